// Opt-in variants of the chunked KDA backward's chunk-gradient kernel (same math, grid, smem layout
// and outputs as kda_bwd_chunk.cu; selected by LINATTN_CUDA_KDA_BWD=chunked2 / chunked3 in gdn_bwd.cc):
//  chunked2: the per-channel gate work runs on every thread instead of 128 serial 64-step loops:
//    the decays a = e^g are staged element-parallel (BT x K / NT independent gate loads per thread, 8
//    in flight at a time), per-channel decay products of each 16-row block (blk) let eg / egl / egL
//    walk at most 16 rows instead of up to 64, the <S, dS'> row dots run on every thread, and the
//    reverse cumsum + gate chain + partials run as NT / K row groups per channel (group sums exchanged
//    through shared memory, the group's gate derivatives loaded up front).
//  chunked3: chunked2 + the off-diagonal 16 x 16 blocks of the intra-chunk per-channel sums on 3xTF32
//    mma.sync (split precision, ~fp32: see mma_3xtf32). For rows i in block I and columns
//    j < R1 = 16 I (reference row R = R1 - 1): E_ij = E_iR E_Rj with E_iR = prod_{R1<=t<=i} a_t and
//    E_Rj = prod_{j<t<R1} a_t, both products of decays <= 1 (no exponent is ever positive, exact
//    underflow to 0 at gates -1000 / lower_bound -5), so dq2_I = E_IR (.) (daqk_I,<R1 @ (k^ (.) E_R.)),
//    rp_I likewise with dL; the column side mirrors it with R = the last row of block J. Only the
//    diagonal blocks keep the fp32 per-element loops.
// Both unverified on a GPU at the time of writing (no device time): opt-in until the lead's H200 run.
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/kda/kda_bwd_chunk_common.cuh"

