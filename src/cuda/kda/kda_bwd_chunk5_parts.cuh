// The rolled pieces of the KDA chunk-gradient kernel (kda_bwd_chunk2_kernel.cuh; they were chunked5, and
// chunked7 = chunked5 with the six tile products' k-steps rolled, mma_tile_r). The older chunked4
// (removed in session 10) was instruction-fetch bound (ncu at 4988c89: "no instruction" the first stall
// reason, 26.8% of samples): ~13 K SASS instructions run once per (chunk, head), straight-line, so every
// CTA streams its ~200 KB of code. The pieces here keep every value and its order of operations and roll
// what chunked4 unrolls only for address math or inlines once per element:
//  - tile loads: one call site for every head, rolled cp.async loops (same 16-byte pieces);
//  - the gate formula (both forms, ~150 instructions): once in a rolled loop instead of 8 copies in the
//    decay staging and 16 in the gate chain; the raw gates still load in batches (8 / 16 in flight) and
//    wait in shared memory (the staging in a itself, the chain in the dead vh..ai tiles);
//  - dq / dk: the fragments' finished values go through shared memory (a and the union, dead by then)
//    and are stored by a rolled loop, one element per thread per step, so a warp writes 32 consecutive
//    elements (chunked4: 2 elements per thread 8 channels apart, 12.7 of 32 B per store sector used).
#pragma once
#include <cstddef>

#include "cuda/kda/kda_bwd_chunk2_parts.cuh"

