// chunked14 (kdabwd14, session 14; LINATTN_CUDA_KDA_BWD=chunked14, default between 5bd3b72 and 4e4abfa): chunked13
// (SPLIT + GC12 + C13 of kda_bwd_chunk2_kernel.cuh) with eg / egl in 8 row steps each (kda_bwd_chunk14_parts.cuh) and
// the split-TF32 lo parts of the off-diagonal / square blocks truncated by the mask instead of cvt.rna (split_tf32_t's
// LT, kda_bwd_chunk2_parts.cuh): not bitwise chunked13 (docs/perf-notes.md "chunked14").
#include <cuda_runtime.h>

#include "cuda/kda/kda_bwd_chunk2_kernel.cuh"

namespace linattn::cuda {

void launch_kda_bwd_chunk14(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  launch_v<true, true, true, true>(p, w, stream);
}

}  // namespace linattn::cuda
