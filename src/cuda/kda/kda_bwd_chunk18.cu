// chunked18 (kdabwd18, session 15; opt-in LINATTN_CUDA_KDA_BWD=chunked18): chunked17 (SPLIT + GC12 + C13 + C14 + C15 +
// C17 of kda_bwd_chunk2_kernel.cuh) with the diagonal blocks' 8 x 8 triangles split into two walked 4 x 4 triangles +
// one 4 x 4 square on 3xTF32 mma (C18, kda_bwd_chunk18_parts.cuh): <= 4 walk steps instead of <= 8; not bitwise
// chunked17 (docs/perf-notes.md "chunked18").
#include <cuda_runtime.h>

#include "cuda/kda/kda_bwd_chunk2_kernel.cuh"

namespace linattn::cuda {

void launch_kda_bwd_chunk18(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  launch_v<true, true, true, true, true, true, true>(p, w, stream);
}

}  // namespace linattn::cuda