namespace linattn::cuda {
namespace {

using namespace kda_bwd;

// The default kernel's layout plus the per-channel decay products of each 16-row block (rows < len).
template <class T, int BT, int V>
struct KdaChunk2Smem : KdaChunkSmem<T, BT, V> {
  float blk[BT / 16][kK];
};

// eg[nt][e] = prod_{t <= row} a[t][ch] = prod_{b < wm} blk[b][ch] * prod_{16 wm <= t <= row} a[t][ch]
// (rows past len: 0, as a = 0 there).
template <int BT, int NTK>
__device__ __forceinline__ void frag_eg_blk(float (&eg)[NTK][4], const float (*a)[kLdF], const float (*blk)[kK],
                                            int wm, int r0, int ck, int tq) {
  float pre[NTK][2];  // one loop over the blocks for all 8 channels of the thread
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) pre[nt][0] = pre[nt][1] = 1.f;
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
  mul_decay_rows<NTK>(eg, a, 16 * wm, r0, ck, tq);
}

// egl[nt][e] = prod_{row < t < len} a[t][ch] = prod_{row < t < min(len, 16 wm + 16)} a[t][ch] *
// prod_{b > wm} blk[b][ch]; 0 for rows >= len.
template <int BT, int NTK>
__device__ __forceinline__ void frag_egl_blk(float (&egl)[NTK][4], const float (*a)[kLdF], const float (*blk)[kK],
                                             int wm, int r0, int ck, int tq, int len) {
  float suf[NTK][2];
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) suf[nt][0] = suf[nt][1] = 1.f;
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

// a[i][c] = e^(g_ic) for rows i < len, 0 past the end (the gate is never read there); batches of 8
// independent gate loads per thread in flight (16 in one batch spilled more at the 128-register cap).
template <int BT, int NT>
__device__ __forceinline__ void stage_decays(float (*a)[kLdF], const GdnBwdParams& p, int64_t t0, int len, int j,
                                             int tid) {
  constexpr int PER = BT * kK / NT, B = 8;
  static_assert(PER * NT == BT * kK && PER % B == 0, "whole tile per pass");
#pragma unroll 1
  for (int m0 = 0; m0 < PER; m0 += B) {
    float v[B];
#pragma unroll
    for (int m = 0; m < B; ++m) {
      const int idx = tid + (m0 + m) * NT, i = idx / kK, c = idx % kK;
      v[m] = i < len ? expf(bwd_gate_deriv(p, t0 + i, j, c).g) : 0.f;
    }
#pragma unroll
    for (int m = 0; m < B; ++m) {
      const int idx = tid + (m0 + m) * NT;
      a[idx / kK][idx % kK] = v[m];
    }
  }
}

// s.a holds dgam (0 past len), s.red[0] the dbeta row partials. Thread (channel c, row group grp):
// dg_t = draw_t * (egL sd + zsum + sum_{t' >= t} dgam_t'), per-chunk partials pA / pT summed over the
// groups in a fixed order, dbeta through the sigmoid chain. Uses s.u.in as scratch (daqk / dL dead).
template <class T, int BT, int V, int NT>
__device__ __forceinline__ void gate_chain(KdaChunk2Smem<T, BT, V>& s, const GdnBwdParams& p, const GdnBwdWs& w,
                                           int64_t r, int64_t t0, int len, int j, int tid) {
  constexpr int RG = NT / kK, RPG = BT / RG;
  static_assert(RG * kK == NT && RG * RPG == BT, "row groups tile the chunk");
  static_assert(RG * kK * 2 <= BT * (BT + 4), "scratch fits in daqk / dL");
  const GdnFwdParams& f = p.f;
  const int c = tid % kK, grp = tid / kK, i0 = grp * RPG;
  float* gs = &s.u.in.daqk[0][0];  // [RG][kK] group sums of dgam
  float* gp = &s.u.in.dL[0][0];    // [RG][kK][2] group gate partials
  float draw[RPG], dA[RPG];
#pragma unroll
  for (int u = 0; u < RPG; ++u) {
    draw[u] = 0.f;
    dA[u] = 0.f;
    if (i0 + u < len) {
      const GateDeriv gd = bwd_gate_deriv(p, t0 + i0 + u, j, c);
      draw[u] = gd.draw;
      dA[u] = gd.dA;
    }
  }
  float ps = 0.f;
#pragma unroll
  for (int u = 0; u < RPG; ++u) ps += s.a[i0 + u][c];
  gs[grp * kK + c] = ps;
  __syncthreads();
  float zs = 0.f;
#pragma unroll
  for (int m = 0; m < BT / 16; ++m) zs += s.zsum[m][c];
  float egL = 1.f;  // prod over the chunk's rows < len
#pragma unroll
  for (int b = 0; b < BT / 16; ++b) egL *= s.blk[b][c];
  float acc = egL * s.sd[c] + zs, pA = 0.f, pT = 0.f;
  for (int q = RG - 1; q > grp; --q) acc += gs[q * kK + c];
#pragma unroll
  for (int u = RPG - 1; u >= 0; --u) {
    const int i = i0 + u;
    if (i >= len) continue;
    acc += s.a[i][c];
    const float dgo = acc * draw[u];
    if (f.gate_in_kernel) {
      pA += acc * dA[u];
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

// 3xTF32 (split precision): x = hi + lo with hi, lo TF32 (~21 significant bits together), and
// acc += A B as A_lo B_hi + A_hi B_lo + A_hi B_hi (the A_lo B_lo term is below fp32 rounding). Plain
// TF32 (10 bits) would round the row side (q^ . dq2) and the column side (k^ . dka) of each intra term
// differently, and dgam's rowsum - colsum cancellation would leave that rounding in dA_log / dt_bias
// (the GDN backward's bf16 lesson, "CUDA GDN backward"): with the split it cancels to ~fp32.
struct Tf32x2 {
  uint32_t hi, lo;
};
__device__ __forceinline__ Tf32x2 split_tf32(float x) {
  constexpr uint32_t kMask = 0xffffe000u;  // the 19 TF32 bits (the mma ignores the 13 below)
  const uint32_t hi = to_tf32(x) & kMask;
  return {hi, to_tf32(x - __uint_as_float(hi)) & kMask};
}
__device__ __forceinline__ void mma_3xtf32(float (&d)[4], const Tf32x2 (&a)[4], Tf32x2 b0, Tf32x2 b1) {
  const uint32_t ahi[4] = {a[0].hi, a[1].hi, a[2].hi, a[3].hi}, alo[4] = {a[0].lo, a[1].lo, a[2].lo, a[3].lo};
  mma1688_tf32(d, alo, b0.hi, b1.hi);
  mma1688_tf32(d, ahi, b0.lo, b1.lo);
  mma1688_tf32(d, ahi, b0.hi, b1.hi);
}

// Fragment of B[k][n] for mma m16n8k8 (b0: k = tq, b1: k = tq + 4; n = g) over decay rows br..br+7 at
// channel d: pc carries the product of the rows already walked (<= 1); on return e1 / e2 are pc times
// the product over the fragment's rows after its row (AFTER: row side, walking down) or up to and
// including it (column side, walking up), and pc has taken all 8 rows.
template <bool AFTER>
__device__ __forceinline__ void decay_pair(const float (*a)[kLdF], int br, int d, int tq, float& pc, float& e1,
                                           float& e2) {
  float full = 1.f, p1 = 1.f, p2 = 1.f;
#pragma unroll
  for (int u = 0; u < 8; ++u) {
    const float x = a[br + u][d];
    full *= x;
    if (AFTER ? u > tq : u <= tq) p1 *= x;
    if (AFTER ? u > tq + 4 : u <= tq + 4) p2 *= x;
  }
  e1 = pc * p1;
  e2 = pc * p2;
  pc *= full;
}

// Row side, blocks left of the diagonal (row block I = wm, columns j < R1 = 16 I): sets
// dq2 = E_iR (.) sum_j daqk_ij k^_j E_Rj and rp likewise with dL (0 for I = 0).
template <class T, int BT, int V, int NTK>
__device__ __forceinline__ void offdiag_rows(const KdaChunkSmem<T, BT, V>& s, float (&dq2)[NTK][4],
                                             float (&rp)[NTK][4], int wm, int ck, int g, int tq) {
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      dq2[nt][e] = 0.f;
      rp[nt][e] = 0.f;
    }
  const int R1 = 16 * wm, r0 = R1 + g;
  if (wm == 0) return;
  float pc[NTK];  // prod_{8 kk + 8 <= t < R1} a_t at channel ck + 8 nt + g
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) pc[nt] = 1.f;
  for (int kk = 2 * wm - 1; kk >= 0; --kk) {
    const int br = 8 * kk;
    Tf32x2 fq[4], fl[4];
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int row = r0 + 8 * (x & 1), col = br + tq + 4 * (x >> 1);
      fq[x] = split_tf32(s.u.in.daqk[row][col]);
      fl[x] = split_tf32(s.u.in.dL[row][col]);
    }
    const float rk1 = s.rk[br + tq], rk2 = s.rk[br + tq + 4];
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int d = ck + 8 * nt + g;
      float e1, e2;
      decay_pair<true>(s.a, br, d, tq, pc[nt], e1, e2);
      const Tf32x2 b0 = split_tf32(rk1 * MmaType<T>::to_float(s.k[br + tq][d]) * e1);
      const Tf32x2 b1 = split_tf32(rk2 * MmaType<T>::to_float(s.k[br + tq + 4][d]) * e2);
      mma_3xtf32(dq2[nt], fq, b0, b1);
      mma_3xtf32(rp[nt], fl, b0, b1);
    }
  }
  float er[NTK][4];  // E_iR = prod_{R1 <= t <= i} a_t, rows i = r0 (e 0, 1), r0 + 8 (e 2, 3)
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) er[nt][e] = 1.f;
#pragma unroll 4
  for (int t = R1; t < R1 + 16; ++t) {
    const bool lo = t <= r0, hi = t <= r0 + 8;
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const float2 av = *reinterpret_cast<const float2*>(&s.a[t][ck + nt * 8 + 2 * tq]);
      if (lo) {
        er[nt][0] *= av.x;
        er[nt][1] *= av.y;
      }
      if (hi) {
        er[nt][2] *= av.x;
        er[nt][3] *= av.y;
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      dq2[nt][e] *= er[nt][e];
      rp[nt][e] *= er[nt][e];
    }
}

