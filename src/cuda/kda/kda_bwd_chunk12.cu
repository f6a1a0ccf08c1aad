// chunked12 (kdagate, session 12; the default since session 13, LINATTN_CUDA_KDA_BWD=chunked11 the previous):
// chunked11 (SPLIT) with the per-channel
// gate staging and gate chain of kda_bwd_chunk12_parts.cuh (GC12): the same values, fewer instructions per
// (token, channel) (docs/perf-notes.md "chunked12").
#include <cuda_runtime.h>

#include "cuda/kda/kda_bwd_chunk2_kernel.cuh"

namespace linattn::cuda {

void launch_kda_bwd_chunk12(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  launch_v<true, true>(p, w, stream);
}

}  // namespace linattn::cuda
