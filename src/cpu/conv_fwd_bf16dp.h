// bf16 conv forward for W in {2, 4}, rows whose taps all lie inside the sequence, no residual,
// 32-channel groups (64-byte loads per tap row). vpunpck{l,h}wd work inside 128-bit lanes, so
// results are in a permuted channel order (lo: 8L + 0..3, hi: 8L + 4..7 for lane L); weights and
// bias are staged in that order and one vpermq after vcvtne2ps2bf16 restores it.
// fma_rows<4> / <2> (four / two output rows: the common case / the pairs left over): each x row
// widened once by an unpack with zero (bf16 bits to the high half = its fp32 value) for all output
// rows it is a tap of, fp32 FMAs with the fp32 weights. With silu every path takes silu_pre: the
// staged weights and bias carry the -log2(e) factor (Stage::load's scale).
// dot_row (single rows): unpacks pair rows (t - W + 1 + 2k, t - W + 2 + 2k) and one vdpbf16ps per
// pair adds both taps (bf16 products are exact in fp32; bias is the accumulator's start);
// bf16-exact weights take one vdpbf16ps per pair, others are split into w = hi + lo + e with
// hi = bf16(w), lo = bf16(w - hi) (|e| <= 2^-18 |w|, far under the bf16 output's 2^-9 rounding)
// and take two. vdpbf16ps treats bf16 denormal inputs as 0 and flushes a denormal sum (below
// 1e-38, far under the output's rounding for O(1) data). Channels past the last full group of 32
// and the first W - 1 rows of a sequence go through the generic path.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu/conv_cpu_common.h"

namespace linattn::cpu::conv {

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
inline constexpr bool kHaveBf16Dot = true;

struct DotStage {
  // [pair k][permuted channel]: bf16(w[c][2k]) | bf16(w[c][2k + 1]) << 16; pairs 2, 3: the lo parts
  alignas(64) uint32_t w[4][kMaxBlock];
  alignas(64) float bias[kMaxBlock];     // [permuted channel]
  alignas(64) float wf[kConvMaxW][kMaxBlock];  // fp32 weights [tap][permuted channel] (fma_rows)

  // Block channel of position q (0..31) of a 32-channel group in the permuted order.
  static int channel_of(int q) {
    const int half = q / 16, lane = q % 16;
    return 8 * (lane / 4) + 4 * half + lane % 4;
  }
  bool split = false;  // whether some weight is not bf16-exact (the lo pairs are in use)

