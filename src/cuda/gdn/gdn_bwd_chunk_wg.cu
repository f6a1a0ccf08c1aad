// wgmma variant of the GDN backward chunk kernel (gdn_bwd_chunk.cu has the math and the row-dot
// bookkeeping; this file keeps both, line for line, and changes only where the products run):
// one CTA of 4 warpgroups per (chunk row r, q/k head h), BT = 64, K = 128, V in {64, 128}.
// Warpgroup wn owns output columns [wn N, (wn + 1) N) of every product (N = 32 of K, V / 4 of V,
// 16 of BT) and warp wm of it rows 16 wm .. 16 wm + 15, which is the mma.sync kernel's warp tile,
// so each 64 x N product is K / 16 wgmma (m64nNk16) reading its shared operands once per
// warpgroup instead of ldmatrix fragments per warp. Tiles are 128-byte swizzled (wgmma.cuh), every
// operand orientation is a descriptor (K-major or MN-major), so no tile is stored twice.
// V2 ("wg2", LINATTN_CUDA_GDN_BWD_CHUNK=wg2): the same products and reduction order with fewer
// instructions (descriptors built once per product, per-thread swizzle offsets, hoisted cp.async
// offsets) and warp 0's finish taken off the head-to-head chain (WgRows below).
// V3 ("wg3", LINATTN_CUDA_GDN_BWD_CHUNK=wg3; wg2 keeps V2): V2 plus shorter live ranges (t0 as a 32-bit
// value, the v row pointers not hoisted: fewer spill reloads per head), the next head's v rows and
// gam row prefetched into L2, <S, dS'> computed while the xn product is in flight, and dq / dk in
// the io type stored as 16-byte row pieces through the q / k tiles. Same values as V2 bit for bit.
// V4 ("wg4", the default at V = 128 from 95f8975's A/B to 1ec4943): V3 with two pairs of independent products
// in flight together (dq_inter / dk_inter; R K^ / Pd K^), each finished in the same order as V3's.
// V5 ("wg5", opt-in =wg5): V4 with Y = Ai^T dV^ issued ahead of the first pair (three in flight; its
// store and Y.v row dot run under them). Both: same values as V3 bit for bit.
// V6 ("wg6", opt-in =wg6; "wg6:N" caps the CTA count at N): V4 in persistent CTAs, one per SM, that
// walk the items (chunk row, q/k head) with a stride of the grid (template flag kPer of the same
// kernel): the next item's head-0 tiles load at the last head's third barrier (as a next head's do)
// and its q / k under the epilogue's stores (dq / dk staged in the dead intra tiles instead of over
// q / k) and under head 0's Y, so an item's start no longer waits for 152 KB with nothing in flight.
// Same values as V4 bit for bit (same per-item code and order).
// V7 ("wg7", opt-in =wg7; template V4 = 3): V4 with each head's tiles in two cp.async groups (Ai / dV^,
// what Y reads, issued at the previous head's second barrier; S / dS' / V^ / dO at its third), the
// second barrier moved before dq_inter / dk_inter so the second group lands under Y; the Y.v row
// dot's v loads under the Y product; in each M half, X and the staged Pd / R stores under the second
// product (Q K^T / K K^T, its own commit group); warp 0's finish of head jj under head jj + 1's Y, the row-dot
// partials double-buffered by head parity (WgRed), no end-of-head barrier but the last. Same values
// as V4 bit for bit.
// V8d ("wg8d", opt-in =wg8d; template V4 = 5): V7 with each M element's decay exp2(gam_i - gam_j)
// computed once per head, under the first M product (decay_frag), and kept for both halves' element loops
// in the thread's own R / beta R staging slots (half 1 recomputed them in V7). Same values as V7 bit for
// bit. ("wg8", V4 = 4: wg8d plus head 0's S / dS' issued before the index loads, was removed in session 12:
// +1.7% on the H200 at ee5c88b.)
// V9 / V9d ("wg9" opt-in / "wg9d" the default since session 14; template V4 = 6 / 7): V7 / V8d with each head's
// row scalars (gam, beta, the
// finish's gate / beta draws) split over 8 warps by kind (one global round trip per thread where V2's warps
// 2-3 made four in a row before the head's first barrier), and head 1's computed with head 0's at head 0's
// start, so head 1's first barrier waits for no global load; head 0's loads go out ahead of its tiles. Same
// values as V7 bit for bit. V9p ("wg9p", "wg9p:N"; V4 = 8, kPer): V6 (persistent) with the same row scalars,
// an item's heads 0 and 1 at the item's start. Same values as V4 bit for bit. V9ps ("wg9ps", "wg9ps:N"; V4 = 9,
// kPer): V9 in persistent CTAs (split loads for the next item too: its Ai / dV^ at the last head's second barrier,
// the rest at its third, q / k after the epilogue; the last finish where V7 has it). Same values as V7 bit for bit.
// V12 ("wg12", the default since session 16; V4 = 11, gdn_bwd_chunk_wg_tma.cuh): V11 with a full chunk's tiles by TMA (one thread per group,
// mbarriers; partial chunks and a converted d_o keep cp.async) and the last finish under the staged dq / dk stores
// (warps 1-15 store, warp 0 finishes). Same values as V11 bit for bit. Falls back to V11 where its tensor maps cannot
// be built (unaligned bases, 32-bit coordinates).
// V11 ("wg11", the default in session 15; V4 = 10): V9d with the shared-memory reads of the finishing passes (the M halves' decays and
// row / column scales, the k words of xn's and R K^'s row dots, <S, dS'>'s tiles) issued before the wgmma wait they
// follow and the Y.v row dot's v loads before the head's first barrier. Same values as V9d bit for bit.
// sm_90a only; the other targets never launch it (gdn_bwd_chunk_wg_eligible).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/env.h"
#include "core/util.h"
#include "cuda/common/device_info.h"
#include "cuda/common/launch.h"
#include "cuda/common/tma.h"
#include "cuda/gdn/gdn_bwd_chunk_common.cuh"
#include "cuda/gdn/gdn_bwd_chunk_wg.cuh"
#include "cuda/gdn/gdn_bwd_chunk_wg.h"
#include "cuda/gdn/gdn_bwd_chunk_wg_smem.cuh"
#include "cuda/gdn/gdn_bwd_chunk_wg_tma.cuh"

