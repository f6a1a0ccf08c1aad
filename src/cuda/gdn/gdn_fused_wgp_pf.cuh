// The pipelined wgmma GDN forward with P formed in the kernel (LINATTN_CUDA_GDN_P=fused; gdn_fused_wgp.cu's
// gdn_fused_wgp_pf_kernel, chosen when the workspace has no P: gdn_fwd.cc). WG0 (state chain) is
// gdn_fused_wgp.cu's, unchanged; the output warpgroup (WG1) streams q and k (not q and P) and per chunk
//   P = scale M o D o (Q K^T): one 8-step m64n64k16 wgmma, both operands in shared memory, then in registers
//       P[t][s] = acc * 2^(gam_t - gam_s) * rk_s * (scale rq_t) for s <= t (rows past the chunk end: gam_t
//       = -inf, so 0), bf16 / fp16, stored by stmatrix into the first 64-key panel of the chunk's k tile
//       (K-major [row][s]: the B operand of V^T P^T);
//   O^T = S^T Q^T diag(scale e^gam rq) + V^T P^T as in output_warpgroup (gdn_fused_wgp_common.cuh).
// Balanced causal skip: the q tile's rows are permuted so that each warp's 16 accumulator rows are one
// early and one late 8-token group (tile rows 16w + 0..7 = tokens 8w + 0..7, tile rows 16w + 8..15 =
// tokens 8(7 - w) + 0..7: row_token below). Then every warp forms P on 9 of its 16 (8-row x 8-column)
// blocks (w + 1 for the early group, 8 - w for the late one; the rest are known zeros), 18 of 32
// elements per thread, and only the two diagonal blocks need the s <= t select. O^T's columns follow
// the same tile-row order (q is its B operand, P^T's N index); O is staged back in token order by
// giving stmatrix.trans the token row of each 8-row matrix, so the global stores are the default's.
// Software pipeline within WG1: chunk c's Q K^T is issued first and chunk c-1's O (packed, staged,
// stored) is written while it runs, so the Q K^T latency is not on WG1's path; chunk c+1's loads are
// issued after the barrier that ends chunk c-1's staging reads (the staging is stage (c-1) & 1's k
// tile, panel 1, which chunk c+1's loads overwrite).
// Shared memory: WG0's ring as WgpSmem, WG1's 2 stages of q + k (32 KB each) with per-token factors,
// the hand-off buffers; no separate P / O staging. The prep then skips P (gdn_prep.cu, WP = false).
#pragma once
#include <math_constants.h>

#include "cuda/gdn/gdn_fused_wgp_common.cuh"

