// chunked11 (kdadiag, session 12): the diagonal 16 x 16 intra blocks of the KDA chunk kernel split at their
// 8-row halves. chunked7 walks them per element (intra_rows / intra_cols): lane g's two fragment rows need
// g + 1 and g + 9 steps (columns 16 - g and 8 - g), so every warp runs 16 two-row steps (108 / 132 SASS
// instructions each). Here the block = two 8 x 8 triangles + the lower-left 8 x 8 square:
//  - the triangles (rows r0 over columns 16 I .. r0, rows r0 + 8 over 16 I + 8 .. r0 + 8; columns likewise)
//    are walked in lockstep: g + 1 (8 - g) steps for BOTH rows, 8 warp steps instead of 16, no predicates
//    (the column side as a Horner recurrence: 3 FP operations per element instead of 4);
//  - the square (rows 16 I + 8 .., columns 16 I .. 16 I + 7) is separable through the reference row
//    R = 16 I + 7: E_ij = E_iR E_Rj with both factors products of decays <= 1 (no exponent positive, no
//    division; safe at -1000 gates), so it runs on 3xTF32 mma.sync like the off-diagonal blocks. The outer
//    factor of the row side (E_iR) is the triangle walk's running product at its end, the column side's sum
//    seeds its Horner walk at R; the inner factors come from the DecayTab (V = 128) or decay_pair (V = 64).
// Row side: one m16n8k8 per (n-tile, split term) with A rows 0..7 = daqk, 8..15 = dL of the 8 lower rows
// (both sums share the B operand k^_j E_Rj). Column side: two k-steps (daqk against q^, dL against
// beta k^), A rows 8..15 zero. Not bitwise chunked7 (the square's sum is a product): checked against the
// fp64 reference.
#pragma once
#include <type_traits>

#include "cuda/kda/kda_bwd_chunk2_parts.cuh"

namespace linattn::cuda {
namespace kda_bwd {

// ld_pair, with UP (chunked17) a bf16 pair unpacked by one shift and one mask instead of __bfloat162float's PRMT +
// shift per half: the same floats (bf16 -> fp32 is exact); fp16 and UP = false: ld_pair.
template <bool UP, class T>
__device__ __forceinline__ float2 ld_pair_x(const T* src) {
  if constexpr (UP && std::is_same_v<T, __nv_bfloat16>) {
    const uint32_t w = *reinterpret_cast<const uint32_t*>(src);
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  } else {
    return ld_pair(src);
  }
}

// dq2 / rp (rows r0, r0 + 8) += the diagonal block's terms (intra_rows over the block, init = false).
template <class T, int BT, int V, int NTK, bool TAB, bool FS = false, bool LT = false, bool UP = false>
__device__ __forceinline__ void diag_rows_split(const KdaChunkSmem<T, BT, V>& s, float (&dq2)[NTK][4],
                                                float (&rp)[NTK][4], int wm, int ck, int g, int tq,
                                                const DecayTab& tb) {
  const int j0 = 16 * wm, r0 = j0 + g, r1 = r0 + 8;
  float e[NTK][4];  // E_{row, column walked}: e 0, 1 row r0 (columns jr), e 2, 3 row r1 (columns jr + 8)
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int x = 0; x < 4; ++x) e[nt][x] = 1.f;
  for (int jr = r0; jr >= j0; --jr) {
    const int jh = jr + 8;
    const float rk0 = s.rk[jr], rk1 = s.rk[jh];
    const float cf[4] = {s.u.in.daqk[r0][jr] * rk0, s.u.in.dL[r0][jr] * rk0, s.u.in.daqk[r1][jh] * rk1,
                         s.u.in.dL[r1][jh] * rk1};
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int col = ck + nt * 8 + 2 * tq;
      const float2 k0 = ld_pair_x<UP>(&s.k[jr][col]), k1 = ld_pair_x<UP>(&s.k[jh][col]);
      const float2 a0 = *reinterpret_cast<const float2*>(&s.a[jr][col]);
      const float2 a1 = *reinterpret_cast<const float2*>(&s.a[jh][col]);
      const float kx[4] = {k0.x, k0.y, k1.x, k1.y}, ax[4] = {a0.x, a0.y, a1.x, a1.y};
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const float t = kx[x] * e[nt][x];
        dq2[nt][x] += cf[x & 2] * t;
        rp[nt][x] += cf[(x & 2) + 1] * t;
        e[nt][x] *= ax[x];
      }
    }
  }
  // e[nt][2 + x] = prod_{j0 + 8 <= t <= r1} a_t = E_{r1, R}. The square: A[m][k] = daqk (m < 8) / dL (m >= 8)
  // of row j0 + 8 + (m & 7) at column j0 + k; B[k][n] = rk_j k_j E_Rj at j = j0 + k, channel ck + 8 nt + n.
  Tf32x2 fa[4];
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    const int col = j0 + tq + 4 * (x >> 1);
    fa[x] = split_tf32_t<FS, LT>((x & 1) ? s.u.in.dL[r1][col] : s.u.in.daqk[r1][col]);
  }
  const float rka = s.rk[j0 + tq], rkb = s.rk[j0 + tq + 4];
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) {
    const int d = ck + 8 * nt + g;
    float pc = 1.f, e1, e2;
    decay_pair_t<true, TAB>(s.a, tb, j0, d, tq, pc, e1, e2);
    const Tf32x2 b0 = split_tf32_t<FS, LT>(rka * MmaType<T>::to_float(s.k[j0 + tq][d]) * e1);
    const Tf32x2 b1 = split_tf32_t<FS, LT>(rkb * MmaType<T>::to_float(s.k[j0 + tq + 4][d]) * e2);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    mma_3xtf32(acc, fa, b0, b1);
    dq2[nt][2] += e[nt][2] * acc[0];
    dq2[nt][3] += e[nt][3] * acc[1];
    rp[nt][2] += e[nt][2] * acc[2];
    rp[nt][3] += e[nt][3] * acc[3];
  }
}

