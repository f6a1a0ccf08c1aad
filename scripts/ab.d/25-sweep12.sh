# GDN backward sweeps, variant wg4 (LINATTN_CUDA_GDN_BWD_SWEEP=wg4; src/cuda/gdn/gdn_bwd_sweep_wg.cu, kMode 4;
# perf-notes "Sweeps: the next refill's inputs in L2 (sweep12)"): wg3 (the default) with role 1's inputs of chunk
# cc + 2 (q / k rows, Ab, P, dO rows, gam / rk / rq) prefetched to L2 (prefetch.global.L2, 4 lines per thread)
# under step cc's first products, so the one-step-ahead cp.async refill at step cc + 1's top hits L2. A hint
# only: outputs bitwise wg3's. Compiled here, never run on a GPU before. Prediction: backward 2.785 -> ~2.70-2.74.
# 1. bench 16/32 1x32768 --saved 1 (the bwd eager-live p50 is the row to read): none, wg4, wg4, none (two
#    interleaved rounds) while the piece has >= 35 s left.
# 2. tests: test_cuda_gdn_bwd's CudaGdnBwdSweepWg4.* (fp64 reference + bitwise == wg3 on every case and the long
#    GVA varlen case at bf16 / fp16 BT 64, the wg4 kernel ran, determinism, graph sequence) and the switch-error
#    test, capped at what the piece has left (~25 s expected). A FAIL voids the wg4 bench rows.
# Own clock: S12_SHARE seconds (default 90).
S12=LINATTN_CUDA_GDN_BWD_SWEEP
s12_end=$(( $(date +%s) + ${S12_SHARE:-90} ))
s12_mine() { local m=$(( s12_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
s12_bench() {  # s12_bench SWITCH: one row while the piece has >= 35 s left (the tests need ~25)
  [ "$(s12_mine)" -gt 35 ] || { say "sweep12 bench $1 skipped (piece time spent)"; return; }
  bench 12 "$1" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
}
for sw in none "$S12=wg4" "$S12=wg4" none; do s12_bench "$sw"; done
if [ "$(s12_mine)" -gt 10 ]; then
  echo "### test_cuda_gdn_bwd CudaGdnBwdSweepWg4.* (wg4 vs wg3; BT 64) + the switch-error test" >>"$OUT/ab-tests.txt"
  timeout "$(cap "$(s12_mine)")" stdbuf -oL -eL "$BIN/test_cuda_gdn_bwd" --gtest_brief=1 \
    --gtest_filter='CudaGdnBwdSweepWg4.*:CudaGdnBwdSweepWg.RemovedOrUnknownSwitchValueIsAnError' \
    >>"$OUT/ab-tests.txt" 2>&1
  s12rc=$?
  if [ $s12rc -eq 0 ]; then
    say "PASS test_cuda_gdn_bwd CudaGdnBwdSweepWg4.* (wg4)"
  else
    status=1; say "FAIL test_cuda_gdn_bwd CudaGdnBwdSweepWg4.* (exit $s12rc; 124 = the cap): wg4 bench rows void"
  fi
else
  say "sweep12 wg4 tests skipped (no time)"
fi
true
