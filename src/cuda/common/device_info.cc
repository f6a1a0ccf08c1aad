// Cached cudaDeviceGetAttribute queries (see device_info.h). Thread-safe: one slot per ordinal,
// filled under a mutex.
#include "cuda/common/device_info.h"

#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <vector>

#include "cuda/common/check.h"

namespace linattn::cuda {
namespace {

DeviceInfo query(int ordinal) {
  DeviceInfo d;
  d.ordinal = ordinal;
  int v = 0;
  LINATTN_CUDA_CHECK(cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, ordinal));
  LINATTN_CUDA_CHECK(cudaDeviceGetAttribute(&d.cc_major, cudaDevAttrComputeCapabilityMajor, ordinal));
  LINATTN_CUDA_CHECK(cudaDeviceGetAttribute(&d.cc_minor, cudaDevAttrComputeCapabilityMinor, ordinal));
  LINATTN_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal));
  d.smem_per_block_optin = static_cast<size_t>(v);
  LINATTN_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerMultiprocessor, ordinal));
  d.smem_per_sm = static_cast<size_t>(v);
  LINATTN_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, ordinal));
  d.l2_bytes = static_cast<size_t>(v);
  LINATTN_CUDA_CHECK(cudaDeviceGetAttribute(&d.max_threads_per_sm,
                                            cudaDevAttrMaxThreadsPerMultiProcessor, ordinal));
  return d;
}

}  // namespace

const DeviceInfo& device_info(int ordinal) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<DeviceInfo>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (ordinal >= static_cast<int>(cache.size())) cache.resize(ordinal + 1);
  if (!cache[ordinal]) cache[ordinal] = std::make_unique<DeviceInfo>(query(ordinal));
  return *cache[ordinal];
}

const DeviceInfo& current_device_info() {
  int ordinal = 0;
  LINATTN_CUDA_CHECK(cudaGetDevice(&ordinal));
  return device_info(ordinal);
}

}  // namespace linattn::cuda
