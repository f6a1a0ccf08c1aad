# GDN backward sweeps, variant wg6 (LINATTN_CUDA_GDN_BWD_SWEEP=wg6; src/cuda/gdn/gdn_bwd_sweep_wg.cu,
# gdn_bwd_sweep_wg_ring.cuh FwdTmaRing; perf-notes "Sweeps: role 0's refill by TMA (sweep13)"): wg5 (role 1's
# q / k / Ab / P refills by TMA, opt-in, -1.7% at 4e4abfa) with role 0's k / v / Ab refills by TMA boxes too (one lane
# per warp, three stage mbarriers; the v tile a swizzled box; a partial last chunk zeroed). Outputs bitwise wg3's.
# Compiled here, never run on a GPU before. Prediction (backward eager p50, --saved 1): wg5 ~2.77, wg6 ~2.66-2.73.
# 1. bench 16/32 1x32768 --saved 1 (the bwd eager-live p50 is the row to read): none, wg5, wg6, wg6, wg5, none
#    (two interleaved rounds) while the piece has >= 110 s left (the tests need up to ~100).
# 2. tests (test_cuda_gdn_bwd, filtered, each capped at what the piece has left): CudaGdnBwdSweepWg6.* first (fp64
#    reference + bitwise == wg3 on every case and the long GVA varlen case at bf16 / fp16 BT 64, the wg6 kernel ran,
#    determinism, graph sequence), then CudaGdnBwdSweepWg5.* (wg5's tests, cut by 25-sweep12's share at 4e4abfa).
#    A FAIL voids that variant's bench rows (a SameBits failure with unchanged products means a race).
# Own clock: S13_SHARE seconds (default 200, so that both test sets complete).
S13=LINATTN_CUDA_GDN_BWD_SWEEP
s13_end=$(( $(date +%s) + ${S13_SHARE:-200} ))
s13_mine() { local m=$(( s13_end - $(date +%s) )) l; l=$(left); echo $(( m < l ? m : l )); }
s13_bench() {  # s13_bench SWITCH: one row while the piece has >= 110 s left
  [ "$(s13_mine)" -gt 110 ] || { say "sweep13 bench $1 skipped (piece time spent)"; return; }
  bench 15 "$1" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
}
s13_test() {  # s13_test FILTER WHAT
  if [ "$(s13_mine)" -gt 10 ]; then
    echo "### test_cuda_gdn_bwd $1 ($2)" >>"$OUT/ab-tests.txt"
    timeout "$(cap "$(s13_mine)")" stdbuf -oL -eL "$BIN/test_cuda_gdn_bwd" --gtest_brief=1 --gtest_filter="$1" \
      >>"$OUT/ab-tests.txt" 2>&1
    local rc=$?
    if [ $rc -eq 0 ]; then say "PASS test_cuda_gdn_bwd $1 ($2)"
    else status=1; say "FAIL test_cuda_gdn_bwd $1 (exit $rc; 124 = the cap): $2 bench rows void, see ab-tests.txt"; fi
  else
    say "sweep13 tests $1 skipped (no time)"
  fi
}
for sw in none "$S13=wg5" "$S13=wg6" "$S13=wg6" "$S13=wg5" none; do s13_bench "$sw"; done
s13_test 'CudaGdnBwdSweepWg6.*' wg6
s13_test 'CudaGdnBwdSweepWg5.*' 'wg5, wg5p'
true
