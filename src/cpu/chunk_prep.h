// Per-token preprocessing shared by the CPU chunked and token-by-token paths (and the backward):
// q / k rows in fp32 with the optional in-kernel L2 norm, beta with the optional sigmoid, and the
// log-decay g (GDN: one per token and value head; KDA: one per key channel) with the optional
// in-kernel gate. Formulas: ALGORITHMS.md section 1. Work buffers are fp32 rows of length K.
#pragma once
#include <cmath>
#include <cstdint>

#include "cpu/chunk_params.h"
#include "cpu/convert.h"
#include "cpu/simd.h"

namespace linattn::cpu {

// x <- x / sqrt(sum x^2 + 1e-6) over n values.
inline void l2norm_row(float* x, int64_t n) {
  using namespace simd;
  VF acc = zero();
  int64_t i = 0;
  for (; i + kW <= n; i += kW) acc = fma(load(x + i), load(x + i), acc);
  if (i < n) {
    const VF t = load(x + i, tail_mask(static_cast<int>(n - i)));
    acc = fma(t, t, acc);
  }
  const float r = 1.0f / std::sqrt(hsum(acc) + 1e-6f);
  for (int64_t c = 0; c < n; ++c) x[c] *= r;
}

// q and k rows of token t, q/k head h, in fp32 (normalized when p.l2norm). Either may be null.
inline void prep_qk(const ChunkParams& p, int64_t t, int64_t h, float* q, float* k) {
  const int64_t off = (t * p.H + h) * p.K;
  if (q) {
    load_row(p.q, p.qk_dtype, off, p.K, q);
    if (p.l2norm) l2norm_row(q, p.K);
  }
  if (k) {
    load_row(p.k, p.qk_dtype, off, p.K, k);
    if (p.l2norm) l2norm_row(k, p.K);
  }
}

// beta of token t, value head j.
inline float prep_beta(const ChunkParams& p, int64_t t, int64_t j) {
  const float b = load_one(p.beta, p.beta_dtype, t * p.HV + j);
  if (!p.beta_sigmoid) return b;
  const float s = 1.0f / (1.0f + std::exp(-b));
  return p.neg_eigval ? 2.0f * s : s;
}

// GDN: log-decay of token t, value head j.
inline float prep_gate_scalar(const ChunkParams& p, int64_t t, int64_t j) {
  const float g = load_one(p.g, p.g_dtype, t * p.HV + j);
  if (!p.gate_in_kernel) return g;
  const float x = g + (p.dt_bias ? p.dt_bias[j] : 0.0f);
  const float sp = x > 20.0f ? x : std::log1p(std::exp(x));
  return -std::exp(p.A_log[j]) * sp;
}

// KDA: log-decays of token t, value head j, over the K channels, into out[K].
inline void prep_gate_vec(const ChunkParams& p, int64_t t, int64_t j, float* out) {
  using namespace simd;
  load_row(p.g, p.g_dtype, (t * p.HV + j) * p.K, p.K, out);
  if (!p.gate_in_kernel) return;
  const float* bias = p.dt_bias ? p.dt_bias + j * p.K : nullptr;
  const bool lb = p.has_lower_bound;
  const float a = p.A_log ? std::exp(p.A_log[j]) : 1.0f;
  for (int64_t d = 0; d < p.K; d += kW) {
    const int n = static_cast<int>(p.K - d < kW ? p.K - d : kW);
    const Tail tm = tail_mask(n);
    VF x = load(out + d, tm);
    if (bias) x = add(x, load(bias + d, tm));
    // default: -exp(A_log) softplus(x); lower bound: lb * sigmoid(exp(A_log) x) (A_log optional)
    const VF r = lb ? mul(set1(p.lower_bound), sigmoid(mul(set1(a), x))) : mul(set1(-a), softplus(x));
    store(out + d, r, tm);
  }
}

}  // namespace linattn::cpu
