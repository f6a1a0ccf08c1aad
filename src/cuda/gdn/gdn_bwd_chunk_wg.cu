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
// V4 ("wg4", the default at V = 128 since 95f8975's A/B): V3 with two pairs of independent products
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
// V9 / V9d ("wg9" / "wg9d", opt-in; template V4 = 6 / 7): V7 / V8d with each head's row scalars (gam, beta, the
// finish's gate / beta draws) split over 8 warps by kind (one global round trip per thread where V2's warps
// 2-3 made four in a row before the head's first barrier), and head 1's computed with head 0's at head 0's
// start, so head 1's first barrier waits for no global load; head 0's loads go out ahead of its tiles. Same
// values as V7 bit for bit. V9p ("wg9p", "wg9p:N"; V4 = 8, kPer): V6 (persistent) with the same row scalars,
// an item's heads 0 and 1 at the item's start. Same values as V4 bit for bit. V9ps ("wg9ps", "wg9ps:N"; V4 = 9,
// kPer): V9 in persistent CTAs (split loads for the next item too: its Ai / dV^ at the last head's second barrier,
// the rest at its third, q / k after the epilogue; the last finish where V7 has it). Same values as V7 bit for bit.
// sm_90a only; the other targets never launch it (gdn_bwd_chunk_wg_eligible).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <string>

#include "core/env.h"
#include "core/util.h"
#include "cuda/common/device_info.h"
#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_bwd_chunk_common.cuh"
#include "cuda/gdn/gdn_bwd_chunk_wg.cuh"
#include "cuda/gdn/gdn_bwd_chunk_wg.h"
#include "cuda/gdn/gdn_bwd_chunk_wg_smem.cuh"

