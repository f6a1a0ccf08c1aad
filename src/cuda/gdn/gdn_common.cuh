// Device helpers shared by the GDN forward kernels: runtime-typed scalar loads, sequence bounds
// (clamped, identical in every kernel and in the metadata kernel), the in-kernel gate and beta.
// Gates follow ALGORITHMS.md section 1: g = -exp(A_log) * softplus(a + dt_bias) (softplus = x
// above 20), beta = sigmoid(x) (2 sigmoid(x) with allow_neg_eigval).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/gdn/gdn_params.h"

namespace linattn::cuda {

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float load_elem(const void* p, ElemType t, int64_t i) {
  switch (t) {
    case ElemType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case ElemType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ int64_t load_cu(const void* cu, bool i64, int64_t i) {
  return i64 ? static_cast<const int64_t*>(cu)[i] : static_cast<const int32_t*>(cu)[i];
}

// Rows [bos, eos) of sequence n, clamped into [0, T_total].
__device__ __forceinline__ void seq_bounds(const GdnFwdParams& p, int64_t n, int64_t& bos,
                                           int64_t& eos) {
  if (p.cu_seqlens) {
    bos = min(max(load_cu(p.cu_seqlens, p.cu_i64, n), int64_t(0)), p.T_total);
    eos = min(max(load_cu(p.cu_seqlens, p.cu_i64, n + 1), bos), p.T_total);
  } else {
    bos = n * p.T_seq;
    eos = bos + p.T_seq;
  }
}

// Natural-log decay of token t, value head j.
__device__ __forceinline__ float gdn_gate(const GdnFwdParams& p, int64_t t, int j) {
  float g = load_elem(p.g, p.g_type, t * p.HV + j);
  if (p.gate_in_kernel) {
    float x = g + (p.dt_bias ? p.dt_bias[j] : 0.f);
    float sp = x > 20.f ? x : log1pf(expf(x));
    g = -expf(p.A_log[j]) * sp;
  }
  return g;
}

// KDA gate of one raw value with x = raw + dtb (ALGORITHMS.md section 1): -ea softplus(x), or
// lower_bound sigmoid(ea x) when lower_bound is set; ea = exp(A_log[j]) (1 without A_log).
__device__ __forceinline__ float kda_gate_value(const GdnFwdParams& p, float raw, float dtb, float ea) {
  const float x = raw + dtb;
  if (p.has_lower_bound) return p.lower_bound / (1.f + expf(-ea * x));
  return -ea * (x > 20.f ? x : log1pf(expf(x)));
}

// Natural-log decay of token t, value head j, key channel c (KDA).
__device__ __forceinline__ float kda_gate(const GdnFwdParams& p, int64_t t, int j, int c) {
  const float g = load_elem(p.g, p.g_type, (t * p.HV + j) * p.K + c);
  if (!p.gate_in_kernel) return g;
  return kda_gate_value(p, g, p.dt_bias ? p.dt_bias[j * p.K + c] : 0.f, p.A_log ? expf(p.A_log[j]) : 1.f);
}

__device__ __forceinline__ float gdn_beta(const GdnFwdParams& p, int64_t t, int j) {
  float b = load_elem(p.beta, p.beta_type, t * p.HV + j);
  if (p.beta_sigmoid) {
    b = 1.f / (1.f + expf(-b));
    if (p.neg_eigval) b *= 2.f;
  }
  return b;
}

// Index of state element (kk, vv) of sequence n, value head j, in the caller's layout.
__device__ __forceinline__ int64_t state_index(const GdnFwdParams& p, int64_t n, int j, int kk,
                                               int vv) {
  const int64_t head = (n * p.HV + j) * int64_t(p.K) * p.V;
  return head + (p.state_v_first ? int64_t(vv) * p.K + kk : int64_t(kk) * p.V + vv);
}

// The chunk a chunk-parallel CTA owns: row r of the chunk table (chunk_indices: varlen / fixed
// capacity) or r = n * nts + c (dense); its first token t0 and length len (< BT at a sequence
// end). False for a sentinel row or an empty chunk: the CTA then touches nothing.
__device__ __forceinline__ bool chunk_span(const GdnFwdParams& p, const int32_t* chunk_indices, int nts, int64_t r,
                                           int BT, int64_t& t0, int& len) {
  int64_t n, c;
  if (chunk_indices) {
    n = chunk_indices[2 * r];
    c = chunk_indices[2 * r + 1];
    if (n < 0) return false;  // sentinel row
  } else {
    n = r / nts;
    c = r % nts;
  }
  int64_t bos, eos;
  seq_bounds(p, n, bos, eos);
  t0 = bos + c * BT;
  len = static_cast<int>(min(int64_t(BT), eos - t0));
  return len > 0;
}

}  // namespace linattn::cuda
