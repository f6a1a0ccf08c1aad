// copy_batch: up to kCopyBatchMax device-to-device copies in one launch (copy_tensors' CUDA path).
// Grid (blocks, pairs): block x of pair y walks pair y's bytes grid-stride in 16-byte words (when
// dst and src are both 16-byte aligned; the last bytes % 16 by block 0) or in bytes (otherwise).
// The grid depends only on the pairs' sizes, so a captured launch replays the same copies.
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/common/check.h"
#include "cuda/dense/dense_cuda.h"

namespace linattn::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kWordsPerBlock = 4 * kThreads;  // 16 KiB per block and sweep

__global__ void __launch_bounds__(kThreads) copy_batch_kernel(const __grid_constant__ CopyBatch b) {
  const int y = blockIdx.y;
  auto* d = static_cast<char*>(b.dst[y]);
  const auto* s = static_cast<const char*>(b.src[y]);
  const int64_t n = b.bytes[y];
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  const int64_t first = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s)) & 15) == 0) {
    const int64_t words = n / 16;
    auto* dw = reinterpret_cast<uint4*>(d);
    const auto* sw = reinterpret_cast<const uint4*>(s);
    for (int64_t i = first; i < words; i += stride) dw[i] = sw[i];
    if (blockIdx.x == 0 && threadIdx.x < n % 16) d[16 * words + threadIdx.x] = s[16 * words + threadIdx.x];
  } else {
    for (int64_t i = first; i < n; i += stride) d[i] = s[i];
  }
}

}  // namespace

void copy_batch(const CopyBatch& b, void* stream) {
  int64_t most = 0;
  for (int i = 0; i < b.n; ++i) most = std::max(most, b.bytes[i]);
  if (b.n == 0 || most == 0) return;
  const int64_t words = (most + 15) / 16;
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>((words + kWordsPerBlock - 1) / kWordsPerBlock, 1, 1024));
  copy_batch_kernel<<<dim3(blocks, static_cast<unsigned>(b.n)), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(b);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
