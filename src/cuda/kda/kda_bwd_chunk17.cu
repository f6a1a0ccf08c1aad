// chunked17 (kdabwd17, session 15; the default since e829969, also LINATTN_CUDA_KDA_BWD=chunked17): chunked15
// (SPLIT + GC12 + C13 + C14 + C15 of kda_bwd_chunk2_kernel.cuh) with the row scales batched, shift / mask bf16 unpacks
// in the diagonal walks and row dots, and eg / egl steps by selects, one basic block a step (C17,
// kda_bwd_chunk17_parts.cuh): bitwise chunked15 (docs/perf-notes.md "chunked17").
#include <cuda_runtime.h>

#include "cuda/kda/kda_bwd_chunk2_kernel.cuh"

namespace linattn::cuda {

void launch_kda_bwd_chunk17(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  launch_v<true, true, true, true, true, true>(p, w, stream);
}

}  // namespace linattn::cuda
