// Matrix-product shapes of the CPU chunk backward, on top of the shared register-blocked
// cpu::gemm (gemm.h): plain, lower-triangular A (k range cut at the diagonal block), transposed
// lower-triangular A (the same kernel on row-reversed views: (L^T B) reversed is a lower-
// triangular product), and products whose result is only needed on and below the diagonal.
// All matrices are fp32 row-major with explicit row strides. Every output element is the same
// ordered FMA chain whatever the thread count, so the backward stays bitwise deterministic.
#pragma once
#include <cstdint>

namespace linattn::cpu::bwd {

// C[M x N] = (acc ? C * c_scale (or C * row_scale[r]) : 0) + A B with A(r, k) = A[r*a_rs + k*a_ks].
void mm(int M, int N, int Kd, const float* A, int64_t a_rs, int64_t a_ks, const float* B,
        int64_t ldb, float* C, int64_t ldc, bool acc, float c_scale = 1.0f,
        const float* row_scale = nullptr);
// C[n x N] (+)= L B with L [n x n] lower triangular (entries above the diagonal must be 0).
void mm_lower(int n, int N, const float* L, int64_t ldl, const float* B, int64_t ldb, float* C,
              int64_t ldc, bool acc);
// C[n x N] (+)= L^T B with L [n x n] lower triangular (entries above the diagonal must be 0).
void mm_lower_t(int n, int N, const float* L, int64_t ldl, const float* B, int64_t ldb, float* C,
                int64_t ldc, bool acc);
// The lower triangle (diagonal included) of C[n x n] = A[n x Kd] B[Kd x n]; entries above the
// diagonal are left undefined (callers mask them): some are computed, the others untouched.
void mm_to_lower(int n, int Kd, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                 int64_t ldc, bool acc);

// C[M x N] = (acc ? C * c_scale (or row_scale[r]) : 0) + A B with both operands rounded to bf16
// and AVX512-BF16 pair dot products (fp32 accumulation). A is [M x Kd] (row stride lda) or,
// with a_t, stored [Kd x M]; B is [Kd x N]. pk_a / pk_b receive the pair packings
// (bf16_pack_words(M, Kd) and bf16_pack_words(Kd, N) words).
void mm_bf16(int M, int N, int Kd, const float* A, int64_t lda, bool a_t, const float* B, int64_t ldb,
             float* C, int64_t ldc, bool acc, float c_scale, const float* row_scale, uint32_t* pk_a,
             uint32_t* pk_b);
inline int64_t bf16_pack_words(int64_t rows, int64_t cols) {
  return (rows + 1) / 2 * cols + rows * ((cols + 1) / 2);  // enough for either pairing
}

// dst[c * ldd + r] = sign * src[r * lds + c] for r < R, c < C. `stream`: non-temporal stores
// where the destination rows are 64-byte aligned (results read back much later).
void transpose(int R, int C, const float* src, int64_t lds, float* dst, int64_t ldd,
               float sign = 1.0f, bool stream = false);

// y[i] = exp(x[i]) (0 below e^-87.3). Pointers may alias.
void vexp(int n, const float* x, float* y);

}  // namespace linattn::cpu::bwd
