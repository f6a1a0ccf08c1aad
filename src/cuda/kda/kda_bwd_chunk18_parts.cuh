// chunked18 (kdabwd18, session 15): the diagonal 16 x 16 blocks' two walked 8 x 8 triangles of chunked11 split once
// more at their 4-row halves (Q4 flag of diag_rows_split / diag_cols_horner, kda_bwd_chunk11_parts.cuh): each 8 x 8
// triangle = two 4 x 4 triangles (walked, <= 4 steps per lane instead of <= 8) + one 4 x 4 square on 3xTF32 mma.sync.
// The block's two 4 x 4 squares (rows 16 I + 4.., columns 16 I..; rows 16 I + 12.., columns 16 I + 8..) share one
// m16n8k8: k 0..3 = the upper square's columns (row side) / rows (column side), k 4..7 the lower square's; A rows m = g
// and m = g + 8 are the lane's own fragment rows (row side: daqk of rows r0 / r1 of lanes g >= 4, and in the idle rows
// of lanes g < 4 the dL of lane g + 4's rows, moved there by shfl.up 16; column side: columns r0 / r1 of lanes g < 4,
// the other A entries zero). Separable through the square's reference row R' (its last column,
// 16 I + 3 / 16 I + 11): E_ij = E_iR' E_R'j, both factors products of <= 4 decays a <= 1 (no exponent positive, no
// division: safe at -1000 gates, a = 0). The row side's outer factor E_iR' is the (shorter) triangle walk's running
// product at its end; the 8 x 8 square then needs E_{r1, 16 I + 7} = E_{r1, 16 I + 11} prod_{16 I + 8..16 I + 11} a
// for lanes g >= 4 (q4_prod4). The column side seeds its Horner walk at level R' with the square's sum (upper column
// r0 of lanes g < 4: the 8 x 8 square's sum carried down by prod_{16 I + 4..16 I + 7} a, plus the 4 x 4 square's).
#pragma once
#include "cuda/kda/kda_bwd_chunk2_parts.cuh"

namespace linattn::cuda {
namespace kda_bwd {

// prod_{b <= t < b + 4} a_t at channels col, col + 1 (rows b.. of one 8-row group: LOWER = b is the group's first row,
// else its fifth): from the DecayTab (pre / suf, TAB) or walked over a.
template <bool TAB, bool LOWER>
__device__ __forceinline__ float2 q4_prod4(const float (*a)[kLdF], const DecayTab& tb, int b, int col) {
  if constexpr (TAB) {
    const float* t = LOWER ? &tb.pre[b + 3][col] : &tb.suf[b - 1][col];
    return make_float2(t[0], t[1]);
  } else {
    float2 p = *reinterpret_cast<const float2*>(&a[b][col]);
#pragma unroll
    for (int u = 1; u < 4; ++u) {
      const float2 x = *reinterpret_cast<const float2*>(&a[b + u][col]);
      p.x *= x.x;
      p.y *= x.y;
    }
    return p;
  }
}

// Decay factor of fragment row b + tq at channel d within its 4-row square: AFTER (row side) prod_{tq < u <= 3}
// a_{b + u} = E_{b + 3, b + tq}; else (column side) prod_{0 <= u <= tq} a_{b + u} = E_{b + tq, b - 1}.
template <bool AFTER>
__device__ __forceinline__ float q4_decay(const float (*a)[kLdF], int b, int d, int tq) {
  float p = AFTER ? 1.f : a[b][d];
#pragma unroll
  for (int u = 1; u < 4; ++u) {
    const float x = a[b + u][d];
    p *= (AFTER ? u > tq : u <= tq) ? x : 1.f;
  }
  return p;
}

// A fragment of the block's two 4 x 4 squares: a0 = (m g, k tq) = src[ra][ca], a3 = (m g + 8, k tq + 4) = src[rb][cb]
// where `own` (the lane's rows / columns are in a square), a1 = a2 = 0.
template <bool FS, bool LT>
__device__ __forceinline__ void q4_frag_a(Tf32x2 (&fa)[4], float x0, float x3, bool own) {
  fa[0] = split_tf32_t<FS, LT>(own ? x0 : 0.f);
  fa[1] = fa[2] = Tf32x2{0u, 0u};
  fa[3] = split_tf32_t<FS, LT>(own ? x3 : 0.f);
}

// Row side: dq2 / rp (rows r0 = j0 + g, r1 = r0 + 8) += E_{row, R'} (.) sum_{j in the square} daqk / dL_{row, j} k^_j
// E_{R', j} for lanes g >= 4; e = the walk's end products E_{r0, j0 + 3}, E_{r1, j0 + 11} (fragment layout). One A
// fragment: lanes g >= 4 put their rows' daqk in A rows g / g + 8, lanes g < 4 the dL of lane g + 4's rows (idle
// otherwise), so one 3xTF32 product per n-tile; the dL sums reach their lanes by shfl.up 16 (lane g + 4 = lane + 16).
template <class T, int BT, int V, int NTK, bool FS, bool LT>
__device__ __forceinline__ void diag_rows_q4(const KdaChunkSmem<T, BT, V>& s, float (&dq2)[NTK][4],
                                             float (&rp)[NTK][4], const float (&e)[NTK][4], int j0, int ck, int g,
                                             int tq) {
  const bool own = g >= 4;
  const int ra = j0 + (g | 4), rb = ra + 8, ja = j0 + tq, jb = ja + 8;
  const auto& src = own ? s.u.in.daqk : s.u.in.dL;
  Tf32x2 fa[4];
  q4_frag_a<FS, LT>(fa, src[ra][ja], src[rb][jb], true);
  const float rka = s.rk[ja], rkb = s.rk[jb];
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) {
    const int d = ck + 8 * nt + g;
    const Tf32x2 b0 = split_tf32_t<FS, LT>(rka * MmaType<T>::to_float(s.k[ja][d]) * q4_decay<true>(s.a, j0, d, tq));
    const Tf32x2 b1 =
        split_tf32_t<FS, LT>(rkb * MmaType<T>::to_float(s.k[jb][d]) * q4_decay<true>(s.a, j0 + 8, d, tq));
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    mma_3xtf32(acc, fa, b0, b1);
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const float l = __shfl_up_sync(0xffffffffu, acc[x], 16);
      dq2[nt][x] += e[nt][x] * (own ? acc[x] : 0.f);
      rp[nt][x] += e[nt][x] * (own ? l : 0.f);
    }
  }
}

