// Finishing kernels of the CUDA GDN backward (both paths):
//  - gate reduce: dA_log[j] / ddt_bias[j] from per-row partials [rows, HV, 2]; one warp per value
//    head, lane l sums rows l, l + 32, ... in order (double), then a fixed shuffle tree: the
//    result never depends on timing (no atomics), so graph replays are bitwise reproducible.
//  - zero padding: every per-token gradient in rows [clamp(cu_seqlens[N]), T_total) is set to 0
//    (GRAPH_CONTRACT.md section 3: padding never holds stale values); fixed grid, grid-stride.
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_bwd_common.cuh"

namespace linattn::cuda {
namespace {

__global__ void __launch_bounds__(256) gate_reduce_kernel(GdnBwdParams p, const float* part, int64_t rows,
                                                          const int32_t* count) {
  const int j = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (j >= p.f.HV) return;
  const int64_t nr = count ? min(int64_t(max(*count, 0)), rows) : rows;
  double a = 0.0, b = 0.0;
  for (int64_t r = lane; r < nr; r += 32) {
    a += part[(r * p.f.HV + j) * 2];
    b += part[(r * p.f.HV + j) * 2 + 1];
  }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    a += __shfl_xor_sync(0xffffffffu, a, d);
    b += __shfl_xor_sync(0xffffffffu, b, d);
  }
  if (lane == 0) {
    if (p.dA_log.p) store_out(p.dA_log.p, p.dA_log.t, j, static_cast<float>(a));
    if (p.ddt_bias.p) store_out(p.ddt_bias.p, p.ddt_bias.t, j, static_cast<float>(b));
  }
}

__device__ __forceinline__ void zero_rows(const GradOut& o, int64_t end, int64_t T, int64_t width, int64_t i0,
                                          int64_t stride) {
  if (!o.p) return;
  for (int64_t i = end * width + i0; i < T * width; i += stride) store_out(o.p, o.t, i, 0.f);
}

__global__ void __launch_bounds__(256) zero_padding_kernel(GdnBwdParams p) {
  const GdnFwdParams& f = p.f;
  const int64_t end = min(max(load_cu(f.cu_seqlens, f.cu_i64, f.N), int64_t(0)), f.T_total);
  const int64_t i0 = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  zero_rows(p.dq, end, f.T_total, int64_t(f.H) * f.K, i0, stride);
  zero_rows(p.dk, end, f.T_total, int64_t(f.H) * f.K, i0, stride);
  zero_rows(p.dv, end, f.T_total, int64_t(f.HV) * f.V, i0, stride);
  zero_rows(p.dg, end, f.T_total, int64_t(f.HV) * bwd_gate_width(f), i0, stride);
  zero_rows(p.dbeta, end, f.T_total, f.HV, i0, stride);
}

}  // namespace

void launch_gdn_bwd_gate_reduce(const GdnBwdParams& p, const float* part, int64_t rows, const int32_t* count,
                                cudaStream_t stream) {
  if (!p.dA_log.p && !p.ddt_bias.p) return;
  launch(gate_reduce_kernel, dim3((p.f.HV + 7) / 8), dim3(256), 0, stream, p, part, rows, count);
}

void launch_gdn_bwd_zero_padding(const GdnBwdParams& p, cudaStream_t stream) {
  if (!p.f.cu_seqlens) return;
  if (!p.dq.p && !p.dk.p && !p.dv.p && !p.dg.p && !p.dbeta.p) return;
  launch(zero_padding_kernel, dim3(132), dim3(256), 0, stream, p);
}

}  // namespace linattn::cuda