// One Horner step of the column walk at rows i (column r0) and i + 8 (column r1): h = a_{i+1} h + X_i with
// X_i = daqk_ij q^_i + beta_i dL_ij k^_i (MUL = false: h + X_i, the walk's first row).
template <bool MUL, class T, int BT, int V, int NTK, bool UP = false>
__device__ __forceinline__ void horner_cols_step(const KdaChunkSmem<T, BT, V>& s, float (&h)[NTK][4], int i, int r0,
                                                 int ck, int tq) {
  const int ih = i + 8, r1 = r0 + 8;
  const float gq[2] = {s.u.in.daqk[i][r0] * s.rq[i], s.u.in.daqk[ih][r1] * s.rq[ih]};
  const float gk[2] = {s.u.in.dL[i][r0] * (s.beta[i] * s.rk[i]), s.u.in.dL[ih][r1] * (s.beta[ih] * s.rk[ih])};
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) {
    const int col = ck + nt * 8 + 2 * tq;
    const float2 q0 = ld_pair_x<UP>(&s.q[i][col]), k0 = ld_pair_x<UP>(&s.k[i][col]);
    const float2 q1 = ld_pair_x<UP>(&s.q[ih][col]), k1 = ld_pair_x<UP>(&s.k[ih][col]);
    const float qx[4] = {q0.x, q0.y, q1.x, q1.y}, kx[4] = {k0.x, k0.y, k1.x, k1.y};
    float ax[4] = {1.f, 1.f, 1.f, 1.f};
    if constexpr (MUL) {
      const float2 a0 = *reinterpret_cast<const float2*>(&s.a[i + 1][col]);
      const float2 a1 = *reinterpret_cast<const float2*>(&s.a[ih + 1][col]);
      ax[0] = a0.x;
      ax[1] = a0.y;
      ax[2] = a1.x;
      ax[3] = a1.y;
    }
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const float xv = gq[x >> 1] * qx[x] + gk[x >> 1] * kx[x];
      h[nt][x] = MUL ? h[nt][x] * ax[x] + xv : h[nt][x] + xv;
    }
  }
}

// ca (columns r0, r0 + 8) += the diagonal block's terms (intra_cols over the block, init = false), in Horner
// form (3 FP operations per element, the running-product walk's 4): the square first, its sum S at level
// R = 16 I + 7 seeds column r0's walk, then rows R down to r0 (R + 8 down to r1 for column r1), the first row
// without the multiply. Rows past len carry zero coefficients (daqk = dL = 0, beta = 0, zero q / k rows, a = 0),
// so the walks need no len. The square: A[m][k] = daqk / dL of row j0 + 8 + k at column j0 + m (m < 8; rows
// m >= 8 zero), B[k][n] = rq_i q_i E_iR / beta_i rk_i k_i E_iR at i = j0 + 8 + k, channel ck + 8 nt + n.
template <class T, int BT, int V, int NTK, bool TAB, bool FS = false, bool LT = false, bool UP = false>
__device__ __forceinline__ void diag_cols_horner(const KdaChunkSmem<T, BT, V>& s, float (&ca)[NTK][4], int wm,
                                                 int ck, int g, int tq, const DecayTab& tb) {
  const int j0 = 16 * wm, r0 = j0 + g, R = j0 + 7;
  float h[NTK][4];
  {
    const int i1 = j0 + 8 + tq, i2 = i1 + 4;
    Tf32x2 fq[4], fl[4];
    fq[1] = fq[3] = fl[1] = fl[3] = Tf32x2{0u, 0u};
    fq[0] = split_tf32_t<FS, LT>(s.u.in.daqk[i1][r0]);
    fq[2] = split_tf32_t<FS, LT>(s.u.in.daqk[i2][r0]);
    fl[0] = split_tf32_t<FS, LT>(s.u.in.dL[i1][r0]);
    fl[2] = split_tf32_t<FS, LT>(s.u.in.dL[i2][r0]);
    const float sq1 = s.rq[i1], sq2 = s.rq[i2], sk1 = s.beta[i1] * s.rk[i1], sk2 = s.beta[i2] * s.rk[i2];
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int d = ck + 8 * nt + g;
      float pc = 1.f, e1, e2;
      decay_pair_t<false, TAB>(s.a, tb, j0 + 8, d, tq, pc, e1, e2);
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
      mma_3xtf32(acc, fq, split_tf32_t<FS, LT>(sq1 * MmaType<T>::to_float(s.q[i1][d]) * e1),
                 split_tf32_t<FS, LT>(sq2 * MmaType<T>::to_float(s.q[i2][d]) * e2));
      mma_3xtf32(acc, fl, split_tf32_t<FS, LT>(sk1 * MmaType<T>::to_float(s.k[i1][d]) * e1),
                 split_tf32_t<FS, LT>(sk2 * MmaType<T>::to_float(s.k[i2][d]) * e2));
      h[nt][0] = acc[0];
      h[nt][1] = acc[1];
      h[nt][2] = h[nt][3] = 0.f;
    }
  }
  horner_cols_step<false, T, BT, V, NTK, UP>(s, h, R, r0, ck, tq);
  for (int i = R - 1; i >= r0; --i) horner_cols_step<true, T, BT, V, NTK, UP>(s, h, i, r0, ck, tq);
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int x = 0; x < 4; ++x) ca[nt][x] += h[nt][x];
}

}  // namespace kda_bwd
}  // namespace linattn::cuda
