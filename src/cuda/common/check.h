// Checked CUDA runtime calls and launches for the CUDA backend (host code only).
// LINATTN_CUDA_CHECK(call) throws linattn::Error (kBackend) naming the call, the CUDA error
// string and the caller's file:line; LINATTN_CUDA_CHECK_LAUNCH() checks the last launch error
// without synchronizing (capture-safe). Library code never prints or aborts on CUDA errors.
#pragma once
#include <cuda_runtime.h>

#include "core/check.h"

namespace linattn::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line);

}  // namespace linattn::cuda

#define LINATTN_CUDA_CHECK(call)                                                         \
  do {                                                                                 \
    cudaError_t linattn_err_ = (call);                                                 \
    if (linattn_err_ != cudaSuccess) [[unlikely]]                                      \
      ::linattn::cuda::throw_cuda_error(linattn_err_, #call, __FILE__, __LINE__);      \
  } while (0)

#define LINATTN_CUDA_CHECK_LAUNCH()                                                      \
  do {                                                                                 \
    cudaError_t linattn_err_ = cudaGetLastError();                                     \
    if (linattn_err_ != cudaSuccess) [[unlikely]]                                      \
      ::linattn::cuda::throw_cuda_error(linattn_err_, "kernel launch", __FILE__, __LINE__); \
  } while (0)
