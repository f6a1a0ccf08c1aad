// chunked8 (LINATTN_CUDA_KDA_BWD=chunked8, MODE 8 of kda_bwd_chunk2_kernel.cuh): chunked7 with the lower-left
// 8 x 8 quadrant of each diagonal 16 x 16 intra block on the split-TF32 path, so the fp32 per-element loops
// walk only the two 8 x 8 diagonal sub-blocks (a warp: <= 8 steps per side instead of 16). Only where the
// 8-row-group decay tables exist (DecayTab: V = 128); V = 64 runs chunked7's code.
// Rows side, row block I (R1 = 16 I, R' = R1 + 7): for rows i in R1 + 8 .. R1 + 15 and columns j in R1 .. R'
// E_ij = E_iR' E_R'j, E_R'j = suf[j] (group R1), E_iR' = pre[i] (group R1 + 8); the blocks left of the
// diagonal (reference R = R1 - 1) enter row i >= R1 + 8 as E_iR' (E_R'R S_off + S_quad), E_R'R = pre[R'].
// Columns side, column block J (j0 = 16 J, R' = j0 + 7): for columns j in j0 .. R' and rows i in j0 + 8 ..
// j0 + 15, E_ij = E_iR' E_R'j with E_iR' = pre[i] (group j0 + 8), E_R'j = suf[j] (group j0); the blocks below
// (reference R = j0 + 15) enter column j <= R' as E_R'j (E_RR' S_off + S_quad), E_RR' = pre[R] (group j0 + 8).
// Every factor is still a product of decays <= 1 (nothing divided, no positive exponent). Fragment rows of the
// quadrant's other half (rows i < R1 + 8, resp. columns j > R') are zero in A, so the mma adds exact zeros there.
// Not bitwise equal to chunked7 (other summation order of the quadrant's terms); held to the same bars.
// chunked9 = chunked8 + the fp32 gate tile by cp.async (load_gate_tile, at the end): bitwise equal to chunked8.
#pragma once
#include <cstdint>

#include "cuda/kda/kda_bwd_chunk2_parts.cuh"

namespace linattn::cuda {
namespace kda_bwd {

// Row side, every split-TF32 part: the blocks left of the diagonal (offdiag_rows with the tables) and the
// quadrant rows R1 + 8 .. R1 + 15 x columns R1 .. R1 + 7. Sets dq2 / rp.
template <class T, int BT, int V, int NTK, bool TRUNC = false>
__device__ __forceinline__ void offdiag_rows_q(const KdaChunkSmem<T, BT, V>& s, float (&dq2)[NTK][4],
                                               float (&rp)[NTK][4], int wm, int ck, int g, int tq, const DecayTab& tb) {
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      dq2[nt][e] = 0.f;
      rp[nt][e] = 0.f;
    }
  const int R1 = 16 * wm, r0 = R1 + g;
  if (wm > 0) {
    float pc[NTK];  // prod_{8 kk + 8 <= t < R1} a_t at channel ck + 8 nt + g
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) pc[nt] = 1.f;
    for (int kk = 2 * wm - 1; kk >= 0; --kk) {
      const int br = 8 * kk;
      Tf32x2 fq[4], fl[4];
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const int row = r0 + 8 * (x & 1), col = br + tq + 4 * (x >> 1);
        fq[x] = split_tf32_t<TRUNC>(s.u.in.daqk[row][col]);
        fl[x] = split_tf32_t<TRUNC>(s.u.in.dL[row][col]);
      }
      const float rk1 = s.rk[br + tq], rk2 = s.rk[br + tq + 4];
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt) {
        const int d = ck + 8 * nt + g;
        float e1, e2;
        decay_pair_t<true, true>(s.a, tb, br, d, tq, pc[nt], e1, e2);
        const Tf32x2 b0 = split_tf32_t<TRUNC>(rk1 * MmaType<T>::to_float(s.k[br + tq][d]) * e1);
        const Tf32x2 b1 = split_tf32_t<TRUNC>(rk2 * MmaType<T>::to_float(s.k[br + tq + 4][d]) * e2);
        mma_3xtf32(dq2[nt], fq, b0, b1);
        mma_3xtf32(rp[nt], fl, b0, b1);
      }
    }
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {  // rows r0 + 8: from reference R to R' (E_R'R)
      const float2 pg = *reinterpret_cast<const float2*>(&tb.pre[R1 + 7][ck + nt * 8 + 2 * tq]);
      dq2[nt][2] *= pg.x;
      dq2[nt][3] *= pg.y;
      rp[nt][2] *= pg.x;
      rp[nt][3] *= pg.y;
    }
  }
  {  // the quadrant: A rows r0 (x even) zero, rows r0 + 8 = daqk / dL[r0 + 8][R1 + tq (+4)]
    const Tf32x2 z{0u, 0u};
    Tf32x2 fq[4] = {z, z, z, z}, fl[4] = {z, z, z, z};
#pragma unroll
    for (int x = 1; x < 4; x += 2) {
      const int col = R1 + tq + 4 * (x >> 1);
      fq[x] = split_tf32_t<TRUNC>(s.u.in.daqk[r0 + 8][col]);
      fl[x] = split_tf32_t<TRUNC>(s.u.in.dL[r0 + 8][col]);
    }
    const float rk1 = s.rk[R1 + tq], rk2 = s.rk[R1 + tq + 4];
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int d = ck + 8 * nt + g;
      const Tf32x2 b0 = split_tf32_t<TRUNC>(rk1 * MmaType<T>::to_float(s.k[R1 + tq][d]) * tb.suf[R1 + tq][d]);
      const Tf32x2 b1 = split_tf32_t<TRUNC>(rk2 * MmaType<T>::to_float(s.k[R1 + tq + 4][d]) * tb.suf[R1 + tq + 4][d]);
      mma_3xtf32(dq2[nt], fq, b0, b1);
      mma_3xtf32(rp[nt], fl, b0, b1);
    }
  }
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) {  // E_iR for rows r0 (group R1), E_iR' for rows r0 + 8 (group R1 + 8)
    const int col = ck + nt * 8 + 2 * tq;
    const float2 p0 = *reinterpret_cast<const float2*>(&tb.pre[r0][col]);
    const float2 p1 = *reinterpret_cast<const float2*>(&tb.pre[r0 + 8][col]);
    const float sc[4] = {p0.x, p0.y, p1.x, p1.y};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      dq2[nt][e] *= sc[e];
      rp[nt][e] *= sc[e];
    }
  }
}

