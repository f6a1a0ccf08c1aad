// Small fp32 GEMM / transpose / exp for the CPU chunk backward (see bwd_blas.h).
// The micro-kernel keeps an MR x 32 block of C in zmm registers and, for each inner index p,
// broadcasts MR values of op(A) against two 16-wide rows of B (tails use masked loads/stores).
// The sum over p runs in order 0..k-1 for every element, whatever the blocking.
#include "cpu/bwd_blas.h"

#include <cmath>

#if defined(__AVX512F__)
#include <immintrin.h>
// GCC 12 flags the intentionally undefined pass-through operand inside the AVX-512 intrinsics.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace linattn::cpu::bwd {

#if defined(__AVX512F__)
namespace {

inline __mmask16 tail_mask(int cols) {
  return cols >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1u);
}

// C block [MR x nc] (nc <= 32) at C; op(A) rows start at A (row r: A + r*lda, or column r of
// the stored [k x m] matrix when AT).
template <int MR, bool AT>
inline void micro(int k, int nc, float alpha, const float* A, int lda, const float* B, int ldb,
                  float* C, int ldc, bool acc) {
  const __mmask16 m0 = tail_mask(nc), m1 = tail_mask(nc > 16 ? nc - 16 : 0);
  const bool two = nc > 16;
  __m512 c0[MR], c1[MR];
  for (int r = 0; r < MR; ++r) {
    c0[r] = _mm512_setzero_ps();
    c1[r] = _mm512_setzero_ps();
  }
  if (two) {
    for (int p = 0; p < k; ++p) {
      const float* b = B + static_cast<int64_t>(p) * ldb;
      const __m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = _mm512_maskz_loadu_ps(m1, b + 16);
      for (int r = 0; r < MR; ++r) {
        const __m512 a = _mm512_set1_ps(AT ? A[static_cast<int64_t>(p) * lda + r]
                                           : A[static_cast<int64_t>(r) * lda + p]);
        c0[r] = _mm512_fmadd_ps(a, b0, c0[r]);
        c1[r] = _mm512_fmadd_ps(a, b1, c1[r]);
      }
    }
  } else {
    for (int p = 0; p < k; ++p) {
      const __m512 b0 = _mm512_maskz_loadu_ps(m0, B + static_cast<int64_t>(p) * ldb);
      for (int r = 0; r < MR; ++r) {
        const __m512 a = _mm512_set1_ps(AT ? A[static_cast<int64_t>(p) * lda + r]
                                           : A[static_cast<int64_t>(r) * lda + p]);
        c0[r] = _mm512_fmadd_ps(a, b0, c0[r]);
      }
    }
  }
  const __m512 al = _mm512_set1_ps(alpha);
  for (int r = 0; r < MR; ++r) {
    float* c = C + static_cast<int64_t>(r) * ldc;
    __m512 v0 = _mm512_mul_ps(al, c0[r]);
    if (acc) v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, c), v0);
    _mm512_mask_storeu_ps(c, m0, v0);
    if (two) {
      __m512 v1 = _mm512_mul_ps(al, c1[r]);
      if (acc) v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, c + 16), v1);
      _mm512_mask_storeu_ps(c + 16, m1, v1);
    }
  }
}

template <bool AT>
void gemm_impl(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
               float* C, int ldc, bool acc) {
  constexpr int MR = 8;
  for (int j = 0; j < n; j += 32) {
    const int nc = n - j < 32 ? n - j : 32;
    int i = 0;
    for (; i + MR <= m; i += MR) {
      const float* a = AT ? A + i : A + static_cast<int64_t>(i) * lda;
      micro<MR, AT>(k, nc, alpha, a, lda, B + j, ldb, C + static_cast<int64_t>(i) * ldc + j, ldc, acc);
    }
    const int rem = m - i;
    if (rem == 0) continue;
    const float* a = AT ? A + i : A + static_cast<int64_t>(i) * lda;
    float* c = C + static_cast<int64_t>(i) * ldc + j;
    switch (rem) {
      case 1: micro<1, AT>(k, nc, alpha, a, lda, B + j, ldb, c, ldc, acc); break;
      case 2: micro<2, AT>(k, nc, alpha, a, lda, B + j, ldb, c, ldc, acc); break;
      case 3: micro<3, AT>(k, nc, alpha, a, lda, B + j, ldb, c, ldc, acc); break;
      case 4: micro<4, AT>(k, nc, alpha, a, lda, B + j, ldb, c, ldc, acc); break;
      case 5: micro<5, AT>(k, nc, alpha, a, lda, B + j, ldb, c, ldc, acc); break;
      case 6: micro<6, AT>(k, nc, alpha, a, lda, B + j, ldb, c, ldc, acc); break;
      default: micro<7, AT>(k, nc, alpha, a, lda, B + j, ldb, c, ldc, acc); break;
    }
  }
}

// exp on 16 lanes: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial, scaled by 2^n with
// scalef (exact underflow to 0 for very negative x).
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-150.0f));
  x = _mm512_min_ps(x, _mm512_set1_ps(88.7f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

}  // namespace

void gemm(int m, int n, int k, float alpha, const float* A, int lda, bool a_t, const float* B,
          int ldb, float* C, int ldc, bool acc) {
  if (m <= 0 || n <= 0) return;
  if (a_t) gemm_impl<true>(m, n, k, alpha, A, lda, B, ldb, C, ldc, acc);
  else gemm_impl<false>(m, n, k, alpha, A, lda, B, ldb, C, ldc, acc);
}

void vexp(int n, const float* x, float* y) {
  int i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

#else  // portable fallback

void gemm(int m, int n, int k, float alpha, const float* A, int lda, bool a_t, const float* B,
          int ldb, float* C, int ldc, bool acc) {
  for (int i = 0; i < m; ++i) {
    float* c = C + static_cast<int64_t>(i) * ldc;
    float row[256 + 16];
    for (int j = 0; j < n; ++j) row[j] = 0.0f;
    for (int p = 0; p < k; ++p) {
      const float a = a_t ? A[static_cast<int64_t>(p) * lda + i] : A[static_cast<int64_t>(i) * lda + p];
      const float* b = B + static_cast<int64_t>(p) * ldb;
      for (int j = 0; j < n; ++j) row[j] += a * b[j];
    }
    for (int j = 0; j < n; ++j) c[j] = (acc ? c[j] : 0.0f) + alpha * row[j];
  }
}

void vexp(int n, const float* x, float* y) {
  for (int i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

#endif

void transpose(int rows, int cols, const float* src, int lds, float* dst, int ldd) {
  constexpr int kTile = 16;
  for (int i0 = 0; i0 < rows; i0 += kTile)
    for (int j0 = 0; j0 < cols; j0 += kTile) {
      const int i1 = i0 + kTile < rows ? i0 + kTile : rows, j1 = j0 + kTile < cols ? j0 + kTile : cols;
      for (int i = i0; i < i1; ++i)
        for (int j = j0; j < j1; ++j)
          dst[static_cast<int64_t>(j) * ldd + i] = src[static_cast<int64_t>(i) * lds + j];
    }
}

void gemm_bt(int m, int n, int k, float alpha, const float* A, int lda, bool a_t, const float* B,
             int ldb, float* C, int ldc, bool acc, float* tmp) {
  transpose(n, k, B, ldb, tmp, n);
  gemm(m, n, k, alpha, A, lda, a_t, tmp, n, C, ldc, acc);
}

}  // namespace linattn::cpu::bwd
