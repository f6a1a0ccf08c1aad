// The parts of the GDN chunk prep (gdn_prep.cu: v5 / v6, gdn_prep_v7.cu: v7) shared by its versions: the shared
// layout of v5 / v6 (PrepSmem), the Gram products, the row scales and the chunk's front half (prep_front).
// Included by the prep .cu files only (anonymous namespace: each gets its own instances).
#pragma once
#include <cuda_runtime.h>

#include <type_traits>

#include "cuda/common/mma.cuh"
#include "cuda/gdn/gdn_chain_scales.cuh"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/gdn/gdn_kernels.h"
#include "cuda/gdn/gdn_prep_common.cuh"

namespace linattn::cuda {
namespace {

constexpr int kK = 128, kThreads = 256, kWarps = kThreads / 32, kLdK = kK + 8;

// WP: P is written (ws.P set). PE (with WP; the default, LINATTN_CUDA_GDN_PREP=v2 turns it off): the P rows of every
// value head are written right after the Gram products, so Q K^T lives in the shared union (the dead
// q / k tiles, before L / X use it): ~65 KB at BT 64, 3 CTAs per SM as without P.
// V6 (prep v6): kk keeps only its lower 16x16 blocks (the only ones L reads), packed, and the merge scratch only
// the BT/16 - 1 warps of the column chains: ~51 KB at BT 64 and G 4 (~65 KB without), 4 CTAs per SM with the
// kernel's 64 registers. Block (a, b), a >= b, at kkb[(a (a + 1) / 2 + b) kKkBlk]: rows of 16 floats, blocks
// 260 floats apart, so a quarter warp's float4 loads (two rows x four blocks) hit eight distinct bank groups.
template <class T, int BT, bool WP = true, bool PE = false, bool V6 = false>
struct PrepSmem {
  static constexpr int kLd = BT + 4;  // fp32 row stride: 16-byte aligned rows
  static constexpr bool kPacked = V6;
  static constexpr int kNB = BT / 16, kKkBlk = 16 * 16 + 4, kKkFloats = V6 ? kNB * (kNB + 1) / 2 * kKkBlk : 4;
  union {
    struct { T q[BT][kLdK]; T k[BT][kLdK]; } in;     // until the Gram products
    struct { float L[BT][kLd]; float X[BT][kLd]; } sv;  // then L and X = (I + L)^-1
    float qk[PE ? BT : 1][kLd];                         // PE: Q K^T (as qk below) until P is stored
  } u;
  float kk[V6 ? 1 : BT][kLd];  // (k_i . k_j) rk_i rk_j (V6: kkb)
  float qk[(WP && !PE) ? BT : 1][kLd];  // (q_i . k_j) rq_i rk_j (WP without PE only)
  float tscr[V6 ? (kNB > 1 ? kNB - 1 : 1) : kWarps][16][20];  // per-warp 16x16 scratch of the merges
  float rq[BT], rk[BT];
  alignas(16) float kkb[kKkFloats];  // V6: kk's lower blocks, packed
  // followed by gam[G][BT], beta[G][BT] (dynamic)
  static size_t bytes(int G) { return sizeof(PrepSmem) + size_t(G) * BT * 2 * sizeof(float); }
  // kk[i][c0 ..] (c0 a multiple of 4 in the block of column c0; V6: only blocks with c0 / 16 <= i / 16)
  __device__ __forceinline__ float* kk_at(int i, int c0) {
    if constexpr (V6) return &kkb[((i >> 4) * ((i >> 4) + 1) / 2 + (c0 >> 4)) * kKkBlk + (i & 15) * 16 + (c0 & 15)];
    else return &kk[i][c0];
  }
  static constexpr bool kQkPacked = false;  // Q K^T dense: u.qk (PE) or qk
  static constexpr bool kPairs = false;     // gram_products' epilogue: scalar stores (v8: pairs, PrepSmemV7)
  __device__ __forceinline__ float* qk_at(int i, int c) {
    if constexpr (PE) return &u.qk[i][c];
    else return &qk[i][c];
  }
};

// Prep v8's Gram epilogue (Smem::kPairs, packed lower blocks): the row / column scales loaded first, then each
// (row, column pair) stored as one 8-byte pair. The scalar epilogue below re-read rk / rq after every store (the
// compiler cannot tell kk / qk from rk / rq): 32 dependent LDS -> FMUL -> STS round trips per warp. Same
// expressions in the same order (products (a rk_row) rk_col): the same bits.
template <bool WP, int WM, int CW, int NTW, class Smem>
__device__ __forceinline__ void gram_store_pairs(Smem& s, const float (&ak)[NTW][4], const float (&aq)[NTW][4], int wm,
                                                 int wn, int g, int t) {
  static_assert(Smem::kPacked && Smem::kQkPacked, "pairs of the packed lower blocks only");
  float rkr[2], rqr[2], rkc[NTW][2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    rkr[half] = s.rk[16 * wm + g + 8 * half];
    rqr[half] = WP ? s.rq[16 * wm + g + 8 * half] : 0.f;
  }
#pragma unroll
  for (int nt = 0; nt < NTW; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) rkc[nt][e] = s.rk[wn * CW + nt * 8 + 2 * t + e];
#pragma unroll
  for (int nt = 0; nt < NTW; ++nt) {
    const int col = wn * CW + nt * 8 + 2 * t;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = 16 * wm + g + 8 * half;
      if ((col >> 4) > (row >> 4)) continue;  // packed: lower blocks only
      *reinterpret_cast<float2*>(s.kk_at(row, col)) = make_float2(ak[nt][2 * half] * rkr[half] * rkc[nt][0],
                                                                  ak[nt][2 * half + 1] * rkr[half] * rkc[nt][1]);
      if constexpr (WP)
        *reinterpret_cast<float2*>(s.qk_at(row, col)) = make_float2(aq[nt][2 * half] * rqr[half] * rkc[nt][0],
                                                                    aq[nt][2 * half + 1] * rqr[half] * rkc[nt][1]);
    }
  }
}

template <class T, int BT, bool WP, bool PE, class Smem>
__device__ __forceinline__ void gram_products(Smem& s, int warp, int lane) {
  constexpr int WM = BT / 16, WN = kWarps / WM, CW = BT / WN, NTW = CW / 8;
  const int wm = warp % WM, wn = warp / WM;
  float ak[NTW][4] = {}, aq[NTW][4] = {};
#pragma unroll
  for (int kt = 0; kt < kK / 16; ++kt) {
    uint32_t fk[4], fq[4];
    ldsm_x4(fk, a_addr_rowmajor(&s.u.in.k[0][0], kLdK, 16 * wm, 16 * kt, lane));
    if constexpr (WP) ldsm_x4(fq, a_addr_rowmajor(&s.u.in.q[0][0], kLdK, 16 * wm, 16 * kt, lane));
#pragma unroll
    for (int np = 0; np < NTW / 2; ++np) {
      uint32_t b[4];
      ldsm_x4(b, b_addr_nk(&s.u.in.k[0][0], kLdK, 16 * kt, wn * CW + 16 * np, lane));
      mma16816<T>(ak[2 * np], fk, b[0], b[1]);
      mma16816<T>(ak[2 * np + 1], fk, b[2], b[3]);
      if constexpr (WP) {
        mma16816<T>(aq[2 * np], fq, b[0], b[1]);
        mma16816<T>(aq[2 * np + 1], fq, b[2], b[3]);
      }
    }
    if constexpr (NTW % 2 == 1) {
      uint32_t b[2];
      ldsm_x2(b, b_addr_nk(&s.u.in.k[0][0], kLdK, 16 * kt, wn * CW + 16 * (NTW / 2), lane));
      mma16816<T>(ak[NTW - 1], fk, b[0], b[1]);
      if constexpr (WP) mma16816<T>(aq[NTW - 1], fq, b[0], b[1]);
    }
  }
  const int g = lane >> 2, t = lane & 3;
  if constexpr (PE) __syncthreads();  // qk overwrites the q / k tiles every warp reads above
  if constexpr (Smem::kPairs) {
    gram_store_pairs<WP, WM, CW, NTW>(s, ak, aq, wm, wn, g, t);
  } else {
#pragma unroll
    for (int nt = 0; nt < NTW; ++nt) {
      const int col = wn * CW + nt * 8 + 2 * t;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = 16 * wm + g + 8 * half;
        const bool lower = (col >> 4) <= (row >> 4);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (!Smem::kPacked || lower) *s.kk_at(row, col + e) = ak[nt][2 * half + e] * s.rk[row] * s.rk[col + e];
          if constexpr (WP)
            if (!Smem::kQkPacked || lower) *s.qk_at(row, col + e) = aq[nt][2 * half + e] * s.rq[row] * s.rk[col + e];
        }
      }
    }
  }
}