// Row side of the two 8 x 8 diagonal sub-blocks, both rows in one walk: row r0 over j = r0 .. R1, row r0 + 8
// over j = r0 + 8 .. R1 + 8 (g + 1 steps each), adding to dq2 / rp (intra_rows' terms, per row the same order).
template <class T, int BT, int V, int NTK>
__device__ __forceinline__ void intra_rows_q(const KdaChunkSmem<T, BT, V>& s, float (&dq2)[NTK][4],
                                             float (&rp)[NTK][4], int r0, int g, int ck, int tq) {
  float e[NTK][4];
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int x = 0; x < 4; ++x) e[nt][x] = 1.f;
#pragma unroll 1
  for (int u = 0; u <= g; ++u) {
    const int jl = r0 - u, jh = r0 + 8 - u;
    const float rkl = s.rk[jl], rkh = s.rk[jh];
    const float c0 = s.u.in.daqk[r0][jl] * rkl, l0 = s.u.in.dL[r0][jl] * rkl;
    const float c1 = s.u.in.daqk[r0 + 8][jh] * rkh, l1 = s.u.in.dL[r0 + 8][jh] * rkh;
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int col = ck + nt * 8 + 2 * tq;
      const float2 kl = ld_pair(&s.k[jl][col]), kh = ld_pair(&s.k[jh][col]);
      const float2 al = *reinterpret_cast<const float2*>(&s.a[jl][col]);
      const float2 ah = *reinterpret_cast<const float2*>(&s.a[jh][col]);
      const float klx[2] = {kl.x, kl.y}, khx[2] = {kh.x, kh.y}, alx[2] = {al.x, al.y}, ahx[2] = {ah.x, ah.y};
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const float t0 = klx[x] * e[nt][x];
        dq2[nt][x] += c0 * t0;
        rp[nt][x] += l0 * t0;
        e[nt][x] *= alx[x];
        const float t1 = khx[x] * e[nt][2 + x];
        dq2[nt][2 + x] += c1 * t1;
        rp[nt][2 + x] += l1 * t1;
        e[nt][2 + x] *= ahx[x];
      }
    }
  }
}

