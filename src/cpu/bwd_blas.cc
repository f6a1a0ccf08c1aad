// Product shapes of the CPU chunk backward on cpu::gemm (see bwd_blas.h).
// NOTE: mm_lower_t passes negative strides to cpu::gemm (row-reversed views of A, B and C);
// gemm only forms base + index * stride addresses, so any sign is valid. tests/cpu_bwd checks it.
#include "cpu/bwd_blas.h"

#include "cpu/gemm.h"
#include "cpu/gemm_bf16.h"
#include "cpu/intrin.h"
#include "cpu/simd.h"

namespace linattn::cpu::bwd {

void mm(int M, int N, int Kd, const float* A, int64_t a_rs, int64_t a_ks, const float* B,
        int64_t ldb, float* C, int64_t ldc, bool acc, float c_scale, const float* row_scale) {
  if (M <= 0 || N <= 0) return;
  GemmArgs g;
  g.M = M;
  g.N = N;
  g.Kd = Kd;
  g.A = A;
  g.a_rs = a_rs;
  g.a_ks = a_ks;
  g.B = B;
  g.ldb = ldb;
  g.C = C;
  g.ldc = ldc;
  g.accumulate = acc;
  g.c_scale = c_scale;
  g.c_row_scale = row_scale;
  gemm(g);
}

void mm_bf16(int M, int N, int Kd, const float* A, int64_t lda, bool a_t, const float* B, int64_t ldb,
             float* C, int64_t ldc, bool acc, float c_scale, const float* row_scale, uint32_t* pk_a,
             uint32_t* pk_b) {
  if (M <= 0 || N <= 0) return;
  const int Kp = (Kd + 1) / 2;
  GemmBf16Args g;
  if (a_t) {  // A(r, k) = A[k * lda + r]: pairs of stored rows
    pack_bf16_row_pairs(Kd, M, A, lda, pk_a, M);
    g.a_rs = 1;
    g.a_ks = M;
  } else {
    pack_bf16_rows(M, Kd, A, lda, pk_a, Kp);
    g.a_rs = Kp;
    g.a_ks = 1;
  }
  pack_bf16_row_pairs(Kd, N, B, ldb, pk_b, N);
  g.M = M;
  g.N = N;
  g.Kp = Kp;
  g.A = pk_a;
  g.B = pk_b;
  g.ldb = N;
  g.C = C;
  g.ldc = ldc;
  g.accumulate = acc;
  g.c_scale = c_scale;
  g.c_row_scale = row_scale;
  gemm_bf16(g);
}

void mm_lower(int n, int N, const float* L, int64_t ldl, const float* B, int64_t ldb, float* C,
              int64_t ldc, bool acc) {
  if (n <= 0 || N <= 0) return;
  GemmArgs g;
  g.M = n;
  g.N = N;
  g.Kd = n;
  g.A = L;
  g.a_rs = ldl;
  g.B = B;
  g.ldb = ldb;
  g.C = C;
  g.ldc = ldc;
  g.accumulate = acc;
  g.k_tri = true;
  gemm(g);
}

void mm_lower_t(int n, int N, const float* L, int64_t ldl, const float* B, int64_t ldb, float* C,
                int64_t ldc, bool acc) {
  if (n <= 0 || N <= 0) return;
  // Row r' = n-1-r of C: C'(r') = sum_{k'} L[n-1-k'][n-1-r'] B[n-1-k'], lower in (r', k').
  GemmArgs g;
  g.M = n;
  g.N = N;
  g.Kd = n;
  g.A = L + static_cast<int64_t>(n - 1) * ldl + (n - 1);
  g.a_rs = -1;
  g.a_ks = -ldl;
  g.B = B + static_cast<int64_t>(n - 1) * ldb;
  g.ldb = -ldb;
  g.C = C + static_cast<int64_t>(n - 1) * ldc;
  g.ldc = -ldc;
  g.accumulate = acc;
  g.k_tri = true;
  gemm(g);
}

void mm_to_lower(int n, int Kd, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                 int64_t ldc, bool acc) {
  // 16-row blocks, each over the columns up to its end: full-width register tiles on ~5/8 of
  // the square (gemm's own n_tri cut leaves narrow, latency-bound tiles; measured 2x slower).
  constexpr int kRows = 16;
  for (int r0 = 0; r0 < n; r0 += kRows) {
    const int rows = n - r0 < kRows ? n - r0 : kRows;
    mm(rows, r0 + rows, Kd, A + r0 * lda, lda, 1, B, ldb, C + r0 * ldc, ldc, acc);
  }
}

namespace {

void transpose_scalar(int r0, int r1, int c0, int c1, const float* src, int64_t lds, float* dst,
                      int64_t ldd, float sign) {
  for (int r = r0; r < r1; ++r)
    for (int c = c0; c < c1; ++c) dst[c * ldd + r] = sign * src[r * lds + c];
}

#if defined(__AVX512F__)
// One full 16 x 16 block: unpack pairs, 4-row shuffles, then two 128-bit lane shuffles.
void transpose16(const float* src, int64_t lds, float* dst, int64_t ldd, float sign, bool stream) {
  __m512 r[16], a[16], b[16], c[16];
  const __m512 sg = _mm512_set1_ps(sign);
  for (int i = 0; i < 16; ++i) r[i] = _mm512_mul_ps(sg, _mm512_loadu_ps(src + i * lds));
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    b[4 * i + 0] = _mm512_shuffle_ps(a[4 * i + 0], a[4 * i + 2], 0x44);
    b[4 * i + 1] = _mm512_shuffle_ps(a[4 * i + 0], a[4 * i + 2], 0xEE);
    b[4 * i + 2] = _mm512_shuffle_ps(a[4 * i + 1], a[4 * i + 3], 0x44);
    b[4 * i + 3] = _mm512_shuffle_ps(a[4 * i + 1], a[4 * i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    c[j] = _mm512_shuffle_f32x4(b[j], b[4 + j], 0x88);
    c[4 + j] = _mm512_shuffle_f32x4(b[j], b[4 + j], 0xDD);
    c[8 + j] = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0x88);
    c[12 + j] = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0xDD);
  }
  __m512 o[16];
  for (int j = 0; j < 4; ++j) {
    o[j] = _mm512_shuffle_f32x4(c[j], c[8 + j], 0x88);
    o[8 + j] = _mm512_shuffle_f32x4(c[j], c[8 + j], 0xDD);
    o[4 + j] = _mm512_shuffle_f32x4(c[4 + j], c[12 + j], 0x88);
    o[12 + j] = _mm512_shuffle_f32x4(c[4 + j], c[12 + j], 0xDD);
  }
  const bool aligned = stream && (reinterpret_cast<uintptr_t>(dst) & 63) == 0 && (ldd & 15) == 0;
  for (int j = 0; j < 16; ++j) {
    if (aligned) _mm512_stream_ps(dst + j * ldd, o[j]);
    else _mm512_storeu_ps(dst + j * ldd, o[j]);
  }
}
#endif

}  // namespace

void transpose(int R, int C, const float* src, int64_t lds, float* dst, int64_t ldd, float sign,
               bool stream) {
#if defined(__AVX512F__)
  const int R16 = R / 16 * 16, C16 = C / 16 * 16;
  for (int r0 = 0; r0 < R16; r0 += 16)
    for (int c0 = 0; c0 < C16; c0 += 16)
      transpose16(src + r0 * lds + c0, lds, dst + c0 * ldd + r0, ldd, sign, stream);
  transpose_scalar(0, R16, C16, C, src, lds, dst, ldd, sign);
  transpose_scalar(R16, R, 0, C, src, lds, dst, ldd, sign);
#else
  transpose_scalar(0, R, 0, C, src, lds, dst, ldd, sign);
#endif
}

void vexp(int n, const float* x, float* y) {
  using namespace simd;
  int i = 0;
  for (; i + kW <= n; i += kW) store(y + i, exp(load(x + i)));
  if (i < n) {
    const Tail t = tail_mask(n - i);
    store(y + i, exp(load(x + i, t)), t);
  }
}

}  // namespace linattn::cpu::bwd