// q / k row scales (rq, rk in shared memory and the workspace), one warp per row: row i = warp + 8 u.
// SPLIT (prep v7 split, gridDim.z CTAs per (chunk, q/k head)): every CTA forms the scales, split 0 stores them.
// V6: a warp's 2 BT / 8 rows at once (one 8-byte load per row and lane, the butterflies of all rows
// interleaved) instead of one row after another (~20% of the prep's stall samples at 3d3a678: each row a
// chain of 4 loads, 5 dependent shuffles, a predicated store); the same sums in the same order (same bits).
template <bool V6, class T, int BT, bool SPLIT = false, class Smem>
__device__ __forceinline__ void row_scales(const GdnFwdParams& p, const GdnChunkWs& ws, Smem& s, int h, int64_t t0,
                                           int len, int warp, int lane) {
  if constexpr (!V6) {
    for (int i = warp; i < 2 * BT; i += kWarps) {
      const T* row = i < BT ? &s.u.in.q[i][0] : &s.u.in.k[i - BT][0];
      const float ss = row_sumsq_warp<T, kK>(row, lane);
      const float rs = p.l2norm ? rsqrtf(ss + 1e-6f) : 1.f;
      if (lane == 0) {
        const int ri = i < BT ? i : i - BT;
        (i < BT ? s.rq : s.rk)[ri] = rs;
        if (ri < len) (i < BT ? ws.rq : ws.rk)[h * ws.T_cap + t0 + ri] = rs;
      }
    }
  } else {
    constexpr int R = 2 * BT / kWarps, RQ = BT / kWarps;  // rows per warp; the first RQ are q rows
    static_assert(kK / 32 == 4, "one 8-byte load per row and lane");
    float ss[R];
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const int i = warp + kWarps * u;
      const T* row = u < RQ ? &s.u.in.q[i][0] : &s.u.in.k[i - BT][0];
      const uint2 w = *reinterpret_cast<const uint2*>(row + 4 * lane);
      const T* e2 = reinterpret_cast<const T*>(&w);
      ss[u] = 0.f;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = MmaType<T>::to_float(e2[e]);
        ss[u] += x * x;
      }
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1)
#pragma unroll
      for (int u = 0; u < R; ++u) ss[u] += __shfl_xor_sync(0xffffffffu, ss[u], d);
    float mine = 0.f;  // lane u < R stores row u's scale