namespace linattn::cuda {
namespace kda_bwd {

// mma_tile (gdn_bwd_common.cuh) with the k-steps rolled (chunked7): the same fragments and mma.sync calls
// in the same order per accumulator, so the same bits, in one k-step of code.
template <class T, int NTW, int KD, bool A_T, bool B_NK>
__device__ __forceinline__ void mma_tile_r(float (&acc)[NTW][4], const T* a, int lda, int m0, const T* b, int ldb,
                                           int n0, int lane) {
#pragma unroll 1
  for (int kt = 0; kt < KD / 16; ++kt) {
    uint32_t fa[4];
    if constexpr (A_T) ldsm_x4_t(fa, a_addr_colmajor(a, lda, m0, 16 * kt, lane));
    else ldsm_x4(fa, a_addr_rowmajor(a, lda, m0, 16 * kt, lane));
#pragma unroll
    for (int np = 0; np < NTW / 2; ++np) {
      uint32_t fb[4];
      if constexpr (B_NK) ldsm_x4(fb, b_addr_nk(b, ldb, 16 * kt, n0 + 16 * np, lane));
      else ldsm_x4_t(fb, b_addr_kn(b, ldb, 16 * kt, n0 + 16 * np, lane));
      mma16816<T>(acc[2 * np], fa, fb[0], fb[1]);
      mma16816<T>(acc[2 * np + 1], fa, fb[2], fb[3]);
    }
    if constexpr (NTW % 2 == 1) {
      uint32_t fb[2];
      if constexpr (B_NK) ldsm_x2(fb, b_addr_nk(b, ldb, 16 * kt, n0 + 16 * (NTW / 2), lane));
      else ldsm_x2_t(fb, b_addr_kn(b, ldb, 16 * kt, n0 + 16 * (NTW / 2), lane));
      mma16816<T>(acc[NTW - 1], fa, fb[0], fb[1]);
    }
  }
}

// Raw gates g[t0 + i0 + STEP m, j, c] (0 for rows >= len) of N rows, all N in flight before the first use:
// one copy of the loads for both 16-bit gate types (the bits, then the conversion of the type) and one for
// fp32.
template <int N, int STEP>
__device__ __forceinline__ void load_gate_raw_r(float (&v)[N], const GdnFwdParams& f, int64_t t0, int i0, int len,
                                                int j, int c) {
  const int64_t first = ((t0 + i0) * f.HV + j) * int64_t(kK) + c, step = int64_t(STEP) * f.HV * kK;
  if (f.g_type == ElemType::kF16 || f.g_type == ElemType::kBF16) {
    const unsigned short* g = static_cast<const unsigned short*>(f.g) + first;  // walks by step (no multiplies)
    unsigned short b[N];
#pragma unroll
    for (int m = 0; m < N; ++m, g += step) b[m] = i0 + STEP * m < len ? *g : 0;
    const bool bf = f.g_type == ElemType::kBF16;
#pragma unroll
    for (int m = 0; m < N; ++m)
      v[m] = i0 + STEP * m < len
                 ? (bf ? __bfloat162float(__ushort_as_bfloat16(b[m])) : __half2float(__ushort_as_half(b[m])))
                 : 0.f;
  } else {
    const float* g = static_cast<const float*>(f.g) + first;
#pragma unroll
    for (int m = 0; m < N; ++m, g += step) v[m] = i0 + STEP * m < len ? *g : 0.f;
  }
}

// eg[nt][e] = prod_{t <= row} a[t][ch] = prod_{b < wm} blk[b][ch] * prod_{16 wm <= t <= row} a[t][ch] (rows
// past len: 0, as a = 0 there); egl[nt][e] = prod_{row < t < len} a[t][ch] = prod_{row < t < min(len, 16 wm
// + 16)} a[t][ch] * prod_{b > wm} blk[b][ch], 0 for rows >= len. Row walks rolled.
template <int NTK>
__device__ __forceinline__ void mul_decay_rows_r(float (&eg)[NTK][4], const float (*a)[kLdF], int t0, int r0, int ck,
                                                 int tq) {
#pragma unroll 1
  for (int t = t0; t <= r0 + 8; ++t) {
    const bool lo = t <= r0;
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const float2 av = *reinterpret_cast<const float2*>(&a[t][ck + nt * 8 + 2 * tq]);
      if (lo) {
        eg[nt][0] *= av.x;
        eg[nt][1] *= av.y;
      }
      eg[nt][2] *= av.x;
      eg[nt][3] *= av.y;
    }
  }
}
template <int BT, int NTK>
__device__ __forceinline__ void frag_eg_blk_r(float (&eg)[NTK][4], const float (*a)[kLdF], const float (*blk)[kK],
                                              int wm, int r0, int ck, int tq) {
  float pre[NTK][2];
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) pre[nt][0] = pre[nt][1] = 1.f;
#pragma unroll 1
  for (int b = 0; b < wm; ++b)
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const float2 bv = *reinterpret_cast<const float2*>(&blk[b][ck + nt * 8 + 2 * tq]);
      pre[nt][0] *= bv.x;
      pre[nt][1] *= bv.y;
    }
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) eg[nt][e] = pre[nt][e & 1];
  mul_decay_rows_r<NTK>(eg, a, 16 * wm, r0, ck, tq);
}
template <int BT, int NTK>
__device__ __forceinline__ void frag_egl_blk_r(float (&egl)[NTK][4], const float (*a)[kLdF], const float (*blk)[kK],
                                               int wm, int r0, int ck, int tq, int len) {
  float suf[NTK][2];
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) suf[nt][0] = suf[nt][1] = 1.f;
#pragma unroll 1
  for (int b = wm + 1; b < BT / 16; ++b)
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const float2 bv = *reinterpret_cast<const float2*>(&blk[b][ck + nt * 8 + 2 * tq]);
      suf[nt][0] *= bv.x;
      suf[nt][1] *= bv.y;
    }
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) egl[nt][e] = (r0 + 8 * (e >> 1)) < len ? suf[nt][e & 1] : 0.f;
  const int tend = min(len, 16 * wm + 16);
#pragma unroll 1
  for (int t = r0 + 1; t < tend; ++t) {
    const bool hi = t > r0 + 8;
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const float2 av = *reinterpret_cast<const float2*>(&a[t][ck + nt * 8 + 2 * tq]);
      egl[nt][0] *= av.x;
      egl[nt][1] *= av.y;
      if (hi) {
        egl[nt][2] *= av.x;
        egl[nt][3] *= av.y;
      }
    }
  }
}

