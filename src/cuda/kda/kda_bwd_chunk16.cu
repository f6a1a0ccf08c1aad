// chunked16 (kdabwd16, session 14; opt-in LINATTN_CUDA_KDA_BWD=chunked16): chunked15 (SPLIT + GC12 + C13 + C14 + C15 of
// kda_bwd_chunk2_kernel.cuh) with S / dS prefetched into L2 before the chunk-table loads, the gate chain's raw gates
// loaded into dead shared tiles during the intra phase (V = 128, fp32 aligned gates) and no spilled lane reload
// after the q / k barrier (C16, kda_bwd_chunk16_parts.cuh): bitwise chunked15 (docs/perf-notes.md "chunked16").
#include <cuda_runtime.h>

#include "cuda/kda/kda_bwd_chunk2_kernel.cuh"

namespace linattn::cuda {

void launch_kda_bwd_chunk16(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  launch_v<true, true, true, true, true, true>(p, w, stream);
}

}  // namespace linattn::cuda
