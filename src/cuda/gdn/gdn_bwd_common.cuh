// Device helpers of the CUDA GDN backward kernels: runtime-typed stores, the local derivatives
// of the in-kernel gate and beta (ALGORITHMS.md 4.1 step 7-8), chunk-row bases, and one generic
// warp-tile product on mma.sync (every operand storage order the backward needs).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/common/mma.cuh"
#include "cuda/gdn/gdn_bwd_kernels.h"
#include "cuda/gdn/gdn_common.cuh"

namespace linattn::cuda {

__device__ __forceinline__ void store_out(void* p, ElemType t, int64_t i, float x) {
  switch (t) {
    case ElemType::kF16: static_cast<__half*>(p)[i] = __float2half_rn(x); break;
    case ElemType::kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x); break;
    default: static_cast<float*>(p)[i] = x;
  }
}

// Gate of token t, value head j, and its local derivatives: g (natural log-decay), dg/draw (1
// without the in-kernel gate) and dg/dA_log (= g with the in-kernel gate).
struct GateDeriv {
  float g, draw, dA;
};
__device__ __forceinline__ GateDeriv gdn_gate_deriv(const GdnFwdParams& p, int64_t t, int j) {
  const float raw = load_elem(p.g, p.g_type, t * p.HV + j);
  if (!p.gate_in_kernel) return {raw, 1.f, 0.f};
  const float x = raw + (p.dt_bias ? p.dt_bias[j] : 0.f);
  const float ea = expf(p.A_log[j]);
  const float sp = x > 20.f ? x : log1pf(expf(x));
  const float sg = x > 20.f ? 1.f : 1.f / (1.f + expf(-x));
  const float g = -ea * sp;
  return {g, -ea * sg, g};
}

// The same for gate channel c (0 <= c < bwd_gate_width) under the gate policy of f: scalar GDN
// gates (width 1) or KDA per-channel gates (f.kda) with the default or the lower-bound in-kernel
// form (x = raw + dt_bias[j, c]; lower bound: g = lb sigmoid(a x), a = exp(A_log) or 1 without
// A_log, dg/draw = lb s (1 - s) a, dg/dA_log = dg/draw * x), the same forms as kda_gate_value.
// Finite for any finite raw input.
__device__ __forceinline__ GateDeriv bwd_gate_deriv(const GdnBwdParams& p, int64_t t, int j, int c) {
  const GdnFwdParams& f = p.f;
  const int W = bwd_gate_width(f);
  const float raw = load_elem(f.g, f.g_type, (t * f.HV + j) * W + c);
  if (!f.gate_in_kernel) return {raw, 1.f, 0.f};
  const float x = raw + (f.dt_bias ? f.dt_bias[j * W + c] : 0.f);
  if (!f.has_lower_bound) {
    const float ea = expf(f.A_log[j]);
    const float sp = x > 20.f ? x : log1pf(expf(x));
    const float sg = 1.f / (1.f + expf(-x));
    const float g = -ea * sp;
    return {g, -ea * sg, g};
  }
  const float a = f.A_log ? expf(f.A_log[j]) : 1.f;
  const float s = 1.f / (1.f + expf(-a * x));
  const float ds = f.lower_bound * s * (1.f - s);
  return {f.lower_bound * s, ds * a, f.A_log ? ds * a * x : 0.f};
}

// d beta / d(beta input): s * sigmoid * (1 - sigmoid) with the in-kernel sigmoid, else 1.
__device__ __forceinline__ float gdn_beta_draw(const GdnFwdParams& p, int64_t t, int j) {
  if (!p.beta_sigmoid) return 1.f;
  const float b = load_elem(p.beta, p.beta_type, t * p.HV + j);
  const float s = 1.f / (1.f + expf(-b));
  return (p.neg_eigval ? 2.f : 1.f) * s * (1.f - s);
}

// First chunk row of sequence n (see GdnBwdWs).
__device__ __forceinline__ int64_t chunk_row_base(const int32_t* chunk_offsets, int nts, int64_t n) {
  return chunk_offsets ? int64_t(chunk_offsets[n]) : n * nts;
}

// acc[NTW] += A[m0..m0+16, 0..KD) * B[0..KD, n0..n0+8 NTW), fp32 accumulators.
// A_T: A stored transposed ([k][m], ldmatrix.trans), else row-major [m][k].
// B_NK: B stored [n][k] (plain ldmatrix), else [k][n] (ldmatrix.trans).
template <class T, int NTW, int KD, bool A_T, bool B_NK>
__device__ __forceinline__ void mma_tile(float (&acc)[NTW][4], const T* a, int lda, int m0, const T* b,
                                         int ldb, int n0, int lane) {
#pragma unroll
  for (int kt = 0; kt < KD / 16; ++kt) {
    uint32_t fa[4];
    if constexpr (A_T) ldsm_x4_t(fa, a_addr_colmajor(a, lda, m0, 16 * kt, lane));
    else ldsm_x4(fa, a_addr_rowmajor(a, lda, m0, 16 * kt, lane));
#pragma unroll
    for (int np = 0; np < NTW / 2; ++np) {
      uint32_t fb[4];
      if constexpr (B_NK) ldsm_x4(fb, b_addr_nk(b, ldb, 16 * kt, n0 + 16 * np, lane));
      else ldsm_x4_t(fb, b_addr_kn(b, ldb, 16 * kt, n0 + 16 * np, lane));
      mma16816<T>(acc[2 * np], fa, fb[0], fb[1]);
      mma16816<T>(acc[2 * np + 1], fa, fb[2], fb[3]);
    }
    if constexpr (NTW % 2 == 1) {
      uint32_t fb[2];
      if constexpr (B_NK) ldsm_x2(fb, b_addr_nk(b, ldb, 16 * kt, n0 + 16 * (NTW / 2), lane));
      else ldsm_x2_t(fb, b_addr_kn(b, ldb, 16 * kt, n0 + 16 * (NTW / 2), lane));
      mma16816<T>(acc[NTW - 1], fa, fb[0], fb[1]);
    }
  }
}

template <class T>
__device__ __forceinline__ void st_pair(T* dst, float a, float b) {
  *reinterpret_cast<uint32_t*>(dst) = MmaType<T>::pack(a, b);
}
template <class T>
__device__ __forceinline__ float2 ld_pair(const T* src) {
  const uint32_t w = *reinterpret_cast<const uint32_t*>(src);
  const T* e = reinterpret_cast<const T*>(&w);
  return make_float2(MmaType<T>::to_float(e[0]), MmaType<T>::to_float(e[1]));
}

}  // namespace linattn::cuda