namespace linattn::cuda {
namespace {
using namespace gdn_bwd_chunk_detail;
using namespace gdn_bwd_chunk_wg_detail;

#define LINATTN_GDN_BWD_CHUNK_WG_BODY 1
#include "cuda/gdn/gdn_bwd_chunk_wg_kernel.cuh"  // gdn_bwd_chunk_wg_kernel<T, V, V2, V3, V4, kPer>

std::atomic<int64_t> g_wg6_launches{0}, g_wg7_launches{0}, g_wg8d_launches{0}, g_wg9_launches{0},
    g_wg9d_launches{0}, g_wg11_launches{0}, g_wg12_launches{0};

// The switch's value, checked: a value that names no chunk kernel (the removed wg8, a typo) is an error, not a
// silent V4.
std::string chunk_switch() {
  const std::string v = env_or("LINATTN_CUDA_GDN_BWD_CHUNK", "");
  const size_t pn = v.rfind("wg6:", 0) == 0    ? 4  // "wg6:N" / "wg9p:N" / "wg9ps:N"
                    : v.rfind("wg9p:", 0) == 0  ? 5
                    : v.rfind("wg9ps:", 0) == 0 ? 6
                                                : 0;
  const bool capped = pn > 0 && v.size() > pn && v.find_first_not_of("0123456789", pn) == std::string::npos;
  if (!capped)
    choice_index("LINATTN_CUDA_GDN_BWD_CHUNK", v,
                 {"wg7", "wg8d", "wg9", "wg9d", "wg11", "wg12", "wg9p", "wg9ps", "wg6", "wg5", "wg4", "wg3", "wg2", "wg", "mma"}, 0,
                 "or wg6:N / wg9p:N / wg9ps:N (persistent with at most N CTAs); wg8 was removed");
  return v;
}

// wg12's tensor maps (tma.h), false where a base is not 16-byte aligned or a box coordinate would not fit in 32 bits
// (then wg11 runs). d_o's map only when the kernel reads d_o directly (else its CTAs keep cp.async).
// Built per launch and passed by value (__grid_constant__): a captured graph replays the capture's maps, which hold
// only what the kernel's plain parameters bake in too (the base pointers and the capacity extents T_total, T_cap,
// nt_cap, H, HV), so they stay valid because the graph contract never replaces a buffer (GRAPH_CONTRACT.md section 4).
bool chunk_maps(const GdnBwdParams& p, const GdnBwdWs& w, ChunkMaps& m) {
  const GdnFwdParams& f = p.f;
  const uint64_t HV = uint64_t(f.HV), Tc = uint64_t(w.c.T_cap), NT = uint64_t(w.nt_cap), T = uint64_t(f.T_total);
  constexpr uint64_t kLim = uint64_t(1) << 31;
  auto a16 = [](const void* x) { return x != nullptr && (reinterpret_cast<uintptr_t>(x) & 15) == 0; };
  if (f.V != 128 || NT == 0 || T == 0 || NT * HV * kK >= kLim || HV * Tc >= kLim || T >= kLim) return false;
  if (!a16(w.hS) || !a16(w.hdS) || !a16(w.vh) || !a16(w.dvh) || !a16(w.c.Ai) || !a16(f.q) || !a16(f.k)) return false;
  const bool bf = f.io == ElemType::kBF16;
  const uint64_t V = 128, QK = uint64_t(f.H) * kK;
  m.S = make_tma_2d_sw128(w.hS, bf, NT * HV * kK, V, V, kK);
  m.dS = make_tma_2d_sw128(w.hdS, bf, NT * HV * kK, V, V, kK);
  m.vh = make_tma_2d_sw128(w.vh, bf, HV * Tc, V, V, kBT);
  m.dvh = make_tma_2d_sw128(w.dvh, bf, HV * Tc, V, V, kBT);
  m.ai = make_tma_2d_sw128(w.c.Ai, bf, HV * Tc, kBT, kBT, kBT);
  m.q = make_tma_2d_sw128(f.q, bf, T, QK, QK, kBT);
  m.k = make_tma_2d_sw128(f.k, bf, T, QK, QK, kBT);
  m.dO = w.do_direct ? make_tma_2d_sw128(p.d_o, bf, T, HV * V, HV * V, kBT) : CUtensorMap{};
  return true;
}

template <class T, int V>
void launch_t(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(w.nt_cap), p.f.H);
  const std::string mode = chunk_switch();
  if (mode == "wg") {
    launch(gdn_bwd_chunk_wg_kernel<T, V, false, false>, grid, dim3(kNT), wg_smem_bytes<V, false>(), stream, p, w, NoMaps{});
    return;
  }
  // wg4 and its successors (the default: wg12) and wg3 / wg5: V = 128 only (at V = 64
  // ptxas spills more with them: 184 B of reloads vs V2's 96) and T_total < 2^31 (t0 in 32 bits)
  if constexpr (V == 128) {
    const bool w9ps = mode.rfind("wg9ps", 0) == 0, w9p = !w9ps && mode.rfind("wg9p", 0) == 0;
    if ((w9p || w9ps || mode.rfind("wg6", 0) == 0) && p.f.T_total < (int64_t(1) << 31) - kBT) {
      // wg6 / wg9p / wg9ps: one persistent CTA per SM (1 fits), at most one per item; ":N" caps the count at N
      int64_t ctas = std::min<int64_t>(current_device_info().sm_count, w.nt_cap * p.f.H);
      const size_t colon = mode.find(':');
      if (colon != std::string::npos)
        ctas = std::min<int64_t>(ctas, std::max(1L, std::strtol(mode.c_str() + colon + 1, nullptr, 10)));
      const dim3 pgrid(static_cast<unsigned>(std::max<int64_t>(ctas, 0)));
      constexpr size_t kPerSmem = wg_smem_bytes<V, true, true>();
      if (w9ps) {
        g_wg9_launches.fetch_add(1);
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 9, true>, pgrid, dim3(kNT), wg7_smem_bytes<V>(), stream, p, w, NoMaps{});
      } else if (w9p) {
        g_wg9_launches.fetch_add(1);
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 8, true>, pgrid, dim3(kNT), kPerSmem, stream, p, w, NoMaps{});
      } else {
        g_wg6_launches.fetch_add(1);
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 1, true>, pgrid, dim3(kNT), kPerSmem, stream, p, w, NoMaps{});
      }
      return;
    }
    if (mode != "wg2" && mode != "wg3" && p.f.T_total < (int64_t(1) << 31) - kBT) {
      if (mode == "wg5") {
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 2>, grid, dim3(kNT), wg_smem_bytes<V, true>(), stream, p, w, NoMaps{});
      } else if (mode == "wg8d") {  // opt-in (gdnbwd10: the decays once per head)
        g_wg8d_launches.fetch_add(1);
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 5>, grid, dim3(kNT), wg7_smem_bytes<V>(), stream, p, w, NoMaps{});
      } else if (mode == "wg9" || mode == "wg9d") {
        // wg9d the default from session 14 to session 15 (gdnbwd11: the row scalars one round trip deep, bitwise wg7; H200 A/B at
        // 5bd3b72, 16/32 1x32768 with the cache: backward 3.29 / 3.27 -> 2.787 / 2.785 ms, wg9 2.84 / 2.83)
        g_wg9_launches.fetch_add(1);
        if (mode == "wg9") {
          launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 6>, grid, dim3(kNT), wg7_smem_bytes<V>(), stream, p, w, NoMaps{});
        } else {
          g_wg9d_launches.fetch_add(1);
          launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 7>, grid, dim3(kNT), wg7_smem_bytes<V>(), stream, p, w, NoMaps{});
        }
      } else if (ChunkMaps maps{}; (mode == "wg12" || mode.empty()) && chunk_maps(p, w, maps)) {
        // wg12 the default since session 16 (gdnbwd14: wg11 with a full chunk's tiles by TMA and the last finish under
        // the staged stores, bitwise wg11; H200 A/B at 75a0119, 16/32 1x32768 with the cache: backward 2.677 / 2.671
        // -> 2.564 / 2.561 ms)
        g_wg12_launches.fetch_add(1);
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 11, false, ChunkMaps>, grid, dim3(kNT), wg7_smem_bytes<V>(),
               stream, p, w, maps);
      } else if (mode == "wg11" || mode == "wg12" || mode.empty()) {
        // wg11 (the default in session 15; unset / "wg12" where wg12's maps cannot be built) (gdnbwd13: the finishing
        // passes' shared loads ahead of the waits, bitwise wg9d; H200 A/B at a438559: backward 2.771 -> 2.681 ms)
        g_wg11_launches.fetch_add(1);
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 10>, grid, dim3(kNT), wg7_smem_bytes<V>(), stream, p, w, NoMaps{});
      } else if (mode == "wg7") {  // wg7 the default from 1ec4943 to session 14 ("wg4" keeps V4)
        g_wg7_launches.fetch_add(1);
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 3>, grid, dim3(kNT), wg7_smem_bytes<V>(), stream, p, w, NoMaps{});
      } else {
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 1>, grid, dim3(kNT), wg_smem_bytes<V, true>(), stream, p, w, NoMaps{});
      }
      return;
    }
    if (mode == "wg3" && p.f.T_total < (int64_t(1) << 31) - kBT) {
      launch(gdn_bwd_chunk_wg_kernel<T, V, true, true>, grid, dim3(kNT), wg_smem_bytes<V, true>(), stream, p, w, NoMaps{});
      return;
    }
  }
  launch(gdn_bwd_chunk_wg_kernel<T, V, true, false>, grid, dim3(kNT), wg_smem_bytes<V, true>(), stream, p, w, NoMaps{});
}

}  // namespace

