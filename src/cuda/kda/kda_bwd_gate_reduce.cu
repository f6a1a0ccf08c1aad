// The KDA backward's gate-parameter reduce (after the chunk-gradient kernel, kda_bwd_chunk5.cu): one block
// per value head j, thread = channel c: dA_log[j] = sum over rows, then channels, of part[., j, c, 0];
// ddt_bias[j, c] = sum over rows of part[., j, c, 1] (double, fixed order: deterministic).
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/kda/kda_bwd_chunk_common.cuh"

namespace linattn::cuda {
namespace {

using namespace kda_bwd;

__global__ void __launch_bounds__(kK) kda_bwd_gate_reduce_kernel(GdnBwdParams p, const float* part, int64_t rows,
                                                                 const int32_t* count) {
  __shared__ double red[kK];
  const int j = blockIdx.x, c = threadIdx.x;
  const int64_t nr = count ? min(int64_t(max(*count, 0)), rows) : rows;
  double a = 0.0, b = 0.0;
  for (int64_t r = 0; r < nr; ++r) {
    const float* o = part + ((r * p.f.HV + j) * kK + c) * 2;
    a += o[0];
    b += o[1];
  }
  if (p.ddt_bias.p) store_out(p.ddt_bias.p, p.ddt_bias.t, j * kK + c, static_cast<float>(b));
  red[c] = a;
  __syncthreads();
  if (c == 0 && p.dA_log.p) {
    double s = 0.0;
    for (int i = 0; i < kK; ++i) s += red[i];
    store_out(p.dA_log.p, p.dA_log.t, j, static_cast<float>(s));
  }
}

}  // namespace

void launch_kda_bwd_gate_reduce(const GdnBwdParams& p, const float* part, int64_t rows, const int32_t* count,
                                cudaStream_t stream) {
  if (!p.dA_log.p && !p.ddt_bias.p) return;
  launch(kda_bwd_gate_reduce_kernel, dim3(p.f.HV), dim3(kK), 0, stream, p, part, rows, count);
}

}  // namespace linattn::cuda