// a[i][c] = e^(g_ic) for rows i < len, 0 past the end (the gate is never read there). Thread (c = tid % K,
// rows tid / K + (NT / K) m), batches of 8 raw loads in flight (16 spilled more at the 128-register cap);
// the raw gates wait in a[i][c] and one rolled loop evaluates the formula.
template <int BT, int NT>
__device__ __forceinline__ void stage_decays_r(float (*a)[kLdF], const GdnBwdParams& p, int64_t t0, int len, int j,
                                               int tid) {
  constexpr int PER = BT * kK / NT, B = 8, RG = NT / kK;
  static_assert(PER * NT == BT * kK && PER % B == 0 && RG * kK == NT, "whole tile per pass");
  const int c = tid % kK, i0 = tid / kK;
#pragma unroll 1
  for (int m0 = 0; m0 < PER; m0 += B) {
    float v[B];
    load_gate_raw_r<B, RG>(v, p.f, t0, i0 + RG * m0, len, j, c);
#pragma unroll
    for (int m = 0; m < B; ++m) a[i0 + RG * (m0 + m)][c] = v[m];
  }
  const GateConst gc = gate_const(p.f, j, c);
#pragma unroll 1
  for (int m = 0; m < PER; ++m) {
    const int i = i0 + RG * m;
    a[i][c] = i < len ? expf(gate_deriv_raw(p.f, a[i][c], gc).g) : 0.f;
  }
}

// Scratch of the gate chain's raw gates, [BT][kK] fp32 over the vh, y, dO, ai tiles (dead once dgam is
// in a: their last readers are the pm / lm products and the intra phase's decay tables).
template <class T, int BT, int V>
__device__ __forceinline__ float (*gate_scratch(KdaChunk2Smem<T, BT, V>& s))[kK] {
  using S0 = KdaChunkSmem<T, BT, V>;
  static_assert(offsetof(S0, ai) + sizeof(S0::ai) - offsetof(S0, vh) >= sizeof(float) * BT * kK,
                "raw gates fit in vh..ai");
  static_assert(offsetof(S0, vh) % 16 == 0, "float rows");
  return reinterpret_cast<float(*)[kK]>(&s.vh[0][0]);
}