// Column side, blocks below the diagonal (column block J = wm, rows i >= R1 = 16 J + 16, reference
// R = R1 - 1): sets ca = E_Rj (.) sum_i (daqk_ij q^_i + beta_i dL_ij k^_i) E_iR (0 for the last block).
template <class T, int BT, int V, int NTK>
__device__ __forceinline__ void offdiag_cols(const KdaChunkSmem<T, BT, V>& s, float (&ca)[NTK][4], int wm, int ck,
                                             int g, int tq) {
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) ca[nt][e] = 0.f;
  const int j0 = 16 * wm, R1 = j0 + 16, r0 = j0 + g;
  if (R1 >= BT) return;
  float pc[NTK];  // prod_{R1 <= t < br} a_t at channel ck + 8 nt + g
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) pc[nt] = 1.f;
  for (int br = R1; br < BT; br += 8) {
    Tf32x2 fq[4], fl[4];  // A[m = j][k = i] = daqk[i][j] (transposed read)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int row = br + tq + 4 * (x >> 1), col = r0 + 8 * (x & 1);
      fq[x] = split_tf32(s.u.in.daqk[row][col]);
      fl[x] = split_tf32(s.u.in.dL[row][col]);
    }
    const float sq1 = s.rq[br + tq], sq2 = s.rq[br + tq + 4];
    const float sk1 = s.beta[br + tq] * s.rk[br + tq], sk2 = s.beta[br + tq + 4] * s.rk[br + tq + 4];
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int d = ck + 8 * nt + g;
      float e1, e2;
      decay_pair<false>(s.a, br, d, tq, pc[nt], e1, e2);
      mma_3xtf32(ca[nt], fq, split_tf32(sq1 * MmaType<T>::to_float(s.q[br + tq][d]) * e1),
                 split_tf32(sq2 * MmaType<T>::to_float(s.q[br + tq + 4][d]) * e2));
      mma_3xtf32(ca[nt], fl, split_tf32(sk1 * MmaType<T>::to_float(s.k[br + tq][d]) * e1),
                 split_tf32(sk2 * MmaType<T>::to_float(s.k[br + tq + 4][d]) * e2));
    }
  }
  float ej[NTK][4];  // E_Rj = prod_{j < t < R1} a_t, columns j = r0 (e 0, 1), r0 + 8 (e 2, 3)
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) ej[nt][e] = 1.f;
#pragma unroll 4
  for (int t = j0 + 1; t < R1; ++t) {
    const bool lo = t > r0, hi = t > r0 + 8;
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const float2 av = *reinterpret_cast<const float2*>(&s.a[t][ck + nt * 8 + 2 * tq]);
      if (lo) {
        ej[nt][0] *= av.x;
        ej[nt][1] *= av.y;
      }
      if (hi) {
        ej[nt][2] *= av.x;
        ej[nt][3] *= av.y;
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) ca[nt][e] *= ej[nt][e];
}

