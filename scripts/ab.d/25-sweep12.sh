# GDN backward sweeps, variants wg4 / wg5 / wg5p (LINATTN_CUDA_GDN_BWD_SWEEP; src/cuda/gdn/gdn_bwd_sweep_wg.cu,
# gdn_bwd_sweep_wg_ring.cuh; perf-notes "Sweeps: the refill off the chain warp's issue (sweep12)"): wg3 (the default)
# with role 1's input ring changed, outputs bitwise wg3's. wg4: chunk cc + 2's inputs prefetched to L2 under step
# cc's first products. wg5: chunk cc + 1's q / k / Ab / P (48 of 56 KB) by TMA boxes (one lane per warp) on an
# mbarrier instead of 24 of each thread's 31 cp.asyncs between the chain barrier and the first product. wg5p: both.
# Compiled here, never run on a GPU before. Prediction (backward p50, 2.785 today): wg4 ~2.74-2.78, wg5 ~2.65-2.72,
# wg5p ~2.63-2.72.
# 1. bench 16/32 1x32768 --saved 1 (the bwd eager-live p50 is the row to read): none, wg5p, wg5, wg4, then the same
#    reversed (second round) while the piece has >= 45 s left.
# 2. tests: test_cuda_gdn_bwd's CudaGdnBwdSweepWg5.* / CudaGdnBwdSweepWg4.* (fp64 reference + bitwise == wg3 on every
#    case and the long GVA varlen case at BT 64, the kernel ran, determinism, graph sequence) and the switch-error
#    test, capped at what the piece has left (~40 s expected). A FAIL voids that variant's bench rows.
# Own clock: S12_SHARE seconds (default 90; 120 fits both rounds and the tests).
S12=LINATTN_CUDA_GDN_BWD_SWEEP
s12_end=$(( $(date +%s) + ${S12_SHARE:-90} ))
s12_mine() { local m=$(( s12_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
s12_bench() {  # s12_bench SWITCH: one row while the piece has >= 45 s left (the tests need ~40)
  [ "$(s12_mine)" -gt 45 ] || { say "sweep12 bench $1 skipped (piece time spent)"; return; }
  bench 12 "$1" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
}
for sw in none "$S12=wg5p" "$S12=wg5" "$S12=wg4" "$S12=wg4" "$S12=wg5" "$S12=wg5p" none; do s12_bench "$sw"; done
if [ "$(s12_mine)" -gt 10 ]; then
  echo "### test_cuda_gdn_bwd CudaGdnBwdSweepWg5.* / Wg4.* (vs wg3; BT 64) + the switch-error test" >>"$OUT/ab-tests.txt"
  timeout "$(cap "$(s12_mine)")" stdbuf -oL -eL "$BIN/test_cuda_gdn_bwd" --gtest_brief=1 \
    --gtest_filter='CudaGdnBwdSweepWg5.*:CudaGdnBwdSweepWg4.*:CudaGdnBwdSweepWg.RemovedOrUnknownSwitchValueIsAnError' \
    >>"$OUT/ab-tests.txt" 2>&1
  s12rc=$?
  if [ $s12rc -eq 0 ]; then
    say "PASS test_cuda_gdn_bwd CudaGdnBwdSweepWg5.* / Wg4.* (wg5, wg5p, wg4)"
  else
    status=1
    say "FAIL test_cuda_gdn_bwd CudaGdnBwdSweepWg5.* / Wg4.* (exit $s12rc; 124 = the cap): see ab-tests.txt for which"
  fi
else
  say "sweep12 tests skipped (no time)"
fi
true
