// wgmma self-test kernel (see wgmma_probe.h): 128 threads stage A and B into 1024-byte-aligned
// swizzled shared memory in the requested majorness, fence the generic -> async proxy, issue K/16
// wgmmas back to back in one commit group, wait, and store the accumulator fragments.
#include <cuda_bf16.h>

#include "core/check.h"
#include "cuda/common/device_info.h"
#include "cuda/common/launch.h"
#include "cuda/common/mma.cuh"
#include "cuda/common/tma.cuh"
#include "cuda/common/tma.h"
#include "cuda/common/wgmma.cuh"
#include "cuda/common/wgmma_probe.h"

namespace linattn::cuda {
namespace {

// Byte offset of element (mn, k) of an operand with `rows` MN-rows and K columns.
template <int MN_MAJOR>
__device__ __forceinline__ uint32_t operand_offset(int mn, int k, int rows, int K) {
  if (MN_MAJOR) return uint32_t(mn >> 6) * uint32_t(K / 8) * 1024u + sw128_offset(k, mn & 63);
  return uint32_t(k >> 6) * uint32_t(rows) * 128u + sw128_offset(mn, k & 63);
}

// Descriptor of k16 step `kk` of that operand.
template <int MN_MAJOR>
__device__ __forceinline__ uint64_t operand_desc(uint32_t base, int kk, int rows, int K) {
  if (MN_MAJOR) return wgmma_desc_sw128(base + uint32_t(kk) * 2048u, uint32_t(K / 8) * 1024u, 1024u);
  return wgmma_desc_sw128(base + uint32_t(kk >> 2) * uint32_t(rows) * 128u + uint32_t(kk & 3) * 32u, 16u, 1024u);
}

template <int N, int TA, int TB>
__global__ void __launch_bounds__(128) wgmma_probe_kernel(const __nv_bfloat16* __restrict__ A,
                                                          const __nv_bfloat16* __restrict__ B, float* __restrict__ C,
                                                          int K) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* sa = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* sb = sa + 64 * K * 2;  // a multiple of 1024 bytes for K % 64 == 0
  const int t = threadIdx.x;
  for (int i = t; i < 64 * K; i += 128)
    *reinterpret_cast<__nv_bfloat16*>(sa + operand_offset<TA>(i / K, i % K, 64, K)) = A[i];
  for (int i = t; i < N * K; i += 128)
    *reinterpret_cast<__nv_bfloat16*>(sb + operand_offset<TB>(i / K, i % K, N, K)) = B[i];
  fence_view_async_shared();
  __syncthreads();
  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  wgmma_fence();
  for (int kk = 0; kk < K / 16; ++kk) {
    const uint64_t da = operand_desc<TA>(smem_u32(sa), kk, 64, K);
    const uint64_t db = operand_desc<TB>(smem_u32(sb), kk, N, K);
    wgmma_m64k16<__nv_bfloat16, N, TA, TB>(d, da, db, 1);
  }
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_fence_operands(d);
#pragma unroll
  for (int r = 0; r < N / 2; ++r) C[acc_row(t, r) * N + acc_col(t, r)] = d[r];
}

// The same product with both K-major operands loaded by TMA (one box per 64-wide K panel) behind
// one mbarrier phase: checks that TMA's 128-byte swizzle is the layout the descriptors assume.
template <int N>
__global__ void __launch_bounds__(128) wgmma_tma_probe_kernel(const __grid_constant__ CUtensorMap map_a,
                                                              const __grid_constant__ CUtensorMap map_b,
                                                              float* __restrict__ C, int K) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* sa = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* sb = sa + 64 * K * 2;
  __shared__ __align__(8) uint64_t bar;
  const int t = threadIdx.x;
  if (t == 0) {
    mbar_init(&bar, 1);
    fence_barrier_init();
  }
  __syncthreads();
  if (t == 0) {
    mbar_arrive_expect_tx(&bar, uint32_t(64 + N) * uint32_t(K) * 2u);
    for (int p = 0; p < K / 64; ++p) {
      tma_load_2d(sa + p * 64 * 128, &map_a, p * 64, 0, &bar);
      tma_load_2d(sb + p * N * 128, &map_b, p * 64, 0, &bar);
    }
  }
  mbar_wait(&bar, 0);
  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  wgmma_fence();
  for (int kk = 0; kk < K / 16; ++kk) {
    const uint64_t da = operand_desc<0>(smem_u32(sa), kk, 64, K);
    const uint64_t db = operand_desc<0>(smem_u32(sb), kk, N, K);
    wgmma_m64k16<__nv_bfloat16, N, 0, 0>(d, da, db, 1);
  }
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_fence_operands(d);
#pragma unroll
  for (int r = 0; r < N / 2; ++r) C[acc_row(t, r) * N + acc_col(t, r)] = d[r];
}

template <int N, int TA, int TB>
void launch_probe(const void* A, const void* B, float* C, int K, cudaStream_t s) {
  const size_t smem = size_t(64 + N) * K * 2 + 1024;
  launch(wgmma_probe_kernel<N, TA, TB>, dim3(1), dim3(128), smem, s, static_cast<const __nv_bfloat16*>(A),
         static_cast<const __nv_bfloat16*>(B), C, K);
}

template <int N>
void dispatch_major(const void* A, const void* B, float* C, int K, bool ta, bool tb, cudaStream_t s) {
  if (!ta && !tb) launch_probe<N, 0, 0>(A, B, C, K, s);
  else if (ta && !tb) launch_probe<N, 1, 0>(A, B, C, K, s);
  else if (!ta && tb) launch_probe<N, 0, 1>(A, B, C, K, s);
  else launch_probe<N, 1, 1>(A, B, C, K, s);
}

void check_probe_args(int N, int K) {
  LINATTN_CHECK(N == 64 || N == 128, "wgmma_probe_gemm: N: expected 64 or 128, got ", N);
  LINATTN_CHECK(K > 0 && K % 64 == 0 && K <= 256, "wgmma_probe_gemm: K: expected a multiple of 64 in [64, 256], got ", K);
  const DeviceInfo& dev = current_device_info();
  if (dev.cc_major != 9)
    LINATTN_UNSUPPORTED("wgmma_probe_gemm: needs an sm_90 GPU, this one is sm_", dev.cc_major, dev.cc_minor);
}

}  // namespace

void wgmma_probe_gemm_tma(const void* A, const void* B, float* C, int N, int K, void* stream) {
  check_probe_args(N, K);
  const CUtensorMap ma = make_tma_2d_sw128(A, true, 64, uint64_t(K), uint64_t(K), 64);
  const CUtensorMap mb = make_tma_2d_sw128(B, true, uint64_t(N), uint64_t(K), uint64_t(K), uint32_t(N));
  const size_t smem = size_t(64 + N) * K * 2 + 1024;
  auto s = static_cast<cudaStream_t>(stream);
  if (N == 64) launch(wgmma_tma_probe_kernel<64>, dim3(1), dim3(128), smem, s, ma, mb, C, K);
  else launch(wgmma_tma_probe_kernel<128>, dim3(1), dim3(128), smem, s, ma, mb, C, K);
}

void wgmma_probe_gemm(const void* A, const void* B, float* C, int N, int K, bool a_mn_major, bool b_mn_major,
                      void* stream) {
  check_probe_args(N, K);
  auto s = static_cast<cudaStream_t>(stream);
  if (N == 64) dispatch_major<64>(A, B, C, K, a_mn_major, b_mn_major, s);
  else dispatch_major<128>(A, B, C, K, a_mn_major, b_mn_major, s);
}

}  // namespace linattn::cuda
