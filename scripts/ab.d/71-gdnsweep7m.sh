# GDN backward sweeps wg7m (session 18: wg7 with the x[c % 2] fragment hand-off on mbarriers (XMbar) instead of
# bar.arrive / bar.sync, so racecheck models it; the kEarly refill takes the chain barrier every step). Same values
# (the tests step runs CudaGdnBwdSweepWg5.* incl. wg7m; the sanitizer step racechecks it alone). Bench: GDN 16/32
# 1x32768 with the training cache, default (wg7) vs wg7m interleaved, two rounds; 4096x8 once each.
for r in 1 2; do
  bench 15 none bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
  bench 15 LINATTN_CUDA_GDN_BWD_SWEEP=wg7m bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
done
bench 15 none bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 4096x8 --iters 5 --saved 1 --commit "$COMMIT"
bench 15 LINATTN_CUDA_GDN_BWD_SWEEP=wg7m bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 4096x8 --iters 5 --saved 1 --commit "$COMMIT"
true
