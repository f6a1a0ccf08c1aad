// cublasLt GEMM with one algorithm per GEMM class and size bucket (dense_lt.cc says why).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace linattn::cuda::dense {

// Row-major C [M, N] = alpha op(A) op(B) + beta C (the GemmArgs convention of dense_cuda.h).
struct LtGemm {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  float alpha = 1.0f, beta = 0.0f;
  const void* a = nullptr;  // [M, K] (or [K, M] when trans_a), leading dim lda
  const void* b = nullptr;  // [K, N] (or [N, K] when trans_b), leading dim ldb
  void* c = nullptr;        // [M, N], leading dim ldc
  int64_t lda = 0, ldb = 0, ldc = 0;
  cudaDataType_t ab = CUDA_R_32F, ct = CUDA_R_32F;
  void* workspace = nullptr;  // fixed, workspace_bytes
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

// Enqueues the GEMM on g.stream; false when cublasLt has no algorithm for it (the caller then
// takes cublasGemmEx). Throws linattn::Error on a cublasLt failure.
bool gemm_lt(cublasLtHandle_t lt, const LtGemm& g);

}  // namespace linattn::cuda::dense
