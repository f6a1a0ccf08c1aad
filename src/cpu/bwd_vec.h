// Elementwise fp32 helpers of the CPU chunk backward on the shared simd.h vectors: row
// scaling and products, the L2 norm of a row, and the in-kernel gate transforms together with
// their local derivatives (ALGORITHMS.md section 1 forms, matching the forward's prep code).
#pragma once
#include <cmath>
#include <cstdint>

#include "cpu/simd.h"

namespace linattn::cpu::bwd {

inline simd::Tail tail_of(int64_t rem) {
  return simd::tail_mask(static_cast<int>(rem < simd::kW ? rem : simd::kW));
}

// dst = a * src
inline void vscale(float a, const float* src, float* dst, int64_t n) {
  using namespace simd;
  const VF av = set1(a);
  int64_t i = 0;
  for (; i + kW <= n; i += kW) store(dst + i, mul(av, load(src + i)));
  if (i < n) store(dst + i, mul(av, load(src + i, tail_of(n - i))), tail_of(n - i));
}

// dst = a (.) b
inline void vmul(const float* a, const float* b, float* dst, int64_t n) {
  using namespace simd;
  for (int64_t i = 0; i < n; i += kW) {
    const Tail t = tail_of(n - i);
    store(dst + i, mul(load(a + i, t), load(b + i, t)), t);
  }
}

// dst = a + b
inline void vadd(const float* a, const float* b, float* dst, int64_t n) {
  using namespace simd;
  for (int64_t i = 0; i < n; i += kW) {
    const Tail t = tail_of(n - i);
    store(dst + i, add(load(a + i, t), load(b + i, t)), t);
  }
}

inline void vfill(float* dst, float x, int64_t n) {
  using namespace simd;
  for (int64_t i = 0; i < n; i += kW) store(dst + i, set1(x), tail_of(n - i));
}

// y += a x
inline void vaxpy(float a, const float* x, float* y, int64_t n) {
  using namespace simd;
  const VF av = set1(a);
  for (int64_t i = 0; i < n; i += kW) {
    const Tail t = tail_of(n - i);
    store(y + i, fma(av, load(x + i, t), load(y + i, t)), t);
  }
}

inline float vdot(const float* a, const float* b, int64_t n) {
  using namespace simd;
  VF acc = zero();
  for (int64_t i = 0; i < n; i += kW) {
    const Tail t = tail_of(n - i);
    acc = fma(load(a + i, t), load(b + i, t), acc);
  }
  return hsum(acc);
}

inline float vsum(const float* a, int64_t n) {
  using namespace simd;
  VF acc = zero();
  for (int64_t i = 0; i < n; i += kW) acc = add(acc, load(a + i, tail_of(n - i)));
  return hsum(acc);
}

// x <- x / sqrt(sum x^2 + 1e-6); returns the factor (the forward's formula).
inline float l2norm_row(float* x, int64_t n) {
  const float r = 1.0f / std::sqrt(vdot(x, x, n) + 1e-6f);
  vscale(r, x, x, n);
  return r;
}

// dx <- rstd (dx - (dx . y) y), y the normalized row.
inline void l2norm_bwd_row(float* dx, const float* y, float rstd, int64_t n) {
  const float dot = vdot(dx, y, n);
  vaxpy(-dot, y, dx, n);
  vscale(rstd, dx, dx, n);
}

inline float sigmoid1(float x) { return simd::sigmoid1(x); }

// g <- -a softplus(x) for x = g (bias already added); dd = dg/dx = -a sigmoid(x), dA = g.
inline void gate_softplus(int64_t n, float a, float* g, float* dd, float* dA) {
  using namespace simd;
  const VF na = set1(-a);
  for (int64_t i = 0; i < n; i += kW) {
    const Tail t = tail_of(n - i);
    const VF x = load(g + i, t);
    const VF gv = mul(na, softplus(x));
    store(g + i, gv, t);
    store(dd + i, mul(na, sigmoid(x)), t);
    store(dA + i, gv, t);
  }
}

// g <- lb sigmoid(a x); dd = lb s (1 - s) a; dA = dd x when A_log is present, else 0.
inline void gate_lower_bound(int64_t n, float a, float lb, bool has_A_log, float* g, float* dd,
                             float* dA) {
  using namespace simd;
  const VF av = set1(a), lv = set1(lb), one = set1(1.0f);
  for (int64_t i = 0; i < n; i += kW) {
    const Tail t = tail_of(n - i);
    const VF x = load(g + i, t);
    const VF s = sigmoid(mul(av, x));
    const VF d = mul(mul(lv, mul(s, sub(one, s))), av);
    store(g + i, mul(lv, s), t);
    store(dd + i, d, t);
    store(dA + i, has_A_log ? mul(d, x) : zero(), t);
  }
}

}  // namespace linattn::cpu::bwd
