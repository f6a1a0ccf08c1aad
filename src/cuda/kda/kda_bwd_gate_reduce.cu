// The KDA backward's gate-parameter reduce (after the chunk-gradient kernel): per value head j and channel c,
// ddt_bias[j, c] = sum over chunk rows of part[., j, c, 1]; dA_log[j] = sum over rows and channels of
// part[., j, c, 0]. Sums in double, in a fixed order (deterministic; not the order of the session-17 kernel).
// One block per value head, 1024 threads: row group g = thread / 128 (of kGroups) takes the contiguous rows
// [g * nr / kGroups, (g + 1) * nr / kGroups) for channel c = thread % 128, four rows' loads in flight; then the
// groups' partials are added in group order and dA_log over channels by a fixed shuffle tree and warp order. Why: the previous
// form (one thread per channel walking all rows, session 17) was one dependent load per row, 66 us at 32/32 1x32768
// (512 rows; ncu, h200-ncu-deep-20261202-s16-75a0119) for a 16.8 MB read.
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/kda/kda_bwd_chunk_common.cuh"

namespace linattn::cuda {
namespace {

using namespace kda_bwd;
constexpr int kGroups = 8;

__global__ void __launch_bounds__(kK* kGroups) kda_bwd_gate_reduce_kernel(GdnBwdParams p, const float* part,
                                                                          int64_t rows, const int32_t* count) {
  __shared__ double red[2][kGroups][kK];
  __shared__ double wsum[kK / 32];
  const int j = blockIdx.x, c = threadIdx.x % kK, g = threadIdx.x / kK;
  const int64_t nr = count ? min(int64_t(max(*count, 0)), rows) : rows;
  const int64_t r0 = nr * g / kGroups, r1 = nr * (g + 1) / kGroups;
  const int64_t stride = int64_t(p.f.HV) * kK;  // float2 elements from one row to the next
  const float2* o = reinterpret_cast<const float2*>(part) + (r0 * p.f.HV + j) * kK + c;
  double a = 0.0, b = 0.0;
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4, o += 4 * stride) {
    float2 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = o[u * stride];
#pragma unroll
    for (int u = 0; u < 4; ++u) a += v[u].x, b += v[u].y;
  }
  for (; r < r1; ++r, o += stride) {
    const float2 v = *o;
    a += v.x, b += v.y;
  }
  red[0][g][c] = a;
  red[1][g][c] = b;
  __syncthreads();
  if (g == 0) {  // channel c's group partials in group order, then the channels' warp sums
    a = 0.0, b = 0.0;
#pragma unroll
    for (int i = 0; i < kGroups; ++i) a += red[0][i][c], b += red[1][i][c];
    if (p.ddt_bias.p) store_out(p.ddt_bias.p, p.ddt_bias.t, j * kK + c, static_cast<float>(b));
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) a += __shfl_xor_sync(0xffffffffu, a, d);
    if ((c & 31) == 0) wsum[c / 32] = a;
  }
  __syncthreads();
  if (threadIdx.x == 0 && p.dA_log.p) {
    double s = 0.0;
    for (int i = 0; i < kK / 32; ++i) s += wsum[i];
    store_out(p.dA_log.p, p.dA_log.t, j, static_cast<float>(s));
  }
}

}  // namespace

void launch_kda_bwd_gate_reduce(const GdnBwdParams& p, const float* part, int64_t rows, const int32_t* count,
                                cudaStream_t stream) {
  if (!p.dA_log.p && !p.ddt_bias.p) return;
  launch(kda_bwd_gate_reduce_kernel, dim3(p.f.HV), dim3(kK * kGroups), 0, stream, p, part, rows, count);
}

}  // namespace linattn::cuda
