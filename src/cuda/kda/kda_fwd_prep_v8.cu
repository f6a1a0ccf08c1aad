// Prep v8 of the chunked KDA forward, BT = 64, K = 128: prep v6 (kda_fwd_prep_v6.cu: hierarchy of
// reference rows, every factor 2^-|gam_i - gam_n| <= 1, no positive exponent, no division by a decay;
// fp16 Gram operands of normalised rows on m16n8k16, 4 rounds of 32 channels, coalesced qg / kg / kgl
// from the staging loop, half2 staging, ldmatrix fragments) with fewer shared-memory passes per
// element; the changes are listed in kda_fwd_prep_v8_body.cuh and docs/perf-notes.md "Prep v8".
// prefetch = true (LINATTN_KDA_PREP=v8p) adds an L2 prefetch of the inputs of the chunk pf rows ahead.
// Prep v9 (LINATTN_KDA_PREP=v9) is the same body with kV9: a shorter gate phase (kda_fwd_prep_v9_parts.cuh).
// 256 threads, two CTAs per SM (the same shared-memory layout as v6). Same outputs, masking and
// stability rules as v6.
#include <cuda_runtime.h>

#include <atomic>

#include "cuda/common/check.h"
#include "cuda/common/device_info.h"
#include "cuda/common/launch.h"
#include "cuda/kda/kda_fwd_prep_v8.cuh"
#include "cuda/kda/kda_fwd_prep_v8_body.cuh"

namespace linattn::cuda {
namespace {

template <class T, bool kPf, bool kV9>
__global__ void __launch_bounds__(kThreads, 2) kda_prep_v8_kernel(GdnFwdParams p, GdnChunkWs ws,
                                                                  const int32_t* chunk_indices, int nts, int pf) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  kda_prep_v8_body<T, kPf, kV9>(p, ws, chunk_indices, nts, pf, smem_raw);
}

std::atomic<int64_t> g_launches{0}, g_launches_v9{0};

template <class T, bool kPf, bool kV9>
void launch_t(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* ci, int64_t nt_cap,
              cudaStream_t stream) {
  prefer_max_shared_carveout(reinterpret_cast<const void*>(kda_prep_v8_kernel<T, kPf, kV9>));  // two CTAs per SM
  const int nts = p.cu_seqlens ? 0 : static_cast<int>((p.T_seq + kBT - 1) / kBT);
  const int pf = current_device_info().sm_count;  // prefetch distance in chunk-table rows (v8p)
  launch(kda_prep_v8_kernel<T, kPf, kV9>, dim3(static_cast<unsigned>(nt_cap), p.HV), dim3(kThreads),
         sizeof(PrepSmem<T, false>), stream, p, ws, ci, nts, pf);
  (kV9 ? g_launches_v9 : g_launches).fetch_add(1, std::memory_order_relaxed);
}

template <class T, bool kV9>
int ctas_per_sm_t() {
  const void* k = reinterpret_cast<const void*>(kda_prep_v8_kernel<T, false, kV9>);
  prefer_max_shared_carveout(k);
  ensure_dynamic_smem(k, sizeof(PrepSmem<T, false>));
  int n = 0;
  LINATTN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kda_prep_v8_kernel<T, false, kV9>, kThreads,
                                                                   sizeof(PrepSmem<T, false>)));
  return n;
}

}  // namespace

void launch_kda_prep_v8(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                        int64_t nt_cap, bool prefetch, cudaStream_t stream) {
  if (p.io == ElemType::kBF16) {
    prefetch ? launch_t<__nv_bfloat16, true, false>(p, ws, chunk_indices, nt_cap, stream)
             : launch_t<__nv_bfloat16, false, false>(p, ws, chunk_indices, nt_cap, stream);
  } else {
    prefetch ? launch_t<__half, true, false>(p, ws, chunk_indices, nt_cap, stream)
             : launch_t<__half, false, false>(p, ws, chunk_indices, nt_cap, stream);
  }
}

void launch_kda_prep_v9(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                        int64_t nt_cap, cudaStream_t stream) {
  p.io == ElemType::kBF16 ? launch_t<__nv_bfloat16, false, true>(p, ws, chunk_indices, nt_cap, stream)
                          : launch_t<__half, false, true>(p, ws, chunk_indices, nt_cap, stream);
}

int64_t kda_prep_v8_launches() { return g_launches.load(std::memory_order_relaxed); }

int64_t kda_prep_v9_launches() { return g_launches_v9.load(std::memory_order_relaxed); }

int kda_prep_v8_ctas_per_sm(bool bf16) {
  return bf16 ? ctas_per_sm_t<__nv_bfloat16, false>() : ctas_per_sm_t<__half, false>();
}

int kda_prep_v9_ctas_per_sm(bool bf16) {
  return bf16 ? ctas_per_sm_t<__nv_bfloat16, true>() : ctas_per_sm_t<__half, true>();
}

}  // namespace linattn::cuda