  static uint32_t bits_of(float v) {
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  }
  // bf16 bits of v rounded to nearest even (finite v).
  static uint32_t bf16_of(float v) {
    const uint32_t b = bits_of(v);
    return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
  }
  // Stages the block from the fp32 staging sg (W in {2, 4}; with silu sg carries the
  // kSiluPreScale factor and so does everything here); returns the number of channels the dot
  // path takes (a multiple of 32; 0 when a weight is not finite).
  int load(const Stage& sg, int W, int nc) {
    const int n32 = nc / 32 * 32;
    split = false;
    for (int i = 0; i < W; ++i)
      for (int c = 0; c < n32; ++c) {
        const uint32_t b = bits_of(sg.w[i][c]);
        if ((b & 0x7f800000u) == 0x7f800000u) return 0;
        split = split || (b & 0xFFFFu) != 0;
      }
    for (int g = 0; g < n32; g += 32)
      for (int q = 0; q < 32; ++q) {
        const int c = g + channel_of(q);
        for (int k = 0; k < W / 2; ++k) {
          const float a = sg.w[2 * k][c], b = sg.w[2 * k + 1][c];
          const uint32_t ha = bf16_of(a), hb = bf16_of(b);
          w[k][g + q] = ha | hb << 16;
          if (split) {
            float ra, rb;  // exact residuals w - hi
            const uint32_t fa = ha << 16, fb = hb << 16;
            std::memcpy(&ra, &fa, sizeof ra);
            std::memcpy(&rb, &fb, sizeof rb);
            w[2 + k][g + q] = bf16_of(a - ra) | bf16_of(b - rb) << 16;
          }
        }
        bias[g + q] = sg.bias[c];
        for (int i = 0; i < W; ++i) wf[i][g + q] = sg.w[i][c];
      }
    return n32;
  }
};

// One 32-channel group of an output row: silu_pre (the sums are kSiluPreScale z: weights and bias
// are staged prescaled with silu) of the fp32 sums lo / hi (the dot path's permuted channel
// order), packed to bf16 and put back in channel order.
template <bool kSilu>
LINATTN_SIMD_INLINE void store_group(simd::bf16_t* y, int j, __m512 lo, __m512 hi, bool nt) {
  // 64-bit group q <- {0,4,1,5,2,6,3,7}[q] (maskz form: the unmasked one reads an undefined register)
  const __m512i order = _mm512_set_epi64(7, 3, 6, 2, 5, 1, 4, 0);
  if constexpr (kSilu) {
    lo = reinterpret_cast<__m512>(simd::silu_pre(reinterpret_cast<simd::vf>(lo)));
    hi = reinterpret_cast<__m512>(simd::silu_pre(reinterpret_cast<simd::vf>(hi)));
  }
  const __m512i out = _mm512_maskz_permutexvar_epi64(0xFF, order, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  if (nt) _mm512_stream_si512(reinterpret_cast<__m512i*>(y + j), out);
  else _mm512_storeu_si512(y + j, out);
}

// Channels [0, n32) of one output row from its kW tap rows (x rows t - kW + 1 .. t).
template <int kW, bool kSilu, bool kSplit>
void dot_row(const simd::bf16_t* const* taps, const DotStage& ds, int n32, simd::bf16_t* y, bool nt,
             const simd::bf16_t* pf) {
  static_assert(kW == 2 || kW == 4);
  nt = nt && reinterpret_cast<uintptr_t>(y) % 64 == 0;
  const simd::bf16_t* tp[kW];  // local copies: stores through y could alias taps[]
  for (int i = 0; i < kW; ++i) tp[i] = taps[i];
  for (int j = 0; j < n32; j += 32) {
    if (pf) _mm_prefetch(reinterpret_cast<const char*>(pf + j), _MM_HINT_T0);
    __m512 lo = _mm512_load_ps(ds.bias + j), hi = _mm512_load_ps(ds.bias + j + 16);
    // the lo-part products go to separate accumulators: shorter dependency chains
    __m512 lo2 = _mm512_setzero_ps(), hi2 = _mm512_setzero_ps();
    for (int k = 0; k < kW / 2; ++k) {
      const __m512i a = _mm512_loadu_si512(tp[2 * k] + j), b = _mm512_loadu_si512(tp[2 * k + 1] + j);
      const __m512i wl = _mm512_load_si512(ds.w[k] + j), wh = _mm512_load_si512(ds.w[k] + j + 16);
      const __m512i pl = _mm512_unpacklo_epi16(a, b), ph = _mm512_unpackhi_epi16(a, b);
      lo = _mm512_dpbf16_ps(lo, (__m512bh)pl, (__m512bh)wl);
      hi = _mm512_dpbf16_ps(hi, (__m512bh)ph, (__m512bh)wh);
      if constexpr (kSplit) {
        const __m512i vl = _mm512_load_si512(ds.w[2 + k] + j), vh = _mm512_load_si512(ds.w[2 + k] + j + 16);
        lo2 = _mm512_dpbf16_ps(lo2, (__m512bh)pl, (__m512bh)vl);
        hi2 = _mm512_dpbf16_ps(hi2, (__m512bh)ph, (__m512bh)vh);
      }
    }
    if constexpr (kSplit) lo = _mm512_add_ps(lo, lo2), hi = _mm512_add_ps(hi, hi2);
    store_group<kSilu>(y, j, lo, hi, nt);
  }
}
// kR consecutive output rows (channels [0, n32)) from the kW + kR - 1 x rows t - kW + 1 .. t + kR - 1,
// fp32 weights: each x row is widened once by an in-lane vpunpck{l,h}wd with zero (bf16 bits to
// the high half = its fp32 value, in the dot path's permuted order) and serves the FMAs of every
// output row it is a tap of (kW + kR - 1 widenings per kR rows). Measured faster than dot_row on
// this Zen 4-class VM for bf16-exact weights too (two rows: process CPU 8.9-9.3 vs 10.0-10.4 ms at
// 6144 x 4096: vdpbf16ps costs more than an FMA and dot_row cannot share a pair between rows), so
// the 4- and 2-row steps always take it; dot_row serves the single rows. Each row accumulates its
// taps in order: kR does not change a result.
template <int kR, int kW, bool kSilu>
void fma_rows(const simd::bf16_t* const* taps, const DotStage& ds, int n32, simd::bf16_t* const* y,
              const bool* nt, const simd::bf16_t* const* pf) {
  static_assert(kW == 2 || kW == 4);
  const __m512i zero = _mm512_setzero_si512();
  const simd::bf16_t* tp[kW + kR - 1];  // local copies: stores through y could alias taps[]
  simd::bf16_t* yr[kR];
  bool ntr[kR];
  for (int i = 0; i < kW + kR - 1; ++i) tp[i] = taps[i];
  for (int r = 0; r < kR; ++r) yr[r] = y[r], ntr[r] = nt[r] && reinterpret_cast<uintptr_t>(y[r]) % 64 == 0;
  for (int j = 0; j < n32; j += 32) {
    if (pf) {
#pragma GCC unroll 4
      for (int r = 0; r < kR; ++r) _mm_prefetch(reinterpret_cast<const char*>(pf[r] + j), _MM_HINT_T0);
    }
    const __m512 blo = _mm512_load_ps(ds.bias + j), bhi = _mm512_load_ps(ds.bias + j + 16);
    __m512 lo[kR], hi[kR];
#pragma GCC unroll 4
    for (int r = 0; r < kR; ++r) lo[r] = blo, hi[r] = bhi;
#pragma GCC unroll 8
    for (int q = 0; q < kW + kR - 1; ++q) {  // x row q is tap i = q - r of output row r
      const __m512i a = _mm512_loadu_si512(tp[q] + j);
      const __m512 xl = (__m512)_mm512_unpacklo_epi16(zero, a), xh = (__m512)_mm512_unpackhi_epi16(zero, a);
#pragma GCC unroll 4
      for (int r = 0; r < kR; ++r) {
        const int i = q - r;
        if (i < 0 || i >= kW) continue;
        lo[r] = _mm512_fmadd_ps(_mm512_load_ps(ds.wf[i] + j), xl, lo[r]);
        hi[r] = _mm512_fmadd_ps(_mm512_load_ps(ds.wf[i] + j + 16), xh, hi[r]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < kR; ++r) store_group<kSilu>(yr[r], j, lo[r], hi[r], ntr[r]);
  }
}
#else
inline constexpr bool kHaveBf16Dot = false;
struct DotStage {
  bool split = false;
  int load(const Stage&, int, int) { return 0; }
};
template <int kW, bool kSilu, bool kSplit>
void dot_row(const simd::bf16_t* const*, const DotStage&, int, simd::bf16_t*, bool, const simd::bf16_t*) {}
template <int kR, int kW, bool kSilu>
void fma_rows(const simd::bf16_t* const*, const DotStage&, int, simd::bf16_t* const*, const bool*,
              const simd::bf16_t* const*) {}
#endif

// dot_row with the split chosen at run time.
template <int kW, bool kSilu>
void dot_row_any(const simd::bf16_t* const* taps, const DotStage& ds, int n32, simd::bf16_t* y, bool nt,
                 const simd::bf16_t* pf) {
  if (ds.split) dot_row<kW, kSilu, true>(taps, ds, n32, y, nt, pf);
  else dot_row<kW, kSilu, false>(taps, ds, n32, y, nt, pf);
}

// Whether the forward of element type E, width kW (0 = runtime W) and residual flag can use dot_row.
template <class E, int kW, bool kRes>
constexpr bool dot_applies() {
  return kHaveBf16Dot && std::is_same_v<E, simd::bf16_t> && (kW == 2 || kW == 4) && !kRes;
}

}  // namespace linattn::cpu::conv
