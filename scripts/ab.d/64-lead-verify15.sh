# Lead, session 15, after the flips (prep v10, GDN backward chunk kernel wg11, KDA sweep wg2, KDA chunk kernel
# chunked17 the defaults): the GDN backward tests that run the defaults (test_cuda_gdn_bwd in full is two 220 s shards:
# here the default-path cases, both dtypes and BTs, the default-switch tests, the graph sequences), then one bench row per
# backward with the new defaults (the backward headline).
ab_test LINATTN_S15_NOOP=1 test_cuda_gdn_bwd \
  'Dtypes/CudaGdnBwd.ChunkedMatchesReference/*:Dtypes/CudaGdnBwd.ChunkedIsDeterministic/*:CudaGdnBwdChunkSwitch.*:CudaGdnBwdSweepWg5.DefaultIsWg5:CudaGdnBwdSweepWg.GraphSequence:CudaGdnBwdSweepWg.DefaultFollowsSequenceLength'
bench 15 none bench-cuda-bwd --op gdn --hqk 16 --hv 32 --lengths 1x32768 --iters 10 --saved 1 --commit "$COMMIT"
bench 20 none bench-cuda-bwd --op kda --hqk 32 --hv 32 --lengths 1x32768 --iters 5 --saved 1 --commit "$COMMIT"
true
