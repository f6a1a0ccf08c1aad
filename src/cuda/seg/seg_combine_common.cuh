// Device helpers shared by tier 3's combines (seg_kernels.cu: the FFMA default; seg_combine_tc.cu: the
// tensor-core one): the M prefetch and the walk's initial state.
#pragma once
#include <cuda_runtime.h>

#include "cuda/common/mma.cuh"
#include "cuda/gdn/gdn_common.cuh"

namespace linattn::cuda::seg::combine {

constexpr int kK = 128, kThreads = 256;

// cp.async of one slot's M (K x K fp32, K K / 4 / kThreads chunks of 16 bytes per thread) into buffer m (rows of
// LD floats, 16-byte aligned).
template <int LD>
__device__ __forceinline__ void prefetch_m(float (*m)[LD], const float* Mg, int tid) {
#pragma unroll
  for (int u = 0; u < kK * kK / 4 / kThreads; ++u) {
    const int idx = tid + u * kThreads, row = idx / (kK / 4), col = 4 * (idx % (kK / 4));
    cp_async16(&m[row][col], Mg + 4 * idx, true);
  }
}

// The walk's initial state at (row, col) of value head j of sequence n: FIRST: slot0's fp32 K-major state in
// init_seg, also stored as slot0's output; else init (p's state layout, type init_type) or zero.
template <bool FIRST>
__device__ __forceinline__ float initial_state(const GdnFwdParams& p, int64_t n, int64_t slot0, int j, int row,
                                               int col, const void* init, ElemType init_type, const float* init_seg,
                                               float* out) {
  if constexpr (FIRST) {
    const int64_t i = ((slot0 * p.HV + j) * kK + row) * p.V + col;
    const float x = init_seg[i];
    out[i] = x;
    return x;
  } else {
    return init ? load_elem(init, init_type, state_index(p, n, j, row, col)) : 0.f;
  }
}

}  // namespace linattn::cuda::seg::combine