#pragma unroll
    for (int u = 0; u < R; ++u)
      if (lane == u) mine = ss[u];
    if (lane < R) {
      const bool isq = lane < RQ;
      const int ri = warp + kWarps * lane - (isq ? 0 : BT);
      const float rs = p.l2norm ? rsqrtf(mine + 1e-6f) : 1.f;
      (isq ? s.rq : s.rk)[ri] = rs;
      if (ri < len && (!SPLIT || blockIdx.z == 0)) (isq ? ws.rq : ws.rk)[h * ws.T_cap + t0 + ri] = rs;
    }
  }
}

// One transpose-reduce level of row_scales_v10 on ss[0 .. 2 HH): lanes with bit D keep the upper half; each kept
// value = own partial + partner's (v6's butterfly operands). Bit selects: a select of ss[k] / ss[k + HH] may become a
// select of addresses (ss in local memory).
template <int HH, int D, int N>
__device__ __forceinline__ void transpose_reduce(float (&ss)[N], int lane) {
  if constexpr (HH >= 1) {
    const uint32_t m = (lane & D) ? 0xffffffffu : 0u;
#pragma unroll
    for (int k = 0; k < HH; ++k) {
      const uint32_t lo = __float_as_uint(ss[k]), hi = __float_as_uint(ss[k + HH]);
      const float send = __uint_as_float((lo & m) | (hi & ~m));
      const float keep = __uint_as_float((hi & m) | (lo & ~m));
      ss[k] = keep + __shfl_xor_sync(0xffffffffu, send, D);
    }
    transpose_reduce<HH / 2, D / 2>(ss, lane);
  }
}