template <class T, int BT, int V, bool TC>
__global__ void __launch_bounds__(KTiling<BT, V>::NT, 1) kda_bwd_chunk2_kernel(GdnBwdParams p, GdnBwdWs w) {
  using Sm = KdaChunk2Smem<T, BT, V>;
  using Tl = KTiling<BT, V>;
  static_assert(sizeof(KdaChunkSmem<T, BT, V>) % 8 == 0, "blk rows 8-byte aligned (float2 reads)");
  constexpr int NTK = Tl::NTK;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Sm& s = *reinterpret_cast<Sm*>(smem_raw);
  const GdnFwdParams& f = p.f;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const int64_t r = blockIdx.x;
  const int h = blockIdx.y, G = f.HV / f.H;
  int64_t t0;
  int len;
  if (!chunk_span(f, w.chunk_indices, w.nts, r, BT, t0, len)) return;  // sentinel row / empty chunk
  const int wm = warp % Tl::WM, wn = warp / Tl::WM, r0 = 16 * wm + g;
  const int ck = wn * Tl::CK, cv = wn * Tl::CV, cb = wn * Tl::CB;

  const int64_t qoff = (t0 * f.H + h) * kK, qstride = int64_t(f.H) * kK;
  load_rows_async<T, BT, kK, kLdK, Tl::NT>(s.q, static_cast<const T*>(f.q) + qoff, qstride, len, tid);
  load_rows_async<T, BT, kK, kLdK, Tl::NT>(s.k, static_cast<const T*>(f.k) + qoff, qstride, len, tid);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  for (int i = warp; i < 2 * BT; i += Tl::NW) {  // row scales (the forward prep's formula)
    const T* row = i < BT ? &s.q[i][0] : &s.k[i - BT][0];
    const float ss = row_sumsq_warp<T, kK>(row, lane);
    if (lane == 0) (i < BT ? s.rq : s.rk)[i < BT ? i : i - BT] = f.l2norm ? rsqrtf(ss + 1e-6f) : 1.f;
  }

  float dqA[NTK][4] = {}, dkA[NTK][4] = {};
  for (int jj = 0; jj < G; ++jj) {
    const int j = h * G + jj;
    load_head<T, BT, V>(s, p, w, r, t0, len, j, tid);
    cp_async_commit();
    if (tid < BT) s.beta[tid] = tid < len ? gdn_beta(f, t0 + tid, j) : 0.f;
    stage_decays<BT, Tl::NT>(s.a, p, t0, len, j, tid);  // every thread; rows past the end read no gate
    cp_async_wait<0>();
    __syncthreads();

    float dgam[NTK][4], dbp[2] = {0.f, 0.f}, xh[NTK][4], eg[NTK][4];
    {  // Y = Ai^T dV^ (registers until every warp has read dV^); Y.v
      float Y[Tl::NTV][4] = {};
      mma_tile<T, Tl::NTV, BT, true, false>(Y, &s.ai[0][0], Sm::kLdA, 16 * wm, &s.y[0][0], Sm::kLdV, cv, lane);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int rr = r0 + 8 * hf;
        if (rr >= len) continue;
        const T* vrow = static_cast<const T*>(f.v) + ((t0 + rr) * f.HV + j) * int64_t(V);
#pragma unroll
        for (int nt = 0; nt < Tl::NTV; ++nt) {
          const float2 vv = ld_pair(vrow + cv + nt * 8 + 2 * tq);
          dbp[hf] += Y[nt][2 * hf] * vv.x + Y[nt][2 * hf + 1] * vv.y;
        }
      }
      {  // blk[b][c]: decay product of row block b (rows < len), thread (c, b)
        static_assert(Tl::NT / kK == BT / 16, "one thread per (channel, row block)");
        const int cc = tid % kK, b = tid / kK;
        float pr = 1.f;
#pragma unroll
        for (int u = 0; u < 16; ++u) pr *= 16 * b + u < len ? s.a[16 * b + u][cc] : 1.f;
        s.blk[b][cc] = pr;
      }
      {  // <S_d, dS'_d> per key row on every thread: NT / K adjacent lanes per row, interleaved column
         // pairs (conflict-free: row stride 68 words), then a lane-group sum
        constexpr int TPR = Tl::NT / kK;
        const int d = tid / TPR, qq = tid % TPR;
        float acc = 0.f;
#pragma unroll 4
        for (int cc = 2 * qq; cc < V; cc += 2 * TPR) {
          const float2 a = ld_pair(&s.u.st.S[d][cc]), b = ld_pair(&s.u.st.dS[d][cc]);
          acc += a.x * b.x + a.y * b.y;
        }
#pragma unroll
        for (int o = 1; o < TPR; o <<= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (qq == 0) s.sd[d] = acc;
      }
      __syncthreads();
#pragma unroll
      for (int hf = 0; hf < 2; ++hf)
#pragma unroll
        for (int nt = 0; nt < Tl::NTV; ++nt)
          st_pair(&s.y[r0 + 8 * hf][cv + nt * 8 + 2 * tq], Y[nt][2 * hf], Y[nt][2 * hf + 1]);
    }
    frag_eg_blk<BT, NTK>(eg, s.a, s.blk, wm, r0, ck, tq);
    {  // dq_inter = eg (.) scale (dO S^T)
      float t[NTK][4] = {};
      mma_tile<T, NTK, V, false, true>(t, &s.dO[0][0], Sm::kLdV, 16 * wm, &s.u.st.S[0][0], Sm::kLdV, ck, lane);
      frag_rows<T, NTK>(xh, s.q, s.rq, r0, ck, tq);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float v = f.scale * eg[nt][e] * t[nt][e];
          dqA[nt][e] += v;
          dgam[nt][e] = xh[nt][e] * v;
        }
    }
    frag_rows<T, NTK>(xh, s.k, s.rk, r0, ck, tq);  // k^ from here on
    {  // dk_inter = egl (.) (V^ dS'^T); its column sums of k^ (.) dk_inter feed the last row
      float t[NTK][4] = {}, egl[NTK][4];
      mma_tile<T, NTK, V, false, true>(t, &s.vh[0][0], Sm::kLdV, 16 * wm, &s.u.st.dS[0][0], Sm::kLdV, ck, lane);
      frag_egl_blk<BT, NTK>(egl, s.a, s.blk, wm, r0, ck, tq, len);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt) {
        float z[2] = {0.f, 0.f};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float v = egl[nt][e] * t[nt][e];
          dkA[nt][e] += v;
          dgam[nt][e] -= xh[nt][e] * v;
          z[e & 1] += xh[nt][e] * v;
        }
#pragma unroll
        for (int x = 0; x < 2; ++x) {
          float v = z[x];
          v += __shfl_xor_sync(0xffffffffu, v, 4);
          v += __shfl_xor_sync(0xffffffffu, v, 8);
          v += __shfl_xor_sync(0xffffffffu, v, 16);
          if (g == 0) s.zsum[wm][ck + nt * 8 + 2 * tq + x] = v;
        }
      }
    }
    __syncthreads();  // Y visible to every warp

    {  // xn = Y S^T: dk^ -= beta eg xn; dgam -= beta eg k^ xn; dbeta -= eg k^ . xn
      float t[NTK][4] = {};
      mma_tile<T, NTK, V, false, true>(t, &s.y[0][0], Sm::kLdV, 16 * wm, &s.u.st.S[0][0], Sm::kLdV, ck, lane);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float bi = s.beta[r0 + 8 * (e >> 1)];
          const float kex = eg[nt][e] * t[nt][e];
          dkA[nt][e] -= bi * kex;
          dgam[nt][e] -= bi * xh[nt][e] * kex;
          dbp[e >> 1] -= xh[nt][e] * kex;
        }
    }
    float pm[Tl::NTB][4] = {}, lm[Tl::NTB][4] = {};
    mma_tile<T, Tl::NTB, V, false, true>(pm, &s.dO[0][0], Sm::kLdV, 16 * wm, &s.vh[0][0], Sm::kLdV, cb, lane);
    mma_tile<T, Tl::NTB, V, false, true>(lm, &s.y[0][0], Sm::kLdV, 16 * wm, &s.vh[0][0], Sm::kLdV, cb, lane);
    __syncthreads();  // S, dS' dead: the union takes daqk / dL
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i = r0 + 8 * hf;
#pragma unroll
      for (int nt = 0; nt < Tl::NTB; ++nt)
