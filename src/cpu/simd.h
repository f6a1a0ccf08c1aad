// A thin fp32 vector abstraction for the CPU kernels, chosen at build time: AVX-512 (16 lanes),
// AVX2 + FMA (8 lanes) or scalar (1 lane). Kernels are written once against VF / Tail and the
// helpers below; a Tail masks the last, partial vector of a row (lanes >= n read as 0, never
// written). exp() flushes results below e^-87.3 to exactly 0 (no denormals reach a product) and
// saturates above e^88.7 to +inf; log1p_unit() is log(1 + y) for y in [0, 1], used by softplus.
// The same code path runs for every lane of a row, so results never depend on how rows are split.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cpu/intrin.h"

namespace linattn::cpu::simd {

// Hint: bring the cache line holding p toward L2 (never faults).
inline void prefetch_l2(const void* p) { __builtin_prefetch(p, 0, 2); }

#if defined(__AVX512F__)
inline constexpr int kW = 16;
inline constexpr const char* kIsa = "avx512";
using VF = __m512;
struct Tail { __mmask16 m; };
inline Tail tail_mask(int n) { return {static_cast<__mmask16>((1u << n) - 1u)}; }
inline VF load(const float* p) { return _mm512_loadu_ps(p); }
inline VF load(const float* p, Tail t) { return _mm512_maskz_loadu_ps(t.m, p); }
inline void store(float* p, VF v) { _mm512_storeu_ps(p, v); }
inline void store(float* p, VF v, Tail t) { _mm512_mask_storeu_ps(p, t.m, v); }
inline VF set1(float x) { return _mm512_set1_ps(x); }
inline VF zero() { return _mm512_setzero_ps(); }
inline VF add(VF a, VF b) { return _mm512_add_ps(a, b); }
inline VF sub(VF a, VF b) { return _mm512_sub_ps(a, b); }
inline VF mul(VF a, VF b) { return _mm512_mul_ps(a, b); }
inline VF div(VF a, VF b) { return _mm512_div_ps(a, b); }
inline VF fma(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }   // a * b + c
inline VF fnma(VF a, VF b, VF c) { return _mm512_fnmadd_ps(a, b, c); } // c - a * b
inline VF max(VF a, VF b) { return _mm512_max_ps(a, b); }
inline VF min(VF a, VF b) { return _mm512_min_ps(a, b); }
inline VF abs(VF a) { return _mm512_abs_ps(a); }
inline float hsum(VF v) { return _mm512_reduce_add_ps(v); }
inline VF iota() { return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
// Lanes where a < b take x, others y.
inline VF select_lt(VF a, VF b, VF x, VF y) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x);
}
inline VF select_gt(VF a, VF b, VF x, VF y) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), y, x);
}
inline VF round_nearest(VF x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
// x * 2^n for integral n in [-126, 127].
inline VF ldexp(VF x, VF n) { return _mm512_scalef_ps(x, n); }
#elif defined(__AVX2__) && defined(__FMA__)
inline constexpr int kW = 8;
inline constexpr const char* kIsa = "avx2";
using VF = __m256;
struct Tail { __m256i m; };
inline Tail tail_mask(int n) {
  return {_mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))};
}
inline VF load(const float* p) { return _mm256_loadu_ps(p); }
inline VF load(const float* p, Tail t) { return _mm256_maskload_ps(p, t.m); }
inline void store(float* p, VF v) { _mm256_storeu_ps(p, v); }
inline void store(float* p, VF v, Tail t) { _mm256_maskstore_ps(p, t.m, v); }
inline VF set1(float x) { return _mm256_set1_ps(x); }
inline VF zero() { return _mm256_setzero_ps(); }
inline VF add(VF a, VF b) { return _mm256_add_ps(a, b); }
inline VF sub(VF a, VF b) { return _mm256_sub_ps(a, b); }
inline VF mul(VF a, VF b) { return _mm256_mul_ps(a, b); }
inline VF div(VF a, VF b) { return _mm256_div_ps(a, b); }
inline VF fma(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
inline VF fnma(VF a, VF b, VF c) { return _mm256_fnmadd_ps(a, b, c); }
inline VF max(VF a, VF b) { return _mm256_max_ps(a, b); }
inline VF min(VF a, VF b) { return _mm256_min_ps(a, b); }
inline VF abs(VF a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
inline float hsum(VF v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline VF iota() { return _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7); }
inline VF select_lt(VF a, VF b, VF x, VF y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
inline VF select_gt(VF a, VF b, VF x, VF y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_GT_OQ)); }
inline VF round_nearest(VF x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline VF ldexp(VF x, VF n) {
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(x, _mm256_castsi256_ps(e));
}
#else
inline constexpr int kW = 1;
inline constexpr const char* kIsa = "scalar";
using VF = float;
struct Tail { int n; };
inline Tail tail_mask(int n) { return {n}; }
inline VF load(const float* p) { return *p; }
inline VF load(const float* p, Tail t) { return t.n > 0 ? *p : 0.0f; }
inline void store(float* p, VF v) { *p = v; }
inline void store(float* p, VF v, Tail t) { if (t.n > 0) *p = v; }
inline VF set1(float x) { return x; }
inline VF zero() { return 0.0f; }
inline VF add(VF a, VF b) { return a + b; }
inline VF sub(VF a, VF b) { return a - b; }
inline VF mul(VF a, VF b) { return a * b; }
inline VF div(VF a, VF b) { return a / b; }
inline VF fma(VF a, VF b, VF c) { return std::fma(a, b, c); }
inline VF fnma(VF a, VF b, VF c) { return std::fma(-a, b, c); }
inline VF max(VF a, VF b) { return a > b ? a : b; }
inline VF min(VF a, VF b) { return a < b ? a : b; }
inline VF abs(VF a) { return std::fabs(a); }
inline float hsum(VF v) { return v; }
inline VF iota() { return 0.0f; }
inline VF select_lt(VF a, VF b, VF x, VF y) { return a < b ? x : y; }
inline VF select_gt(VF a, VF b, VF x, VF y) { return a > b ? x : y; }
inline VF round_nearest(VF x) { return std::nearbyint(x); }
inline VF ldexp(VF x, VF n) { return std::ldexp(x, static_cast<int>(n)); }
#endif

// e^x: n = round(x / ln2), r = x - n ln2 (two-part ln2), degree-6 Taylor on |r| <= ln2/2
// (~1 ulp), then scale by 2^n. Below -87.3 the result is 0, above 88.7 it is +inf.
inline VF exp(VF x) {
  const VF lo = set1(-87.3f), hi = set1(88.7f);
  const VF xc = min(max(x, lo), hi);
  const VF n = round_nearest(mul(xc, set1(1.44269504f)));
  VF r = fnma(n, set1(0.693145752f), xc);
  r = fnma(n, set1(1.42860677e-6f), r);
  VF p = set1(1.0f / 720.0f);
  p = fma(p, r, set1(1.0f / 120.0f));
  p = fma(p, r, set1(1.0f / 24.0f));
  p = fma(p, r, set1(1.0f / 6.0f));
  p = fma(p, r, set1(0.5f));
  p = fma(p, r, set1(1.0f));
  p = fma(p, r, set1(1.0f));
  VF e = ldexp(p, n);
  e = select_lt(x, lo, zero(), e);
  return select_gt(x, hi, set1(INFINITY), e);
}

// log(1 + y) for y in [0, 1]: 2 atanh(s), s = y / (2 + y) in [0, 1/3], odd series to s^15.
inline VF log1p_unit(VF y) {
  const VF s = div(y, add(set1(2.0f), y));
  const VF s2 = mul(s, s);
  VF p = set1(1.0f / 15.0f);
  p = fma(p, s2, set1(1.0f / 13.0f));
  p = fma(p, s2, set1(1.0f / 11.0f));
  p = fma(p, s2, set1(1.0f / 9.0f));
  p = fma(p, s2, set1(1.0f / 7.0f));
  p = fma(p, s2, set1(1.0f / 5.0f));
  p = fma(p, s2, set1(1.0f / 3.0f));
  p = fma(p, s2, set1(1.0f));
  return mul(set1(2.0f), mul(s, p));
}

// softplus(x) = max(x, 0) + log(1 + e^-|x|); equals x above 20 in fp32, as FLA's rule.
inline VF softplus(VF x) { return add(max(x, zero()), log1p_unit(exp(sub(zero(), abs(x))))); }
// 1 / (1 + e^-x).
inline VF sigmoid(VF x) { return div(set1(1.0f), add(set1(1.0f), exp(sub(zero(), x)))); }

// Scalar versions through lane 0 of the vector code, so scalar and vector results agree.
inline float lane0(VF v) {
  float buf[kW];
  store(buf, v);
  return buf[0];
}
inline float exp1(float x) { return lane0(exp(set1(x))); }
inline float softplus1(float x) { return lane0(softplus(set1(x))); }
inline float sigmoid1(float x) { return lane0(sigmoid(set1(x))); }

}  // namespace linattn::cpu::simd
