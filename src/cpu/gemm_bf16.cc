// AVX512-BF16 micro-kernels behind gemm_bf16() and the pair packings (see gemm_bf16.h). Without
// AVX512-BF16 the entry points fall back to exact scalar loops (never used on the hot path).
#include "cpu/intrin.h"
#include "cpu/gemm_bf16.h"

#include <algorithm>
#include <cstring>

#include "core/half.h"

namespace linattn::cpu {

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
namespace {

constexpr int kMR = 6, kNV = 4, kW = 16;

template <int MR, int NV, bool TAIL>
void micro(const GemmBf16Args& g, int r0, int c0, __mmask16 t) {
  __m512 acc[MR][NV];
  float* Cb = g.C + r0 * g.ldc + c0;
  for (int r = 0; r < MR; ++r) {
    if (g.accumulate) {
      const __m512 s = _mm512_set1_ps(g.c_row_scale ? g.c_row_scale[r0 + r] : g.c_scale);
      for (int c = 0; c < NV; ++c) {
        const float* p = Cb + r * g.ldc + c * kW;
        acc[r][c] = _mm512_mul_ps(TAIL && c == NV - 1 ? _mm512_maskz_loadu_ps(t, p) : _mm512_loadu_ps(p), s);
      }
    } else {
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_setzero_ps();
    }
  }
  const uint32_t* Ab = g.A + r0 * g.a_rs;
  const uint32_t* Bb = g.B + c0;
  for (int k = 0; k < g.Kp; ++k) {
    __m512bh b[NV];
    const uint32_t* Bk = Bb + k * g.ldb;
    for (int c = 0; c < NV; ++c)
      b[c] = (__m512bh)(TAIL && c == NV - 1 ? _mm512_maskz_loadu_epi32(t, Bk + c * kW) : _mm512_loadu_si512(Bk + c * kW));
    const uint32_t* Ak = Ab + k * g.a_ks;
    for (int r = 0; r < MR; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(Ak[r * g.a_rs]));
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], a, b[c]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NV; ++c) {
      float* p = Cb + r * g.ldc + c * kW;
      if (TAIL && c == NV - 1) _mm512_mask_storeu_ps(p, t, acc[r][c]);
      else _mm512_storeu_ps(p, acc[r][c]);
    }
}

using Fn = void (*)(const GemmBf16Args&, int, int, __mmask16);

template <int MR>
constexpr void fill_row(Fn (&f)[kMR][kNV][2]) {
  f[MR - 1][0][0] = &micro<MR, 1, false>;
  f[MR - 1][0][1] = &micro<MR, 1, true>;
  f[MR - 1][1][0] = &micro<MR, 2, false>;
  f[MR - 1][1][1] = &micro<MR, 2, true>;
  f[MR - 1][2][0] = &micro<MR, 3, false>;
  f[MR - 1][2][1] = &micro<MR, 3, true>;
  f[MR - 1][3][0] = &micro<MR, 4, false>;
  f[MR - 1][3][1] = &micro<MR, 4, true>;
}

struct Table {
  Fn f[kMR][kNV][2] = {};
  constexpr Table() {
    fill_row<1>(f);
    fill_row<2>(f);
    fill_row<3>(f);
    fill_row<4>(f);
    fill_row<5>(f);
    fill_row<6>(f);
  }
};
const Table kTable;

// 16 floats -> 16 bf16 (round to nearest even) in the low 256 bits.
inline __m256i cvt16(const float* p, __mmask16 m) {
  return (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, p));
}

}  // namespace

void gemm_bf16(const GemmBf16Args& g) {
  constexpr int kNR = kNV * kW;
  for (int c0 = 0; c0 < g.N; c0 += kNR) {
    const int nc = std::min(kNR, g.N - c0);
    const int nv = (nc + kW - 1) / kW, rem = nc % kW;
    const __mmask16 t = static_cast<__mmask16>((1u << rem) - 1u);
    for (int r0 = 0; r0 < g.M; r0 += kMR) {
      const int mr = std::min(kMR, g.M - r0);
      kTable.f[mr - 1][nv - 1][rem != 0](g, r0, c0, t);
    }
  }
}