// LINATTN_CUDA_GDN_BWD_CHUNK: "mma" = the mma.sync kernel (kept for A/B runs); "wg" = this kernel's
// first version (V1); "wg2" = V2 (the instruction diet and the off-critical-path finish; the
// default from 7c12eef); "wg3" = V3 (the default from 0253e2d: values equal to V2 bit for bit,
// backward 7.0% / 6.6% faster at 16/32 1x32768 / 1x8192); "wg5" = V5; unset (until 1ec4943) / "wg4" = V4 at
// V = 128 (V2 at V = 64) where eligible: the default since the H200 A/B at 95f8975 (test_cuda_gdn_bwd
// 65/65 with wg4 / wg5 bitwise equal to wg3 on every case, backward 4.20 / 4.19 -> 4.117 / 4.111 ms
// at 16/32 1x32768 in two interleaved rounds; wg5 4.157 / 4.176); "wg7" = V7 (the default until session 14);
// "wg8d" = V8d (opt-in); "wg9d" = V9d (the default in session 14); "wg9" / "wg9p" / "wg9ps" = V9 / V9p /
// V9ps (opt-in); "wg11" = V11 (the default in session 15); "wg12" = V12 (unset: the default since session 16; V11
// where its tensor maps cannot be built). Since session 12 a value that names none of these (the removed "wg8" / "wg10", a typo) is an error
// (chunk_switch), no longer a silent V4.
bool gdn_bwd_chunk_wg_eligible(const GdnFwdParams& f) {
  if (chunk_switch() == "mma") return false;
  return f.BT == kBT && f.K == kK && (f.V == 64 || f.V == 128) &&
         (f.io == ElemType::kBF16 || f.io == ElemType::kF16) && current_device_info().cc_major == 9;
}