namespace linattn::cuda {
namespace wgp {

// Tile row r of the q tile / P / O^T's N index holds token row_token(r) (r < 64); token_row inverts it.
__host__ __device__ constexpr int row_group_token(int u) { return (u & 1) ? 7 - (u >> 1) : (u >> 1); }
__host__ __device__ constexpr int row_token(int r) { return 8 * row_group_token(r >> 3) + (r & 7); }
__host__ __device__ constexpr int token_row(int tok) {
  return 8 * ((tok >> 3) < 4 ? 2 * (tok >> 3) : 15 - 2 * (tok >> 3)) + (tok & 7);
}
// The map is a bijection and warp w's row groups are tokens 8w.. and 8(7 - w).. (form_p_warp relies on it).
constexpr bool row_map_ok() {
  for (int r = 0; r < 64; ++r)
    if (token_row(row_token(r)) != r || row_token(r) != 8 * ((r & 8) ? 7 - (r >> 4) : (r >> 4)) + (r & 7)) return false;
  return true;
}
static_assert(row_map_ok(), "gdn fused (P in WG1): the q-row permutation");

template <class T>
struct WgpSmemPf {
  using Stage0 = typename WgpSmem<T, false>::Stage0;
  using Xch = typename WgpSmem<T, false>::Xch;
  struct alignas(1024) Stage1 {  // WG1's inputs of one chunk
    alignas(1024) uint8_t q[kBT * kK * 2];  // [tile row][key] K-major, tile row r = token row_token(r)
    alignas(1024) uint8_t k[kBT * kK * 2];  // [token][key] K-major; after Q K^T: P [tile row][s], then O [token][v] (panel 1)
    float gam[kBT], rq[kBT], rk[kBT];        // raw inputs, thread t < 64 copies token t
    float qsc[kBT];                          // scale e^gam rq per tile row
    float2 rowf[kBT];                        // per tile row: (gam, or -inf past the chunk end; scale rq)
    float4 colf[kBT / 2];                    // per token pair 2i, 2i + 1: (gam_2i, gam_2i+1, rk_2i, rk_2i+1)
  };
  Stage0 st0[kStages0<false>];
  Stage1 st1[kStages1];
  Xch xch[2];
};

template <class T>
__device__ __forceinline__ void load_output_inputs_pf(typename WgpSmemPf<T>::Stage1& st, const GdnFwdParams& p,
                                                      const GdnChunkWs& ws, int64_t t0, int len, int h, int j, int t) {
  const T* q = static_cast<const T*>(p.q) + (t0 * p.H + h) * kK;
  const T* k = static_cast<const T*>(p.k) + (t0 * p.H + h) * kK;
  const int64_t stride = int64_t(p.H) * kK;
  const int kr = t >> 4, kc = (t & 15) * 8;  // as in load_state_inputs: rows kr + 8u, chunk t % 16
  uint8_t* dq = st.q + kmaj(kr, kc, kBT);    // tile row kr + 8u <- token 8 row_group_token(u) + kr
  if (len == kBT) {
#pragma unroll
    for (int u = 0; u < 8; ++u) cp_async16(dq + u * 1024, q + (8 * row_group_token(u) + kr) * stride + kc, true);
  } else {
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int tok = 8 * row_group_token(u) + kr;
      const bool valid = tok < len;
      cp_async16(dq + u * 1024, valid ? q + tok * stride + kc : q, valid);
    }
  }
  copy_rows<8>(st.k + kmaj(kr, kc, kBT), 1024u, k + kr * stride + kc, 8 * stride, k, kr, 8, len);
  if (t < 64) {
    const bool valid = t < len;
    const int64_t tok = valid ? t0 + t : 0;
    cp_async4(st.gam + t, ws.gam + j * ws.T_cap + tok, valid);
    cp_async4(st.rq + t, ws.rq + h * ws.T_cap + tok, valid);
    cp_async4(st.rk + t, ws.rk + h * ws.T_cap + tok, valid);
  }
}

// Thread t < 64, from its own copies of token t (its cp.async group waited): the factors of the chunk.
template <class T>
__device__ __forceinline__ void token_factors(typename WgpSmemPf<T>::Stage1& st, float scale, int len, int t) {
  const float g = st.gam[t], rq = st.rq[t], rk = st.rk[t];
  const int r = token_row(t);
  st.qsc[r] = scale * exp2f(g) * rq;
  st.rowf[r] = make_float2(t < len ? g : -CUDART_INF_F, scale * rq);
  float* cf = reinterpret_cast<float*>(st.colf) + 4 * (t >> 1) + (t & 1);
  cf[0] = g;
  cf[2] = rk;
}

// P of warp W's rows from the Q K^T accumulator pa (waited) into pf (A-fragment order: pf[2m + hf] = the
// pair of registers 4m + 2hf, +1 = row group hf, columns 8m + 2(t % 4) + {0, 1}). Row group 0 is tokens
// 8W + g (g = lane / 4), group 1 tokens 8(7 - W) + g; block m of a group is kept up to its diagonal block
// (m <= W, resp. m <= 7 - W), where the column 2(t % 4) + e must be <= g (dm[e]).
template <class T, int W>
__device__ __forceinline__ void form_p_warp(uint32_t (&pf)[16], const float (&pa)[32],
                                            const typename WgpSmemPf<T>::Stage1& st, const bool (&dm)[2], int t) {
  const int g = (t & 31) >> 2;
  const float2 rf[2] = {st.rowf[16 * W + g], st.rowf[16 * W + 8 + g]};
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const int last[2] = {W, 7 - W};  // each row group's diagonal block
    if (m > last[0] && m > last[1]) {
      pf[2 * m] = pf[2 * m + 1] = 0u;
      continue;
    }
    const float4 cf = st.colf[4 * m + (t & 3)];
    const float gs[2] = {cf.x, cf.y}, rs[2] = {cf.z, cf.w};
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      if (m > last[hf]) {
        pf[2 * m + hf] = 0u;
        continue;
      }
      float v[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float x = pa[4 * m + 2 * hf + e] * ex2_ftz(rf[hf].x - gs[e]) * rs[e] * rf[hf].y;
        v[e] = (m < last[hf] || dm[e]) ? x : 0.f;
      }
      pf[2 * m + hf] = MmaType<T>::pack(v[0], v[1]);
    }
  }
}

