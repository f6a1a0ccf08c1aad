// chunked11 (kdadiag, session 12; the session-12 default, LINATTN_CUDA_KDA_BWD=chunked11 since session 13): the
// chunk-gradient kernel of
// kda_bwd_chunk2_kernel.cuh with SPLIT = true, its diagonal 16 x 16 intra blocks as two walked 8 x 8 triangles
// and one 3xTF32 mma square (kda_bwd_chunk11_parts.cuh; docs/perf-notes.md "chunked11").
#include <cuda_runtime.h>

#include "cuda/kda/kda_bwd_chunk2_kernel.cuh"

namespace linattn::cuda {

void launch_kda_bwd_chunk11(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  launch_v<true>(p, w, stream);
}

}  // namespace linattn::cuda
