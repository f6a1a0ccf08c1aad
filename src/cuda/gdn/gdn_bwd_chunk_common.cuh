// Row-scalar epilogue shared by the GDN backward chunk kernels (gdn_bwd_chunk.cu, mma.sync, and
// gdn_bwd_chunk_wg.cu, wgmma): quad / column-warp reductions of the row dot products and warp 0's
// finish of one value head (dgam, dbeta, the reverse cumsum into dg, the gate / beta chains, the
// per-chunk dA_log / ddt_bias partials). Both kernels use 4 column warps (kWN) and the same fp32
// reduction order, so their dg / dbeta differ only through the products' rounding.
#pragma once
#include "cuda/gdn/gdn_bwd_load.cuh"

namespace linattn::cuda {
namespace gdn_bwd_chunk_detail {

constexpr int kWN = 4;

// red[q][row][wn] = quad sum of part (rows r0, r0 + 8 of this warp).
template <int BT>
__device__ __forceinline__ void flush_rowdot(float (*red)[BT][kWN], int q, const float (&part)[2], int r0, int wn,
                                             int tq) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float v = part[hf];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    if (tq == 0) red[q][r0 + 8 * hf][wn] = v;
  }
}

// acc += diag(f) x
template <int NTW>
__device__ __forceinline__ void add_scaled(float (&acc)[NTW][4], const float (&x)[NTW][4], const float (&f)[2]) {
#pragma unroll
  for (int nt = 0; nt < NTW; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] += f[e >> 1] * x[nt][e];
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
  return v;
}

// Inclusive suffix sum over the lanes of a warp.
__device__ __forceinline__ float warp_suffix_sum(float v, int lane) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const float o = __shfl_down_sync(0xffffffffu, v, d);
    if (lane + d < 32) v += o;
  }
  return v;
}

// Warp 0: dgam, dbeta, the reverse cumsum into dg, the gate / beta chains and the gate partials
// of value head j (rows of the chunk; s.red / s.redc / s.wred hold the row-dot partials, s.rq / s.rk
// the row norms).
// gam / beta: the head's row scalars; draws(i, t) -> RowDraws of valid row i (token t).
struct RowDraws {
  float gate, dA, beta;  // GateDeriv::draw, GateDeriv::dA, gdn_beta_draw (when dbeta is requested)
};
template <int BT, int NW, class Sm, class Draws>
__device__ __forceinline__ void finish_rows_core(Sm& s, const float* gam, const float* beta, Draws draws,
                                                 const GdnBwdParams& p, const GdnBwdWs& w, int64_t r, int64_t t0,
                                                 int len, int j, int lane) {
  constexpr int NH = BT / 32;
  const GdnFwdParams& f = p.f;
  float sdS = 0.f;
  for (int i = 0; i < NW; ++i) sdS += s.wred[i];
  float dgam[NH], dbeta[NH], kdk = 0.f;
#pragma unroll
  for (int hh = 0; hh < NH; ++hh) {
    const int i = lane + 32 * hh;
    float a[6];
#pragma unroll
    for (int q = 0; q < 6; ++q) a[q] = ((s.red[q][i][0] + s.red[q][i][1]) + s.red[q][i][2]) + s.red[q][i][3];
    const float eg = exp2f(gam[i]), rq = s.rq[i], rk = s.rk[i], b = beta[i];
    const bool valid = i < len;
    float colM = 0.f;
#pragma unroll
    for (int w = 0; w < BT / 16; ++w) colM += s.redc[i][w];
    dgam[hh] = valid ? rq * a[1] - rk * a[2] - b * eg * rk * a[5] + a[3] - colM : 0.f;
    dbeta[hh] = a[0] - eg * rk * a[5] + rk * a[4];
    kdk += valid ? rk * a[2] : 0.f;
  }
  kdk = warp_sum(kdk);
  const float last = exp2f(gam[len - 1]) * sdS + kdk;
#pragma unroll
  for (int hh = 0; hh < NH; ++hh)
    if (lane + 32 * hh == len - 1) dgam[hh] += last;
  float carry = 0.f, dg[NH];
#pragma unroll
  for (int hh = NH - 1; hh >= 0; --hh) {
    const float sfx = warp_suffix_sum(dgam[hh], lane);
    dg[hh] = sfx + carry;
    carry += __shfl_sync(0xffffffffu, sfx, 0);
  }
  float pA = 0.f, pT = 0.f;
#pragma unroll
  for (int hh = 0; hh < NH; ++hh) {
    const int i = lane + 32 * hh;
    if (i >= len) continue;
    const int64_t t = t0 + i;
    const RowDraws rd = draws(i, t);
    const float dgo = dg[hh] * rd.gate;
    if (f.gate_in_kernel) {
      pA += dg[hh] * rd.dA;
      pT += dgo;
    }
    if (p.dg.p) store_out(p.dg.p, p.dg.t, t * f.HV + j, dgo);
    if (p.dbeta.p) store_out(p.dbeta.p, p.dbeta.t, t * f.HV + j, dbeta[hh] * rd.beta);
  }
  pA = warp_sum(pA);
  pT = warp_sum(pT);
  if (lane == 0) {
    w.part[(r * f.HV + j) * 2] = pA;
    w.part[(r * f.HV + j) * 2 + 1] = pT;
  }
}

// The row draws of valid row i of value head j (the gate input loads and exponentials).
__device__ __forceinline__ RowDraws row_draws(const GdnBwdParams& p, int64_t t, int j) {
  const GateDeriv gd = gdn_gate_deriv(p.f, t, j);
  return {gd.draw, gd.dA, p.dbeta.p ? gdn_beta_draw(p.f, t, j) : 0.f};
}

// Sm: any shared-memory struct with the members red, redc, wred, gam, rq, rk, beta of ChunkSmem;
// the row draws are computed here (warp 0, after the head's last barrier).
template <int BT, int NW, class Sm>
__device__ __forceinline__ void finish_rows(Sm& s, const GdnBwdParams& p, const GdnBwdWs& w, int64_t r, int64_t t0,
                                            int len, int j, int lane) {
  finish_rows_core<BT, NW>(s, s.gam, s.beta, [&](int, int64_t t) { return row_draws(p, t, j); }, p, w, r, t0, len, j,
                           lane);
}

}  // namespace gdn_bwd_chunk_detail
}  // namespace linattn::cuda
