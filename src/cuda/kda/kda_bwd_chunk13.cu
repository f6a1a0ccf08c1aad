// chunked13 (kdabwd13, session 13; the default from its A/B at ebf1299 to session 14): chunked12 with the head's gates as a
// cp.async tile whose formula pass runs while the head's tiles stream, and the split-TF32 hi parts without cvt's
// non-finite test (kda_bwd_chunk13_parts.cuh): the same values (docs/perf-notes.md "chunked13").
#include <cuda_runtime.h>

#include "cuda/kda/kda_bwd_chunk2_kernel.cuh"

namespace linattn::cuda {

void launch_kda_bwd_chunk13(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  launch_v<true, true, true>(p, w, stream);
}

}  // namespace linattn::cuda
