// Hopper (sm_90a) warpgroup MMA wrappers: shared-memory matrix descriptors for the 128-byte
// swizzled layouts, the wgmma fence / commit / wait protocol, and m64nNk16 bf16 / fp16 -> fp32
// with both operands in shared memory or A in registers (N = 64, 128). One warpgroup = 4 consecutive warps
// (128 threads) issues each wgmma together.
// Shared-memory layouts (PTX ISA "Matrix descriptor" / "Shared memory matrix layout"), 16-bit
// elements, every tile 1024-byte aligned; an "atom" is 8 rows x 128 bytes in which the 16-byte
// chunk c of row r is stored at chunk c ^ r:
//   K-major (no transpose): rows along M (or N), 64 K-elements per row; 8-row atoms 1024 bytes
//     apart (SBO = 1024); K beyond 64 in further panels of rows * 128 bytes. A k16 step is the
//     descriptor start advanced by 32 bytes inside the panel.
//   MN-major (transpose): rows along K, 64 M (or N) elements per row; 8-row atoms of one 64-wide
//     MN block 1024 bytes apart (SBO), MN blocks LBO bytes apart. A k16 step advances 2048 bytes.
// Accumulator fragment (m64nN, fp32): thread t of the warpgroup, w = t / 32, g = (t % 32) / 4,
// q = t % 4; register 4j + r holds D[16w + g + 8(r / 2)][8j + 2q + (r % 2)] (acc_row / acc_col).
// Compiled only for sm_90a; other targets trap (the portable compute_80 PTX never reaches them).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace linattn::cuda {

// Byte offset of element (row, col) (col < 64) inside a 128-byte-swizzled panel of rows.
__host__ __device__ __forceinline__ uint32_t sw128_offset(uint32_t row, uint32_t col) {
  return (row >> 3) * 1024u + (row & 7u) * 128u + ((((col >> 3) ^ row) & 7u) << 4) + (col & 7u) * 2u;
}

// Descriptor of a 128-byte-swizzled operand starting at shared address `smem` (the k16 step's
// start; its atom must be 1024-byte aligned). Offsets in bytes (multiples of 16).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem, uint32_t lbo, uint32_t sbo) {
  uint64_t d = 0;
  d |= uint64_t((smem & 0x3FFFFu) >> 4);
  d |= uint64_t((lbo >> 4) & 0x3FFFu) << 16;
  d |= uint64_t((sbo >> 4) & 0x3FFFu) << 32;
  d |= uint64_t(1) << 62;  // layout type: 128-byte swizzle
  return d;
}

__device__ __forceinline__ int acc_row(int t, int reg) { return 16 * (t >> 5) + ((t & 31) >> 2) + 8 * ((reg & 3) >> 1); }
__device__ __forceinline__ int acc_col(int t, int reg) { return 8 * (reg >> 2) + 2 * (t & 3) + (reg & 1); }

// Generic-proxy shared-memory writes must be fenced before the async proxy (wgmma, TMA) reads them.
__device__ __forceinline__ void fence_view_async_shared() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Before the first wgmma of a group (and after any other write to its accumulator registers).
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed groups are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving accumulator reads/writes across an in-flight wgmma.
template <int R>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Operand spellings of the m64nNk16 accumulators (N / 2 fp32 registers per thread).
#define LINATTN_WGMMA_REGS32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define LINATTN_WGMMA_REGS64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define LINATTN_WGMMA_D32 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define LINATTN_WGMMA_D64 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
// One wgmma with both operands from shared-memory descriptors; A_, B_, S_, TA_, TB_ are the
// operand numbers of desc_a, desc_b, scale_d and the two transpose immediates.
#define LINATTN_WGMMA_SS(SHAPE, TY, REGS, A_, B_, S_, TA_, TB_, DOPS)                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " S_ ", 0;\nwgmma.mma_async.sync.aligned." SHAPE ".f32." TY \
               "." TY " " REGS ", " A_ ", " B_ ", p, 1, 1, " TA_ ", " TB_ ";\n}\n"                           \
               : DOPS                                                                                       \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB))

// D (+)= A x B with A [64 x 16], B [16 x N] from descriptors; T = __nv_bfloat16 or __half, N = 64
// or 128; TA / TB: 1 = MN-major operand; scale_d = 0 overwrites D.
template <class T, int N, int TA, int TB>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  static_assert(kBf16 || std::is_same_v<T, __half>, "wgmma: bf16 or fp16 operands");
  static_assert(N == 64 || N == 128, "wgmma: N = 64 or 128");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (N == 64 && kBf16)
    LINATTN_WGMMA_SS("m64n64k16", "bf16", LINATTN_WGMMA_REGS32, "%32", "%33", "%34", "%35", "%36", LINATTN_WGMMA_D32);
  else if constexpr (N == 64)
    LINATTN_WGMMA_SS("m64n64k16", "f16", LINATTN_WGMMA_REGS32, "%32", "%33", "%34", "%35", "%36", LINATTN_WGMMA_D32);
  else if constexpr (kBf16)
    LINATTN_WGMMA_SS("m64n128k16", "bf16", LINATTN_WGMMA_REGS64, "%64", "%65", "%66", "%67", "%68", LINATTN_WGMMA_D64);
  else
    LINATTN_WGMMA_SS("m64n128k16", "f16", LINATTN_WGMMA_REGS64, "%64", "%65", "%66", "%67", "%68", LINATTN_WGMMA_D64);
