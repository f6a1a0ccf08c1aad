// Staging-area row placement of KDA prep v8 (kda_fwd_prep_v8_body.cuh), BT = 64, K = 128: v6's staging
// (kda_fwd_prep_v6_parts.cuh: k-versions of the 64 tokens in rows 0..63, q-versions of a level's 32
// right tokens in rows 64..95, level lv in words [16 lv, +16) of a row) with the rows permuted so every
// 8-row matrix that ldmatrix reads hits 8 distinct bank quads. A row is kLdW = 100 words = 1 quad mod 8
// apart, so a matrix is conflict-free exactly when its 8 physical rows differ mod 8; in v6 the small
// levels' matrices were not (rows {0-3, 8-11}, {0,1,4,5,8,9,12,13}, the even rows, and q rows beside
// k rows at levels 4 / 5: 128 of 480 matrix reads per round one wavefront over, 0.5k per CTA).
// k rows: bit 3 of the token complements its low 3 bits (all levels). q rows: levels 0..3 as v6; level
// 4 swaps bits 1 and 2 of the rank, level 5 rotates its low 3 bits left. Checked in a Python emulation
// of every slot's ldmatrix rows (480 matrix reads per round, 0 conflicts), the staging stores (still
// conflict-free) and the bijections. Only placement changes: the values are v6's.
#pragma once
#include "cuda/kda/kda_fwd_prep_v6_parts.cuh"

namespace linattn::cuda {
namespace {

__device__ __forceinline__ int st_krow(int i) { return i ^ (7 * ((i >> 3) & 1)); }

__device__ __forceinline__ int st_qrow(int lv, int idx) {
  const int x = idx & 7;
  const int y = lv == 4 ? (x & 1) | ((x >> 1) & 2) | ((x << 1) & 4) : lv == 5 ? ((x << 1) & 6) | (x >> 2) : x;
  return kBT + ((idx & ~7) | y);
}

// v6's slot_ldsm with the permuted rows.
template <int U>
__device__ __forceinline__ void slot_ldsm_v8(int w, int lane, uint32_t& a, uint32_t& b) {
  const int lv = slot_level<U>(w), l = 32 >> lv;
  int i, v, bi, jj, bj;
  slot_row<U>(w, (lane & 7) + 8 * ((lane >> 3) & 1), i, v, bi);
  slot_col<U>(w, lane & 7, jj, bj);
  a = 4 * ((v ? st_krow(i) : st_qrow(lv, compact_right(i, l))) * kLdW + 16 * lv + 4 * (lane >> 4));
  b = 4 * (st_krow(jj) * kLdW + 16 * lv + 4 * (lane >> 3));
}

// v6's stage_levels (the same products) into the permuted rows.
template <int LV0>
__device__ __forceinline__ void stage_levels_v8(uint32_t (*st)[kLdW], const float (*gam)[kLdG], int si, int c0,
                                                int wo, const float (&gi)[8], const __half2 (&xq)[4],
                                                const __half2 (&xk)[4]) {
  const int kr = st_krow(si);
#pragma unroll
  for (int lvi = 0; lvi < 3; ++lvi) {
    const int lv = LV0 + lvi, l = 32 >> lv;
    const bool right = (si & l) != 0;
    const int nref = (si & ~(2 * l - 1)) | l;
    float gn[8];
    load8f(&gam[nref][c0], gn);
    uint32_t kv[4], qv[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      // -|gam_i - gam_n|: gam_i - gam_n for a right token, gam_n - gam_i for a left one (<= 0 both).
      const __half2 f = __floats2half2_rn(ex2_ftz(-fabsf(gi[2 * e] - gn[2 * e])),
                                          ex2_ftz(-fabsf(gi[2 * e + 1] - gn[2 * e + 1])));
      const __half2 vk = __hmul2(xk[e], f), vq = __hmul2(xq[e], f);
      kv[e] = *reinterpret_cast<const uint32_t*>(&vk);
      qv[e] = *reinterpret_cast<const uint32_t*>(&vq);
    }
    *reinterpret_cast<uint4*>(&st[kr][16 * lv + wo]) = make_uint4(kv[0], kv[1], kv[2], kv[3]);
    if (right)
      *reinterpret_cast<uint4*>(&st[st_qrow(lv, compact_right(si, l))][16 * lv + wo]) =
          make_uint4(qv[0], qv[1], qv[2], qv[3]);
  }
}

}  // namespace
}  // namespace linattn::cuda