namespace linattn::cuda {
namespace {
using namespace gdn_bwd_chunk_detail;
using namespace gdn_bwd_chunk_wg_detail;


template <class T, int V, bool V2, bool V3, int V4 = 0, bool kPer = false>
__global__ void __launch_bounds__(kNT, 1) gdn_bwd_chunk_wg_kernel(GdnBwdParams p, GdnBwdWs w) {
  static_assert(!V3 || V2, "wg3 extends wg2");
  static_assert(V4 == 0 || V3, "wg4 / wg5 extend wg3");
  static_assert(!kPer || V4 == 1 || V4 == 8 || V4 == 9, "wg6 / wg9p are wg4, wg9ps wg9, in persistent CTAs");
  // wg7 (V4 == 3): wg4 with each head's tiles in two cp.async groups (split load, see the header)
  // wg8d (V4 == 5): wg7 with each M element's decay computed once per head (under the first M product)
  // for both halves (V4 == 4, wg8, was removed)
  // wg9 / wg9d (V4 == 6 / 7): wg7 / wg8d with the row scalars split over 8 warps per head (one global round
  // trip each), heads 0 and 1 both at head 0's start (head 1's start loads nothing); wg9p (V4 == 8, kPer):
  // wg6 with the same row scalars, an item's heads 0 and 1 at the item's start; wg9ps (V4 == 9, kPer): wg9's split
  // loads in persistent CTAs (the next item's Ai / dV^ at the last head's second barrier, the rest at its third,
  // q / k after the epilogue), the row scalars as wg9p's, the last finish where wg7 has it
  static_assert(V4 != 4, "wg8 (V4 = 4) was removed in session 12");
  static_assert((V4 != 8 && V4 != 9) || kPer, "wg9p / wg9ps are persistent");
  constexpr bool kW8 = V4 == 5 || V4 == 7, kD9 = V4 >= 6, kSplit = V4 == 3 || kW8 || V4 == 6 || V4 == 9;
  // wg9 / wg9d: the last head's finish (warp 0) after the epilogue's stores instead of before its first barrier
  constexpr bool kLateFin = kSplit && kD9 && !kPer;
  static_assert(!kSplit || !kPer || V4 == 9, "wg7 / wg8d / wg9 / wg9d are not persistent");
  using Sm = WgSmem<V>;
  constexpr int CV = V / kWN, NTV = CV / 8, NTK = 4, NTB = 2;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Sm& s = *reinterpret_cast<Sm*>(smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u));
  const GdnFwdParams& f = p.f;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  // wg6: the CTA's items blockIdx.x, + gridDim.x, ... (find_item); slot 0 holds the first, whose
  // loads go out here as every later item's do: head 0's tiles, then q / k (two groups).
  WgPer& pr = *reinterpret_cast<WgPer*>(reinterpret_cast<WgRows*>(&s + 1) + 1);
  // wg7: partial set b (0: WgSmem's, 1: WgRed's; head jj writes set jj & 1, the epilogue set G & 1)
  WgRed& rd2 = *reinterpret_cast<WgRed*>(&pr + 1);
  auto red_of = [&](int b) -> float(*)[kBT][kWN] { return kSplit && b ? rd2.red : s.red; };
  if constexpr (kPer) {
    if (tid == 0) pr.nx[0] = find_item(p, w, blockIdx.x, gridDim.x);
    __syncthreads();
    const WgItem first = pr.nx[0];
    if (first.len <= 0) return;
    if constexpr (kSplit) {  // wg9ps: the three groups a later item finds in flight (Ai / dV^, the rest, q / k)
      const int j0 = first.h * (f.HV / f.H);
      load_head_part<T, V, 0>(s, p, w, first.r, first.t0, first.len, j0, tid);
      cp_async_commit();
      load_head_part<T, V, 1>(s, p, w, first.r, first.t0, first.len, j0, tid);
      cp_async_commit();
    } else {
      load_head_wg<T, V, V2, V3>(s, p, w, first.r, first.t0, first.len, first.h * (f.HV / f.H), tid);
      cp_async_commit();
    }
    load_item_qk<T, V, V2>(s, f, w, first.t0, first.len, first.h, tid);
    cp_async_commit();
  }
  for (int item = 0;; ++item) {
    // wg6: this item (slot item & 1, by value: thread 32 rewrites the other slot at the next item's
    // start, while a thread still in this item's tail may read nx) and the next one (nx, by thread 32,
    // read after the first barrier)
    WgItem it{};
    WgItem* const nx = &pr.nx[(item + 1) & 1];
    if constexpr (kPer) {
      it = pr.nx[item & 1];
      // (wg9ps: under head 0's Y instead, so head 0's first barrier does not wait for its index loads; read
      // first after head 0's second barrier)
      if (!kSplit && tid == 32) *nx = find_item(p, w, it.i + gridDim.x, gridDim.x);
    }
    const int64_t r = kPer ? it.r : int64_t(blockIdx.x);
    const int h = kPer ? it.h : int(blockIdx.y), G = f.HV / f.H;
    int64_t n = 0, c = 0;  // (wg6: the item came resolved from find_item)
    if constexpr (!kPer) {
      if (w.chunk_indices) {
        n = w.chunk_indices[2 * r];
        c = w.chunk_indices[2 * r + 1];
        if (n < 0) return;  // sentinel row: touch nothing
      } else {
        n = r / w.nts;
        c = r % w.nts;
      }
    }
    int64_t bos = 0, eos = 0;
    if constexpr (!kPer) seq_bounds(f, n, bos, eos);
    // wg3 (launched only when T_total < 2^31): t0 known to be a sign-extended 32-bit value, so its
    // high word is one shift away instead of a register live through the head loop (spilled)
    const int64_t t0 = kPer ? int64_t(int32_t(it.t0)) : V3 ? int64_t(int32_t(bos + c * kBT)) : bos + c * kBT;
    const int len = kPer ? it.len : static_cast<int>(min(int64_t(kBT), eos - t0));
    if (len <= 0) return;
    // warpgroup wn, row group wm (wg2: wn broadcast from lane 0, so the compiler keeps the
    // descriptor arithmetic that depends on it in uniform registers)
    const int wm = warp & 3, wn = V2 ? __shfl_sync(0xffffffffu, warp >> 2, 0) : warp >> 2, r0 = 16 * wm + g;
    const int ck = wn * 32, cv = wn * CV, cb = wn * 16;
    // wg2: per-thread swizzled fragment offsets (frag_base) of the K-, V- and BT-column tiles
    const uint32_t fbk = frag_base<kBT>(ck, wm, g, tq), fbv = frag_base<kBT>(cv, wm, g, tq),
                   fbb = frag_base<kBT>(cb, wm, g, tq);
    WgRows& rs = *reinterpret_cast<WgRows*>(&s + 1);  // wg2 only
    // wg7: warp 0's finish of head jf from partial set jf & 1 (as wg4's, with the set's pointers)
    auto finish_wg7 = [&](int jf) {
      const int b = jf & 1;
      const WgRedView v{red_of(b), b ? rd2.redc : s.redc, b ? rd2.wred : s.wred, s.rq, s.rk};
      finish_rows_core<kBT, kNW>(
          v, rs.gam[b], rs.beta[b], [&](int i, int64_t) { return RowDraws{rs.gate[b][i], rs.dA[b][i], rs.bdraw[b][i]}; },
          p, w, r, t0, len, h * G + jf, lane);
    };

    if constexpr (kSplit && !kPer) {  // wg7: head 0's Ai / dV^ first (its own group), then q / k and the rest
      // wg9: the row scalars of heads 0 (threads 0-255) and 1 (256-511, G > 1) in roles of 64 threads
      // (row_scalar_load), their loads issued ahead of the 152 KB of tiles, stored after them
      [[maybe_unused]] RowRaw raw{};
      [[maybe_unused]] const int jh0 = tid >> 8, role0 = (tid >> 6) & 3;
      if constexpr (kD9)
        if (jh0 < G) raw = row_scalar_load(p, w, t0, len, h * G + jh0, role0, tid & 63);
      load_head_part<T, V, 0>(s, p, w, r, t0, len, h * G, tid);
      cp_async_commit();
      load_item_qk<T, V, V2>(s, f, w, t0, len, h, tid);
      load_head_part<T, V, 1>(s, p, w, r, t0, len, h * G, tid);
      cp_async_commit();
      if constexpr (kD9)
        if (jh0 < G) row_scalar_store(rs, p, len, jh0 & 1, role0, tid & 63, raw);
    } else if constexpr (!kPer) {  // wg6: issued before the loop (first item) or by the previous item
      load_item_qk<T, V, V2>(s, f, w, t0, len, h, tid);
      load_head_wg<T, V, V2, V3>(s, p, w, r, t0, len, h * G, tid);
      cp_async_commit();
    }

    float dqA[NTK][4] = {}, dkA[NTK][4] = {};
    for (int jj = 0; jj < G; ++jj) {
      const int j = h * G + jj;
      // this head's row scalars (wg2: buffer jj & 1, by warps 2-3, which do not run warp 0's
      // finish of the previous head, plus the finish's gate / beta draws)
      float* const gam = V2 ? rs.gam[jj & 1] : s.gam;
      float* const beta = V2 ? rs.beta[jj & 1] : s.beta;
      if (!V2 && tid < kBT) {
        const bool valid = tid < len;
        s.gam[tid] = valid ? w.c.gam[j * w.c.T_cap + t0 + tid] : 0.f;
        s.beta[tid] = valid ? gdn_beta(f, t0 + tid, j) : 0.f;
      }
      if constexpr (kD9) {
        // wg9: heads 0 and 1 were done before the loop (buffer 1 is read first at head 1's start, so that start
        // loads nothing). A head jj >= 2 (G > 2) loads its own at its start (threads 0-255), into the buffer
        // whose last reader, the finish of head jj - 2, ran before head jj - 1's second barrier (as in V2).
        // wg9p: an item's heads 0 and 1 at its start (no raw-register split: its tiles went out under the previous
        // item); the previous item's last finish (warp 0) read its buffer before the epilogue's barriers.
        // wg9ps: only the first item here; a later item's come from the previous item's end (below)
        if (kPer && jj == 0 && (!kSplit || item == 0)) {
          const int jh = tid >> 8, role = (tid >> 6) & 3, i = tid & 63;
          if (jh < G) row_scalar_store(rs, p, len, jh, role, i, row_scalar_load(p, w, t0, len, h * G + jh, role, i));
        }
        if (jj >= 2 && tid < kNT / 2) {
          const int role = tid >> 6, i = tid & 63;
          row_scalar_store(rs, p, len, jj & 1, role, i, row_scalar_load(p, w, t0, len, j, role, i));
        }
      } else if (V2 && tid >= kBT && tid < 2 * kBT) {
        const int i = tid - kBT, b = jj & 1;
        const bool valid = i < len;
        gam[i] = valid ? w.c.gam[j * w.c.T_cap + t0 + i] : 0.f;
        beta[i] = valid ? gdn_beta(f, t0 + i, j) : 0.f;
        const RowDraws rd = valid ? row_draws(p, t0 + i, j) : RowDraws{0.f, 0.f, 0.f};
        rs.gate[b][i] = rd.gate;
        rs.dA[b][i] = rd.dA;
        rs.bdraw[b][i] = rd.beta;
      }
      if constexpr (kPer && kSplit) {  // wg9ps: head 0 needs Ai / dV^ of three groups, a later head of two
        if (jj == 0) cp_async_wait<2>();
        else cp_async_wait<1>();
      } else if constexpr (kPer) {  // wg6: head 0 leaves the item's q / k (its last group) in flight, under Y
        if (jj == 0) cp_async_wait<1>();
        else cp_async_wait<0>();
      } else if constexpr (kSplit) {  // wg7: the head's Ai / dV^ only; the rest lands under Y
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      fence_view_async_shared();  // cp.async data -> the async proxy (wgmma)
      __syncthreads();

      const float gl = gam[len - 1];
      float eg[2], egl[2], bv[2], neg_beg[2];
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int rr = r0 + 8 * hf;
        const bool valid = rr < len;
        eg[hf] = valid ? exp2f(gam[rr]) : 0.f;
        egl[hf] = valid ? exp2f(gl - gam[rr]) : 0.f;
        bv[hf] = beta[rr];
        neg_beg[hf] = -bv[hf] * eg[hf];
      }
      // Row dots, flushed to s.red[q]: 0 Y.v, 1 q.dq_inter, 2 k.dk_inter, 3 rowsum(M), 4 k.(R K^),
      // 5 k.xn (q, k raw; the row scales are applied in finish_rows).

      if constexpr (V4 != 2) {  // Y = Ai^T dV^ (own buffer: no wait for the other warpgroups' reads of dV^); Y.v
        float Y[NTV][4] = {};
        // wg7: this thread's v pairs of the Y.v row dot are loaded while Y is on the tensor pipe
        // (same values, same operations after it: ld_pair of the same 32-bit words)
        [[maybe_unused]] uint32_t vraw[2][NTV];
        if constexpr (kSplit) {
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTV]>(Y));
          wgmma_fence();
          wg_issue_v<V2, T, CV, kBT, true, true, kBT>(Y, s.ai, s.dvh, cv);
          wgmma_commit();
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
            int rv = r0 + 8 * hf;
            asm volatile("mov.b32 %0, %1;" : "=r"(rv) : "r"(rv));
            const T* vrow = static_cast<const T*>(f.v) + ((t0 + rv) * f.HV + j) * int64_t(V);
#pragma unroll
            for (int nt = 0; nt < NTV; ++nt)
              vraw[hf][nt] = rv < len ? *reinterpret_cast<const uint32_t*>(vrow + cv + nt * 8 + 2 * tq) : 0u;
          }
          // the previous head's finish (warp 0), under Y and the other warps' Y.v: its partial set is
          // not the one this head writes, its row scalars not the buffer this head's start wrote
          if (jj > 0 && warp == 0) finish_wg7(jj - 1);
          if constexpr (kPer) {  // wg9ps: the next item (see the item's start)
            if (jj == 0 && tid == 32) *nx = find_item(p, w, it.i + gridDim.x, gridDim.x);
          }
          wgmma_wait<0>();
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTV]>(Y));
        } else {
          wg_tile_v<V2, T, CV, kBT, true, true, kBT>(Y, s.ai, s.dvh, cv);
        }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf)