int64_t gdn_bwd_chunk_wg6_launches() { return g_wg6_launches.load(); }
int64_t gdn_bwd_chunk_wg7_launches() { return g_wg7_launches.load(); }
int64_t gdn_bwd_chunk_wg8d_launches() { return g_wg8d_launches.load(); }
int64_t gdn_bwd_chunk_wg9_launches() { return g_wg9_launches.load(); }
int64_t gdn_bwd_chunk_wg9d_launches() { return g_wg9d_launches.load(); }
int64_t gdn_bwd_chunk_wg11_launches() { return g_wg11_launches.load(); }
int64_t gdn_bwd_chunk_wg12_launches() { return g_wg12_launches.load(); }

void launch_gdn_bwd_chunk_wg(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  LINATTN_CHECK(p.f.BT == kBT && p.f.K == kK, "gdn bwd chunk wg: BT must be ", kBT, " and K ", kK, ", got ", p.f.BT,
                " and ", p.f.K);
  const bool bf = p.f.io == ElemType::kBF16;
  if (p.f.V == 128) return bf ? launch_t<__nv_bfloat16, 128>(p, w, stream) : launch_t<__half, 128>(p, w, stream);
  if (p.f.V == 64) return bf ? launch_t<__nv_bfloat16, 64>(p, w, stream) : launch_t<__half, 64>(p, w, stream);
  LINATTN_UNSUPPORTED("gdn bwd chunk wg: V = ", p.f.V, " (supported: 64, 128)");
}

}  // namespace linattn::cuda
