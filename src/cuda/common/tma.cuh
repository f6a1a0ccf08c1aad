// Device side of TMA loads and shared-memory mbarriers (sm_90a): barrier init / arrive with an
// expected transaction byte count / parity wait, and the 2-D tiled bulk tensor load that
// completes on a barrier. Protocol: one thread inits (count 1), fence_barrier_init + __syncthreads;
// per phase the issuing thread calls mbar_arrive_expect_tx(total bytes) then its tma_load_2d's;
// every consumer waits with the phase parity (0, 1, 0, ...). Also the 1-D bulk load on a barrier, the 2-D tensor
// store and the bulk stores with their commit / wait. Other targets trap (loads, waits) or do nothing (stores).
#pragma once
#include <cuda.h>

#include <cstdint>

#include "cuda/common/mma.cuh"

namespace linattn::cuda {

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void fence_barrier_init() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\n"
      "LAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@p bra.uni DONE;\n"
      "bra.uni LAB_WAIT;\n"
      "DONE:\n}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
#else
  __trap();
#endif
}
// Box (col0, row0) of `map` -> smem (1024-byte aligned for the 128-byte swizzle); completes its
// bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(void* smem, const CUtensorMap* map, int col0, int row0, uint64_t* bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
          smem_u32(smem)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(col0), "r"(row0)
      : "memory");
#else
  __trap();
#endif
}

// smem (1024-byte aligned for the 128-byte swizzle) -> box (col0, row0) of `map`, in this thread's bulk group
// (bulk_commit / bulk_wait_read0 / bulk_wait0 below; the writers fence_view_async_shared + barrier first).
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* smem, int col0, int row0) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(col0), "r"(row0), "r"(smem_u32(smem))
               : "memory");
#endif
}

// 1-D bulk copy global -> shared (16-byte aligned, bytes a multiple of 16), completing on bar.
__device__ __forceinline__ void bulk_load_1d(void* smem, const void* gmem, uint32_t bytes, uint64_t* bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_u32(smem)),
               "l"(gmem), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
#else
  __trap();
#endif
}

// Bulk stores shared -> global (sm_90; 16-byte aligned, bytes a multiple of 16) in this thread's bulk groups:
// issue, commit the group, wait until every group has finished reading shared memory / has completed.
__device__ __forceinline__ void bulk_store_row(void* gmem, unsigned smem, unsigned bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(gmem), "r"(smem), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_wait_read0() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_wait0() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}

}  // namespace linattn::cuda