#pragma unroll
          for (int nt = 0; nt < NTV; ++nt)
            st_pair(V2 ? reinterpret_cast<T*>(s.y + frag_off(fbv, hf, nt))
                       : sw_at<T, kBT>(s.y, r0 + 8 * hf, cv + nt * 8 + 2 * tq),
                    Y[nt][2 * hf], Y[nt][2 * hf + 1]);
        float yv[2] = {};
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int rr = r0 + 8 * hf;
          if (rr >= len) continue;
          // wg3: the row from an opaque copy of rr, so the row pointers are not hoisted out of the
          // head loop into spilled registers (their reloads sat in front of these loads)
          int rv = rr;
          if constexpr (V3) asm volatile("mov.b32 %0, %1;" : "=r"(rv) : "r"(rr));
          const T* vrow = static_cast<const T*>(f.v) + ((t0 + rv) * f.HV + j) * int64_t(V);
#pragma unroll
          for (int nt = 0; nt < NTV; ++nt) {
            const float2 vv = kSplit ? ld_pair(reinterpret_cast<const T*>(&vraw[hf][nt]))
                                     : ld_pair(vrow + cv + nt * 8 + 2 * tq);
            yv[hf] += Y[nt][2 * hf] * vv.x + Y[nt][2 * hf + 1] * vv.y;
          }
        }
        flush_rowdot<kBT>(red_of(jj & 1), 0, yv, r0, wn, tq);
      }
      if constexpr (kSplit) {
        // wg7: the head's second barrier moves here (before dq_inter / dk_inter, which read the
        // second group; xn after them needs only Y visible, which it is): second group landed and
        // visible to wgmma, Y visible to every warpgroup. Ai / dV^ are dead from here on (only Y
        // read them): the next head's go out now, a third of a head earlier than wg4's tiles.
        cp_async_wait<0>();
        fence_view_async_shared();
        __syncthreads();
        if (jj + 1 < G) {
          load_head_part<T, V, 0>(s, p, w, r, t0, len, j + 1, tid);
        } else if constexpr (kPer) {  // wg9ps: the next item's head 0 (nx was set before the first barrier)
          if (nx->len > 0) load_head_part<T, V, 0>(s, p, w, nx->r, nx->t0, nx->len, nx->h * G, tid);
        }
        cp_async_commit();
      }
      if constexpr (kPer && !kSplit) {  // wg6: the item's q / k, read from the row dots of the pair below on
        if (jj == 0) {
          cp_async_wait<0>();
          fence_view_async_shared();
          __syncthreads();
        }
      }
      // wg5: the Y block below as a lambda, run when Y lands (Y issued with dq_inter / dk_inter)
      auto y_finish = [&](float (&Y)[NTV][4]) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf)
