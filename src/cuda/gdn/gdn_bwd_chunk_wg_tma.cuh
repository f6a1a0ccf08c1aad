// wg12 (gdn_bwd_chunk_wg.cu, V4 = 11): the tiles of a full chunk by TMA instead of per-thread cp.async. One thread
// arms an mbarrier per load group with the group's bytes and issues the 64-column boxes (2-D tensor maps built on
// the host per launch, tma.h); a box of a 1024-byte aligned 128-byte-swizzled destination lands exactly where
// load_sw2 puts its 16-byte pieces (sw128_offset), so every product reads the same operands as wg11's. Partial
// chunks (len < 64: rows past len must be zero) and a converted d_o keep wg11's cp.async path. The barriers
// live in WgPer's bytes (unused by the non-persistent kernel). Included once, by gdn_bwd_chunk_wg.cu.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "cuda/common/tma.cuh"
#include "cuda/gdn/gdn_bwd_chunk_wg_smem.cuh"

namespace linattn::cuda {
namespace {

struct NoMaps {};  // the kernel's maps argument of every variant but wg12
struct ChunkMaps {
  CUtensorMap S, dS;    // [nt_cap HV K, V], box 128 x 64: row (r HV + j) K
  CUtensorMap vh, dvh;  // [HV T_cap, V], box 64 x 64: row j T_cap + t0
  CUtensorMap ai;       // [HV T_cap, 64]
  CUtensorMap dO;       // [T_total, HV V], box 64 x 64: column j V (only with d_o direct)
  CUtensorMap q, k;     // [T_total, H K]: column h K
};
static_assert(sizeof(WgPer) >= 2 * sizeof(uint64_t), "wg12: two mbarriers in WgPer's bytes");

constexpr uint32_t kTmaPart0 = kBT * kBT * 2 + kBT * 128 * 2;                 // Ai, dV^ (V = 128)
constexpr uint32_t kTmaPart1 = 2 * kK * 128 * 2 + 2 * kBT * 128 * 2;          // S, dS', V^, dO
constexpr uint32_t kTmaQk = 2 * kBT * kK * 2;                                  // q, k

// Thread 0 of the CTA (the caller checks): head j's group PART (0: Ai / dV^ on bars[0]; 1: S / dS' / V^ / dO on
// bars[1], with QK the item's q / k too), armed with its bytes first. The caller: after the barrier that ends the
// previous reads of the buffers (as for load_head_part), and at most one phase ahead of every waiter. Every box
// coordinate fits in 32 bits (chunk_maps checks); the inputs go through opaque copies (as load_head_wg's tid), so
// nothing computed from them is hoisted out of the head loop into registers that live through the products.
template <int PART, bool QK = false>
__device__ __forceinline__ void tma_head_part(WgSmem<128>& s, const ChunkMaps& m, uint64_t* bars, int r_, int HV,
                                              int64_t T_cap, int t0_, int h_, int j_) {
  int r, t0, h, j;
  asm volatile("mov.b32 %0, %1;" : "=r"(r) : "r"(r_));
  asm volatile("mov.b32 %0, %1;" : "=r"(t0) : "r"(t0_));
  asm volatile("mov.b32 %0, %1;" : "=r"(h) : "r"(h_));
  asm volatile("mov.b32 %0, %1;" : "=r"(j) : "r"(j_));
  const int trow = j * static_cast<int>(T_cap) + t0;
  if constexpr (PART == 0) {
    mbar_arrive_expect_tx(&bars[0], kTmaPart0);
    tma_load_2d(s.ai, &m.ai, 0, trow, &bars[0]);
#pragma unroll
    for (int pn = 0; pn < 2; ++pn) tma_load_2d(s.dvh + pn * kBT * 128, &m.dvh, 64 * pn, trow, &bars[0]);
  } else {
    mbar_arrive_expect_tx(&bars[1], kTmaPart1 + (QK ? kTmaQk : 0u));
    const int t = t0, srow = (r * HV + j) * kK;
#pragma unroll
    for (int pn = 0; pn < 2; ++pn) {
      if constexpr (QK) {
        tma_load_2d(s.q + pn * kBT * 128, &m.q, h * kK + 64 * pn, t, &bars[1]);
        tma_load_2d(s.k + pn * kBT * 128, &m.k, h * kK + 64 * pn, t, &bars[1]);
      }
      tma_load_2d(s.S + pn * kK * 128, &m.S, 64 * pn, srow, &bars[1]);
      tma_load_2d(s.dS + pn * kK * 128, &m.dS, 64 * pn, srow, &bars[1]);
      tma_load_2d(s.vh + pn * kBT * 128, &m.vh, 64 * pn, trow, &bars[1]);
      tma_load_2d(s.dO + pn * kBT * 128, &m.dO, j * 128 + 64 * pn, t, &bars[1]);
    }
  }
}

// wg12: the CTA's first head: both barriers initialized, then head 0's two groups (thread 0).
__device__ __forceinline__ void tma_head0(WgSmem<128>& s, const ChunkMaps& m, uint64_t* bars, int r, int HV,
                                          int64_t T_cap, int t0, int h, int j) {
  mbar_init(&bars[0], 1);
  mbar_init(&bars[1], 1);
  fence_barrier_init();
  fence_view_async_shared();
  tma_head_part<0>(s, m, bars, r, HV, T_cap, t0, h, j);
  tma_head_part<1, true>(s, m, bars, r, HV, T_cap, t0, h, j);
}

}  // namespace
}  // namespace linattn::cuda
