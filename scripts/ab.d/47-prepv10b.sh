# prepv10b (lead, session 17): GDN prep v10's role loops pass their CTA barriers by `barrier.sync 0` without .aligned
# (src/cuda/common/barrier.cuh) instead of __syncthreads (barrier.sync.aligned), which compute-sanitizer synccheck
# reported as divergent (session 16). Same values (the prep tests assert bitwise v8). It is the default path now, so
# the A/B is default (fixed v10) vs v8 (LINATTN_CUDA_GDN_PREP=v8) and vs session 16's numbers (c696bd4: 16/64 1x32768
# eager 1.157, short 16/32 replay 48.4 us). Prediction: equal to c696bd4 within noise (+-0.3%; the barrier is the
# same BAR.SYNC, only its .aligned hint goes), v10 vs v8 as in session 15 (-1.5%).
# 1. the prep tests and their synccheck; 2. interleaved benches, two rounds.
ab_test LINATTN_CUDA_GDN_PREP=v10 test_cuda_gdn_prep 'Dtypes/CudaGdnPrepV10*'
san synccheck 40 30 "s17 GDN prep v10 (piece 47)" test_cuda_gdn_prep 'Dtypes/CudaGdnPrepV10.SameBitsAsV8/bf16_bt64'
for pv_round in 1 2; do
  for pv_sw in none LINATTN_CUDA_GDN_PREP=v8; do
    [ "$(left)" -gt 40 ] || { say "prepv10b: bench skipped (no time)"; break 2; }
    bench 12 "$pv_sw" bench-cuda --hqk 16 --hv 64 --lengths 1x32768 --segments 1 --iters 20 --check 0 --commit "$COMMIT"
  done
done
true