#pragma unroll
          for (int nt = 0; nt < NTV; ++nt)
            st_pair(V2 ? reinterpret_cast<T*>(s.y + frag_off(fbv, hf, nt))
                       : sw_at<T, kBT>(s.y, r0 + 8 * hf, cv + nt * 8 + 2 * tq),
                    Y[nt][2 * hf], Y[nt][2 * hf + 1]);
        float yv[2] = {};
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int rr = r0 + 8 * hf;
          if (rr >= len) continue;
          // wg3: the row from an opaque copy of rr, so the row pointers are not hoisted out of the
          // head loop into spilled registers (their reloads sat in front of these loads)
          int rv = rr;
          if constexpr (V3) asm volatile("mov.b32 %0, %1;" : "=r"(rv) : "r"(rr));
          const T* vrow = static_cast<const T*>(f.v) + ((t0 + rv) * f.HV + j) * int64_t(V);
#pragma unroll
          for (int nt = 0; nt < NTV; ++nt) {
            const float2 vv = ld_pair(vrow + cv + nt * 8 + 2 * tq);
            yv[hf] += Y[nt][2 * hf] * vv.x + Y[nt][2 * hf + 1] * vv.y;
          }
        }
        flush_rowdot<kBT>(s.red, 0, yv, r0, wn, tq);
      };
      // wg4: dq_inter = scale e^gam (dO S^T), dk_inter = e^(gL - gam) (V^ dS'^T) finished as the
      // else branch below does (same operations, same order)
      auto inter_q = [&](float (&t)[NTK][4]) {
        const float sc[2] = {f.scale * eg[0], f.scale * eg[1]};
        scale_rows(t, sc);
        float pq1[2] = {};
        rowdot_v<V2, T, NTK>(pq1, t, s.q, r0, ck, tq, fbk);
        flush_rowdot<kBT>(red_of(jj & 1), 1, pq1, r0, wn, tq);
        const float one[2] = {1.f, 1.f};
        add_scaled(dqA, t, one);
      };
      auto inter_k = [&](float (&t)[NTK][4]) {
        scale_rows(t, egl);
        float pk1[2] = {};
        rowdot_v<V2, T, NTK>(pk1, t, s.k, r0, ck, tq, fbk);
        flush_rowdot<kBT>(red_of(jj & 1), 2, pk1, r0, wn, tq);
        const float one[2] = {1.f, 1.f};
        add_scaled(dkA, t, one);
      };
      if constexpr (V4 > 0) {  // wg4: dq_inter and dk_inter issued back to back, each finished as it lands
        float Y[NTV][4] = {}, tq_[NTK][4] = {}, tk_[NTK][4] = {};  // Y: wg5 only
        wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(tq_));
        wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(tk_));
        if constexpr (V4 == 2) wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTV]>(Y));
        wgmma_fence();
        if constexpr (V4 == 2) {  // wg5: Y first, finished (its Y.v row dot's loads) under the two products
          wg_issue_v<V2, T, CV, kBT, true, true, kBT>(Y, s.ai, s.dvh, cv);
          wgmma_commit();
        }
        wg_issue_v<V2, T, 32, V, false, false, kK>(tq_, s.dO, s.S, ck);
        wgmma_commit();
        wg_issue_v<V2, T, 32, V, false, false, kK>(tk_, s.vh, s.dS, ck);
        wgmma_commit();
        if constexpr (V4 == 2) {
          wgmma_wait<2>();
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTV]>(Y));
          y_finish(Y);
        }
        wgmma_wait<1>();
        wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(tq_));
        inter_q(tq_);
        wgmma_wait<0>();
        wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(tk_));
        inter_k(tk_);
      } else {
        {  // dq_inter = scale e^gam (dO S^T)
          float t[NTK][4] = {};
          wg_tile_v<V2, T, 32, V, false, false, kK>(t, s.dO, s.S, ck);
          const float sc[2] = {f.scale * eg[0], f.scale * eg[1]};
          scale_rows(t, sc);
          float pq1[2] = {};
          rowdot_v<V2, T, NTK>(pq1, t, s.q, r0, ck, tq, fbk);
          flush_rowdot<kBT>(s.red, 1, pq1, r0, wn, tq);
          const float one[2] = {1.f, 1.f};
          add_scaled(dqA, t, one);
        }
        {  // dk_inter = e^(gL - gam) (V^ dS'^T)
          float t[NTK][4] = {};
          wg_tile_v<V2, T, 32, V, false, false, kK>(t, s.vh, s.dS, ck);
          scale_rows(t, egl);
          float pk1[2] = {};
          rowdot_v<V2, T, NTK>(pk1, t, s.k, r0, ck, tq, fbk);
          flush_rowdot<kBT>(s.red, 2, pk1, r0, wn, tq);
          const float one[2] = {1.f, 1.f};
          add_scaled(dkA, t, one);
        }
      }
      // <S, dS'> (same layout: 16-byte pieces in address order; block partials in a fixed order)
      auto s_dot_ds = [&] {
        float acc = 0.f;
        for (int idx = tid; idx < kK * V / 8; idx += kNT)
          acc += dot8<T>(reinterpret_cast<const uint4*>(s.S)[idx], reinterpret_cast<const uint4*>(s.dS)[idx]);
        acc = warp_sum(acc);
        if (lane == 0) (kSplit && (jj & 1) ? rd2.wred : s.wred)[warp] = acc;
      };
      if constexpr (!V3) s_dot_ds();
      if constexpr (!kSplit) {  // (wg7: above, before dq_inter / dk_inter)
        fence_view_async_shared();
        __syncthreads();  // Y visible to every warpgroup
      }

      {  // xn = Y S^T: dk^ -= beta e^gam xn
        float t[NTK][4] = {};
        if constexpr (V3) {  // wg3: <S, dS'> runs while the product is in flight (both only read S)
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(t));
          wgmma_fence();
          wg_issue_v<V2, T, 32, V, false, false, kK>(t, s.y, s.S, ck);
          wgmma_commit();
          s_dot_ds();
          wgmma_wait<0>();
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(t));
        } else {
          wg_tile_v<V2, T, 32, V, false, false, kK>(t, s.y, s.S, ck);
        }
        float pk[2] = {};
        rowdot_v<V2, T, NTK>(pk, t, s.k, r0, ck, tq, fbk);
        flush_rowdot<kBT>(red_of(jj & 1), 5, pk, r0, wn, tq);
        add_scaled(dkA, t, neg_beg);
      }
      {  // Pd = scale M o D o (dO V^^T), R = -M- o D o (Y V^^T), staged with their row / column scales;
         // M = Pd o (Q^ K^^T) + diag(beta) R o (K^ K^^T) in two halves (16 accumulators live, not 32)
        float rowM[2] = {}, colM[NTB][2] = {};
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          float pl[NTB][4] = {}, xk[NTB][4] = {};  // half 0: dO V^^T, Q K^T; half 1: Y V^^T, K K^T
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTB]>(pl));
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTB]>(xk));
          wgmma_fence();
          wg_issue_v<V2, T, 16, V, false, false, kBT>(pl, half == 0 ? s.dO : s.y, s.vh, cb);
          if constexpr (kSplit) {
            // wg7: the two products in two groups: X (into pl) and the staged Pd / R stores run while
            // Q K^T / K K^T is on the tensor pipe, then M's row / column sums (same operations and
            // order as below: X, the stores, then m = X (xk ..) into rowM / colM)
            wgmma_commit();
            wg_issue_v<V2, T, 16, kK, false, false, kBT>(xk, half == 0 ? s.q : s.k, s.k, cb);
            wgmma_commit();
            if constexpr (kW8) {  // half 0, under the first product: the values the element loop computes,
              // kept in this thread's own staging slots of R / beta R (4 bytes each, written by no other
              // thread and read by no one between this head's first barrier and its R stores), where
              // both halves' element loops read them (see decay_frag for what spilled)
              if (half == 0) {
                float dd[2][NTB][2];
                decay_frag<NTB>(dd, gam, r0, cb + 2 * tq, len);
#pragma unroll
                for (int hf = 0; hf < 2; ++hf)
#pragma unroll
                  for (int nt = 0; nt < NTB; ++nt) {
                    *reinterpret_cast<float*>(s.rm + frag_off(fbb, hf, nt)) = dd[hf][nt][0];
                    *reinterpret_cast<float*>(s.rb + frag_off(fbb, hf, nt)) = dd[hf][nt][1];
                  }
              }
            }
            wgmma_wait<1>();
            wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTB]>(pl));
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              const int i = r0 + 8 * hf;
              const float gi = gam[i], rqi = s.rq[i], brk = bv[hf] * s.rk[i];