#pragma unroll
        for (int x = 0; x < 2; ++x) {
          const int jc = cb + nt * 8 + 2 * tq + x;
          s.u.in.daqk[i][jc] = (i < len && jc <= i) ? f.scale * pm[nt][2 * hf + x] : 0.f;
          s.u.in.dL[i][jc] = (i < len && jc < i) ? -lm[nt][2 * hf + x] : 0.f;
        }
    }
    __syncthreads();

    {  // row side: dq^ += dq2; r = beta rp into dk^; dbeta += k^ . rp
      float dq2[NTK][4], rp[NTK][4];
      if constexpr (TC) offdiag_rows<T, BT, V, NTK>(s, dq2, rp, wm, ck, g, tq);  // blocks left of the diagonal
      intra_rows<T, BT, V, NTK>(s, dq2, rp, r0, ck, tq, TC ? 16 * wm : 0, !TC);
      float qh[NTK][4];
      frag_rows<T, NTK>(qh, s.q, s.rq, r0, ck, tq);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float bi = s.beta[r0 + 8 * (e >> 1)];
          dqA[nt][e] += dq2[nt][e];
          dkA[nt][e] += bi * rp[nt][e];
          dgam[nt][e] += qh[nt][e] * dq2[nt][e] + xh[nt][e] * bi * rp[nt][e];
          dbp[e >> 1] += xh[nt][e] * rp[nt][e];
        }
    }
    {  // column side: dk^ += dka; dgam -= k^ (.) dka
      float ca[NTK][4];
      if constexpr (TC) offdiag_cols<T, BT, V, NTK>(s, ca, wm, ck, g, tq);  // blocks below the diagonal
      intra_cols<T, BT, V, NTK>(s, ca, r0, ck, tq, len, TC ? min(len, 16 * wm + 16) : len, !TC);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          dkA[nt][e] += ca[nt][e];
          dgam[nt][e] -= xh[nt][e] * ca[nt][e];
        }
    }
    __syncthreads();  // every read of a / daqk / dL done: a takes dgam
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i = r0 + 8 * hf;
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt) {
        const int col = ck + nt * 8 + 2 * tq;
        s.a[i][col] = i < len ? dgam[nt][2 * hf] : 0.f;
        s.a[i][col + 1] = i < len ? dgam[nt][2 * hf + 1] : 0.f;
      }
    }
    flush_rowdot<BT>(s.red, 0, dbp, r0, wn, tq);
    __syncthreads();

    gate_chain<T, BT, V, Tl::NT>(s, p, w, r, t0, len, j, tid);
    __syncthreads();
  }

  // L2-norm backward of the group sums: dx = r dy - r^3 (dy . x) x (x raw, y = r x); store.
  float pq2[2] = {}, pk2[2] = {};
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int rr = r0 + 8 * hf, col = ck + nt * 8 + 2 * tq;
      const float2 qv = ld_pair(&s.q[rr][col]), kv = ld_pair(&s.k[rr][col]);
      pq2[hf] += dqA[nt][2 * hf] * qv.x + dqA[nt][2 * hf + 1] * qv.y;
      pk2[hf] += dkA[nt][2 * hf] * kv.x + dkA[nt][2 * hf + 1] * kv.y;
    }
  flush_rowdot<BT>(s.red, 1, pq2, r0, wn, tq);
  flush_rowdot<BT>(s.red, 2, pk2, r0, wn, tq);
  __syncthreads();
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int rr = r0 + 8 * hf;
    if (rr >= len) continue;
    float fq = 1.f, cq = 0.f, fk = 1.f, cpk = 0.f;
    if (f.l2norm) {
      const float sq = ((s.red[1][rr][0] + s.red[1][rr][1]) + s.red[1][rr][2]) + s.red[1][rr][3];
      const float sk = ((s.red[2][rr][0] + s.red[2][rr][1]) + s.red[2][rr][2]) + s.red[2][rr][3];
      fq = s.rq[rr];
      fk = s.rk[rr];
      cq = fq * fq * fq * sq;
      cpk = fk * fk * fk * sk;
    }
    const int64_t base = ((t0 + rr) * f.H + h) * int64_t(kK);
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int col = ck + nt * 8 + 2 * tq;
      const float2 qv = ld_pair(&s.q[rr][col]), kv = ld_pair(&s.k[rr][col]);
      if (p.dq.p) {
        store_out(p.dq.p, p.dq.t, base + col, fq * dqA[nt][2 * hf] - cq * qv.x);
        store_out(p.dq.p, p.dq.t, base + col + 1, fq * dqA[nt][2 * hf + 1] - cq * qv.y);
      }
      if (p.dk.p) {
        store_out(p.dk.p, p.dk.t, base + col, fk * dkA[nt][2 * hf] - cpk * kv.x);
        store_out(p.dk.p, p.dk.t, base + col + 1, fk * dkA[nt][2 * hf + 1] - cpk * kv.y);
      }
    }
  }
}
template <class T, int BT, int V, bool TC>
void launch_t(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  launch(kda_bwd_chunk2_kernel<T, BT, V, TC>, dim3(static_cast<unsigned>(w.nt_cap), p.f.H),
         dim3(KTiling<BT, V>::NT), sizeof(KdaChunk2Smem<T, BT, V>), stream, p, w);
}

