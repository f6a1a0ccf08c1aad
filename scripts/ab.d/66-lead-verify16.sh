# Lead, session 16, after the flip (GDN backward chunk kernel wg12 the default): one bench row per backward headline
# with today's defaults (GDN 16/32 and KDA 32/32 1x32768, the training cache); the tests step runs the full suite.
bench 15 none bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
bench 20 none bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1 --commit "$COMMIT"
true
