// cublasLt GEMM with one algorithm per GEMM class and size bucket (dense_lt.cc says why), and
// the cuBLAS status check both GEMM paths use.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "core/check.h"
#include "cuda/dense/dense_cuda.h"

#define LINATTN_CUBLAS_CHECK(call)                                                                     \
  do {                                                                                                 \
    const cublasStatus_t st_ = (call);                                                                 \
    LINATTN_CHECK_CODE(st_ == CUBLAS_STATUS_SUCCESS, ::linattn::ErrorCode::kBackend,                   \
                       ::linattn::FailureCategory::kNone, #call, ": ", cublasGetStatusString(st_));    \
  } while (0)

namespace linattn::cuda::dense {

// Where and how: the a / b / c element types, the fixed workspace, the stream.
struct LtTarget {
  cudaDataType_t ab = CUDA_R_32F, ct = CUDA_R_32F;
  void* workspace = nullptr;  // workspace_bytes
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

// Enqueues the GEMM g (GemmArgs of dense_cuda.h, K > 0) on t.stream; false when cublasLt has no
// algorithm for it (the caller then takes cublasGemmEx). Throws linattn::Error on a failure.
bool gemm_lt(cublasLtHandle_t lt, const GemmArgs& g, const LtTarget& t);

}  // namespace linattn::cuda::dense
