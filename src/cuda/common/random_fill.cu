// Counter-based random fill (see random_fill.h): splitmix64 of (seed, index) gives two 24-bit
// uniforms per element; grid-stride loop, 256 threads per block.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/common/random_fill.h"

namespace linattn::cuda {
namespace {

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ __forceinline__ void store(void* p, ElemType t, int64_t i, float x) {
  if (t == ElemType::kF16) static_cast<__half*>(p)[i] = __float2half_rn(x);
  else if (t == ElemType::kBF16) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x);
  else static_cast<float*>(p)[i] = x;
}

__global__ void fill_kernel(void* p, ElemType t, int64_t n, uint64_t seed, bool normal, float a, float b) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t h = splitmix64(seed * 0x100000001b3ull + uint64_t(i));
    const float u1 = (float((h >> 40) & 0xffffff) + 0.5f) * (1.f / 16777216.f);
    const float u2 = float((h >> 16) & 0xffffff) * (1.f / 16777216.f);
    float x;
    if (normal) x = a + b * sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    else x = a + (b - a) * u2;
    store(p, t, i, x);
  }
}

void fill(void* data, ElemType type, int64_t n, uint64_t seed, bool normal, float a, float b, void* stream) {
  if (n <= 0) return;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 132 * 32);
  launch(fill_kernel, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, static_cast<cudaStream_t>(stream),
         data, type, n, seed, normal, a, b);
}

}  // namespace

void fill_normal(void* data, ElemType type, int64_t n, uint64_t seed, float mean, float stddev, void* stream) {
  fill(data, type, n, seed, true, mean, stddev, stream);
}
void fill_uniform(void* data, ElemType type, int64_t n, uint64_t seed, float lo, float hi, void* stream) {
  fill(data, type, n, seed, false, lo, hi, stream);
}

}  // namespace linattn::cuda
