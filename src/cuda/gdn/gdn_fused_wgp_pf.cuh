// The pipelined wgmma GDN forward with P formed in the kernel (LINATTN_CUDA_GDN_P=fused; gdn_fused_wgp.cu's
// gdn_fused_wgp_pf_kernel, chosen when the workspace has no P: gdn_fwd.cc). WG0 (state chain) is
// gdn_fused_wgp.cu's, unchanged; the output warpgroup streams q and k (not q and P) and per chunk
//   P = scale M o D o (Q K^T): one 8-step m64n64k16 wgmma with both operands in shared memory, issued
//       before WG1 waits for WG0's hand-off (it runs beside WG0's chain), then in registers
//       P[t][s] = acc * scale rq_t * rk_s * 2^(gam_t - gam_s) for s <= t < len (else 0), bf16 / fp16,
//       stored by stmatrix into the first 64-key panel of the chunk's k tile (K-major [t][s]: the B
//       operand of V^T P^T, as the prep's P was);
//   O^T = S^T Q^T diag(scale e^gam rq) + V^T P^T as in output_warpgroup (gdn_fused_wgp_common.cuh),
//       staged [token][v] 128-byte swizzled in the k tile's second panel (dead after Q K^T).
// Shared memory: WG0's ring as WgpSmem, WG1's 2 stages of q + k (32 KB each), the hand-off buffers;
// no separate P / O staging (226 KB incl. alignment). The prep then skips P (gdn_prep.cu, WP = false).
// Barriers: as WgpSmem's; WG1 adds one kBarWg1 between Q K^T and the P stores (every warp's slice of
// the product reads the whole k tile before any warp overwrites it).
#pragma once
#include "cuda/gdn/gdn_fused_wgp_common.cuh"

namespace linattn::cuda {
namespace wgp {

template <class T>
struct WgpSmemPf {
  using Stage0 = typename WgpSmem<T, false>::Stage0;
  using Xch = typename WgpSmem<T, false>::Xch;
  struct alignas(1024) Stage1 {  // WG1's inputs of one chunk
    alignas(1024) uint8_t q[kBT * kK * 2];  // [token][key] K-major
    alignas(1024) uint8_t k[kBT * kK * 2];  // [token][key] K-major; after Q K^T: P [t][s], then O [t][v] (panel 1)
    float gam[kBT], rq[kBT], rk[kBT];        // raw inputs, thread t < 64 copies token t
    float qsc[kBT];                          // scale e^gam rq per token
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
  const int kr = t >> 4, kc = (t & 15) * 8;  // as in load_state_inputs
  copy_rows<8>(st.q + kmaj(kr, kc, kBT), 1024u, q + kr * stride + kc, 8 * stride, q, kr, 8, len);
  copy_rows<8>(st.k + kmaj(kr, kc, kBT), 1024u, k + kr * stride + kc, 8 * stride, k, kr, 8, len);
  if (t < 64) {
    const bool valid = t < len;
    const int64_t tok = valid ? t0 + t : 0;
    cp_async4(st.gam + t, ws.gam + j * ws.T_cap + tok, valid);
    cp_async4(st.rq + t, ws.rq + h * ws.T_cap + tok, valid);
    cp_async4(st.rk + t, ws.rk + h * ws.T_cap + tok, valid);
  }
}

// P of one chunk from the Q K^T accumulator pa (rows t: acc_row, columns s: acc_col; its wgmma group
// is the only one in flight: waited here, after the factors' loads) into pf (A-fragment order:
// pf[i] = the pair of registers 2i, 2i + 1).
template <class T>
__device__ __forceinline__ void form_p(uint32_t (&pf)[16], float (&pa)[32], const typename WgpSmemPf<T>::Stage1& st,
                                       float scale, int len, int t) {
  float ga[2], aa[2];
  int lim[2];  // the last column kept in the row: s <= t, none past the chunk end
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int r = acc_row(t, 2 * hf);
    ga[hf] = st.gam[r];
    aa[hf] = scale * st.rq[r];
    lim[hf] = r < len ? r : -1;
  }
  float gc[16], rc[16];
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const float2 g2 = *reinterpret_cast<const float2*>(&st.gam[slot_col(t, 2 * m)]);
    const float2 r2 = *reinterpret_cast<const float2*>(&st.rk[slot_col(t, 2 * m)]);
    gc[2 * m] = g2.x, gc[2 * m + 1] = g2.y, rc[2 * m] = r2.x, rc[2 * m + 1] = r2.y;
  }
  wgmma_wait<0>();
  wgmma_fence_operands(pa);
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    float v[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int reg = 2 * i + e, hf = (reg & 3) >> 1, sl = reg_slot(reg);
      v[e] = acc_col(t, reg) <= lim[hf] ? pa[reg] * aa[hf] * rc[sl] * ex2_ftz(ga[hf] - gc[sl]) : 0.f;
    }
    pf[i] = MmaType<T>::pack(v[0], v[1]);
  }
}

