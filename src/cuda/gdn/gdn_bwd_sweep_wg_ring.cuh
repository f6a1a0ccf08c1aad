// Role 1's input ring of the wgmma backward sweeps, opt-in variants of wg3 (gdn_bwd_sweep_wg.cu's rev_chain;
// LINATTN_CUDA_GDN_BWD_SWEEP=wg4 | wg5 | wg5p, perf-notes "Sweeps: the refill off the chain warp's issue (sweep12)"):
// - kPf (wg4, wg5p): chunk cc + 2's inputs prefetched to L2 under step cc's first products.
// - kTma (wg5, wg5p): chunk cc + 1's q / k panels, Ab and P (48 KB of the ring's 56) by four TMA boxes' worth per
//   warp's lane 0 (the forward's tma fan) on the stage's mbarrier (Bars::in_full, unused by wg3) instead of 24 of
//   each thread's 31 cp.asyncs: the ncu profile at 3d3a678 puts ~18% of role 1's samples in the ring's issue
//   (long-scoreboard stalls on the copy address registers behind a backed-up LSU), all of it between the chain
//   barrier and the step's first product. The boxes land exactly as cp.async lays the tiles out (K-major
//   swizzled panels), and chunks cc + 1 >= 1 are full (only the last chunk, cc = 0, can be partial; it keeps
//   cp.async), so every product reads the same operands: outputs bitwise wg3's.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/tma.cuh"
#include "cuda/gdn/gdn_bwd_sweep_wg.cuh"

namespace linattn::cuda {
namespace sweep_wg {

// Tensor maps of one launch (kTma; built on the host per call, passed by value).
struct RevMaps {
  CUtensorMap q, k;  // [T_total, H * 128], box 64 x 64
  CUtensorMap ab, p;  // [HV * T_cap, 64], box 64 x 64
};
constexpr uint32_t kRevTmaBytes = 6u * kBT * 128u;  // q, k (2 panels each), Ab, P

// kPf: chunk cc + 2's role-1 inputs (q / k rows, Ab, P, dO rows, gam / rk / rq) to L2 while step cc's
// first products run, so the cp.async refill issued at step cc + 1's top (one step ahead: the 2-stage ring
// leaves no room for more) finds them in L2 instead of paying the DRAM round trip inside step cc + 1.
// A hint only (prefetch.global.L2, one 128-byte line per instruction, 4 per thread; the bulk form takes a
// uniform address, i.e. a 32-lane loop per call): the values are wg3's. t0: a full chunk's first token.
__device__ __forceinline__ void l2_prefetch(const void* src) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(src)); }
template <class T>
__device__ __forceinline__ void prefetch_rev_inputs(const GdnBwdParams& p, const GdnBwdWs& w, int64_t t0, const Ids& id,
                                                    int t) {
  const GdnFwdParams& f = p.f;
  const int64_t qk = ((t0 + (t >> 1)) * f.H + id.h) * kK + (t & 1) * (kK / 2);  // 64 rows x 256 B: a line each
  l2_prefetch(static_cast<const T*>(f.q) + qk);
  l2_prefetch(static_cast<const T*>(f.k) + qk);
  const int line = t & 63;  // Ab (t < 64) / P: 8 KB each, contiguous
  l2_prefetch(static_cast<const T*>(t < 64 ? w.c.Ab : w.c.P) + (id.j * w.c.T_cap + t0 + line) * kBT);
  if (t < 64) {
    if (w.do_direct) l2_prefetch(static_cast<const T*>(p.d_o) + ((t0 + line) * f.HV + id.j) * int64_t(f.V) + id.v0);
  } else if (t < 73) {  // gam / rk / rq rows of 256 B from any token: the lines of elements 0, 32, 63
    const int a = (t - 64) / 3, e = (t - 64) % 3;
    const float* r = a == 0 ? w.c.gam + id.j * w.c.T_cap : (a == 1 ? w.c.rk : w.c.rq) + id.h * w.c.T_cap;
    l2_prefetch(r + t0 + (e == 2 ? kBT - 1 : 32 * e));
  }
}


// kTma: chunk at t0 (full) of q / k / Ab / P into stage st on bar, fanned over WG0's four warps (lane 0 each):
// warp 0 arms the barrier with all bytes and loads q's panels, warp 1 k's, warp 2 Ab, warp 3 P. A box may
// complete before the arming (the tx-count goes negative for a while); the phase cannot complete before warp
// 0's arrival. The caller: after the chain barrier (the stage's previous products waited by every warp).
template <class T>
__device__ __forceinline__ void tma_rev_tiles(RevStage<T>& st, const RevMaps& m, uint64_t* bar, const GdnBwdWs& w,
                                              int64_t t0, const Ids& id, int t) {
  if ((t & 31) != 0) return;
  const int wp = t >> 5, row = static_cast<int>(t0);
  if (wp == 0) {
    mbar_arrive_expect_tx(bar, kRevTmaBytes);
    tma_load_2d(st.q, &m.q, id.h * kK, row, bar);
    tma_load_2d(st.q + kBT * 128, &m.q, id.h * kK + 64, row, bar);
  } else if (wp == 1) {
    tma_load_2d(st.k, &m.k, id.h * kK, row, bar);
    tma_load_2d(st.k + kBT * 128, &m.k, id.h * kK + 64, row, bar);
  } else {
    tma_load_2d(wp == 2 ? st.a : st.p, wp == 2 ? &m.ab : &m.p, 0, static_cast<int>(id.j * w.c.T_cap + t0), bar);
  }
}

}  // namespace sweep_wg
}  // namespace linattn::cuda
