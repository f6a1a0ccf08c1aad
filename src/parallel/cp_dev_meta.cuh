// Device helpers of the CUDA context-parallel kernels (cp_dev.h): element loads / stores by
// dtype, and the rank layout read on the device. Every index read from cu_seqlens / rank
// offsets is clamped into [0, total rows] (graph replays never validate them on the host), so a
// garbage layout gives garbage values but never an out-of-bounds access.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "parallel/cp_dev.h"

namespace linattn::parallel::dev {

// Grid-stride loop over [0, n) with blocks_for(n) blocks of kThreads.
#define CP_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)
constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 64 ? 65535 * 64 : b));
}

__device__ __forceinline__ float ld(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void st(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    case DType::kF16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    default: static_cast<float*>(p)[i] = v;
  }
}

__device__ __forceinline__ int64_t ld_index(const void* p, bool i64, int64_t i) {
  return i64 ? static_cast<const int64_t*>(p)[i] : static_cast<const int32_t*>(p)[i];
}

struct Rd {  // the layout as seen by one thread
  const Layout& L;
  __device__ explicit Rd(const Layout& l) : L(l) {}
  __device__ int64_t total() const {
    const int64_t t = ld_index(L.off, L.off64, L.world);
    return t < 0 ? 0 : t;
  }
  __device__ int64_t off(int r) const {
    const int64_t v = r <= 0 ? 0 : ld_index(L.off, L.off64, r), t = total();
    return v < 0 ? 0 : (v > t ? t : v);
  }
  __device__ int64_t cu(int64_t i) const {
    const int64_t t = total();
    if (L.cu == nullptr) return i == 0 ? 0 : t;
    const int64_t v = i <= 0 ? 0 : ld_index(L.cu, L.cu64, i);
    return v < 0 ? 0 : (v > t ? t : v);
  }
  // The sequence holding global row `row`, or -1 (padding / out of range).
  __device__ int64_t seq_of_row(int64_t row) const {
    if (row < 0 || row >= cu(L.N)) return -1;
    int64_t lo = 0, hi = L.N - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (cu(mid) <= row) lo = mid;
      else hi = mid - 1;
    }
    return row < cu(lo + 1) ? lo : -1;
  }
  // Sequence continuing onto rank r from earlier rows, or -1.
  __device__ int64_t head(int r) const {
    const int64_t R0 = off(r), R1 = off(r + 1);
    if (R0 >= R1) return -1;
    const int64_t n = seq_of_row(R0);
    return n >= 0 && cu(n) < R0 ? n : -1;
  }
  // Sequence continuing past rank r's last row, or -1.
  __device__ int64_t tail(int r) const {
    const int64_t R0 = off(r), R1 = off(r + 1);
    if (R0 >= R1) return -1;
    const int64_t n = seq_of_row(R1 - 1);
    return n >= 0 && cu(n + 1) > R1 ? n : -1;
  }
  __device__ int owner_of_empty(int64_t b) const {
    int r = 0;
    for (int i = 0; i < L.world; ++i)
      if (off(i) <= b) r = i;
    return r;
  }
  __device__ bool starts_on(int64_t n, int r) const {
    const int64_t b = cu(n), e = cu(n + 1);
    if (b >= e) return owner_of_empty(b) == r;
    return off(r) <= b && b < off(r + 1);
  }
  __device__ bool ends_on(int64_t n, int r) const {
    const int64_t b = cu(n), e = cu(n + 1);
    if (b >= e) return owner_of_empty(b) == r;
    return off(r) < e && e <= off(r + 1);
  }
};

// Element (d, c) of state (n, j) in the op's layout.
__device__ __forceinline__ int64_t state_at(const StateDims& s, int64_t n, int64_t j, int64_t d, int64_t c) {
  return (n * s.HV + j) * s.K * s.V + (s.v_first ? c * s.K + d : d * s.V + c);
}

}  // namespace linattn::parallel::dev