// O^T's accumulator as bf16 / fp16 A-fragment pairs (right after its wgmma wait: the next chunk's
// store_output reads these, not registers a wgmma defined, so ptxas injects no wait there).
template <class T>
__device__ __forceinline__ void pack_output(uint32_t (&opk)[16], const float (&acc)[32]) {
#pragma unroll
  for (int i = 0; i < 16; ++i) opk[i] = MmaType<T>::pack(acc[2 * i], acc[2 * i + 1]);
}

// O^T of one chunk (packed by pack_output) staged [token][v] in its stage's k tile, panel 1, and stored:
// thread t stores 16 bytes (column chunk t % 8) of rows t / 8 + 16u < len; out: its row t / 8 of the chunk.
template <class T>
__device__ __forceinline__ void store_output(uint8_t* stg, const uint32_t (&opk)[16], T* out, int64_t ostride16,
                                             int len, int t) {
  const int lane = t & 31, mat = lane >> 3;
  // stmatrix.trans: matrix mat covers tile rows 16kk + 8(mat / 2) + 0..7 (= tokens 8 row_group_token(2kk +
  // mat / 2) + 0..7, contiguous) and values 16w + 8(mat % 2) + 0..7 (as output_warpgroup's st_row / st_col).
  const int st_col = 16 * (t >> 5) + 8 * (mat & 1), hi = mat >> 1, r8 = lane & 7;
#pragma unroll
  for (int kk = 0; kk < kBT / 16; ++kk) {
    const uint32_t r[4] = {opk[4 * kk], opk[4 * kk + 1], opk[4 * kk + 2], opk[4 * kk + 3]};
    const int tok = 8 * (hi ? row_group_token(2 * kk + 1) : row_group_token(2 * kk)) + r8;
    stmatrix_x4_trans(stg + sw128_offset(tok, st_col), r);
  }
  named_barrier(kBarWg1, 128);
  const int orow = t >> 3, och = (t & 7) * 8;
#pragma unroll
  for (int u = 0; u < kBT / 16; ++u) {
    if (orow + 16 * u < len) *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(stg + sw128_offset(orow + 16 * u, och));
    out += ostride16;
  }
}