// Column side, every split-TF32 part: the blocks below the diagonal (offdiag_cols with the tables) and the
// quadrant columns j0 .. j0 + 7 x rows j0 + 8 .. j0 + 15. Sets ca.
template <class T, int BT, int V, int NTK, bool TRUNC = false>
__device__ __forceinline__ void offdiag_cols_q(const KdaChunkSmem<T, BT, V>& s, float (&ca)[NTK][4], int wm, int ck,
                                               int g, int tq, const DecayTab& tb) {
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) ca[nt][e] = 0.f;
  const int j0 = 16 * wm, R1 = j0 + 16, r0 = j0 + g;
  if (R1 < BT) {
    float pc[NTK];  // prod_{R1 <= t < br} a_t at channel ck + 8 nt + g
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) pc[nt] = 1.f;
    for (int br = R1; br < BT; br += 8) {
      Tf32x2 fq[4], fl[4];  // A[m = j][k = i] = daqk[i][j] (transposed read)
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const int row = br + tq + 4 * (x >> 1), col = r0 + 8 * (x & 1);
        fq[x] = split_tf32_t<TRUNC>(s.u.in.daqk[row][col]);
        fl[x] = split_tf32_t<TRUNC>(s.u.in.dL[row][col]);
      }
      const float sq1 = s.rq[br + tq], sq2 = s.rq[br + tq + 4];
      const float sk1 = s.beta[br + tq] * s.rk[br + tq], sk2 = s.beta[br + tq + 4] * s.rk[br + tq + 4];
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt) {
        const int d = ck + 8 * nt + g;
        float e1, e2;
        decay_pair_t<false, true>(s.a, tb, br, d, tq, pc[nt], e1, e2);
        mma_3xtf32(ca[nt], fq, split_tf32_t<TRUNC>(sq1 * MmaType<T>::to_float(s.q[br + tq][d]) * e1),
                   split_tf32_t<TRUNC>(sq2 * MmaType<T>::to_float(s.q[br + tq + 4][d]) * e2));
        mma_3xtf32(ca[nt], fl, split_tf32_t<TRUNC>(sk1 * MmaType<T>::to_float(s.k[br + tq][d]) * e1),
                   split_tf32_t<TRUNC>(sk2 * MmaType<T>::to_float(s.k[br + tq + 4][d]) * e2));
      }
    }
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {  // columns r0: from reference R to R' (E_RR')
      const float2 pg = *reinterpret_cast<const float2*>(&tb.pre[R1 - 1][ck + nt * 8 + 2 * tq]);
      ca[nt][0] *= pg.x;
      ca[nt][1] *= pg.y;
    }
  }
  {  // the quadrant: A rows m = g (x even) = daqk / dL[j0 + 8 + tq (+4)][r0], rows m = g + 8 zero
    const int br = j0 + 8;
    const Tf32x2 z{0u, 0u};
    Tf32x2 fq[4] = {z, z, z, z}, fl[4] = {z, z, z, z};
#pragma unroll
    for (int x = 0; x < 4; x += 2) {
      const int row = br + tq + 4 * (x >> 1);
      fq[x] = split_tf32_t<TRUNC>(s.u.in.daqk[row][r0]);
      fl[x] = split_tf32_t<TRUNC>(s.u.in.dL[row][r0]);
    }
    const float sq1 = s.rq[br + tq], sq2 = s.rq[br + tq + 4];
    const float sk1 = s.beta[br + tq] * s.rk[br + tq], sk2 = s.beta[br + tq + 4] * s.rk[br + tq + 4];
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int d = ck + 8 * nt + g;
      const float e1 = tb.pre[br + tq][d], e2 = tb.pre[br + tq + 4][d];
      mma_3xtf32(ca[nt], fq, split_tf32_t<TRUNC>(sq1 * MmaType<T>::to_float(s.q[br + tq][d]) * e1),
                 split_tf32_t<TRUNC>(sq2 * MmaType<T>::to_float(s.q[br + tq + 4][d]) * e2));
      mma_3xtf32(ca[nt], fl, split_tf32_t<TRUNC>(sk1 * MmaType<T>::to_float(s.k[br + tq][d]) * e1),
                 split_tf32_t<TRUNC>(sk2 * MmaType<T>::to_float(s.k[br + tq + 4][d]) * e2));
    }
  }
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) {  // E_R'j for columns r0 (group j0), E_Rj for columns r0 + 8 (group j0 + 8)
    const int col = ck + nt * 8 + 2 * tq;
    const float2 s0 = *reinterpret_cast<const float2*>(&tb.suf[r0][col]);
    const float2 s1 = *reinterpret_cast<const float2*>(&tb.suf[r0 + 8][col]);
    ca[nt][0] *= s0.x;
    ca[nt][1] *= s0.y;
    ca[nt][2] *= s1.x;
    ca[nt][3] *= s1.y;
  }
}

