// 16-lane fp32 vectors (GCC vector extensions: AVX-512 registers with -march=native, split into
// narrower ones elsewhere) for the short-conv kernels: loads / stores of fp32, bf16 and fp16
// rows with conversion (round to nearest even), and exp / sigmoid / silu in fp32.
// exp: inputs clamped to [-87, 88], Cody-Waite range reduction + degree-6 polynomial (relative
// error ~2e-7), 2^n applied by vscalefps on AVX-512, by exponent bits elsewhere. NaN propagates.
#pragma once
#include <cstdint>
#include <cstring>
#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif

// Vectors are only passed between always-inline helpers; the ABI note is irrelevant here.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace linattn::cpu::simd {

inline constexpr int kLanes = 16;
typedef float vf __attribute__((vector_size(64)));
typedef int32_t vi __attribute__((vector_size(64)));
typedef uint32_t vu __attribute__((vector_size(64)));
typedef uint16_t vh __attribute__((vector_size(32)));
typedef _Float16 vhf __attribute__((vector_size(32)));

// Storage tags for the 16-bit element types (2 bytes each, raw bits).
struct bf16_t {
  uint16_t bits;
};
struct fp16_t {
  uint16_t bits;
};

#define LINATTN_SIMD_INLINE inline __attribute__((always_inline))

LINATTN_SIMD_INLINE vf splat(float v) { return vf{} + v; }

