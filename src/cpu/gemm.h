// Small fp32 matrix products for the chunked kernels, register-blocked on the simd.h vectors:
// micro-tiles of up to 6 rows x 4 vectors (6 x 64 on AVX-512), column panels outermost so a
// Kd x 64 panel of B stays in L1 while the rows stream. Every output element is produced by the
// same sequence of FMAs (k ascending, after the optional scaled initial value) whatever M, N and
// the panel it falls in, so splitting the columns of a problem never changes a bit.
#pragma once
#include <cstdint>

namespace linattn::cpu {

// C(r, c) = init(r, c) + sum_{k < kd(r)} A(r, k) * B(k, c) for r < M, c < n(r), where
// A(r, k) = A[r * a_rs + k * a_ks] (any strides: row-major, or A^T of a row-major matrix),
// B(k, c) = B[k * ldb + c], C(r, c) = C[r * ldc + c];
// init = 0, or C * (c_row_scale ? c_row_scale[r] : c_scale) when accumulate.
// k_tri: kd(r) = min(Kd, r_blk_end + k_diag), where r_blk_end is the end of r's 6-row block, so
//   A must hold zeros for k in [r + 1 + k_diag, r_blk_end + k_diag) (a masked triangular A).
// n_tri: only columns c < r_blk_end + n_diag are computed (a triangular C; the other entries of
//   C are left untouched, some above the diagonal are computed and must be ignored).
struct GemmArgs {
  int M = 0, N = 0, Kd = 0;
  const float* A = nullptr;
  int64_t a_rs = 0, a_ks = 1;
  const float* B = nullptr;
  int64_t ldb = 0;
  float* C = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
  float c_scale = 1.0f;
  const float* c_row_scale = nullptr;
  bool k_tri = false;
  int k_diag = 0;
  bool n_tri = false;
  int n_diag = 0;
};

void gemm(const GemmArgs& g);

// In-place unit lower-triangular solve (I - Ln) Y = X with Ln strictly lower (n x n, ld ldl;
// the caller stores minus the L of (I + L)), i.e. Y_i = X_i + sum_{j<i} Ln_ij Y_j, on the
// columns [0, N) of X (ld ldx). Entries of Ln on and above the diagonal are never read.
void trsm_unit_lower(int n, int N, const float* Ln, int64_t ldl, float* X, int64_t ldx);

// dst[c * ldd + r] = src[r * lds + c] for r < R, c < C.
void transpose(int R, int C, const float* src, int64_t lds, float* dst, int64_t ldd);

}  // namespace linattn::cpu
