// linattn's per-device memory pool for eager scratch (see eager_pool.h).
#include "cuda/common/eager_pool.h"

#include <array>
#include <cstdint>
#include <mutex>

#include "cuda/common/check.h"

namespace linattn::cuda {
namespace {

constexpr int kMaxDevices = 64;

int current_device() {
  int dev = 0;
  LINATTN_CUDA_CHECK(cudaGetDevice(&dev));
  LINATTN_CHECK(dev >= 0 && dev < kMaxDevices, "eager pool: device ordinal ", dev, " out of [0, ", kMaxDevices, ")");
  return dev;
}

cudaMemPool_t pool_of(int dev) {
  static std::mutex mu;
  static std::array<cudaMemPool_t, kMaxDevices> pools{};
  std::lock_guard<std::mutex> lock(mu);
  cudaMemPool_t& pool = pools[static_cast<size_t>(dev)];
  if (pool == nullptr) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t p = nullptr;
    LINATTN_CUDA_CHECK(cudaMemPoolCreate(&p, &props));
    uint64_t keep_all = UINT64_MAX;
    LINATTN_CUDA_CHECK(cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keep_all));
    pool = p;
  }
  return pool;
}

}  // namespace

void* eager_alloc(size_t bytes, cudaStream_t stream) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  LINATTN_CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
  void* p = nullptr;
  if (cs != cudaStreamCaptureStatusNone) {
    LINATTN_CUDA_CHECK(cudaMallocAsync(&p, bytes, stream));
  } else {
    LINATTN_CUDA_CHECK(cudaMallocFromPoolAsync(&p, bytes, pool_of(current_device()), stream));
  }
  return p;
}

void eager_free(void* p, cudaStream_t stream) {
  if (p != nullptr) LINATTN_CUDA_CHECK(cudaFreeAsync(p, stream));
}

void trim_eager_pool(size_t keep_bytes) {
  LINATTN_CUDA_CHECK(cudaMemPoolTrimTo(pool_of(current_device()), keep_bytes));
}

}  // namespace linattn::cuda