LINATTN_SIMD_INLINE vf load(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
LINATTN_SIMD_INLINE vf load(const bf16_t* p) {
  vh h;
  std::memcpy(&h, p, sizeof h);
  const vu u = __builtin_convertvector(h, vu) << 16;
  vf v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}
// fp16 <-> fp32 by vcvtph2ps / vcvtps2ph where AVX-512 has them: GCC 12 lowers the _Float16
// vector conversion to per-element library calls without AVX512-FP16 (fp16 forward 6144 x 4096
// took 27 ms per thread, bf16 7.5).
LINATTN_SIMD_INLINE vf load(const fp16_t* p) {
#if defined(__AVX512F__)
  __m256i h;
  std::memcpy(&h, p, sizeof h);
  return reinterpret_cast<vf>(_mm512_maskz_cvtph_ps(static_cast<__mmask16>(0xFFFF), h));
#else
  vhf h;
  std::memcpy(&h, p, sizeof h);
  return __builtin_convertvector(h, vf);
#endif
}

LINATTN_SIMD_INLINE void store(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
LINATTN_SIMD_INLINE void store(bf16_t* p, vf v) {
#if defined(__AVX512BF16__)
  // vcvtneps2bf16: round to nearest even, NaN stays NaN (fp32 denormals become 0).
  const __m256bh h = _mm512_cvtneps_pbh(reinterpret_cast<__m512>(v));
  std::memcpy(p, &h, sizeof h);
#else
  vu u;
  std::memcpy(&u, &v, sizeof u);
  const vu rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const vu quiet_nan = (u >> 16) | 0x40u;
  const vu r = ((u & 0x7fffffffu) > 0x7f800000u) ? quiet_nan : rounded;
  const vh h = __builtin_convertvector(r, vh);
  std::memcpy(p, &h, sizeof h);
#endif
}
LINATTN_SIMD_INLINE void store(fp16_t* p, vf v) {
#if defined(__AVX512F__)
  // round to nearest even, like the conversion below; NaN stays NaN, overflow gives inf
  const __m256i h = _mm512_maskz_cvtps_ph(static_cast<__mmask16>(0xFFFF), reinterpret_cast<__m512>(v),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  std::memcpy(p, &h, sizeof h);
#else
  const vhf h = __builtin_convertvector(v, vhf);
  std::memcpy(p, &h, sizeof h);
#endif
}

// The first n (< kLanes) elements; the rest of the vector is 0 / not written.
template <class E>
LINATTN_SIMD_INLINE vf load_n(const E* p, int n) {
  E tmp[kLanes] = {};
  std::memcpy(tmp, p, sizeof(E) * n);
  return load(tmp);
}
template <class E>
LINATTN_SIMD_INLINE void store_n(E* p, vf v, int n) {
  E tmp[kLanes];
  store(tmp, v);
  std::memcpy(p, tmp, sizeof(E) * n);
}
// Non-temporal (streaming) store of a full vector: bypasses the caches and the read-for-
// ownership of the destination line. `p` must be aligned to the vector's size (64 bytes for
// fp32, 32 for the 16-bit types); callers fence with stream_fence() before others read.
LINATTN_SIMD_INLINE void store_stream(float* p, vf v) {
#if defined(__AVX512F__)
  _mm512_stream_ps(p, reinterpret_cast<__m512>(v));
#else
  store(p, v);
#endif
}
template <class E>
LINATTN_SIMD_INLINE void store_stream(E* p, vf v) {
#if defined(__AVX512F__)
  alignas(32) E tmp[kLanes];
  store(tmp, v);
  _mm256_stream_si256(reinterpret_cast<__m256i*>(p), _mm256_load_si256(reinterpret_cast<const __m256i*>(tmp)));
#else
  store(p, v);
#endif
}
inline void stream_fence() {
#if defined(__AVX512F__) || defined(__AVX__)
  _mm_sfence();
#endif
}

template <class E>
LINATTN_SIMD_INLINE vf load_any(const E* p, int n) {
  return n == kLanes ? load(p) : load_n(p, n);
}
template <class E>
LINATTN_SIMD_INLINE void store_any(E* p, vf v, int n) {
  if (n == kLanes) store(p, v);
  else store_n(p, v, n);
}

LINATTN_SIMD_INLINE vf exp(vf x) {
  // The clamp keeps 1 + exp(-z) finite in the sigmoid (its Newton step needs that).
  const vf lo = splat(-87.0f), hi = splat(88.0f);
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const vf magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const vf n = (x * 1.44269504088896341f + magic) - magic;
  vf r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  vf p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
#if defined(__AVX512F__)
  return reinterpret_cast<vf>(_mm512_maskz_scalef_ps(static_cast<__mmask16>(0xFFFF), reinterpret_cast<__m512>(p), reinterpret_cast<__m512>(n)));
#else
  const vi e = (__builtin_convertvector(n, vi) + 127) << 23;
  vf scale;
  std::memcpy(&scale, &e, sizeof scale);
  return p * scale;
#endif
}

// 1 / d: the 14-bit hardware estimate plus one Newton step (~1 ulp) where AVX-512 has it
// (vdivps is the slowest instruction of the silu otherwise), a division elsewhere.
LINATTN_SIMD_INLINE vf reciprocal(vf d) {
#if defined(__AVX512F__)
  const vf r = reinterpret_cast<vf>(_mm512_maskz_rcp14_ps(static_cast<__mmask16>(0xFFFF), reinterpret_cast<__m512>(d)));
  return r * (2.0f - d * r);
#else
  return 1.0f / d;
#endif
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// sigmoid(z) = 1 / (1 + 2^y), y = -z log2(e) clamped to [-126, 126] (1 + 2^y and its reciprocal stay
// normal; NaN propagates: max / min return their second operand when either is NaN). y = n + f with
// f = vreduceps(y) in [-0.5, 0.5], 2^f by a degree-5 polynomial (least-squares relative fit, 1.8e-7
// in fp32), 2^n by vscalefps: 16 vector ops instead of the Cody-Waite exp's ~23. The conv forward's
// 16-bit path is bound by these (FP pipes of a Zen 4-class core, 512-bit ops double-pumped).
// Error of silu vs fp64 over z in [-100, 100]: relative 3.8e-6 (at z ~ -73, where the fp32 rounding
// of y dominates), absolute 1.3e-6 (fp32 conv bars: 1e-4 relative, 1e-6 absolute on RMS).
LINATTN_SIMD_INLINE vf sigmoid(vf z) {
  // maskz forms: GCC's unmasked ones read an uninitialized pass-through register (-Wmaybe-uninitialized)
  const __mmask16 all = 0xFFFF;
  const __m512 y = _mm512_maskz_min_ps(
      all, _mm512_set1_ps(126.0f),
      _mm512_maskz_max_ps(all, _mm512_set1_ps(-126.0f), reinterpret_cast<__m512>(z * -1.44269504088896341f)));
  const __m512 f = _mm512_maskz_reduce_ps(all, y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const vf fv = reinterpret_cast<vf>(f), n = reinterpret_cast<vf>(y) - fv;
  vf p = splat(1.326660393e-03f);
  p = p * fv + 9.671512991e-03f;
  p = p * fv + 5.550727248e-02f;
  p = p * fv + 2.402224243e-01f;
  p = p * fv + 6.931470037e-01f;
  p = p * fv + 1.0f;
  const vf e = reinterpret_cast<vf>(
      _mm512_maskz_scalef_ps(all, reinterpret_cast<__m512>(p), reinterpret_cast<__m512>(n)));
  return reciprocal(1.0f + e);
}
#else
LINATTN_SIMD_INLINE vf sigmoid(vf z) { return reciprocal(1.0f + exp(-z)); }
#endif
LINATTN_SIMD_INLINE vf silu(vf z) { return z * sigmoid(z); }

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// silu for 16-bit outputs (whose final rounding is 2^-9 (bf16) / 2^-12 (fp16) relative): the same
// 2^y split with a degree-3 2^f polynomial (minimax relative fit on [-0.5, 0.5]: 1.0e-4) and the
// bare 14-bit reciprocal estimate (6.1e-5): relative error <= 1.7e-4 in all, 10 vector ops instead
// of 16. No clamps: vreduceps(+-inf) = 0, vscalefps saturates to 0 / inf and rcp14(inf) = 0 (there
// is no Newton step to turn inf * 0 into NaN), so z = +inf gives +inf, z << 0 gives -0, z = -inf
// gives NaN (as z / (1 + e^-z) does in fp64) and NaN propagates. The forward used it up to v3;
// since v4 it takes silu_pre below (weights prescaled); this unscaled form stays for callers that
// cannot prescale their sums (tested in test_conv_fwd_fast_cpu).
LINATTN_SIMD_INLINE vf silu_fast(vf z) {
  const __mmask16 all = 0xFFFF;
  const vf y = z * -1.44269504088896341f;
  const vf f = reinterpret_cast<vf>(
      _mm512_maskz_reduce_ps(all, reinterpret_cast<__m512>(y), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  const vf n = y - f;
  vf p = splat(5.500858e-02f);
  p = p * f + 2.4221037e-01f;
  p = p * f + 6.932829e-01f;
  p = p * f + 1.0f;
  const vf e = reinterpret_cast<vf>(
      _mm512_maskz_scalef_ps(all, reinterpret_cast<__m512>(p), reinterpret_cast<__m512>(n)));
  const vf r = reinterpret_cast<vf>(_mm512_maskz_rcp14_ps(all, reinterpret_cast<__m512>(1.0f + e)));
  return z * r;
}
#else
// The AVX-512 form's special values without it: exp clamps its argument at 88, so below z = -88.5 the sigmoid
// would stay at e^-88 instead of underflowing; there z (.) 0 gives -0 (z finite) and NaN (z = -inf), as above.
LINATTN_SIMD_INLINE vf silu_fast(vf z) {
  const vf s = silu(z);
  return z < -88.5f ? z * 0.0f : s;
}
#endif

// silu_pre's input scale: callers fold it into their weights and bias (y = kSiluPreScale z).
inline constexpr float kSiluPreScale = -1.44269504088896341f;  // -log2(e)
#if defined(__AVX512F__) && defined(__AVX512DQ__)
// silu_fast of z = y / c from the prescaled y = c z (c = kSiluPreScale), 8 vector ops instead of 10:
// silu(z) = z / (1 + 2^y) = y / (c + c 2^y). f = y - floor(y) in [0, 1] (vreduceps, round down), so
// vscalefps (which applies 2^floor(its exponent operand)) takes y itself and no y - f is needed;
// c 2^f by a degree-3 polynomial with c folded into its coefficients (relative minimax fit of 2^f
// on [0, 1]: 7.5e-5), c + c 2^y by one add, the bare 14-bit reciprocal estimate (6.1e-5): relative
// error <= 1.4e-4 (fp32 emulation over z in [-90, 90]: 7.8e-5 with an exact reciprocal). Special
// values as silu_fast: y = -inf (z = +inf) gives +inf, y >> 0 gives -0, y = +inf gives NaN, NaN
// propagates; large z gives z within the estimate's 2^-14 (not bit-exact: y / c is not z).
LINATTN_SIMD_INLINE vf silu_pre(vf y) {
  const __mmask16 all = 0xFFFF;
  const vf f = reinterpret_cast<vf>(
      _mm512_maskz_reduce_ps(all, reinterpret_cast<__m512>(y), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
  vf p = splat(-1.125651523e-01f);
  p = p * f + -3.261455894e-01f;
  p = p * f + -1.003876328e+00f;
  p = p * f + -1.442587018e+00f;
  const vf e = reinterpret_cast<vf>(
      _mm512_maskz_scalef_ps(all, reinterpret_cast<__m512>(p), reinterpret_cast<__m512>(y)));
  const vf r = reinterpret_cast<vf>(_mm512_maskz_rcp14_ps(all, reinterpret_cast<__m512>(e + kSiluPreScale)));
  return y * r;
}
#else
LINATTN_SIMD_INLINE vf silu_pre(vf y) { return silu_fast(y * (1.0f / kSiluPreScale)); }
#endif
// d silu(z) / dz = s (1 + z (1 - s)), s = sigmoid(z).
LINATTN_SIMD_INLINE vf silu_grad(vf z) {
  const vf s = sigmoid(z);
  return s * (1.0f + z * (1.0f - s));
}

}  // namespace linattn::cpu::simd
