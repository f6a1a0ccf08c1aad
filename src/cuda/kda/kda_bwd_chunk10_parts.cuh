// chunked10 (LINATTN_CUDA_KDA_BWD=chunked10): the diagonal 16 x 16 blocks' per-element walks of the KDA
// chunk-gradient kernel (intra_rows / intra_cols of kda_bwd_chunk_common.cuh) with the work balanced over
// the warp's lanes. In the fragment layout lane g owns rows (columns) 16 I + g and 16 I + 8 + g, which
// need g + 1 and g + 9 (16 - g and 8 - g) steps: the warp runs 16 steps of both, ~17 of its 32 row-steps
// useful. Here lane g walks rows P = 16 I + p and Q = 16 I + 15 - p, p = perm(g), one after the other:
// (p + 1) + (16 - p) = 17 single-row steps for every lane. P is lane p's first fragment row, Q lane
// (7 - p)'s second, so the off-diagonal sums move to the walking lane and back by shuffles; each row's
// operations are intra_rows' / intra_cols' in the same order (explicit roundings: the same FMUL / FFMA),
// so the values are meant to be bitwise chunked7's. perm = 0 2 4 6 1 3 5 7: the rows walked at one step
// by a half-warp are 2 apart, so the float2 reads of a (pitch 132 words) hit distinct banks.
// Same running products of decays <= 1 as chunked7 (no exponent, no division): stable at -1000 gates.
#pragma once
#include <cuda_runtime.h>

#include "cuda/kda/kda_bwd_chunk_common.cuh"

namespace linattn::cuda {
namespace kda_bwd {

__device__ __forceinline__ int bal_perm(int g) { return ((g & 3) << 1) | (g >> 2); }
__device__ __forceinline__ int bal_inv(int p) { return ((p & 1) << 2) | (p >> 1); }

// w[0] <- x's first fragment row of lane srcP, w[1] <- x's second fragment row of lane srcQ.
template <int NTK>
__device__ __forceinline__ void bal_gather(float (&w)[2][NTK][2], const float (&x)[NTK][4], int srcP, int srcQ) {
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      w[0][nt][c] = __shfl_sync(0xffffffffu, x[nt][c], srcP);
      w[1][nt][c] = __shfl_sync(0xffffffffu, x[nt][2 + c], srcQ);
    }
}

// The inverse: x's first fragment row <- w[0] of lane src0, its second <- w[1] of lane src1.
template <int NTK>
__device__ __forceinline__ void bal_scatter(float (&x)[NTK][4], const float (&w)[2][NTK][2], int src0, int src1) {
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      x[nt][c] = __shfl_sync(0xffffffffu, w[0][nt][c], src0);
      x[nt][2 + c] = __shfl_sync(0xffffffffu, w[1][nt][c], src1);
    }
}

// intra_rows (init = false, jlo = i0 = 16 I) balanced: dq2_i += sum_{i0<=j<=i} daqk_ij k^_j E_ij,
// rp_i += sum_{i0<=j<i} dL_ij k^_j E_ij, walking j down from i. Row Q (16 - p >= 9 steps) first: its
// first 9 steps are uniform over the warp, then each lane finishes Q and walks P (one predicated step).
template <class T, int BT, int V, int NTK>
__device__ __forceinline__ void intra_rows_bal(const KdaChunkSmem<T, BT, V>& s, float (&dq2)[NTK][4],
                                               float (&rp)[NTK][4], int i0, int g, int ck, int tq) {
  const int p = bal_perm(g), P = i0 + p, Q = i0 + 15 - p, nQ = 16 - p;
  float dq[2][NTK][2], r[2][NTK][2], e[NTK][2];
  bal_gather<NTK>(dq, dq2, 4 * p + tq, 4 * (7 - p) + tq);
  bal_gather<NTK>(r, rp, 4 * p + tq, 4 * (7 - p) + tq);
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) e[nt][0] = e[nt][1] = 1.f;
  const auto step = [&](int row, int jr, bool onQ) {
    const float rkj = s.rk[jr];
    const float c = __fmul_rn(s.u.in.daqk[row][jr], rkj), l = __fmul_rn(s.u.in.dL[row][jr], rkj);
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int col = ck + nt * 8 + 2 * tq;
      const float2 kv = ld_pair(&s.k[jr][col]);
      const float2 av = *reinterpret_cast<const float2*>(&s.a[jr][col]);
      const float kx[2] = {kv.x, kv.y}, ax[2] = {av.x, av.y};
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const float t = __fmul_rn(kx[x], e[nt][x]);
        if (onQ) {
          dq[1][nt][x] = __fmaf_rn(c, t, dq[1][nt][x]);
          r[1][nt][x] = __fmaf_rn(l, t, r[1][nt][x]);
        } else {
          dq[0][nt][x] = __fmaf_rn(c, t, dq[0][nt][x]);
          r[0][nt][x] = __fmaf_rn(l, t, r[0][nt][x]);
        }
        e[nt][x] = __fmul_rn(e[nt][x], ax[x]);
      }
    }
  };