// Prep v10 (prep_front's V10): v6's row scales with the same sums (same products in the same order, the same
// butterfly partners: the same bits, every lane of v6's butterfly ends with the same value), fewer instructions:
// bf16 pairs widened by a shift / mask (v6: PRMT + shift each), and the R rows' butterflies as a transpose-reduce:
// each of the first log2 R levels keeps half the rows per lane (own partial + partner's partial, v6's operands), so
// R - 1 + 5 - log2 R shuffles (16 rows: 16) instead of 5 R (80); lane l then holds row (l >> (5 - log2 R)).
template <class T, int BT, bool SPLIT, class Smem>
__device__ __forceinline__ void row_scales_v10(const GdnFwdParams& p, const GdnChunkWs& ws, Smem& s, int h,
                                               int64_t t0, int len, int warp, int lane) {
  constexpr int R = 2 * BT / kWarps, RQ = BT / kWarps, LR = R == 16 ? 4 : R == 8 ? 3 : -1;
  static_assert(kK / 32 == 4 && LR > 0, "one 8-byte load per row and lane, 8 or 16 rows per warp");
  float ss[R];
#pragma unroll
  for (int u = 0; u < R; ++u) {
    const int i = warp + kWarps * u;
    const T* row = u < RQ ? &s.u.in.q[i][0] : &s.u.in.k[i - BT][0];
    const uint2 w = *reinterpret_cast<const uint2*>(row + 4 * lane);
    float x[4];
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      x[0] = __uint_as_float(w.x << 16);
      x[1] = __uint_as_float(w.x & 0xffff0000u);
      x[2] = __uint_as_float(w.y << 16);
      x[3] = __uint_as_float(w.y & 0xffff0000u);
    } else {
      const T* e2 = reinterpret_cast<const T*>(&w);
#pragma unroll
      for (int e = 0; e < 4; ++e) x[e] = MmaType<T>::to_float(e2[e]);
    }
    ss[u] = 0.f;
#pragma unroll
    for (int e = 0; e < 4; ++e) ss[u] += x[e] * x[e];
  }
  transpose_reduce<R / 2, 16>(ss, lane);
#pragma unroll
  for (int d = 16 >> LR; d > 0; d >>= 1) ss[0] += __shfl_xor_sync(0xffffffffu, ss[0], d);
  if ((lane & ((32 >> LR) - 1)) == 0) {
    const int u = lane >> (5 - LR);
    const bool isq = u < RQ;
    const int ri = warp + kWarps * u - (isq ? 0 : BT);
    const float rs = p.l2norm ? rsqrtf(ss[0] + 1e-6f) : 1.f;
    (isq ? s.rq : s.rk)[ri] = rs;
    if (ri < len && (!SPLIT || blockIdx.z == 0)) (isq ? ws.rq : ws.rk)[h * ws.T_cap + t0 + ri] = rs;
  }
}

// Prep v10's per-value-head facts, formed by the gate scan's warp (prep_front's V10) after beta_all, 8 floats per
// head: [0, BT / 16) the largest gam of each 16-column segment (fmaxf: NaNs skipped, as exp2f takes its plain path
// for them), [4] 1 when every beta of the head is a non-negative finite (0 beta = +0: Ab's upper zeros all +0).
constexpr int kAuxPerHead = 8;

constexpr int kSeg = 16;  // each thread: 16 contiguous columns of one row of L / P / Ab

