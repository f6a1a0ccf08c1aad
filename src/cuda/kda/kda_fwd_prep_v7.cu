// Prep v7 of the chunked KDA forward, BT = 64, K = 128: prep v6 (kda_fwd_prep_v6.cu: hierarchy of
// reference rows, every factor 2^-|gam_i - gam_n| <= 1, fp16 Gram operands of normalised rows on
// m16n8k16, coalesced qg / kg / kgl stores, half2 staging, ldmatrix fragments) with more warps per SM.
// v6 runs two 8-warp CTAs per SM (106.5 KB shared memory, 109 registers) and issues ~0.47
// instructions per scheduler cycle with < 1 eligible warp: its barrier-separated phases are latency
// bound, and cutting 14% of its instructions (v5 -> v6) bought ~2%. v7 holds three CTAs (24 warps):
// - q / k rows stay in global memory: one L2 prefetch per thread at the start (the chunk's 32 KB), the
//   norm pass reads its 8 x 16 B per thread from global memory, each staging round its 2 x 16 B one
//   round ahead (in flight over the round's barrier and mma). Shared memory keeps gam (then qk / kk),
//   the staging area and the row scalars: 75,264 B (v6 109,056 B); 3 x (75,264 + 1 KB) <= 228 KB.
// - __launch_bounds__(256, 3): <= 80 registers (v6 109).
// Same code as v6 otherwise (kda_fwd_prep_v6_body.cuh with kQkGlobal = true): same outputs, masking
// (rows past the chunk's end load zeros by a select, never read) and stability rules.
#include <cuda_runtime.h>

#include <atomic>

#include "cuda/common/check.h"
#include "cuda/common/launch.h"
#include "cuda/kda/kda_fwd_prep_v6_body.cuh"
#include "cuda/kda/kda_fwd_prep_v7.cuh"

namespace linattn::cuda {
namespace {

static_assert(sizeof(PrepSmem<__nv_bfloat16, true>) <= 76800, "prep v7: three CTAs per SM need <= 75 KB");

template <class T>
__global__ void __launch_bounds__(kThreads, 3) kda_prep_v7_kernel(GdnFwdParams p, GdnChunkWs ws,
                                                                  const int32_t* chunk_indices, int nts) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  kda_prep_body<T, true>(p, ws, chunk_indices, nts, smem_raw);
}

std::atomic<int64_t> g_launches{0};

template <class T>
void launch_t(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* ci, int64_t nt_cap,
              cudaStream_t stream) {
  prefer_max_shared_carveout(reinterpret_cast<const void*>(kda_prep_v7_kernel<T>));  // three CTAs per SM
  const int nts = p.cu_seqlens ? 0 : static_cast<int>((p.T_seq + kBT - 1) / kBT);
  launch(kda_prep_v7_kernel<T>, dim3(static_cast<unsigned>(nt_cap), p.HV), dim3(kThreads),
         sizeof(PrepSmem<T, true>), stream, p, ws, ci, nts);
  g_launches.fetch_add(1, std::memory_order_relaxed);
}

template <class T>
int ctas_per_sm_t() {
  const void* k = reinterpret_cast<const void*>(kda_prep_v7_kernel<T>);
  prefer_max_shared_carveout(k);
  ensure_dynamic_smem(k, sizeof(PrepSmem<T, true>));
  int n = 0;
  LINATTN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kda_prep_v7_kernel<T>, kThreads,
                                                                   sizeof(PrepSmem<T, true>)));
  return n;
}

}  // namespace

void launch_kda_prep_v7(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                        int64_t nt_cap, cudaStream_t stream) {
  if (p.io == ElemType::kBF16) launch_t<__nv_bfloat16>(p, ws, chunk_indices, nt_cap, stream);
  else launch_t<__half>(p, ws, chunk_indices, nt_cap, stream);
}

int64_t kda_prep_v7_launches() { return g_launches.load(std::memory_order_relaxed); }

int kda_prep_v7_ctas_per_sm(bool bf16) { return bf16 ? ctas_per_sm_t<__nv_bfloat16>() : ctas_per_sm_t<__half>(); }

}  // namespace linattn::cuda