#pragma unroll 1
  for (int it = 0; it < 9; ++it) step(Q, Q - it, true);
#pragma unroll 1
  for (int it = 9; it < 17; ++it) {
    const bool onQ = it < nQ;
    if (it == nQ) {
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt) e[nt][0] = e[nt][1] = 1.f;
    }
    step(onQ ? Q : P, onQ ? Q - it : P + nQ - it, onQ);
  }
  bal_scatter<NTK>(dq2, dq, 4 * bal_inv(g) + tq, 4 * bal_inv(7 - g) + tq);
  bal_scatter<NTK>(rp, r, 4 * bal_inv(g) + tq, 4 * bal_inv(7 - g) + tq);
}

// intra_cols (init = false) balanced: ca_j += sum_{j<=i<ihi} (daqk_ij q^_i + beta_i dL_ij k^_i) E_ij,
// walking i up from j; column P (max(0, ihi - P) steps) first, then Q. Every lane has >= n1 steps of P.
template <class T, int BT, int V, int NTK>
__device__ __forceinline__ void intra_cols_bal(const KdaChunkSmem<T, BT, V>& s, float (&ca)[NTK][4], int i0, int g,
                                               int ck, int tq, int len, int ihi) {
  const int p = bal_perm(g), P = i0 + p, Q = i0 + 15 - p;
  const int nP = max(0, ihi - P), n = nP + max(0, ihi - Q), n1 = min(9, max(0, ihi - i0 - 7));
  float w[2][NTK][2], e[NTK][2];
  bal_gather<NTK>(w, ca, 4 * p + tq, 4 * (7 - p) + tq);
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) e[nt][0] = e[nt][1] = 1.f;
  const auto step = [&](int col0, int i, bool onP) {
    const float rqi = s.rq[i], bki = __fmul_rn(s.beta[i], s.rk[i]);
    const float gq = __fmul_rn(s.u.in.daqk[i][col0], rqi), gk = __fmul_rn(s.u.in.dL[i][col0], bki);
    const bool more = i + 1 < len;
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int col = ck + nt * 8 + 2 * tq;
      const float2 qv = ld_pair(&s.q[i][col]), kv = ld_pair(&s.k[i][col]);
      float2 av = make_float2(0.f, 0.f);
      if (more) av = *reinterpret_cast<const float2*>(&s.a[i + 1][col]);
      const float qx[2] = {qv.x, qv.y}, kx[2] = {kv.x, kv.y}, ax[2] = {av.x, av.y};
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const float u = __fmaf_rn(gq, qx[x], __fmul_rn(gk, kx[x]));
        if (onP) w[0][nt][x] = __fmaf_rn(u, e[nt][x], w[0][nt][x]);
        else w[1][nt][x] = __fmaf_rn(u, e[nt][x], w[1][nt][x]);
        e[nt][x] = __fmul_rn(e[nt][x], ax[x]);
      }
    }
  };
#pragma unroll 1
  for (int it = 0; it < n1; ++it) step(P, P + it, true);
#pragma unroll 1
  for (int it = n1; it < n; ++it) {
    const bool onP = it < nP;
    if (it == nP) {
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt) e[nt][0] = e[nt][1] = 1.f;
    }
    step(onP ? P : Q, onP ? P + it : Q + it - nP, onP);
  }
  bal_scatter<NTK>(ca, w, 4 * bal_inv(g) + tq, 4 * bal_inv(7 - g) + tq);
}

}  // namespace kda_bwd
}  // namespace linattn::cuda