// Column side of the two 8 x 8 diagonal sub-blocks, both columns in one walk: column r0 over rows i = r0 ..
// j0 + 7, column r0 + 8 over i = r0 + 8 .. j0 + 15 (8 - g steps each, rows < len), adding to ca (intra_cols'
// terms, per column the same order; rows past len have daqk = dL = 0, a = 0).
template <class T, int BT, int V, int NTK>
__device__ __forceinline__ void intra_cols_q(const KdaChunkSmem<T, BT, V>& s, float (&ca)[NTK][4], int r0, int g,
                                             int ck, int tq, int len) {
  float e[NTK][4];
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int x = 0; x < 4; ++x) e[nt][x] = 1.f;
#pragma unroll 1
  for (int u = 0; u < 8 - g; ++u) {
    const int il = r0 + u, ih = r0 + 8 + u;
    if (il >= len) break;
    const bool vh = ih < len, ml = il + 1 < len, mh = ih + 1 < len;
    const float gq0 = s.u.in.daqk[il][r0] * s.rq[il], gk0 = s.u.in.dL[il][r0] * (s.beta[il] * s.rk[il]);
    const float gq1 = vh ? s.u.in.daqk[ih][r0 + 8] * s.rq[ih] : 0.f;
    const float gk1 = vh ? s.u.in.dL[ih][r0 + 8] * (s.beta[ih] * s.rk[ih]) : 0.f;
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int col = ck + nt * 8 + 2 * tq;
      const float2 ql = ld_pair(&s.q[il][col]), kl = ld_pair(&s.k[il][col]);
      const float2 qh = ld_pair(&s.q[ih][col]), kh = ld_pair(&s.k[ih][col]);
      float2 al = make_float2(0.f, 0.f), ah = make_float2(0.f, 0.f);
      if (ml) al = *reinterpret_cast<const float2*>(&s.a[il + 1][col]);
      if (mh) ah = *reinterpret_cast<const float2*>(&s.a[ih + 1][col]);
      const float qlx[2] = {ql.x, ql.y}, klx[2] = {kl.x, kl.y}, alx[2] = {al.x, al.y};
      const float qhx[2] = {qh.x, qh.y}, khx[2] = {kh.x, kh.y}, ahx[2] = {ah.x, ah.y};
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        ca[nt][x] += (gq0 * qlx[x] + gk0 * klx[x]) * e[nt][x];
        e[nt][x] *= alx[x];
        ca[nt][2 + x] += (gq1 * qhx[x] + gk1 * khx[x]) * e[nt][2 + x];
        e[nt][2 + x] *= ahx[x];
      }
    }
  }
}

// chunked9 (MODE 9 = chunked8 + this): fp32 raw gates of a head as one cp.async tile straight into a (rows < len,
// zeros past it), issued before the head's 152 KB of tiles, so the decay staging no longer waits on 16 scalar
// gate loads queued behind them (ncu at 3d3a678: 3.4% of the chunk kernel's samples, long scoreboard, on those
// loads). The formula pass is stage_decays_r's second loop on the same raw values: the same bits. Needs fp32
// gates and a 16-byte aligned g (rows are K = 128 floats, 512 B); otherwise the kernel takes chunked8's loads.
__device__ __forceinline__ bool gate_tile_ok(const GdnFwdParams& f) {
  return f.g_type == ElemType::kF32 && (reinterpret_cast<uintptr_t>(f.g) & 15) == 0;
}
template <int BT, int NT>
__device__ __forceinline__ void load_gate_tile(float (*a)[kLdF], const GdnFwdParams& f, int64_t t0, int len, int j,
                                               int tid) {
  constexpr int P = kK / 4;  // 16-byte pieces per row
  const float* g = static_cast<const float*>(f.g) + (t0 * f.HV + j) * int64_t(kK);
  const int64_t stride = int64_t(f.HV) * kK;
#pragma unroll 1
  for (int idx = tid; idx < BT * P; idx += NT) {
    const int row = idx / P, ch = idx % P;
    const bool valid = row < len;
    cp_async16(&a[row][ch * 4], g + (valid ? row * stride + ch * 4 : 0), valid);
  }
}
template <int BT, int NT>
__device__ __forceinline__ void stage_decays_tile(float (*a)[kLdF], const GdnBwdParams& p, int len, int j, int tid) {
  constexpr int PER = BT * kK / NT, RG = NT / kK;
  static_assert(PER * NT == BT * kK && RG * kK == NT, "whole tile per pass");
  const int c = tid % kK, i0 = tid / kK;
  const GateConst gc = gate_const(p.f, j, c);
#pragma unroll 1
  for (int m = 0; m < PER; ++m) {
    const int i = i0 + RG * m;
    a[i][c] = i < len ? expf(gate_deriv_raw(p.f, a[i][c], gc).g) : 0.f;
  }
}

}  // namespace kda_bwd
}  // namespace linattn::cuda