#pragma unroll
              for (int nt = 0; nt < NTB; ++nt) {
                const int c0 = cb + nt * 8 + 2 * tq;
                float(&X)[4] = pl[nt];  // X of row i, column c0 + e at 2 hf + e
                float rkc[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                  const int jc = c0 + e;
                  float d;
                  if constexpr (kW8) d = *reinterpret_cast<const float*>((e ? s.rb : s.rm) + frag_off(fbb, hf, nt));
                  else d = (i < len && jc <= i) ? exp2f(gi - gam[jc]) : 0.f;
                  rkc[e] = s.rk[jc];
                  X[2 * hf + e] = half == 0 ? f.scale * d * X[2 * hf + e] : jc < i ? -d * X[2 * hf + e] : 0.f;
                }
                const uint32_t o = frag_off(fbb, hf, nt);
                const float x0 = X[2 * hf], x1 = X[2 * hf + 1];
                st_pair(reinterpret_cast<T*>((half == 0 ? s.pk : s.rm) + o), x0 * rkc[0], x1 * rkc[1]);
                if (half == 0) st_pair(reinterpret_cast<T*>(s.pq + o), rqi * x0, rqi * x1);
                else st_pair(reinterpret_cast<T*>(s.rb + o), brk * x0, brk * x1);
              }
            }
            wgmma_wait<0>();
            wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTB]>(xk));
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              const int i = r0 + 8 * hf;
              const float rqi = s.rq[i], brk = bv[hf] * s.rk[i];
#pragma unroll
              for (int nt = 0; nt < NTB; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                  const float X = pl[nt][2 * hf + e], rkc = s.rk[cb + nt * 8 + 2 * tq + e];
                  const float m = half == 0 ? X * (xk[nt][2 * hf + e] * rqi * rkc) : brk * X * (xk[nt][2 * hf + e] * rkc);
                  rowM[hf] += m;
                  colM[nt][e] += m;
                }
            }
            continue;
          }
          wg_issue_v<V2, T, 16, kK, false, false, kBT>(xk, half == 0 ? s.q : s.k, s.k, cb);
          wg_sync(pl);
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTB]>(xk));
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
            const int i = r0 + 8 * hf;
            const float gi = gam[i], rqi = s.rq[i], brk = bv[hf] * s.rk[i];
#pragma unroll
            for (int nt = 0; nt < NTB; ++nt) {
              const int c0 = cb + nt * 8 + 2 * tq;
              float X[2], rkc[2];
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const int jc = c0 + e;
                const float d = (i < len && jc <= i) ? exp2f(gi - gam[jc]) : 0.f;
                rkc[e] = s.rk[jc];
                float m;
                if (half == 0) {
                  X[e] = f.scale * d * pl[nt][2 * hf + e];
                  m = X[e] * (xk[nt][2 * hf + e] * rqi * rkc[e]);
                } else {
                  X[e] = jc < i ? -d * pl[nt][2 * hf + e] : 0.f;
                  m = brk * X[e] * (xk[nt][2 * hf + e] * rkc[e]);
                }
                rowM[hf] += m;
                colM[nt][e] += m;
              }
              const uint32_t o = V2 ? frag_off(fbb, hf, nt) : sw_off<kBT>(i, c0);
              if (half == 0) {
                st_pair(reinterpret_cast<T*>(s.pk + o), X[0] * rkc[0], X[1] * rkc[1]);
                st_pair(reinterpret_cast<T*>(s.pq + o), rqi * X[0], rqi * X[1]);
              } else {
                st_pair(reinterpret_cast<T*>(s.rm + o), X[0] * rkc[0], X[1] * rkc[1]);
                st_pair(reinterpret_cast<T*>(s.rb + o), brk * X[0], brk * X[1]);
              }
            }
          }
        }
        flush_rowdot<kBT>(red_of(jj & 1), 3, rowM, r0, wn, tq);