// The chunk's front half, shared by every prep version: q / k copies, the G gate scans and betas (gam, beta in
// shared memory and the workspace), row scales (RV6: v6's interleaved rows), the tma3 records (SC), K K^T and
// Q K^T into the Smem's kk / qk (gram_products). Returns false (touching nothing) for a sentinel row or an empty
// chunk; on true the q / k tiles are dead (a CTA barrier passed).
// SPLIT (prep v7 split): the CTA owns value heads hv G' .. hv G' + G' - 1, G' = HV / H / gridDim.z, hv = h gridDim.z +
// blockIdx.z (the q/k head's G value heads split in gridDim.z consecutive groups): its gate scans, gam / beta
// ([G'][BT]) and records only; q / k, row scales and Gram products as unsplit (rq / rk stored by split 0).
template <class T, int BT, bool WP, bool PE, bool SC, bool RV6, bool SPLIT = false, bool V10 = false, class Smem>
__device__ __forceinline__ bool prep_front(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                                           int nts, Smem& s, float* gam_all, float* beta_all, int64_t& t0, int& len) {
  const int G = SPLIT ? p.HV / p.H / static_cast<int>(gridDim.z) : p.HV / p.H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t r = blockIdx.x;
  const int h = blockIdx.y;
  const int hv = SPLIT ? h * static_cast<int>(gridDim.z) + static_cast<int>(blockIdx.z) : h;  // value-head group
  if (!chunk_span(p, chunk_indices, nts, r, BT, t0, len)) return false;  // sentinel row / empty chunk: touch nothing
  load_qk_rows<kThreads, BT>(p, t0, h, len, s.u.in.q, s.u.in.k, tid);
  cp_async_commit();

  // All G gate scans and betas while the copies fly: warp w owns value heads w, w + 8, ...
  for (int jj = warp; jj < G; jj += kWarps) {
    const int j = hv * G + jj;
    float gsum = 0.f;
#pragma unroll
    for (int half = 0; half < BT / 32; ++half) {
      const int i = lane + 32 * half;
      float gv = i < len ? gdn_gate(p, t0 + i, j) : 0.f;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const float o = __shfl_up_sync(0xffffffffu, gv, d);
        if (lane >= d) gv += o;
      }
      gv += gsum;
      gsum = __shfl_sync(0xffffffffu, gv, 31);
      gam_all[jj * BT + i] = gv * kLog2e;
      beta_all[jj * BT + i] = i < len ? gdn_beta(p, t0 + i, j) : 0.f;
      if (i < len) ws.gam[j * ws.T_cap + t0 + i] = gv * kLog2e;
      if constexpr (V10) {  // the segment maxima of gam and the beta sign test (this lane's own stores, re-read)
        float gm = gam_all[jj * BT + i];
#pragma unroll
        for (int d = 8; d > 0; d >>= 1) gm = fmaxf(gm, __shfl_xor_sync(0xffffffffu, gm, d));
        float* aux = beta_all + G * BT + jj * kAuxPerHead;
        if ((lane & 15) == 0) aux[2 * half + (lane >> 4)] = gm;
        const bool bok = __all_sync(0xffffffffu, __float_as_uint(beta_all[jj * BT + i]) < 0x7f800000u);
        if (half == 0 && lane == 0) aux[4] = bok ? 1.f : 0.f;
        if (half > 0 && lane == 0 && !bok) aux[4] = 0.f;
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  if constexpr (V10) row_scales_v10<T, BT, SPLIT>(p, ws, s, h, t0, len, warp, lane);
  else row_scales<RV6, T, BT, SPLIT>(p, ws, s, h, t0, len, warp, lane);
  __syncthreads();
  if constexpr (SC) {  // chain mode tma3: the fused kernel's per-token scales, by its expressions
    static_assert(BT == chain_sc::kTok, "the scale records are per 64-token chunk");
    chain_sc::write_records<kThreads>(ws.sc, r, p.HV, hv, G, gam_all, s.rk, s.rq, len, p.scale, tid);
  }
  gram_products<T, BT, WP, PE>(s, warp, lane);
  __syncthreads();  // q/k tiles dead from here: their space holds L and X (PE: first Q K^T)

  return true;
}

}  // namespace
}  // namespace linattn::cuda
