# KDA backward sweeps, variant wg2 (LINATTN_CUDA_KDA_SWEEP=wg2; src/cuda/kda/kda_bwd_sweep_wg.cu, perf-notes "Sweeps on
# wgmma for KDA: role 1's store warpgroup off the chain (kdasweep3)"): role 1's store warpgroup writes hdS / dvh / dv
# in one pass after two CTA barriers a chunk (was eight) with 16-byte dv stores (was 32 typed 2-byte ones per thread);
# it set role 1's step (the chain's wait for the single hand-off buffer: 10.2% of the sweep's stall samples). Outputs
# bitwise wg's. Compiled here, never run on a GPU before.
# 1. bench 32/32 1x32768 --saved 1 (bwd eager p50 and fwd+bwd graph): none, wg2, wg2, none (20 s cap each).
# 2. tests: test_cuda_kda_sweep's Wg2 cases at BT 64 (fp64 reference + bitwise == wg on every case and the 16-chunk
#    case, fp32 and io-typed dv; determinism; graph replay == eager) in what the piece has left. A FAIL voids the
#    wg2 rows. Own clock: KS3_SHARE seconds (default 90).
KS3=LINATTN_CUDA_KDA_SWEEP
ks3_end=$(( $(date +%s) + ${KS3_SHARE:-90} ))
ks3_left() { local m=$(( ks3_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
for sw in none "$KS3=wg2" "$KS3=wg2" none; do
  if [ "$(ks3_left)" -gt 25 ]; then
    bench 20 "$sw" bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1 --commit "$COMMIT"
  else
    say "kdasweep3 bench $sw skipped (piece time spent)"
  fi
done
if [ "$(ks3_left)" -gt 10 ]; then
  echo "### test_cuda_kda_sweep Wg2 (BT 64)" >>"$OUT/ab-tests.txt"
  timeout "$(cap "$(ks3_left)")" stdbuf -oL -eL "$BIN/test_cuda_kda_sweep" --gtest_brief=1 \
    --gtest_filter='Dtypes/CudaKdaSweep.Wg2*/*_bt64:CudaKdaSweepGraph.Wg2*' >>"$OUT/ab-tests.txt" 2>&1
  ks3rc=$?
  if [ $ks3rc -eq 0 ]; then
    say "PASS test_cuda_kda_sweep Wg2 (BT 64)"
  else
    status=1; say "FAIL test_cuda_kda_sweep Wg2 (exit $ks3rc; 124 = the cap): wg2 bench rows void"
  fi
else
  say "kdasweep3 wg2 tests skipped (no time)"
fi
true