#pragma unroll
        for (int nt = 0; nt < NTB; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float cs = colM[nt][e];  // sum over the 16 rows of this warp: lanes with the same tq
            cs += __shfl_xor_sync(0xffffffffu, cs, 4);
            cs += __shfl_xor_sync(0xffffffffu, cs, 8);
            cs += __shfl_xor_sync(0xffffffffu, cs, 16);
            if (g == 0) (kSplit && (jj & 1) ? rd2.redc : s.redc)[cb + nt * 8 + 2 * tq + e][wm] = cs;
          }
      }
      fence_view_async_shared();
      __syncthreads();  // staged intra matrices visible; S, dS', V^, Y, dO, Ai of head j are dead
      if (kSplit && jj + 1 < G) {  // wg7: the rest of the next head's tiles (Ai / dV^ went out above)
        load_head_part<T, V, 1>(s, p, w, r, t0, len, j + 1, tid);
      } else if (jj + 1 < G) {
        load_head_wg<T, V, V2, V3>(s, p, w, r, t0, len, j + 1, tid);
      } else if constexpr (kPer && kSplit) {  // wg9ps: the rest of the next item's head 0
        if (nx->len > 0) load_head_part<T, V, 1>(s, p, w, nx->r, nx->t0, nx->len, nx->h * G, tid);
      } else if constexpr (kPer) {  // wg6: the next item's first head, like a next head
        if (nx->len > 0) load_head_wg<T, V, V2, V3>(s, p, w, nx->r, nx->t0, nx->len, nx->h * G, tid);
      }
      cp_async_commit();

      if constexpr (V4 == 0) {  // dq^ += Pd K^ (accumulated in place: the product adds onto the running group sum)
        wg_tile_v<V2, T, 32, kBT, false, true, kBT>(dqA, s.pk, s.k, ck);
      }
      {  // dk^ += beta (R K^)
        float t[NTK][4] = {};
        if constexpr (V4 > 0) {  // wg4: R K^ first, then dq^ += Pd K^ left in flight until dk^'s wait below
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(t));
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(dqA));
          wgmma_fence();
          wg_issue_v<V2, T, 32, kBT, false, true, kBT>(t, s.rm, s.k, ck);
          wgmma_commit();
          wg_issue_v<V2, T, 32, kBT, false, true, kBT>(dqA, s.pk, s.k, ck);
          wgmma_commit();
          wgmma_wait<1>();
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(t));
        } else {
          wg_tile_v<V2, T, 32, kBT, false, true, kBT>(t, s.rm, s.k, ck);
        }
        float pk[2] = {};
        rowdot_v<V2, T, NTK>(pk, t, s.k, r0, ck, tq, fbk);
        flush_rowdot<kBT>(red_of(jj & 1), 4, pk, r0, wn, tq);
        add_scaled(dkA, t, bv);
      }
      {  // dk^ += Pd^T Q^ + (beta R)^T K^ (in place)
        wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(dkA));
        wgmma_fence();
        wg_issue_v<V2, T, 32, kBT, true, true, kBT>(dkA, s.pq, s.q, ck);
        wg_issue_v<V2, T, 32, kBT, true, true, kBT>(dkA, s.rb, s.k, ck);
        wg_sync(dkA);
        if constexpr (V4 > 0) wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(dqA));  // Pd K^ landed too
      }
      // (wg7: only after the last head, for its finish: a next head's first barrier orders this
      // head's partials before that finish, and nothing else this head reads is written before it)
      // (wg9: not even then: its finish runs after the epilogue's first barrier, and the epilogue's row dots
      // write the other partial set and read only q / k)
      if (!kSplit || (jj + 1 == G && !kLateFin)) __syncthreads();
      if constexpr (kSplit) {
        // the last head's finish; the epilogue below writes the other partial set (no barrier). wg9: at the
        // kernel's end instead (the epilogue writes none of what it reads: partial set G - 1 & 1, redc / wred of
        // that set, rq / rk, the row-scalar buffers), so the other warps' epilogue no longer waits for it
        if (!kLateFin && jj + 1 == G && warp == 0) finish_wg7(jj);
      } else if constexpr (V2) {
        // no barrier after it: the next head's start writes the other row-scalar buffer, and its
        // first barrier (which warp 0 reaches after this) precedes every write of s.red / redc / wred
        const int b = jj & 1;
        if (warp == 0)
          finish_rows_core<kBT, kNW>(
              s, gam, beta, [&](int i, int64_t) { return RowDraws{rs.gate[b][i], rs.dA[b][i], rs.bdraw[b][i]}; }, p, w,
              r, t0, len, j, lane);
        if (jj + 1 == G) __syncthreads();  // the L2-norm epilogue below reuses s.red
      } else {
        if (warp == 0) finish_rows<kBT, kNW>(s, p, w, r, t0, len, j, lane);
        __syncthreads();
      }
    }
    if constexpr (!kPer) cp_async_wait<0>();  // wg6: the next item's tiles stay in flight

    // L2-norm backward of the group sums: dx = r dy - r^3 (dy . x) x (x raw, y = r x); store.
    float pq2[2] = {}, pk2[2] = {};
    rowdot_v<V2, T, NTK>(pq2, dqA, s.q, r0, ck, tq, fbk);
    rowdot_v<V2, T, NTK>(pk2, dkA, s.k, r0, ck, tq, fbk);
    flush_rowdot<kBT>(red_of(G & 1), 0, pq2, r0, wn, tq);
    flush_rowdot<kBT>(red_of(G & 1), 1, pk2, r0, wn, tq);
    // wg3: a gradient in the io type with a 16-byte aligned base is written in place over the q / k
    // tile elements this thread just read (each element has exactly one owner), then stored as
    // 16-byte row pieces (the per-element stores use 8 of every 32 bytes they move). wg6 stages them
    // in the intra tiles (dead since the last head) instead, so the next q / k can land meanwhile
    // (pk + pq, rm + rb; written at each use: named pointer variables here changed the default's SASS).
    constexpr ElemType kIo = std::is_same_v<T, __nv_bfloat16> ? ElemType::kBF16 : ElemType::kF16;
    const bool dq_staged = V3 && p.dq.p && p.dq.t == kIo && (reinterpret_cast<uintptr_t>(p.dq.p) & 15) == 0;
    const bool dk_staged = V3 && p.dk.p && p.dk.t == kIo && (reinterpret_cast<uintptr_t>(p.dk.p) & 15) == 0;
    __syncthreads();
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int rr = r0 + 8 * hf;
      if (rr >= len) continue;
      float fq = 1.f, cq = 0.f, fk = 1.f, cpk = 0.f;
      if (f.l2norm) {
        float sq, sk;
        if constexpr (kSplit) {  // wg7: the partial set the last head did not write
          const float(*const er)[kBT][kWN] = red_of(G & 1);
          sq = ((er[0][rr][0] + er[0][rr][1]) + er[0][rr][2]) + er[0][rr][3];
          sk = ((er[1][rr][0] + er[1][rr][1]) + er[1][rr][2]) + er[1][rr][3];
        } else {
          sq = ((s.red[0][rr][0] + s.red[0][rr][1]) + s.red[0][rr][2]) + s.red[0][rr][3];
          sk = ((s.red[1][rr][0] + s.red[1][rr][1]) + s.red[1][rr][2]) + s.red[1][rr][3];
        }
        fq = s.rq[rr];
        fk = s.rk[rr];
        cq = fq * fq * fq * sq;
        cpk = fk * fk * fk * sk;
      }
      const int64_t base = ((t0 + rr) * f.H + h) * int64_t(kK);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt) {
        const int col = ck + nt * 8 + 2 * tq;
        const uint32_t o = V2 ? frag_off(fbk, hf, nt) : sw_off<kBT>(rr, col);
        const float2 qv = ld_pair(reinterpret_cast<const T*>(s.q + o)), kv = ld_pair(reinterpret_cast<const T*>(s.k + o));
        const float dq0 = fq * dqA[nt][2 * hf] - cq * qv.x, dq1 = fq * dqA[nt][2 * hf + 1] - cq * qv.y;
        const float dk0 = fk * dkA[nt][2 * hf] - cpk * kv.x, dk1 = fk * dkA[nt][2 * hf + 1] - cpk * kv.y;
        if (dq_staged) {
          st_pair(reinterpret_cast<T*>((kPer ? s.pk : s.q) + o), dq0, dq1);
        } else if (p.dq.p) {
          store_out(p.dq.p, p.dq.t, base + col, dq0);
          store_out(p.dq.p, p.dq.t, base + col + 1, dq1);
        }
        if (dk_staged) {
          st_pair(reinterpret_cast<T*>((kPer ? s.rm : s.k) + o), dk0, dk1);
        } else if (p.dk.p) {
          store_out(p.dk.p, p.dk.t, base + col, dk0);
          store_out(p.dk.p, p.dk.t, base + col + 1, dk1);
        }
      }
    }
    // wg9ps: the next item's row scalars (heads 0 and 1), loaded ahead of its q / k, stored after the staged
    // stores below (the buffers' last reader, this item's last finish, ran before the epilogue's first barrier)
    [[maybe_unused]] RowRaw nraw{};
    [[maybe_unused]] const bool nrow = kPer && kSplit && nx->len > 0 && (tid >> 8) < G;
    if constexpr (kPer) {  // wg6: no return (the loop below skips unstaged gradients)
      __syncthreads();  // q / k / rq / rk / red read, the staged tiles written: the next item's q / k
      if constexpr (kSplit)
        if (nrow) nraw = row_scalar_load(p, w, nx->t0, nx->len, nx->h * G + (tid >> 8), (tid >> 6) & 3, tid & 63);
      if (nx->len > 0) load_item_qk<T, V, V2>(s, f, w, nx->t0, nx->len, nx->h, tid);
      cp_async_commit();
    } else if constexpr (V3) {
      if (!dq_staged && !dk_staged) {
        if (kLateFin && warp == 0) finish_wg7(G - 1);  // wg9: the last head's finish (see above)
        return;
      }
      __syncthreads();
    }
    if constexpr (V3) {
      // rows in address order: 16 pieces of 8 columns per row, 16 threads per 256-byte row
      constexpr int P = kK / 8, PER = kBT * P;
#pragma unroll
      for (int u = 0; u < 2 * PER / kNT; ++u) {
        const int idx = tid + u * kNT, which = idx / PER, row = (idx % PER) / P, ch = idx % P;
        if (row >= len || !(which == 0 ? dq_staged : dk_staged)) continue;
        const uint4 val = *reinterpret_cast<const uint4*>(
            (which == 0 ? (kPer ? s.pk : s.q) : (kPer ? s.rm : s.k)) + sw_off<kBT>(row, ch * 8));
        T* dst = static_cast<T*>(which == 0 ? p.dq.p : p.dk.p) + ((t0 + row) * f.H + h) * int64_t(kK) + ch * 8;
        *reinterpret_cast<uint4*>(dst) = val;
      }
    }
    if constexpr (kLateFin) {
      if (warp == 0) finish_wg7(G - 1);  // wg9: the last head's finish (see above)
    }
    if constexpr (kPer && kSplit) {  // wg9ps: read after the next item's first barrier
      if (nrow) row_scalar_store(rs, p, nx->len, tid >> 8, (tid >> 6) & 3, tid & 63, nraw);
    }
    if constexpr (!kPer) break;
    if (nx->len <= 0) break;  // wg6: no item left for this CTA
  }
}