#else
  __trap();
#endif
}

// One wgmma with A from four 32-bit registers (the m64k16 A fragment, see wgmma_m64k16_rs) and B
// from a descriptor; A0..A3, B_, S_, TB_ are the operand numbers.
#define LINATTN_WGMMA_RS(SHAPE, TY, REGS, A0, A1, A2, A3, B_, S_, TB_, DOPS)                                 \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " S_ ", 0;\nwgmma.mma_async.sync.aligned." SHAPE ".f32." TY   \
               "." TY " " REGS ", {" A0 ", " A1 ", " A2 ", " A3 "}, " B_ ", p, 1, 1, " TB_ ";\n}\n"         \
               : DOPS                                                                                        \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB))

// D (+)= A x B with A [64 x 16] in registers and B [16 x N] from a descriptor (TB = 1: MN-major B).
// A fragment (K-major, packed pairs): thread t (w, g, q as for the accumulator) holds
//   a[0] = A[16w + g][2q, 2q+1], a[1] = A[16w + g + 8][2q, 2q+1], a[2] = A[16w + g][2q+8, 2q+9],
//   a[3] = A[16w + g + 8][2q+8, 2q+9],
// so the accumulator of an m64nN product converts to the A fragments of a following product over
// K = N with a[4kk + i] = pack(d[8kk + 2i], d[8kk + 2i + 1]) (acc_to_frag). The registers must stay
// untouched until the wgmma group that reads them has been waited for.
template <class T, int N, int TB>
__device__ __forceinline__ void wgmma_m64k16_rs(float (&d)[N / 2], const uint32_t* a, uint64_t desc_b, int scale_d) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  static_assert(kBf16 || std::is_same_v<T, __half>, "wgmma: bf16 or fp16 operands");
  static_assert(N == 64 || N == 128, "wgmma: N = 64 or 128");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (N == 64 && kBf16)
    LINATTN_WGMMA_RS("m64n64k16", "bf16", LINATTN_WGMMA_REGS32, "%32", "%33", "%34", "%35", "%36", "%37", "%38",
                     LINATTN_WGMMA_D32);
  else if constexpr (N == 64)
    LINATTN_WGMMA_RS("m64n64k16", "f16", LINATTN_WGMMA_REGS32, "%32", "%33", "%34", "%35", "%36", "%37", "%38",
                     LINATTN_WGMMA_D32);
  else if constexpr (kBf16)
    LINATTN_WGMMA_RS("m64n128k16", "bf16", LINATTN_WGMMA_REGS64, "%64", "%65", "%66", "%67", "%68", "%69", "%70",
                     LINATTN_WGMMA_D64);
  else
    LINATTN_WGMMA_RS("m64n128k16", "f16", LINATTN_WGMMA_REGS64, "%64", "%65", "%66", "%67", "%68", "%69", "%70",
                     LINATTN_WGMMA_D64);
#else
  __trap();
#endif
}

// Keeps the compiler from reusing A-fragment registers before the wgmma reading them completes.
template <int R>
__device__ __forceinline__ void wgmma_fence_regs(uint32_t (&a)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// stmatrix.trans (sm_90): four 8x8 b16 matrices, the inverse of ldmatrix.x4.trans: lane l supplies
// the row address of row l % 8 of matrix l / 8 and r[i] holds its A-fragment pair of matrix i
// (M[g][2q], M[g][2q + 1]), stored as column g of that matrix's rows 2q and 2q + 1.
__device__ __forceinline__ void stmatrix_x4_trans(void* row_addr, const uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(row_addr))),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#else
  __trap();
#endif
}

// stmatrix without transpose: lane l supplies the row address of row l % 8 of matrix l / 8, r[i] holds
// matrix i's pair (row g, columns 2q, 2q + 1), the accumulator / A-fragment layout.
__device__ __forceinline__ void stmatrix_x4(void* row_addr, const uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(row_addr))),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#else
  __trap();
#endif
}

// Arrive (without waiting) at named barrier `id` of `threads` threads: the producer half of a
// producer / consumer hand-off whose consumers bar.sync on the same id and count.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Named barrier over `threads` threads (a multiple of 32) of the CTA; id 0 is __syncthreads'.
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace linattn::cuda