// WG1 with P formed here: the output of chunk c, one chunk behind WG0 (see output_warpgroup).
template <class T>
__device__ void output_warpgroup_pf(WgpSmemPf<T>& s, const GdnFwdParams& p, const GdnChunkWs& ws, int64_t bos,
                                    int64_t eos, int nchunks, int h, int j, int v0, int t) {
  using Stage1 = typename WgpSmemPf<T>::Stage1;
  if (nchunks > 0) load_output_inputs_pf<T>(s.st1[0], p, ws, bos, chunk_len(bos, eos, 0), h, j, t);
  cp_async_commit();
  const int64_t ostride = int64_t(p.HV) * p.V, ostride16 = 16 * ostride;
  // This thread's output row t / 8 (column chunk t % 8) of chunk c - 1, advanced by a chunk per step.
  T* out = static_cast<T*>(p.o) + int64_t(j) * p.V + v0 + (bos - kBT + (t >> 3)) * ostride + (t & 7) * 8;
  float acc[32], pa[32];
  uint32_t opk[16];  // chunk c-1's O^T, packed
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = pa[i] = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i) opk[i] = 0u;
  const int lane = t & 31, mat = lane >> 3, warp = t >> 5;
  // stmatrix of P: matrix mat = (rows + 8 if mat is odd, columns + 8 if mat >= 2) of this warp's 16 rows.
  const int p_row = 16 * warp + 8 * (mat & 1) + (lane & 7), p_col = 8 * (mat >> 1);
  const bool dm[2] = {2 * (lane & 3) <= (lane >> 2), 2 * (lane & 3) + 1 <= (lane >> 2)};
  const uint64_t dq0 = desc_kmaj0(s.st1[0].q), dk0 = desc_kmaj0(s.st1[0].k);
  constexpr uint32_t kOPanel = kBT * 128u;  // O staging: the k tile's second 64-key panel
  for (int c = 0; c < nchunks; ++c) {
    const int stage = c & 1;
    Stage1& st = s.st1[stage];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(Stage1));
    const int64_t t0 = bos + int64_t(c) * kBT;
    const int len = chunk_len(bos, eos, c);
    cp_async_wait<0>();
    if (t < 64) token_factors<T>(st, p.scale, len, t);
    fence_view_async_shared();
    named_barrier(kBarWg1, 128);  // chunk c's inputs and factors visible; all of WG1 is past chunk c-1

    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_m64k16<T, 64, 0, 0>(pa, desc_at(dq0, soff + kmaj_step(kk, kBT)), desc_at(dk0, soff + kmaj_step(kk, kBT)),
                                kk > 0);
    wgmma_commit();
    // While Q K^T runs: chunk c-1's output from the accumulator of its V^T P^T.
    // Unconditional (no branch while the wgmma is in flight: ptxas would serialize it); chunk 0 stages
    // zeros into stage 1's free k tile and stores nothing (len 0).
    store_output<T>(s.st1[stage ^ 1].k + kOPanel, opk, out, ostride16, c > 0 ? kBT : 0, t);  // chunk c-1 is full
    out += 4 * ostride16;
    wgmma_wait<0>();
    wgmma_fence_operands(pa);
    uint32_t pf[16];
    switch (warp) {
      case 0: form_p_warp<T, 0>(pf, pa, st, dm, t); break;
      case 1: form_p_warp<T, 1>(pf, pa, st, dm, t); break;
      case 2: form_p_warp<T, 2>(pf, pa, st, dm, t); break;
      default: form_p_warp<T, 3>(pf, pa, st, dm, t); break;
    }
    // Every warp's slice of Q K^T has read the k tile, and every thread's reads of chunk c-1's staging
    // (stage c + 1's k tile) are done: P may overwrite this k tile, chunk c+1's loads the other stage.
    named_barrier(kBarWg1, 128);
    if (c + 1 < nchunks) load_output_inputs_pf<T>(s.st1[stage ^ 1], p, ws, t0 + kBT, chunk_len(bos, eos, c + 1), h, j, t);
    cp_async_commit();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk) {
      const uint32_t r[4] = {pf[4 * kk], pf[4 * kk + 1], pf[4 * kk + 2], pf[4 * kk + 3]};
      stmatrix_x4(st.k + sw128_offset(p_row, 16 * kk + p_col), r);
    }
    fence_view_async_shared();  // P visible to the async proxy; the full barrier below publishes it to WG1

    auto& x = s.xch[c & 1];
    named_barrier(kBarFull + (c & 1), 256);  // WG0 has written chunk c's fragments
    uint32_t sf[32], vf[16];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint4 u = x.s[i][t];
      sf[4 * i] = u.x, sf[4 * i + 1] = u.y, sf[4 * i + 2] = u.z, sf[4 * i + 3] = u.w;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 u = x.v[i][t];
      vf[4 * i] = u.x, vf[4 * i + 1] = u.y, vf[4 * i + 2] = u.z, vf[4 * i + 3] = u.w;
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_at(dq0, soff + kmaj_step(kk, kBT)), kk > 0);
    wgmma_commit();
    float qsc[16];
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const float2 q2 = *reinterpret_cast<const float2*>(&st.qsc[slot_col(t, 2 * m)]);
      qsc[2 * m] = q2.x, qsc[2 * m + 1] = q2.y;
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_regs(sf);
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] *= qsc[reg_slot(i)];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, vf + 4 * kk, desc_at(dk0, soff + kmaj_step(kk, kBT)), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_regs(vf);
    if (c + 2 < nchunks) named_barrier_arrive(kBarEmpty + (c & 1), 256);  // WG0 may refill this buffer
    pack_output<T>(opk, acc);
  }
  if (nchunks > 0) {  // the last chunk's output (its stage's k tile is free: nothing more is loaded)
    const int c = nchunks - 1;
    store_output<T>(s.st1[c & 1].k + kOPanel, opk, out, ostride16, chunk_len(bos, eos, c), t);
  }
  cp_async_wait<0>();
}

}  // namespace wgp
}  // namespace linattn::cuda