// s.a holds dgam (0 past len), s.red[0] the dbeta row partials. Thread (channel c, row group grp):
// dg_t = draw_t * (egL sd + zsum + sum_{t' >= t} dgam_t'), per-chunk partials pA / pT summed over the
// groups in a fixed order, dbeta through the sigmoid chain. Uses s.u.in as scratch (daqk / dL dead).
// The group's raw gates load together (16 in flight), wait in gate_scratch, and the reverse walk
// evaluates the formula per row in a rolled loop.
template <class T, int BT, int V, int NT>
__device__ __forceinline__ void gate_chain_r(KdaChunk2Smem<T, BT, V>& s, const GdnBwdParams& p, const GdnBwdWs& w,
                                             int64_t r, int64_t t0, int len, int j, int tid) {
  constexpr int RG = NT / kK, RPG = BT / RG;
  static_assert(RG * kK == NT && RG * RPG == BT, "row groups tile the chunk");
  static_assert(RG * kK * 2 <= BT * (BT + 4), "scratch fits in daqk / dL");
  const GdnFwdParams& f = p.f;
  const int c = tid % kK, grp = tid / kK, i0 = grp * RPG;
  float* gs = &s.u.in.daqk[0][0];  // [RG][kK] group sums of dgam
  float* gp = &s.u.in.dL[0][0];    // [RG][kK][2] group gate partials
  float (*graw)[kK] = gate_scratch(s);
  float raw[RPG];
  load_gate_raw_r<RPG, 1>(raw, f, t0, i0, len, j, c);
  float ps = 0.f;
#pragma unroll
  for (int u = 0; u < RPG; ++u) ps += s.a[i0 + u][c];
  gs[grp * kK + c] = ps;
#pragma unroll
  for (int u = 0; u < RPG; ++u) graw[i0 + u][c] = raw[u];
  __syncthreads();
  const GateConst gc = gate_const(f, j, c);
  float zs = 0.f;
#pragma unroll
  for (int m = 0; m < BT / 16; ++m) zs += s.zsum[m][c];
  float egL = 1.f;  // prod over the chunk's rows < len
#pragma unroll
  for (int b = 0; b < BT / 16; ++b) egL *= s.blk[b][c];
  float acc = egL * s.sd[c] + zs, pA = 0.f, pT = 0.f;
  for (int q = RG - 1; q > grp; --q) acc += gs[q * kK + c];
#pragma unroll 1
  for (int u = RPG - 1; u >= 0; --u) {
    const int i = i0 + u;
    if (i >= len) continue;
    const GateDeriv gd = gate_deriv_raw(f, graw[i][c], gc);
    acc += s.a[i][c];
    const float dgo = acc * gd.draw;
    if (f.gate_in_kernel) {
      pA += acc * gd.dA;
      pT += dgo;
    }
    if (p.dg.p) store_out(p.dg.p, p.dg.t, ((t0 + i) * f.HV + j) * int64_t(kK) + c, dgo);
  }
  gp[(grp * kK + c) * 2] = pA;
  gp[(grp * kK + c) * 2 + 1] = pT;
  __syncthreads();
  if (grp == 0) {
    float sA = 0.f, sT = 0.f;
#pragma unroll
    for (int q = RG - 1; q >= 0; --q) {
      sA += gp[(q * kK + c) * 2];
      sT += gp[(q * kK + c) * 2 + 1];
    }
    float* o = w.part + ((r * f.HV + j) * kK + c) * 2;
    o[0] = sA;
    o[1] = sT;
  } else if (tid < kK + BT) {
    const int i = tid - kK;
    if (i < len && p.dbeta.p) {
      const float db = ((s.red[0][i][0] + s.red[0][i][1]) + s.red[0][i][2]) + s.red[0][i][3];
      store_out(p.dbeta.p, p.dbeta.t, (t0 + i) * f.HV + j, db * gdn_beta_draw(f, t0 + i, j));
    }
  }
}

// Staging of the finished dk rows, [BT][kLdF] fp32 over the union (dead after the last gate chain);
// dq rows go to a (same pitch).
template <class T, int BT, int V>
__device__ __forceinline__ float* stage_dk(KdaChunk2Smem<T, BT, V>& s) {
  static_assert(sizeof(s.u) >= sizeof(float) * BT * kLdF, "dk rows fit in the union");
  return reinterpret_cast<float*>(&s.u);
}

// dq / dk rows < len from the staging (a, stage_dk) to [T, H, K]: element idx = tid + NT m of the
// chunk's BT x K tile, so each warp store covers 32 consecutive channels of one row.
template <class T, int BT, int V, int NT>
__device__ __forceinline__ void store_dqdk_r(KdaChunk2Smem<T, BT, V>& s, const GdnBwdParams& p, int64_t t0, int len,
                                             int h, int tid) {
  __syncthreads();
  const float* sk = stage_dk(s);
  const int64_t H = p.f.H;
#pragma unroll 1
  for (int idx = tid; idx < len * kK; idx += NT) {
    const int rr = idx / kK, col = idx % kK;
    const int64_t o = ((t0 + rr) * H + h) * int64_t(kK) + col;
    if (p.dq.p) store_out(p.dq.p, p.dq.t, o, s.a[rr][col]);
    if (p.dk.p) store_out(p.dk.p, p.dk.t, o, sk[rr * kLdF + col]);
  }
}

}  // namespace kda_bwd
}  // namespace linattn::cuda
