# GDN backward chunk kernel, variant wg8d (LINATTN_CUDA_GDN_BWD_CHUNK=wg8d; src/cuda/gdn/gdn_bwd_chunk_wg.cu;
# perf-notes "Chunk kernel: M decays once per head (gdnbwd10)"): wg7 (the default) with each M element's decay
# exp2(gam_i - gam_j) computed once per head under the first M product and reused by both halves (half 1
# recomputed it). Values bitwise equal to wg7. At ee5c88b: -0.3% (undecided); wg8 (+1.7%) was removed in session 12.
# 1. bench 16/32 1x32768 --saved 1 (bwd eager-live p50 is the row to read; fwdbwd graph-replay too):
#    none, wg8d, wg8d, none (two interleaved rounds) while the piece has >= 55 s left.
# 2. tests (BT 64 only: BT 32 never takes the wgmma kernel): test_cuda_gdn_bwd's Wg8d* tests (fp64 reference,
#    bitwise == wg7 on every case + the long GVA varlen case, the kernel ran, determinism, graph sequence) with
#    wg8d exported, and the switch-error test, capped at what the piece has left (~50 s needed). A FAIL voids the
#    wg8d bench rows.
# Own clock: G10_SHARE seconds (default 90; 110 fits both rounds and the tests).
G10=LINATTN_CUDA_GDN_BWD_CHUNK
g10_end=$(( $(date +%s) + ${G10_SHARE:-90} ))
g10_mine() { local m=$(( g10_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
g10_bench() {  # g10_bench SWITCH: one row while the piece has >= 55 s left (the tests need ~50)
  [ "$(g10_mine)" -gt 55 ] || { say "gdnbwd10 bench $1 skipped (piece time spent)"; return; }
  bench 12 "$1" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
}
for sw in none "$G10=wg8d" "$G10=wg8d" none; do g10_bench "$sw"; done
if [ "$(g10_mine)" -gt 15 ]; then
  echo "### test_cuda_gdn_bwd with $G10=wg8d (Wg8d, BT 64; the switch-error test)" >>"$OUT/ab-tests.txt"
  env $G10=wg8d timeout "$(cap "$(g10_mine)")" stdbuf -oL -eL "$BIN/test_cuda_gdn_bwd" --gtest_brief=1 \
    --gtest_filter='Dtypes/CudaGdnBwd.Wg8d*/*_bt64:CudaGdnBwdWg8d.*:CudaGdnBwdChunkSwitch.*' >>"$OUT/ab-tests.txt" 2>&1
  g10rc=$?
  if [ $g10rc -eq 0 ]; then
    say "PASS test_cuda_gdn_bwd Wg8d with $G10=wg8d"
  else
    status=1; say "FAIL test_cuda_gdn_bwd Wg8d with $G10=wg8d (exit $g10rc; 124 = the cap): wg8d bench rows void"
  fi
else
  say "gdnbwd10 wg8d tests skipped (no time)"
fi
true
