# GDN backward sweeps wg8 (session 18: wg7 with role 0's k / v / Ab ring by TMA boxes on three mbarriers, FwdTmaRing,
# first built as session 14's wg6 on wg5, which lost by 0.4% while role 1 was the longer chain). Why now: the ncu
# profile at 222c75a (h200-ncu-deep-20261203-222c75a) has role 0 the longer chain after wg7 (~25.9 k chain samples vs
# role 1's ~25.6 k by executed-once-per-chunk instructions; ~30 k with role-specific store code), and role 0's refill
# span (16 LDGSTS per thread for k / v / Ab, their long-scoreboard address waits) is 8.5 k of its 25.9 k. Prediction:
# backward 16/32 1x32768 (training cache) 2.45 -> 2.34-2.40 ms. Same values (bitwise wg7: the tests step runs
# CudaGdnBwdSweepWg5.* and CudaGdnBwdSweepWg8.*; the sanitizer step memchecks / racechecks it). Bench: default (wg7)
# vs wg8 interleaved, two rounds at 1x32768, one at 4096x8.
for r in 1 2; do
  bench 15 none bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
  bench 15 LINATTN_CUDA_GDN_BWD_SWEEP=wg8 bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
done
bench 15 none bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 4096x8 --iters 5 --saved 1 --commit "$COMMIT"
bench 15 LINATTN_CUDA_GDN_BWD_SWEEP=wg8 bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 4096x8 --iters 5 --saved 1 --commit "$COMMIT"
true
