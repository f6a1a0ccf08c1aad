// Error path of LINATTN_CUDA_CHECK: clears the sticky-free last error and throws kBackend.
#include "cuda/common/check.h"

namespace linattn::cuda {

void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  (void)cudaGetLastError();  // clear a non-sticky error so later calls are not poisoned
  detail::throw_error(ErrorCode::kBackend, FailureCategory::kNone, file, line,
                      detail::str_cat("CUDA error ", cudaGetErrorName(err), " (",
                                      cudaGetErrorString(err), ") in ", what));
}

}  // namespace linattn::cuda
