// chunked5 .. 9 (LINATTN_CUDA_KDA_BWD=chunked5 | chunked6 | chunked7 (default) | chunked8 | chunked9; gdn_bwd.cc):
// MODE 5 .. 9 of the chunk2 kernel family (kda_bwd_chunk2_kernel.cuh). chunked5 = chunked4's arithmetic in less
// code (rolled tile loads, one copy of the gate formula, dq / dk stored from shared memory; kda_bwd_chunk5_parts.cuh);
// chunked6 = chunked5 with the off-diagonal blocks' split-TF32 operands by truncation (split_tf32_trunc);
// chunked7 = chunked5 with the six mma_tile products' k-steps rolled (mma_tile_r: same bits, less code);
// chunked8 = chunked7 with the diagonal intra blocks' lower-left quadrants on split-TF32 (kda_bwd_chunk8_parts.cuh);
// chunked9 = chunked8 with the fp32 raw gates as one cp.async tile (same bits as chunked8).
// Same grid, threads, shared memory, inputs, outputs and workspace as chunked4; BT 64 / 32, V 64 / 128,
// K 128, bf16 / fp16.
#include <cuda_runtime.h>

#include "cuda/kda/kda_bwd_chunk2_kernel.cuh"

namespace linattn::cuda {

void launch_kda_bwd_chunk5(const GdnBwdParams& p, const GdnBwdWs& w, int variant, cudaStream_t stream) {
  LINATTN_CHECK(p.f.kda && p.f.K == kK, "kda bwd chunk5 kernel: K must be ", kK, ", got ", p.f.K);
  LINATTN_CHECK(w.nt_cap < (int64_t(1) << 31), "kda bwd chunk5 kernel: too many chunks: ", w.nt_cap);
  LINATTN_CHECK(variant >= 5 && variant <= 9, "kda bwd chunk5 kernel: variant must be 5 .. 9, got ", variant);
  if (variant == 9) launch_v<9>(p, w, stream);
  else if (variant == 8) launch_v<8>(p, w, stream);
  else if (variant == 7) launch_v<7>(p, w, stream);
  else if (variant == 6) launch_v<6>(p, w, stream);
  else launch_v<5>(p, w, stream);
}

}  // namespace linattn::cuda