// WG1 with P formed here: the output of chunk c, one chunk behind WG0 (see output_warpgroup).
template <class T>
__device__ void output_warpgroup_pf(WgpSmemPf<T>& s, const GdnFwdParams& p, const GdnChunkWs& ws, int64_t bos,
                                    int64_t eos, int nchunks, int h, int j, int v0, int t) {
  using Stage1 = typename WgpSmemPf<T>::Stage1;
  if (nchunks > 0) load_output_inputs_pf<T>(s.st1[0], p, ws, bos, chunk_len(bos, eos, 0), h, j, t);
  cp_async_commit();
  T* o_base = static_cast<T*>(p.o) + int64_t(j) * p.V + v0;
  const int64_t ostride = int64_t(p.HV) * p.V;
  float acc[32], pa[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = pa[i] = 0.f;
  const int lane = t & 31, mat = lane >> 3;
  // stmatrix.trans lane address of O^T (as output_warpgroup); stmatrix of P: matrix mat = (rows + 8 if
  // mat is odd, columns + 8 if mat >= 2) of this warp's 16 rows.
  const int st_row = 8 * (mat >> 1) + (lane & 7), st_col = 16 * (t >> 5) + 8 * (mat & 1);
  const int p_row = 16 * (t >> 5) + 8 * (mat & 1) + (lane & 7), p_col = 8 * (mat >> 1);
  const uint64_t dq0 = desc_kmaj0(s.st1[0].q), dk0 = desc_kmaj0(s.st1[0].k);
  constexpr uint32_t kOPanel = kBT * 128u;  // O staging: the k tile's second 64-key panel
  for (int c = 0; c < nchunks; ++c) {
    const int stage = c & 1;
    Stage1& st = s.st1[stage];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(Stage1));
    const int64_t t0 = bos + int64_t(c) * kBT;
    const int len = chunk_len(bos, eos, c);
    cp_async_wait<0>();
    if (t < 64) st.qsc[t] = p.scale * exp2f(st.gam[t]) * st.rq[t];  // own copies
    fence_view_async_shared();
    named_barrier(kBarWg1, 128);  // chunk c's inputs and scales visible; all of WG1 is past chunk c-1
    if (c + 1 < nchunks) load_output_inputs_pf<T>(s.st1[stage ^ 1], p, ws, t0 + kBT, chunk_len(bos, eos, c + 1), h, j, t);
    cp_async_commit();

    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_m64k16<T, 64, 0, 0>(pa, desc_at(dq0, soff + kmaj_step(kk, kBT)), desc_at(dk0, soff + kmaj_step(kk, kBT)),
                                kk > 0);
    wgmma_commit();
    uint32_t pf[16];
    form_p<T>(pf, pa, st, p.scale, len, t);
    named_barrier(kBarWg1, 128);  // every warp's slice of Q K^T has read the k tile
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

    // O^T's accumulator as A fragments, stored transposed ([token][v], 128-byte swizzled) by stmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk) {
      const uint32_t r[4] = {MmaType<T>::pack(acc[8 * kk], acc[8 * kk + 1]), MmaType<T>::pack(acc[8 * kk + 2], acc[8 * kk + 3]),
                             MmaType<T>::pack(acc[8 * kk + 4], acc[8 * kk + 5]), MmaType<T>::pack(acc[8 * kk + 6], acc[8 * kk + 7])};
      stmatrix_x4_trans(st.k + kOPanel + sw128_offset(16 * kk + st_row, st_col), r);
    }
    named_barrier(kBarWg1, 128);
    const int orow = t >> 3, och = (t & 7) * 8;  // rows t / 8 + 16u, 16-byte chunk t % 8
    T* out = o_base + (t0 + orow) * ostride + och;
#pragma unroll
    for (int u = 0; u < kBT / 16; ++u)
      if (orow + 16 * u < len)
        *reinterpret_cast<uint4*>(out + 16 * u * ostride) =
            *reinterpret_cast<const uint4*>(st.k + kOPanel + sw128_offset(orow + 16 * u, och));
  }
  cp_async_wait<0>();
}

}  // namespace wgp
}  // namespace linattn::cuda