// Column side: h (columns r0 = j0 + g, r1 = r0 + 8) from the 8 x 8 square's sum at level j0 + 7 (h 0, 1; h 2, 3 zero)
// to the Horner seeds at the walk's top row j0 + (g | 3): lanes g < 4 carry h 0, 1 down to level j0 + 3
// (prod_{j0 + 4..j0 + 7} a) and add the 4 x 4 squares' sums sum_i E_{i, R'} X_i (R' = j0 + 3 / j0 + 11, rows i of the
// square: X_i = daqk_{i, c} q^_i + beta_i dL_{i, c} k^_i); lanes g >= 4 keep h.
template <class T, int BT, int V, int NTK, bool TAB, bool FS, bool LT>
__device__ __forceinline__ void diag_cols_q4(const KdaChunkSmem<T, BT, V>& s, float (&h)[NTK][4], int j0, int ck,
                                             int g, int tq, const DecayTab& tb) {
  const bool own = g < 4;
  const int ca = j0 + g, cb = ca + 8, ia = j0 + 4 + tq, ib = ia + 8;
  Tf32x2 fq[4], fl[4];
  q4_frag_a<FS, LT>(fq, s.u.in.daqk[ia][ca], s.u.in.daqk[ib][cb], own);
  q4_frag_a<FS, LT>(fl, s.u.in.dL[ia][ca], s.u.in.dL[ib][cb], own);
  const float sqa = s.rq[ia], sqb = s.rq[ib], ska = s.beta[ia] * s.rk[ia], skb = s.beta[ib] * s.rk[ib];
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) {
    const int d = ck + 8 * nt + g, col = ck + nt * 8 + 2 * tq;
    const float ea = q4_decay<false>(s.a, j0 + 4, d, tq), eb = q4_decay<false>(s.a, j0 + 12, d, tq);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    mma_3xtf32(acc, fq, split_tf32_t<FS, LT>(sqa * MmaType<T>::to_float(s.q[ia][d]) * ea),
               split_tf32_t<FS, LT>(sqb * MmaType<T>::to_float(s.q[ib][d]) * eb));
    mma_3xtf32(acc, fl, split_tf32_t<FS, LT>(ska * MmaType<T>::to_float(s.k[ia][d]) * ea),
               split_tf32_t<FS, LT>(skb * MmaType<T>::to_float(s.k[ib][d]) * eb));
    const float2 f = q4_prod4<TAB, false>(s.a, tb, j0 + 4, col);
    h[nt][0] = (own ? f.x : 1.f) * h[nt][0] + acc[0];
    h[nt][1] = (own ? f.y : 1.f) * h[nt][1] + acc[1];
    h[nt][2] = acc[2];
    h[nt][3] = acc[3];
  }
}

}  // namespace kda_bwd
}  // namespace linattn::cuda
