// The chunk-gradient kernel of the chunked KDA backward (chunked7; kda_bwd_chunk2_kernel.cuh, its pieces in
// kda_bwd_chunk2_parts.cuh and kda_bwd_chunk5_parts.cuh): BT 64 / 32, V 64 / 128, K 128, bf16 / fp16.
// The other modes (chunked .. chunked6, chunked8, chunked9) lost their H200 A/Bs and were removed in
// session 10 (last in 154ad2a; docs/perf-notes.md "CUDA KDA backward").
#include <cuda_runtime.h>

#include "cuda/kda/kda_bwd_chunk2_kernel.cuh"

namespace linattn::cuda {

void launch_kda_bwd_chunk5(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  launch_v<false>(p, w, stream);
}

}  // namespace linattn::cuda
