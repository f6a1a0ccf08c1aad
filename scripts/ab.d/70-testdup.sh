# Lead, session 10: the GPU tests whose code testdup folded into shared helpers (b1aa7f8), filtered to the
# changed tests (no assertion, case, tolerance or name changed; this run shows they still pass).
td() { ab_test LINATTN_TESTDUP_RUN=1 "$@"; }
td test_cuda_kda_fwd 'CudaKdaFwdWgmma.*:CudaKdaFwdPrepV*.*:Dtypes/CudaKdaFwd.Prep*/bf16_bt64:Dtypes/CudaKdaFwd.Prep*/fp16_bt32'
td test_cuda_gdn_fwd 'Dtypes/CudaGdnFwd.ChunkedKernelsMatchReference/*:DtypesAndModes/CudaGdnFwdVs32.CloseToVSlice64/*'
td test_cuda_gdn_fused_wg '*CudaGdnPFused.CloseToPrepP*:*CudaGdnFusedWg.CloseToTheMmaKernel*'
td test_cuda_gdn_prep '*/bf16_bt64'
td test_cuda_gdn_bwd 'Dtypes/CudaGdnBwd.Wg*MatchesReference*/bf16_bt64:Dtypes/CudaGdnBwd.SweepWg*MatchesReference*/bf16_bt64:Dtypes/CudaGdnBwd.ChunkedMatchesReference/fp16_bt32'
td test_cuda_kda_sweep 'Dtypes/CudaKdaSweep.Wg*MatchesReference*/bf16_bt64:Dtypes/CudaKdaSweep.Wg*MatchesReference*/fp16_bt32'
td test_cuda_tier3_bwd '*GdnEverySweepSlice/bf16_bt64'
td test_conv_cuda 'ConvCuda.ForwardVariantRejectsUnknownAndRemovedKeys:ConvCuda.RemovedPathSwitchesAreErrors'
true
