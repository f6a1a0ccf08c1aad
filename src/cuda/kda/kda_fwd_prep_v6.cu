// Prep v6 of the chunked KDA forward, BT = 64, K = 128: prep v5 (removed, git history at 239ab91; v4's hierarchy
// of reference rows, every factor 2^-|gam_i - gam_n| <= 1, no positive exponent, no division by a
// decay; fp16 Gram operands of normalised rows on m16n8k16, 4 rounds of 32 channels, qg / kg / kgl
// from the staging loop) with four changes:
// - Thread mapping: a warp stages 8 tokens x the round's 32 channels (lane = 8 x channel group +
//   token) instead of 32 tokens x 8 channels, so each fused-operand store writes 8 rows x 64
//   contiguous bytes (full 32-B sectors, 8 lines per warp instruction; v5: 32 rows x 16 B, 32 lines
//   of half sectors). Shared accesses stay conflict-free (8 consecutive rows per quarter-warp).
// - Staging products in packed half2: the normalised row (|x| <= 1) and the factor f <= 1 are each
//   rounded to fp16 once per pair, then one HMUL2 per pair (v5: two FMUL + one F2FP per pair per
//   level). Three roundings instead of one: relative error ~1.7 x 2^-11, still ~30x below the
//   bf16 rounding of Ab / P; no overflow (both factors <= 1); fp16 subnormals keep the absolute
//   error <= 2^-24 of the row norm, as v5.
// - Gate phase: thread (row quarter, channel pair) loads two channels per row (bf16x2 / half2 /
//   float2 when g is 2-element aligned, else two scalar loads) through a stepped row pointer; the
//   quarters' totals go through a small array in the staging area. lower_bound form: fast divide.
// - Gram fragments by ldmatrix.x4 (3 per tile and round: A of both k-steps, B of both) instead of 12
//   scalar shared loads per tile.
// 256 threads, ~109 KB shared memory: two CTAs per SM. Same masking and outputs as v5. The constants,
// helpers and kernel body live in kda_fwd_prep_v6_parts.cuh / kda_fwd_prep_v6_body.cuh (shared with v7).
#include <cuda_runtime.h>

#include <atomic>

#include "cuda/common/launch.h"
#include "cuda/kda/kda_fwd_prep_v6.cuh"
#include "cuda/kda/kda_fwd_prep_v6_body.cuh"

namespace linattn::cuda {
namespace {

template <class T>
__global__ void __launch_bounds__(kThreads, 2) kda_prep_v6_kernel(GdnFwdParams p, GdnChunkWs ws,
                                                                  const int32_t* chunk_indices, int nts) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  kda_prep_body<T, false>(p, ws, chunk_indices, nts, smem_raw);
}

std::atomic<int64_t> g_launches{0};

template <class T>
void launch_t(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* ci, int64_t nt_cap,
              cudaStream_t stream) {
  prefer_max_shared_carveout(reinterpret_cast<const void*>(kda_prep_v6_kernel<T>));  // two CTAs per SM
  const int nts = p.cu_seqlens ? 0 : static_cast<int>((p.T_seq + kBT - 1) / kBT);
  launch(kda_prep_v6_kernel<T>, dim3(static_cast<unsigned>(nt_cap), p.HV), dim3(kThreads),
         sizeof(PrepSmem<T, false>), stream, p, ws, ci, nts);
  g_launches.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

void launch_kda_prep_v6(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                        int64_t nt_cap, cudaStream_t stream) {
  if (p.io == ElemType::kBF16) launch_t<__nv_bfloat16>(p, ws, chunk_indices, nt_cap, stream);
  else launch_t<__half>(p, ws, chunk_indices, nt_cap, stream);
}

int64_t kda_prep_v6_launches() { return g_launches.load(std::memory_order_relaxed); }

}  // namespace linattn::cuda
