// Small fp32 dense kernels for the CPU chunk backward: GEMM on row-major tiles of a chunk
// (rows <= 64, inner and output dims <= 256), transpose, and a vectorized exp.
// AVX-512 register-blocked micro-kernel (8 rows x 32 columns of C in registers, A broadcast,
// B rows streamed) when the build targets AVX-512F; a plain-loop fallback otherwise.
// Results depend only on the operands and shapes (fixed summation order over the inner dim),
// never on threads, so the backward stays bitwise deterministic.
#pragma once
#include <cstdint>

namespace linattn::cpu::bwd {

// C[m x n] = (acc ? C : 0) + alpha * op(A) * B.
// op(A) = A [m x k] (row stride lda) when !a_t, else A is stored [k x m] and op(A) = A^T.
// B is [k x n] with row stride ldb; C is [m x n] with row stride ldc.
void gemm(int m, int n, int k, float alpha, const float* A, int lda, bool a_t, const float* B,
          int ldb, float* C, int ldc, bool acc);

// dst[cols x rows] (row stride ldd) = src[rows x cols]^T (row stride lds).
void transpose(int rows, int cols, const float* src, int lds, float* dst, int ldd);

// C = (acc ? C : 0) + alpha * op(A) * B^T with B stored [n x k] (row stride ldb): B is first
// transposed into tmp (k * n floats).
void gemm_bt(int m, int n, int k, float alpha, const float* A, int lda, bool a_t, const float* B,
             int ldb, float* C, int ldc, bool acc, float* tmp);

// y[i] = exp(x[i]); inputs below ~-104 give exactly 0. Pointers may alias.
void vexp(int n, const float* x, float* y);

}  // namespace linattn::cpu::bwd