template <class T, int BT, bool TC>
void launch_bt(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  if (p.f.V == 128) return launch_t<T, BT, 128, TC>(p, w, stream);
  if (p.f.V == 64) return launch_t<T, BT, 64, TC>(p, w, stream);
  LINATTN_UNSUPPORTED("kda bwd chunk2 kernel: V = ", p.f.V, " (supported: 64, 128)");
}

template <bool TC>
void launch_v(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  const bool bf = p.f.io == ElemType::kBF16;
  LINATTN_CHECK(bf || p.f.io == ElemType::kF16, "kda bwd chunk2 kernel: io dtype must be bf16 or fp16");
  if (p.f.BT == 64) {
    bf ? launch_bt<__nv_bfloat16, 64, TC>(p, w, stream) : launch_bt<__half, 64, TC>(p, w, stream);
  } else if (p.f.BT == 32) {
    bf ? launch_bt<__nv_bfloat16, 32, TC>(p, w, stream) : launch_bt<__half, 32, TC>(p, w, stream);
  } else {
    LINATTN_UNSUPPORTED("kda bwd chunk2 kernel: chunk_size ", p.f.BT, " (supported: 32, 64)");
  }
}

}  // namespace

void launch_kda_bwd_chunk2(const GdnBwdParams& p, const GdnBwdWs& w, bool tensor_core_intra, cudaStream_t stream) {
  LINATTN_CHECK(p.f.kda && p.f.K == kK, "kda bwd chunk2 kernel: K must be ", kK, ", got ", p.f.K);
  LINATTN_CHECK(w.nt_cap < (int64_t(1) << 31), "kda bwd chunk2 kernel: too many chunks: ", w.nt_cap);
  tensor_core_intra ? launch_v<true>(p, w, stream) : launch_v<false>(p, w, stream);
}

}  // namespace linattn::cuda
