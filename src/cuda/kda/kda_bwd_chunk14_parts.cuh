// chunked14 (kdabwd14, session 14; opt-in LINATTN_CUDA_KDA_BWD=chunked14): the eg / egl fragments of the KDA chunk
// kernel (C14 of kda_bwd_chunk2_kernel.cuh) in 8 row steps each instead of 16 / 15. chunked13's walks
// (frag_eg_blk_r / frag_egl_blk_r, kda_bwd_chunk5_parts.cuh) multiply both fragment rows r0 and r0 + 8 along one
// chain: lane g needs g + 9 (eg) and 15 - g (egl) steps, so every warp runs 16 / 15 dependent steps of 4 shared loads.
// Here the two rows share the window W = prod_{r0 < t <= r0 + 8} a_t, walked in the same 8 steps as the other chain:
//  - eg: lo = prod_{b < I} blk_b * prod_{16 I <= t <= r0} a_t (steps s <= g; chunked13's order, its bits), and
//    eg(r0 + 8) = lo * W (rows past len: 0, as a = 0 there, as in chunked13);
//  - egl: hi = prod_{b > I} blk_b * prod_{r0 + 8 < t < min(len, 16 I + 16)} a_t (chunked13's order and bits),
//    egl(r0) = hi * W' with W' the window over rows < len; 0 for rows >= len.
// Each step issues both chains' loads (8 shared loads in flight): half the dependent steps, one FMUL per element and
// step instead of chunked13's two for the rows walked together. Products of decays a <= 1 in another association
// (no exponent, no division: the same -1000 / lower-bound behaviour), so eg(r0 + 8) / egl(r0) are not chunked13's bits.
#pragma once
#include "cuda/kda/kda_bwd_chunk2_parts.cuh"

namespace linattn::cuda {
namespace kda_bwd {

// x[nt][0..1] *= the float2 of row t at the fragment's channels.
template <int NTK>
__device__ __forceinline__ void mul_row14(float (&x)[NTK][2], const float (*a)[kLdF], int t, int ck, int tq) {
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) {
    const float2 av = *reinterpret_cast<const float2*>(&a[t][ck + nt * 8 + 2 * tq]);
    x[nt][0] *= av.x;
    x[nt][1] *= av.y;
  }
}

// C17 (chunked17): x[nt][0..1] *= the float2 of row t where on, else *= 1 (exact: the same values), the row's loads
// unconditional (t < BT) so a walk step is one basic block: no divergent branch on the lane's row.
template <int NTK>
__device__ __forceinline__ void mul_row17(float (&x)[NTK][2], const float (*a)[kLdF], int t, int ck, int tq, bool on) {
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) {
    const float2 av = *reinterpret_cast<const float2*>(&a[t][ck + nt * 8 + 2 * tq]);
    x[nt][0] *= on ? av.x : 1.f;
    x[nt][1] *= on ? av.y : 1.f;
  }
}

// The product of the 16-row block products blk[b] for b in [b0, b1) at the fragment's channels (b increasing).
template <int NTK>
__device__ __forceinline__ void blk_prod14(float (&x)[NTK][2], const float (*blk)[kK], int b0, int b1, int ck,
                                           int tq) {
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) x[nt][0] = x[nt][1] = 1.f;
#pragma unroll 1
  for (int b = b0; b < b1; ++b)
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const float2 bv = *reinterpret_cast<const float2*>(&blk[b][ck + nt * 8 + 2 * tq]);
      x[nt][0] *= bv.x;
      x[nt][1] *= bv.y;
    }
}

// C17: the steps by mul_row17 (the row test a select of the factor 1, no divergent branch), the same multiplies; the
// loop stays rolled (unrolled by 2 it spilled: kda_bwd_chunk17_parts.cuh).
template <int BT, int NTK, bool C17 = false>
__device__ __forceinline__ void frag_eg14(float (&eg)[NTK][4], const float (*a)[kLdF], const float (*blk)[kK], int wm,
                                          int r0, int ck, int tq) {
  float lo[NTK][2], w[NTK][2];
  blk_prod14<NTK>(lo, blk, 0, wm, ck, tq);
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) w[nt][0] = w[nt][1] = 1.f;
  const int g = r0 - 16 * wm;
  if constexpr (C17) {
#pragma unroll 1
    for (int s = 0; s < 8; ++s) {
      mul_row17<NTK>(lo, a, 16 * wm + s, ck, tq, s <= g);
      mul_row17<NTK>(w, a, r0 + 1 + s, ck, tq, true);
    }
  } else {
#pragma unroll 1
    for (int s = 0; s < 8; ++s) {
      if (s <= g) mul_row14<NTK>(lo, a, 16 * wm + s, ck, tq);
      mul_row14<NTK>(w, a, r0 + 1 + s, ck, tq);
    }
  }
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      eg[nt][x] = lo[nt][x];
      eg[nt][2 + x] = lo[nt][x] * w[nt][x];
    }
}

template <int BT, int NTK, bool C17 = false>
__device__ __forceinline__ void frag_egl14(float (&egl)[NTK][4], const float (*a)[kLdF], const float (*blk)[kK],
                                           int wm, int r0, int ck, int tq, int len) {
  float hi[NTK][2], w[NTK][2];
  blk_prod14<NTK>(hi, blk, wm + 1, BT / 16, ck, tq);
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) w[nt][0] = w[nt][1] = 1.f;
  const int tend = min(len, 16 * wm + 16);
  if constexpr (C17) {  // row r0 + 9 + s may pass BT (then not < tend): read row BT - 1 and multiply by 1
#pragma unroll 1
    for (int s = 0; s < 8; ++s) {
      mul_row17<NTK>(w, a, r0 + 1 + s, ck, tq, r0 + 1 + s < len);
      mul_row17<NTK>(hi, a, min(r0 + 9 + s, BT - 1), ck, tq, r0 + 9 + s < tend);
    }
  } else {
#pragma unroll 1
    for (int s = 0; s < 8; ++s) {
      if (r0 + 1 + s < len) mul_row14<NTK>(w, a, r0 + 1 + s, ck, tq);
      if (r0 + 9 + s < tend) mul_row14<NTK>(hi, a, r0 + 9 + s, ck, tq);
    }
  }
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      egl[nt][x] = r0 < len ? hi[nt][x] * w[nt][x] : 0.f;
      egl[nt][2 + x] = r0 + 8 < len ? hi[nt][x] : 0.f;
    }
}

}  // namespace kda_bwd
}  // namespace linattn::cuda
