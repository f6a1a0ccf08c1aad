// Token-by-token GDN / KDA forward (ALGORITHMS.md section 2) on CUDA: the general fallback for
// every shape the chunked kernels do not take (any K <= 256, any V, fp32 inputs, unaligned
// pointers) and a second, independent implementation the chunked path is tested against.
// Gate policy: GDN decays the whole state by one scalar per token, KDA decays key row kk by its
// own factor exp(g[t, j, kk]) (staged per token in shared memory next to q and k).
// Mapping: one warp per (value-column tile of 32, value head j, sequence n); lane c owns column
// v0 + c of the fp32 state, kept in shared memory as S[K][32] (conflict-free: lanes read
// consecutive words). Per token the warp stages q and k (l2-normalised if asked) in shared memory,
// then each lane runs e = v - (D S)^T k, S = D S + beta * k e, o = scale * S^T q (D = decay).
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {
namespace {

constexpr int kCols = 32;

__device__ __forceinline__ void store_elem(void* p, ElemType t, int64_t i, float x) {
  switch (t) {
    case ElemType::kF16: static_cast<__half*>(p)[i] = __float2half_rn(x); break;
    case ElemType::kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x); break;
    default: static_cast<float*>(p)[i] = x;
  }
}

// Stages row `row` (K elements) of q or k into `dst`, l2-normalised when asked.
__device__ __forceinline__ void stage_row(const GdnFwdParams& p, const void* src, int64_t row,
                                          float* dst, int lane) {
  float ss = 0.f;
  for (int i = lane; i < p.K; i += 32) {
    float x = load_elem(src, p.io, row * p.K + i);
    dst[i] = x;
    ss += x * x;
  }
  if (p.l2norm) {
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, d);
    const float r = rsqrtf(ss + 1e-6f);
    for (int i = lane; i < p.K; i += 32) dst[i] *= r;
  }
}

__global__ void __launch_bounds__(32) gdn_recurrent_kernel(GdnFwdParams p) {
  extern __shared__ float smem[];
  float* S = smem;                       // [K][kCols]
  float* qs = S + p.K * kCols;           // [K]
  float* ks = qs + p.K;                  // [K]
  float* dec = ks + p.K;                 // [K] KDA per-channel decay of the current token
  const int lane = threadIdx.x;
  const int v0 = blockIdx.x * kCols, j = blockIdx.y;
  const int64_t n = blockIdx.z;
  const int h = j / (p.HV / p.H);
  const int col = v0 + lane;
  const bool active = col < p.V;
  int64_t bos, eos;
  seq_bounds(p, n, bos, eos);

  for (int kk = 0; kk < p.K; ++kk)
    S[kk * kCols + lane] = (active && p.h0) ? load_elem(p.h0, p.h0_type, state_index(p, n, j, kk, col)) : 0.f;

  for (int64_t t = bos; t < eos; ++t) {
    __syncwarp();
    stage_row(p, p.q, t * p.H + h, qs, lane);
    stage_row(p, p.k, t * p.H + h, ks, lane);
    const float decay = p.kda ? 1.f : expf(gdn_gate(p, t, j));
    if (p.kda)
      for (int kk = lane; kk < p.K; kk += 32) dec[kk] = expf(kda_gate(p, t, j, kk));
    const float beta = gdn_beta(p, t, j);
    __syncwarp();
    if (active) {
      float dot = 0.f;
      if (p.kda) {
        for (int kk = 0; kk < p.K; ++kk) {
          const float s = dec[kk] * S[kk * kCols + lane];
          S[kk * kCols + lane] = s;
          dot += s * ks[kk];
        }
      } else {
        for (int kk = 0; kk < p.K; ++kk) dot += S[kk * kCols + lane] * ks[kk];
        dot *= decay;
      }
      const float e = load_elem(p.v, p.io, (t * p.HV + j) * p.V + col) - dot;
      const float be = beta * e;
      float o = 0.f;
      for (int kk = 0; kk < p.K; ++kk) {
        const float s = decay * S[kk * kCols + lane] + ks[kk] * be;
        S[kk * kCols + lane] = s;
        o += s * qs[kk];
      }
      store_elem(p.o, p.io, (t * p.HV + j) * p.V + col, o * p.scale);
    }
  }
  if (p.ht && active)
    for (int kk = 0; kk < p.K; ++kk) p.ht[state_index(p, n, j, kk, col)] = S[kk * kCols + lane];
}

}  // namespace

void launch_gdn_recurrent(const GdnFwdParams& p, cudaStream_t stream) {
  const size_t smem = (size_t(p.K) * kCols + 3 * size_t(p.K)) * sizeof(float);
  launch(gdn_recurrent_kernel, dim3((p.V + kCols - 1) / kCols, p.HV, p.N), dim3(32), smem, stream, p);
}

}  // namespace linattn::cuda