void pack_bf16_rows(int R, int C, const float* src, int64_t lds, uint32_t* dst, int64_t ldd) {
  const int Cp = (C + 1) / 2;
  for (int r = 0; r < R; ++r) {
    const float* s = src + r * lds;
    uint16_t* d = reinterpret_cast<uint16_t*>(dst + r * ldd);
    int c = 0;
    for (; c < C; c += 16) {
      const int n = std::min(16, C - c);
      const __m256i h = cvt16(s + c, static_cast<__mmask16>((1u << n) - 1u));
      _mm256_mask_storeu_epi16(d + c, static_cast<__mmask16>((1u << n) - 1u), h);
    }
    if (C % 2) d[C] = 0;
    (void)Cp;
  }
}

void pack_bf16_row_pairs(int R, int C, const float* src, int64_t lds, uint32_t* dst, int64_t ldd) {
  // Interleave pattern for vpermw over [row0 (16 x u16), row1 (16 x u16)]: 0,16,1,17,...
  alignas(64) static const uint16_t kIdx[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                                8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i idx = _mm512_load_si512(kIdx);
  for (int kp = 0; kp < (R + 1) / 2; ++kp) {
    const float* s0 = src + (2 * kp) * lds;
    const bool has1 = 2 * kp + 1 < R;
    const float* s1 = has1 ? s0 + lds : s0;
    for (int c = 0; c < C; c += 16) {
      const int n = std::min(16, C - c);
      const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
      const __m256i lo = cvt16(s0 + c, m);
      const __m256i hi = has1 ? cvt16(s1 + c, m) : _mm256_setzero_si256();
      const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
      _mm512_mask_storeu_epi32(dst + kp * ldd + c, m, _mm512_permutexvar_epi16(idx, both));
    }
  }
}

#else  // no AVX512-BF16: exact scalar versions (only reached if a caller ignores kHaveBf16Dot)

void gemm_bf16(const GemmBf16Args& g) {
  for (int r = 0; r < g.M; ++r)
    for (int c = 0; c < g.N; ++c) {
      float acc = g.accumulate ? g.C[r * g.ldc + c] * (g.c_row_scale ? g.c_row_scale[r] : g.c_scale) : 0.0f;
      for (int k = 0; k < g.Kp; ++k) {
        const uint32_t a = g.A[r * g.a_rs + k * g.a_ks], b = g.B[k * g.ldb + c];
        acc += bf16_bits_to_float(a & 0xffff) * bf16_bits_to_float(b & 0xffff) +
               bf16_bits_to_float(a >> 16) * bf16_bits_to_float(b >> 16);
      }
      g.C[r * g.ldc + c] = acc;
    }
}

void pack_bf16_rows(int R, int C, const float* src, int64_t lds, uint32_t* dst, int64_t ldd) {
  for (int r = 0; r < R; ++r)
    for (int kp = 0; kp < (C + 1) / 2; ++kp) {
      const uint32_t lo = float_to_bf16_bits(src[r * lds + 2 * kp]);
      const uint32_t hi = 2 * kp + 1 < C ? float_to_bf16_bits(src[r * lds + 2 * kp + 1]) : 0u;
      dst[r * ldd + kp] = lo | hi << 16;
    }
}

void pack_bf16_row_pairs(int R, int C, const float* src, int64_t lds, uint32_t* dst, int64_t ldd) {
  for (int kp = 0; kp < (R + 1) / 2; ++kp)
    for (int c = 0; c < C; ++c) {
      const uint32_t lo = float_to_bf16_bits(src[2 * kp * lds + c]);
      const uint32_t hi = 2 * kp + 1 < R ? float_to_bf16_bits(src[(2 * kp + 1) * lds + c]) : 0u;
      dst[kp * ldd + c] = lo | hi << 16;
    }
}

#endif

void transpose_u32(int R, int C, const uint32_t* src, int64_t lds, uint32_t* dst, int64_t ldd) {
  constexpr int kB = 8;
  for (int r0 = 0; r0 < R; r0 += kB)
    for (int c0 = 0; c0 < C; c0 += kB) {
      const int r1 = std::min(R, r0 + kB), c1 = std::min(C, c0 + kB);
      for (int r = r0; r < r1; ++r)
        for (int c = c0; c < c1; ++c) dst[c * ldd + r] = src[r * lds + c];
    }
}

}  // namespace linattn::cpu
