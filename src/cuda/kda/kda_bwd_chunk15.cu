// chunked15 (kdabwd15, session 14; the default since its A/B at 4e4abfa): chunked14 (SPLIT + GC12 + C13 + C14 of
// kda_bwd_chunk2_kernel.cuh) with the head's dt_bias / A_log, beta and Y.v rows of v loaded ahead of its cp.async
// tiles and the dbeta draw formed at the head start (C15, kda_bwd_chunk15_parts.cuh): bitwise chunked14
// (docs/perf-notes.md "chunked15").
#include <cuda_runtime.h>

#include "cuda/kda/kda_bwd_chunk2_kernel.cuh"

namespace linattn::cuda {

void launch_kda_bwd_chunk15(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  launch_v<true, true, true, true, true>(p, w, stream);
}

}  // namespace linattn::cuda
