# KDA backward sweeps, variant wg3 (LINATTN_CUDA_KDA_SWEEP=wg3; src/cuda/kda/kda_bwd_sweep_wg.cu, perf-notes "Sweeps on
# wgmma for KDA: role 0's ring two chunks ahead (kdasweep4)"): wg2 (the default) with role 0's (forward state chain)
# kg / kgl / v / Ab / gl ring three stages deep, so the refill of chunk c is issued two steps before step c waits on it
# (wg2: one step; the wait was ~31% of role 0's step in the wg profile). Same products, operands and order: outputs
# bitwise wg2's. 225 KB shared memory as wg2. Compiled here, never run on a GPU before.
# 1. bench 32/32 1x32768 --saved 1 (bwd eager p50 and fwd+bwd graph): none, wg3, wg3, none (20 s cap each).
# 2. tests: test_cuda_kda_sweep's Wg3 cases at BT 64 (fp64 reference + bitwise == wg2 on every case and the 16-chunk
#    case; determinism; graph replay == eager) in what the piece has left. A FAIL voids the wg3 rows.
# Flip rule: tests pass and wg3 faster in both rounds -> kSweepWg3 for the unset value in kda_sweep().
# Own clock: KS4_SHARE seconds (default 120).
KS4=LINATTN_CUDA_KDA_SWEEP
ks4_end=$(( $(date +%s) + ${KS4_SHARE:-120} ))
ks4_left() { local m=$(( ks4_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
for sw in none "$KS4=wg3" "$KS4=wg3" none; do
  if [ "$(ks4_left)" -gt 25 ]; then
    bench 20 "$sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1 --commit "$COMMIT"
  else
    say "kdasweep4 bench $sw skipped (piece time spent)"
  fi
done
if [ "$(ks4_left)" -gt 10 ]; then
  echo "### test_cuda_kda_sweep Wg3 (BT 64)" >>"$OUT/ab-tests.txt"
  timeout "$(cap "$(( $(ks4_left) - 2 ))")" stdbuf -oL -eL "$BIN/test_cuda_kda_sweep" --gtest_brief=1 \
    --gtest_filter='Dtypes/CudaKdaSweep.Wg3*/*_bt64:CudaKdaSweepGraph.Wg3*' >>"$OUT/ab-tests.txt" 2>&1
  ks4rc=$?
  if [ $ks4rc -eq 0 ]; then
    say "PASS test_cuda_kda_sweep Wg3 (BT 64)"
  elif [ $ks4rc -eq 124 ]; then
    say "CUT test_cuda_kda_sweep Wg3 (BT 64) at the piece's cap: see ab-tests.txt (no FAIL printed = none seen)"
  else
    status=1; say "FAIL test_cuda_kda_sweep Wg3 (exit $ks4rc): wg3 bench rows void"
  fi
else
  say "kdasweep4 wg3 tests skipped (no time)"
fi
true