std::atomic<int64_t> g_wg6_launches{0}, g_wg7_launches{0}, g_wg8d_launches{0}, g_wg9_launches{0};

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
                 {"wg7", "wg8d", "wg9", "wg9d", "wg9p", "wg9ps", "wg6", "wg5", "wg4", "wg3", "wg2", "wg", "mma"}, 0,
                 "or wg6:N / wg9p:N / wg9ps:N (persistent with at most N CTAs); wg8 was removed");
  return v;
}

template <class T, int V>
void launch_t(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(w.nt_cap), p.f.H);
  const std::string mode = chunk_switch();
  if (mode == "wg") {
    launch(gdn_bwd_chunk_wg_kernel<T, V, false, false>, grid, dim3(kNT), wg_smem_bytes<V, false>(), stream, p, w);
    return;
  }
  // wg4 (the default unless "wg2" / "wg3" / "wg5" is asked for) and wg3 / wg5: V = 128 only (at V = 64
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
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 9, true>, pgrid, dim3(kNT), wg7_smem_bytes<V>(), stream, p, w);
      } else if (w9p) {
        g_wg9_launches.fetch_add(1);
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 8, true>, pgrid, dim3(kNT), kPerSmem, stream, p, w);
      } else {
        g_wg6_launches.fetch_add(1);
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 1, true>, pgrid, dim3(kNT), kPerSmem, stream, p, w);
      }
      return;
    }
    if (mode != "wg2" && mode != "wg3" && p.f.T_total < (int64_t(1) << 31) - kBT) {
      if (mode == "wg5") {
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 2>, grid, dim3(kNT), wg_smem_bytes<V, true>(), stream, p, w);
      } else if (mode == "wg8d") {  // opt-in (gdnbwd10: the decays once per head)
        g_wg8d_launches.fetch_add(1);
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 5>, grid, dim3(kNT), wg7_smem_bytes<V>(), stream, p, w);
      } else if (mode == "wg9" || mode == "wg9d" || mode.empty()) {
        // wg9d the default since session 14 (gdnbwd11: the row scalars one round trip deep, bitwise wg7; H200 A/B at
        // 5bd3b72, 16/32 1x32768 with the cache: backward 3.29 / 3.27 -> 2.787 / 2.785 ms, wg9 2.84 / 2.83)
        g_wg9_launches.fetch_add(1);
        if (mode == "wg9")
          launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 6>, grid, dim3(kNT), wg7_smem_bytes<V>(), stream, p, w);
        else
          launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 7>, grid, dim3(kNT), wg7_smem_bytes<V>(), stream, p, w);
      } else if (mode == "wg7") {  // wg7 the default from 1ec4943 to session 14 ("wg4" keeps V4)
        g_wg7_launches.fetch_add(1);
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 3>, grid, dim3(kNT), wg7_smem_bytes<V>(), stream, p, w);
      } else {
        launch(gdn_bwd_chunk_wg_kernel<T, V, true, true, 1>, grid, dim3(kNT), wg_smem_bytes<V, true>(), stream, p, w);
      }
      return;
    }
    if (mode == "wg3" && p.f.T_total < (int64_t(1) << 31) - kBT) {
      launch(gdn_bwd_chunk_wg_kernel<T, V, true, true>, grid, dim3(kNT), wg_smem_bytes<V, true>(), stream, p, w);
      return;
    }
  }
  launch(gdn_bwd_chunk_wg_kernel<T, V, true, false>, grid, dim3(kNT), wg_smem_bytes<V, true>(), stream, p, w);
}

}  // namespace

