// Helpers for the CUDA backend's tests: device copies of generated GDN inputs, NaN-prefilled
// device outputs copied back to the host, and direct calls of the CUDA entry points with a forced
// path (token-by-token or chunked, optional V-slice) so that both kernels are tested on every shape.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/backend_cuda.h"
#include "common/chunk_attn_check.h"
#include "common/chunk_attn_gen.h"
#include "linattn/dense.h"

namespace linattn::test {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())

inline Device cuda0() { return Device{DeviceType::kCUDA, 0}; }

// Sets an environment variable for a scope (unset when `value` is null), restoring the old value (or its
// absence) at the end: the tests force kernel variants through the LINATTN_* switches this way.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Owns device copies of host tensors.
struct DevArena {
  std::vector<std::unique_ptr<Buffer>> bufs;
  TensorView upload(const Tensor& t);                 // absent stays absent
  TensorView alloc_like(const Tensor& t);             // same shape / dtype, contents of t
  TensorView alloc(DType dtype, std::vector<int64_t> shape);
};
Tensor download(const TensorView& dev);

struct DevChunkAttn {
  DevArena arena;
  ChunkAttnInputs in;
  ChunkAttnOutputs out;
};
// Inputs of d on the device; outputs NaN-filled like alloc_outputs(d, q dtype, fp32).
std::unique_ptr<DevChunkAttn> to_device(const ChunkAttnData& d);
ChunkAttnOutTensors outputs_to_host(const DevChunkAttn& dev);

// Runs the CUDA forward of d and returns its outputs on the host. path / vs as in
// api::chunk_attn_fwd_cuda_forced.
ChunkAttnOutTensors run_cuda_fwd(const ChunkAttnData& d, api::CudaGdnPath path, int vs = 0);

bool have_cuda_device();

}  // namespace linattn::test
