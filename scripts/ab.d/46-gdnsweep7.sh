# gdnsweep7 (lead, session 17, issue 6): GDN backward sweep "wg7" = wg5 with role 1's dO tile and per-token scalars of
# chunk cc + 2 issued in step cc (into the stage whose dO every warp has read), so the end-of-step wait finds chunk
# cc + 1's landed a step earlier (profile at 75a0119: role 1's loop 31.5 k samples vs role 0's 24.8 k; its end-of-step
# DEPBAR 5.6 k, long_sb 3.4 k). Bitwise wg5. 246 registers, no spills (wg5 240).
# Prediction: role 1's loop -10 to -15%, the sweeps 1.15 -> ~1.02-1.07 ms: backward 16/32 1x32768 2.575 -> 2.45-2.50 ms.
# 1. the sweep tests (they force the variants themselves), racecheck of wg7 (bar.arrive hand-off reports are KNOWN);
# 2. interleaved benches default vs wg7, two rounds.
ab_test LINATTN_CUDA_GDN_BWD_SWEEP=wg7 test_cuda_gdn_bwd 'CudaGdnBwdSweepWg5.*'
san racecheck 90 60 "s17 GDN sweep wg7" test_cuda_gdn_bwd 'CudaGdnBwdSweepWg5.MatchesReferenceAndWg3Bitwise' \
  LINATTN_CUDA_GDN_BWD_SWEEP=wg7
for gs_round in 1 2; do
  for gs_sw in none LINATTN_CUDA_GDN_BWD_SWEEP=wg7; do
    [ "$(left)" -gt 30 ] || { say "gdnsweep7: bench skipped (no time)"; break 2; }
    bench 20 "$gs_sw" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
  done
done
[ "$(left)" -gt 40 ] && for gs_sw in none LINATTN_CUDA_GDN_BWD_SWEEP=wg7; do
  bench 15 "$gs_sw" bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 4096x8 --iters 10 --saved 1 --commit "$COMMIT"
done
true