// LINATTN_CUDA_GDN_BWD_CHUNK: "mma" = the mma.sync kernel (kept for A/B runs); "wg" = this kernel's
// first version (V1); "wg2" = V2 (the instruction diet and the off-critical-path finish; the
// default from 7c12eef); "wg3" = V3 (the default from 0253e2d: values equal to V2 bit for bit,
// backward 7.0% / 6.6% faster at 16/32 1x32768 / 1x8192); "wg5" = V5; unset (until 1ec4943) / "wg4" = V4 at
// V = 128 (V2 at V = 64) where eligible: the default since the H200 A/B at 95f8975 (test_cuda_gdn_bwd
// 65/65 with wg4 / wg5 bitwise equal to wg3 on every case, backward 4.20 / 4.19 -> 4.117 / 4.111 ms
// at 16/32 1x32768 in two interleaved rounds; wg5 4.157 / 4.176); "wg7" = V7 (the default until session 14);
// "wg4" = V4; "wg8d" = V8d (opt-in); "wg9d" = V9d (unset: the default since session 14); "wg9" / "wg9p" / "wg9ps" =
// V9 / V9p / V9ps (opt-in). Since session
// 12 a value that names none of these (the removed "wg8", a typo) is an error (chunk_switch), no longer a silent V4.
bool gdn_bwd_chunk_wg_eligible(const GdnFwdParams& f) {
  if (chunk_switch() == "mma") return false;
  return f.BT == kBT && f.K == kK && (f.V == 64 || f.V == 128) &&
         (f.io == ElemType::kBF16 || f.io == ElemType::kF16) && current_device_info().cc_major == 9;
}

int64_t gdn_bwd_chunk_wg6_launches() { return g_wg6_launches.load(); }
int64_t gdn_bwd_chunk_wg7_launches() { return g_wg7_launches.load(); }
int64_t gdn_bwd_chunk_wg8d_launches() { return g_wg8d_launches.load(); }
int64_t gdn_bwd_chunk_wg9_launches() { return g_wg9_launches.load(); }

void launch_gdn_bwd_chunk_wg(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  LINATTN_CHECK(p.f.BT == kBT && p.f.K == kK, "gdn bwd chunk wg: BT must be ", kBT, " and K ", kK, ", got ", p.f.BT,
                " and ", p.f.K);
  const bool bf = p.f.io == ElemType::kBF16;
  if (p.f.V == 128) return bf ? launch_t<__nv_bfloat16, 128>(p, w, stream) : launch_t<__half, 128>(p, w, stream);
  if (p.f.V == 64) return bf ? launch_t<__nv_bfloat16, 64>(p, w, stream) : launch_t<__half, 64>(p, w, stream);
  LINATTN_UNSUPPORTED("gdn bwd chunk wg: V = ", p.f.V, " (supported: 64, 128)");
}

}  // namespace linattn::cuda
