// Product shapes of the CPU chunk backward on cpu::gemm (see bwd_blas.h).
// NOTE: mm_lower_t passes negative strides to cpu::gemm (row-reversed views of A, B and C);
// gemm only forms base + index * stride addresses, so any sign is valid. tests/cpu_bwd checks it.
#include "cpu/bwd_blas.h"

#include "cpu/gemm.h"
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
  if (n <= 0) return;
  GemmArgs g;
  g.M = n;
  g.N = n;
  g.Kd = Kd;
  g.A = A;
  g.a_rs = lda;
  g.B = B;
  g.ldb = ldb;
  g.C = C;
  g.ldc = ldc;
  g.accumulate = acc;
  g.n_tri = true;
  gemm(g);
}

void transpose(int R, int C, const float* src, int64_t lds, float* dst, int64_t ldd, float sign) {
  constexpr int kB = 8;
  for (int r0 = 0; r0 < R; r0 += kB)
    for (int c0 = 0; c0 < C; c0 += kB) {
      const int r1 = r0 + kB < R ? r0 + kB : R, c1 = c0 + kB < C ? c0 + kB : C;
      for (int r = r0; r < r1; ++r)
        for (int c = c0; c < c1; ++c) dst[c * ldd + r] = sign * src[r * lds + c];
    }
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
