// Head-level sweeps of the chunked GDN backward on wgmma (sm_90a; LINATTN_CUDA_GDN_BWD_SWEEP=wg):
// the same two roles, math, outputs and grid as gdn_bwd_sweep.cu, but the fp32 state is held
// transposed (S^T / dS^T [v][key], the accumulator of one warpgroup, 64 registers per thread), so
// every product that starts from the state or from a per-chunk result takes its A operand from
// registers (bf16 / fp16 fragments) and the chain has no CTA-wide barrier:
//   role 0 (chunks in order):  KS^T = S^T K^T, X^T = V^T - KS^T diag(e^gam rk), V^T = X^T Ab^T,
//                              S^T <- e^gam_L S^T + V^T diag(e^(gam_L - gam) rk) K
//   role 1 (chunks reversed):  dV^T = dS^T K^T diag(e^(gam_L - gam) rk) + dO^T P, dv^T = dV^T Ab,
//                              dS^T <- e^gam_L dS^T + dO^T diag(scale e^gam rq) Q - dv^T diag(e^gam rk) K
// CTA = (2 * slice + role, value head j, sequence ws_sequence(z)), V-slice 64, 256 threads:
// WG0 runs the chain and streams its own inputs by cp.async (role 0: the forward's 3-stage k / v / Ab
// ring of gdn_fused_wgp_common.cuh; role 1: a 2-stage q / k / Ab / P / dO ring with the per-token
// scales computed once per chunk); WG1 (the store warpgroup) takes each chunk's results from a double
// buffer in fragment order (bf16 state, bf16 V^ / dV^, fp32 dv; named barriers full / empty as in the
// forward's output hand-off) and writes hS / hdS (stmatrix.trans -> [key][v], 16-byte rows), vh / dvh
// and dv, one chunk behind WG0. w.dstate_only: role 1 only, one CTA per (slice, head, sequence).
// Scope: GDN, BT 64, K 128, V % 64 == 0 (other shapes and KDA take gdn_bwd_sweep.cu). Opt-in: on the
// H200 (d696179) every test passes with it and memcheck is clean, but racecheck reports hazards on the
// hand-off buffer (docs/perf-notes.md "Sweeps on wgmma"); "wglate" / "wgsync" are the variants that probe it.
#include <cuda_runtime.h>

#include <atomic>
#include <string>
#include <type_traits>

#include "core/util.h"
#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_bwd_load.cuh"
#include "cuda/gdn/gdn_bwd_sweep_wg.h"
#include "cuda/gdn/gdn_fused_wgp_common.cuh"

namespace linattn::cuda {
namespace {
using namespace wgp;

// Named barriers: WG0's chain, WG1's staging, the hand-off buffers' full (3, 4) / empty (5, 6).
constexpr int kBarChain = 1, kBarStore = 2, kBarXFull = 3, kBarXEmpty = 5;
constexpr int kFwdStages = 3, kRevStages = 2;

template <class T>
struct alignas(1024) RevStage {  // role 1's inputs of one chunk
  alignas(1024) uint8_t q[kBT * kK * 2];   // [token][key] K-major panels (read MN-major: the update's B)
  alignas(1024) uint8_t k[kBT * kK * 2];   // same layout (K-major for dS^T K^T, MN-major for the update)
  alignas(1024) uint8_t a[kBT * kBT * 2];  // Ab [t][s] (MN-major B of dv^T = dV^T Ab)
  alignas(1024) uint8_t p[kBT * kBT * 2];  // P [t][s] (MN-major B of dO^T P)
  T d[kBT][kLdV];                          // dO [token][v]
  // Raw per-token inputs, one copy per thread (thread t: token t % 64; r = rk for t < 64, rq else).
  float gam[2 * kBT], r[2 * kBT], gl[2 * kBT];
  float wsc[kBT], esc[kBT], osc[kBT];  // e^(gam_L-gam) rk, -e^gam rk, scale e^gam rq (0 past the end)
  float decay;                         // e^gam_L
};

struct Xch {          // one chunk's results in fragment order: [register / 4][thread]
  uint4 s[8][128];    // S^T / dS^T entering the chunk's step (bf16 A fragments, 128 keys)
  uint4 v[4][128];    // V^T / dV^T (bf16 A fragments, 64 tokens)
  float4 d[8][128];   // role 1: dv^T accumulator (fp32)
};

template <class T>
struct SweepWgSmem {
  union Ring {
    typename WgpSmem<T>::Stage0 f[kFwdStages];
    RevStage<T> r[kRevStages];
  } ring;
  Xch x[2];
  T stg[kK][kLdV];  // WG1's staging: [key][v], [token][v], or fp32 [token][kVS + 4] for dv
};
constexpr int kLdF = kVS + 4;

template <class T>
constexpr size_t smem_bytes() { return sizeof(SweepWgSmem<T>) + 1024; }
static_assert(smem_bytes<__nv_bfloat16>() <= 227 * 1024, "gdn bwd sweep (wg): shared memory over the sm_90 limit");
static_assert(kBT * kLdF * sizeof(float) <= sizeof(__nv_bfloat16) * kK * kLdV, "dv staging exceeds stg");

struct Ids {
  int64_t n, bos, eos, rbase;
  int nchunks, h, j, v0;
};

__device__ __forceinline__ void load_acc_state(float (&S)[64], const void* src, ElemType ty, const GdnFwdParams& f,
                                               const Ids& id, int t) {
#pragma unroll
  for (int i = 0; i < 64; ++i)
    S[i] = src ? load_elem(src, ty, state_index(f, id.n, id.j, acc_col(t, i), id.v0 + acc_row(t, i))) : 0.f;
}

// Role 0 (WG0): the forward state chain; S^T and V^T fragments to the hand-off buffer.
template <class T>
__device__ void fwd_chain(SweepWgSmem<T>& s, const GdnBwdParams& p, const GdnBwdWs& w, const Ids& id, int t) {
  using Stage0 = typename WgpSmem<T>::Stage0;
  const GdnFwdParams& f = p.f;
  Stage0* const ring = s.ring.f;
  float S[64];
  load_acc_state(S, f.h0, f.h0_type, f, id, t);
  for (int c = 0; c < kFwdStages - 1; ++c) {
    if (c < id.nchunks)
      load_state_inputs<T>(ring[c], f, w.c, id.bos + c * kBT, chunk_len(id.bos, id.eos, c), id.h, id.j, id.v0, t);
    cp_async_commit();
  }
  cp_async_wait<1>();
  if (id.nchunks > 0) state_scales<T>(ring[0], chunk_len(id.bos, id.eos, 0), t);
  const int lane = t & 31, mat = lane >> 3;  // ldmatrix.trans lane address of V^T's fragments
  const int ld_row = 8 * (mat >> 1) + (lane & 7), ld_col = 16 * (t >> 5) + 8 * (mat & 1);
  const uint64_t dk0 = desc_kmaj0(ring[0].k), da0 = desc_kmaj0(ring[0].a), dkt0 = desc_mnmaj0(ring[0].k, kBT);
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  for (int c = 0, stage = 0; c < id.nchunks; ++c, stage = stage == kFwdStages - 1 ? 0 : stage + 1) {
    Stage0& st = ring[stage];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(Stage0));
    cp_async_wait<1>();
    fence_view_async_shared();
    named_barrier(kBarChain, 128);
    uint32_t sf[32];
    acc_to_frag<T, 64>(sf, S);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_at(dk0, soff + kmaj_step(kk, kBT)), kk > 0);
    wgmma_commit();
    const int ahead = c + kFwdStages - 1, ld_stage = stage == 0 ? kFwdStages - 1 : stage - 1;
    if (ahead < id.nchunks)
      load_state_inputs<T>(ring[ld_stage], f, w.c, id.bos + int64_t(ahead) * kBT, chunk_len(id.bos, id.eos, ahead), id.h,
                           id.j, id.v0, t);
    cp_async_commit();
    Xch& x = s.x[c & 1];
    if (c >= 2) named_barrier(kBarXEmpty + (c & 1), 256);
#pragma unroll
    for (int i = 0; i < 8; ++i) x.s[i][t] = make_uint4(sf[4 * i], sf[4 * i + 1], sf[4 * i + 2], sf[4 * i + 3]);
    uint32_t vv[16];
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk) {
      uint32_t r[4];
      ldsm_x4_t(r, &st.v[16 * kk + ld_row][ld_col]);
      vv[4 * kk] = r[0], vv[4 * kk + 1] = r[1], vv[4 * kk + 2] = r[2], vv[4 * kk + 3] = r[3];
    }
    float erk[16];
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const float2 e2 = *reinterpret_cast<const float2*>(&st.erk[slot_col(t, 2 * m)]);
      erk[2 * m] = e2.x, erk[2 * m + 1] = e2.y;
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_regs(sf);
    uint32_t xf[16];
#pragma unroll
    for (int i = 0; i < 16; ++i)
      xf[i] = MmaType<T>::pack(MmaType<T>::to_float(lo_half<T>(vv[i])) - erk[reg_slot(2 * i)] * acc[2 * i],
                               MmaType<T>::to_float(hi_half<T>(vv[i])) - erk[reg_slot(2 * i + 1)] * acc[2 * i + 1]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, xf + 4 * kk, desc_at(da0, soff + kmaj_step(kk, kBT)), kk > 0);
    wgmma_commit();
    float wsc[16];
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const float2 w2 = *reinterpret_cast<const float2*>(&st.wsc[slot_col(t, 2 * m)]);
      wsc[2 * m] = w2.x, wsc[2 * m + 1] = w2.y;
    }
    const float decay = st.decay;
#pragma unroll
    for (int i = 0; i < 64; ++i) S[i] *= decay;
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_regs(xf);
    uint32_t vf[16], hf[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      vf[i] = MmaType<T>::pack(acc[2 * i], acc[2 * i + 1]);
      hf[i] = MmaType<T>::pack(acc[2 * i] * wsc[reg_slot(2 * i)], acc[2 * i + 1] * wsc[reg_slot(2 * i + 1)]);
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 128, 1>(S, hf + 4 * kk, desc_at(dkt0, soff + uint32_t(kk) * 2048u), 1);
    wgmma_commit();
#pragma unroll
    for (int i = 0; i < 4; ++i) x.v[i][t] = make_uint4(vf[4 * i], vf[4 * i + 1], vf[4 * i + 2], vf[4 * i + 3]);
    named_barrier_arrive(kBarXFull + (c & 1), 256);
    cp_async_wait<1>();
    if (c + 1 < id.nchunks) state_scales<T>(ring[stage == kFwdStages - 1 ? 0 : stage + 1], chunk_len(id.bos, id.eos, c + 1), t);
    wgmma_wait<0>();
    wgmma_fence_operands(S);
    wgmma_fence_regs(hf);
  }
  cp_async_wait<0>();
}

// Role 1's inputs of the chunk at t0 (len valid rows) into stage st.
template <class T>
__device__ __forceinline__ void load_rev_inputs(RevStage<T>& st, const GdnBwdParams& p, const GdnBwdWs& w, int64_t t0,
                                                int len, const Ids& id, int t) {
  const GdnFwdParams& f = p.f;
  const int64_t qoff = (t0 * f.H + id.h) * kK, qstride = int64_t(f.H) * kK;
  const T* q = static_cast<const T*>(f.q) + qoff;
  const T* k = static_cast<const T*>(f.k) + qoff;
  const int64_t aoff = (id.j * w.c.T_cap + t0) * kBT;
  const T* A = static_cast<const T*>(w.c.Ab) + aoff;
  const T* P = static_cast<const T*>(w.c.P) + aoff;
  const int kr = t >> 4, kc = (t & 15) * 8, vr = t >> 3, vc = (t & 7) * 8;
  copy_rows<8>(st.q + kmaj(kr, kc, kBT), 1024u, q + kr * qstride + kc, 8 * qstride, q, kr, 8, len);
  copy_rows<8>(st.k + kmaj(kr, kc, kBT), 1024u, k + kr * qstride + kc, 8 * qstride, k, kr, 8, len);
  copy_rows<4>(st.a + sw128_offset(vr, vc), 2048u, A + vr * kBT + vc, 16 * kBT, A, vr, 16, len);
  copy_rows<4>(st.p + sw128_offset(vr, vc), 2048u, P + vr * kBT + vc, 16 * kBT, P, vr, 16, len);
  if (w.do_direct) {
    const int64_t dstride = int64_t(f.HV) * f.V;
    const T* d = static_cast<const T*>(p.d_o) + (t0 * f.HV + id.j) * int64_t(f.V) + id.v0;
    copy_rows<4>(reinterpret_cast<uint8_t*>(&st.d[vr][vc]), 16u * kLdV * sizeof(T), d + vr * dstride + vc, 16 * dstride,
                 d, vr, 16, len);
  } else {  // converted on load (plain stores, published by the chain barrier of this chunk)
    load_do_rows<T, kBT, kVS, kLdV, 128>(st.d, p, false, t0, len, id.j, id.v0, t);
  }
  const int tok = t & 63;
  const bool valid = tok < len;
  const int64_t ti = valid ? t0 + tok : 0;
  cp_async4(st.gam + t, w.c.gam + id.j * w.c.T_cap + ti, valid);
  cp_async4(st.r + t, (t < 64 ? w.c.rk : w.c.rq) + id.h * w.c.T_cap + ti, valid);
  cp_async4(st.gl + t, w.c.gam + id.j * w.c.T_cap + t0 + len - 1, true);
}

// Role 1's per-token scales of one chunk from the thread's own copies (one or two per thread).
template <class T>
__device__ __forceinline__ void rev_scales(RevStage<T>& st, float scale, int len, int t) {
  const int tok = t & 63;
  const bool valid = tok < len;
  const float g = st.gam[t], r = st.r[t], gl = st.gl[t];
  if (t < 64) {
    st.wsc[tok] = valid ? exp2f(gl - g) * r : 0.f;
    st.esc[tok] = valid ? -exp2f(g) * r : 0.f;
  } else {
    st.osc[tok] = valid ? scale * exp2f(g) * r : 0.f;
    if (tok == 0) st.decay = exp2f(gl);
  }
}

__device__ __forceinline__ void load_scales(float (&dst)[16], const float* src, int t) {
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const float2 v = *reinterpret_cast<const float2*>(&src[slot_col(t, 2 * m)]);
    dst[2 * m] = v.x, dst[2 * m + 1] = v.y;
  }
}

// Role 1 (WG0): the reverse dS chain; dS^T, dV^T and dv^T to the hand-off buffer, dh0 at the end.
template <class T>
__device__ void rev_chain(SweepWgSmem<T>& s, const GdnBwdParams& p, const GdnBwdWs& w, const Ids& id, int t) {
  const GdnFwdParams& f = p.f;
  RevStage<T>* const ring = s.ring.r;
  float dS[64];
  load_acc_state(dS, p.dht, p.dht_type, f, id, t);
  auto start = [&](int cc) { return id.bos + int64_t(id.nchunks - 1 - cc) * kBT; };
  if (id.nchunks > 0) load_rev_inputs<T>(ring[0], p, w, start(0), static_cast<int>(id.eos - start(0)), id, t);
  cp_async_commit();
  cp_async_wait<0>();
  if (id.nchunks > 0) rev_scales<T>(ring[0], f.scale, static_cast<int>(id.eos - start(0)), t);
  const int lane = t & 31, mat = lane >> 3;
  const int ld_row = 8 * (mat >> 1) + (lane & 7), ld_col = 16 * (t >> 5) + 8 * (mat & 1);
  const uint64_t dk0 = desc_kmaj0(ring[0].k), dkt0 = desc_mnmaj0(ring[0].k, kBT), dqt0 = desc_mnmaj0(ring[0].q, kBT);
  const uint64_t dat0 = desc_mnmaj0(ring[0].a, kBT), dpt0 = desc_mnmaj0(ring[0].p, kBT);
  float acc[32], acc2[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = acc2[i] = 0.f;
  for (int cc = 0; cc < id.nchunks; ++cc) {
    const int stage = cc & 1;
    RevStage<T>& st = ring[stage];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(RevStage<T>));
    cp_async_wait<0>();
    fence_view_async_shared();
    named_barrier(kBarChain, 128);
    if (cc + 1 < id.nchunks) load_rev_inputs<T>(ring[stage ^ 1], p, w, start(cc + 1), kBT, id, t);  // full chunk
    cp_async_commit();
    uint32_t sf[32];  // dS^T leaving this chunk: A of dS^T K^T, and hdS
    acc_to_frag<T, 64>(sf, dS);
    uint32_t dof[16];
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk) {
      uint32_t r[4];
      ldsm_x4_t(r, &st.d[16 * kk + ld_row][ld_col]);
      dof[4 * kk] = r[0], dof[4 * kk + 1] = r[1], dof[4 * kk + 2] = r[2], dof[4 * kk + 3] = r[3];
    }
    // Decay and the dO^T fragments first, so the three products of this step issue back to back:
    // dV^T's two parts (dS^T K^T, dO^T P: own accumulators) and dS^T += dO^T diag(osc) Q.
    const float decay = st.decay;
#pragma unroll
    for (int i = 0; i < 64; ++i) dS[i] *= decay;
    uint32_t dos[16];
    float sc[16];
    load_scales(sc, st.osc, t);
#pragma unroll
    for (int i = 0; i < 16; ++i)
      dos[i] = MmaType<T>::pack(MmaType<T>::to_float(lo_half<T>(dof[i])) * sc[reg_slot(2 * i)],
                                MmaType<T>::to_float(hi_half<T>(dof[i])) * sc[reg_slot(2 * i + 1)]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_at(dk0, soff + kmaj_step(kk, kBT)), kk > 0);
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 1>(acc2, dof + 4 * kk, desc_at(dpt0, soff + uint32_t(kk) * 2048u), kk > 0);
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 128, 1>(dS, dos + 4 * kk, desc_at(dqt0, soff + uint32_t(kk) * 2048u), 1);
    wgmma_commit();
    Xch& x = s.x[cc & 1];
    if (cc >= 2) named_barrier(kBarXEmpty + (cc & 1), 256);
#pragma unroll
    for (int i = 0; i < 8; ++i) x.s[i][t] = make_uint4(sf[4 * i], sf[4 * i + 1], sf[4 * i + 2], sf[4 * i + 3]);
    load_scales(sc, st.wsc, t);
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_operands(acc2);
    wgmma_fence_operands(dS);
    wgmma_fence_regs(sf);
    wgmma_fence_regs(dof);
    wgmma_fence_regs(dos);
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = fmaf(acc[i], sc[reg_slot(i)], acc2[i]);
    uint32_t vf[16];  // dV^T
    acc_to_frag<T, 32>(vf, acc);
    // Stored before the product that reads vf is issued: reading an in-flight wgmma's A registers
    // here made ptxas serialize every wgmma of the kernel (C7520).
#pragma unroll
    for (int i = 0; i < 4; ++i) x.v[i][t] = make_uint4(vf[4 * i], vf[4 * i + 1], vf[4 * i + 2], vf[4 * i + 3]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 1>(acc2, vf + 4 * kk, desc_at(dat0, soff + uint32_t(kk) * 2048u), kk > 0);
    wgmma_commit();
    load_scales(sc, st.esc, t);
    wgmma_wait<0>();
    wgmma_fence_operands(acc2);
    wgmma_fence_regs(vf);
    uint32_t ef[16];  // dv^T diag(-e^gam rk)
#pragma unroll
    for (int i = 0; i < 16; ++i)
      ef[i] = MmaType<T>::pack(acc2[2 * i] * sc[reg_slot(2 * i)], acc2[2 * i + 1] * sc[reg_slot(2 * i + 1)]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 128, 1>(dS, ef + 4 * kk, desc_at(dkt0, soff + uint32_t(kk) * 2048u), 1);
    wgmma_commit();
#pragma unroll
    for (int i = 0; i < 8; ++i) x.d[i][t] = make_float4(acc2[4 * i], acc2[4 * i + 1], acc2[4 * i + 2], acc2[4 * i + 3]);
    named_barrier_arrive(kBarXFull + (cc & 1), 256);
    cp_async_wait<0>();  // the next chunk's inputs: its scales while the update runs
    if (cc + 1 < id.nchunks) rev_scales<T>(ring[stage ^ 1], f.scale, kBT, t);
    wgmma_wait<0>();
    wgmma_fence_operands(dS);
    wgmma_fence_regs(ef);
  }
  cp_async_wait<0>();
  if (p.dh0.p) {
#pragma unroll
    for (int i = 0; i < 64; ++i)
      store_out(p.dh0.p, p.dh0.t, state_index(f, id.n, id.j, acc_col(t, i), id.v0 + acc_row(t, i)), dS[i]);
  }
}

// WG1: one chunk behind WG0, writes the state (hS / hdS), V^ / dV^ (vh / dvh) and dv of each chunk.
// kMode (for the racecheck question in perf-notes): 0 ("wg") arrives on "empty" right after the
// fragment loads; 1 ("wglate") after the chunk's stores (the forward's consumer arrives late); 2
// ("wgsync", a racecheck experiment) waits there with bar.sync instead of bar.arrive, so both sides
// of the "empty" barrier block (same ordering as 0 by the PTX barrier semantics, tighter coupling).
template <class T, int kMode>
__device__ void store_warpgroup(SweepWgSmem<T>& s, const GdnBwdParams& p, const GdnBwdWs& w, const Ids& id, int role,
                                int t) {
  const GdnFwdParams& f = p.f;
  const int lane = t & 31, mat = lane >> 3;  // stmatrix.trans lane address
  const int st_row = 8 * (mat >> 1) + (lane & 7), st_col = 16 * (t >> 5) + 8 * (mat & 1);
  const int orow = t >> 3, och = (t & 7) * 8;  // 16-byte pieces: rows t / 8 + 16u, chunk t % 8
  T* const sdst = static_cast<T*>(role ? w.hdS : w.hS);
  T* const vdst = static_cast<T*>(role ? w.dvh : w.vh) + int64_t(id.j) * w.c.T_cap * f.V + id.v0;
  float(*stf)[kLdF] = reinterpret_cast<float(*)[kLdF]>(&s.stg[0][0]);
  for (int cc = 0; cc < id.nchunks; ++cc) {
    const int c = role ? id.nchunks - 1 - cc : cc;
    const int64_t t0 = id.bos + int64_t(c) * kBT, r = id.rbase + c;
    const int len = chunk_len(id.bos, id.eos, c);
    Xch& x = s.x[cc & 1];
    named_barrier(kBarXFull + (cc & 1), 256);
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      const uint4 u = x.s[kk][t];
      const uint32_t rr[4] = {u.x, u.y, u.z, u.w};
      stmatrix_x4_trans(&s.stg[16 * kk + st_row][st_col], rr);
    }
    uint4 vfr[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) vfr[i] = x.v[i][t];
    float4 dvr[8];
    if (role) {
#pragma unroll
      for (int i = 0; i < 8; ++i) dvr[i] = x.d[i][t];
    }
    if (kMode != 1 && cc + 2 < id.nchunks) {
      if (kMode == 2) named_barrier(kBarXEmpty + (cc & 1), 256);
      else named_barrier_arrive(kBarXEmpty + (cc & 1), 256);
    }
    named_barrier(kBarStore, 128);
    if (r < w.nt_cap) {
      T* base = sdst + ((r * f.HV + id.j) * int64_t(kK)) * f.V + id.v0;
#pragma unroll
      for (int u = 0; u < kK / 16; ++u)
        *reinterpret_cast<uint4*>(base + int64_t(orow + 16 * u) * f.V + och) =
            *reinterpret_cast<const uint4*>(&s.stg[orow + 16 * u][och]);
    }
    named_barrier(kBarStore, 128);
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk) {
      const uint32_t rr[4] = {vfr[kk].x, vfr[kk].y, vfr[kk].z, vfr[kk].w};
      stmatrix_x4_trans(&s.stg[16 * kk + st_row][st_col], rr);
    }
    named_barrier(kBarStore, 128);
#pragma unroll
    for (int u = 0; u < kBT / 16; ++u)
      if (orow + 16 * u < len)
        *reinterpret_cast<uint4*>(vdst + (t0 + orow + 16 * u) * f.V + och) =
            *reinterpret_cast<const uint4*>(&s.stg[orow + 16 * u][och]);
    named_barrier(kBarStore, 128);
    if (role && p.dv.p) {
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        const float4& q4 = dvr[i >> 2];
        const float v = (i & 3) == 0 ? q4.x : (i & 3) == 1 ? q4.y : (i & 3) == 2 ? q4.z : q4.w;
        stf[acc_col(t, i)][acc_row(t, i)] = v;
      }
      named_barrier(kBarStore, 128);
      const int drow = t >> 4, dcol = (t & 15) * 4;  // rows t / 16 + 8u, 4 columns
#pragma unroll
      for (int u = 0; u < kBT / 8; ++u) {
        const int row = drow + 8 * u;
        if (row < len) {
          const float4 v = *reinterpret_cast<const float4*>(&stf[row][dcol]);
          const int64_t o = ((t0 + row) * f.HV + id.j) * int64_t(f.V) + id.v0 + dcol;
          store_out(p.dv.p, p.dv.t, o, v.x);
          store_out(p.dv.p, p.dv.t, o + 1, v.y);
          store_out(p.dv.p, p.dv.t, o + 2, v.z);
          store_out(p.dv.p, p.dv.t, o + 3, v.w);
        }
      }
      named_barrier(kBarStore, 128);
    }
    if (kMode == 1 && cc + 2 < id.nchunks) named_barrier_arrive(kBarXEmpty + (cc & 1), 256);
  }
}

template <class T, int kMode>
__global__ void __launch_bounds__(256, 1) gdn_bwd_sweep_wg_kernel(GdnBwdParams p, GdnBwdWs w) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  SweepWgSmem<T>& s = *reinterpret_cast<SweepWgSmem<T>*>(base);
  const int tid = threadIdx.x, t = tid & 127;
  const int role = w.dstate_only ? 1 : int(blockIdx.x & 1);
  const int slice = w.dstate_only ? int(blockIdx.x) : int(blockIdx.x >> 1);
  Ids id;
  id.v0 = slice * kVS;
  id.j = blockIdx.y;
  id.h = id.j / (p.f.HV / p.f.H);
  id.n = ws_sequence(w.c, blockIdx.z);
  seq_bounds(p.f, id.n, id.bos, id.eos);
  id.nchunks = static_cast<int>((id.eos - id.bos + kBT - 1) / kBT);
  id.rbase = chunk_row_base(w.chunk_offsets, w.nts, id.n);
  if (tid >= 128) store_warpgroup<T, kMode>(s, p, w, id, role, t);
  else if (role) rev_chain<T>(s, p, w, id, t);
  else fwd_chain<T>(s, p, w, id, t);
}

}  // namespace

namespace {
std::atomic<int64_t> g_wg_sweep_launches{0};
}  // namespace

bool gdn_bwd_sweep_wg_enabled(const GdnFwdParams& f) {
  const std::string v = env_or("LINATTN_CUDA_GDN_BWD_SWEEP", "");
  if (v == "wg" || v == "wglate" || v == "wgsync") return true;
  if (!v.empty()) return false;  // "mma" (or any other value): the mma.sync sweeps
  // Default: the wgmma sweeps where sequences average >= kWgMinTokens tokens (capacity in graph mode).
  // H200 at 73035b5: 1x32768 5.43 -> 4.23 ms, 4096x8 -14%, 1x8192 -21%, but 512x16 +7.5% (per-CTA
  // pipeline fill and drain over 8 chunks).
  return f.N > 0 && f.T_total / f.N >= kWgMinTokens;
}

int64_t gdn_bwd_sweep_wg_launches() { return g_wg_sweep_launches.load(); }

bool gdn_bwd_sweep_wg_supported(const GdnFwdParams& f) {
  return !f.kda && f.BT == kBT && f.K == kK && f.V % kVS == 0 &&
         (f.io == ElemType::kBF16 || f.io == ElemType::kF16);
}

void launch_gdn_bwd_sweeps_wg(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  LINATTN_CHECK(gdn_bwd_sweep_wg_supported(p.f), "gdn bwd sweeps (wg): needs GDN, BT 64, K 128, V % 64 == 0, bf16 / fp16");
  const dim3 grid((w.dstate_only ? 1 : 2) * (p.f.V / kVS), p.f.HV, p.f.N);
  const std::string v = env_or("LINATTN_CUDA_GDN_BWD_SWEEP", "");
  const bool bf = p.f.io == ElemType::kBF16;
  auto go = [&](auto mode) {
    constexpr int kMode = decltype(mode)::value;
    bf ? launch(gdn_bwd_sweep_wg_kernel<__nv_bfloat16, kMode>, grid, dim3(256), smem_bytes<__nv_bfloat16>(), stream, p, w)
       : launch(gdn_bwd_sweep_wg_kernel<__half, kMode>, grid, dim3(256), smem_bytes<__half>(), stream, p, w);
  };
  g_wg_sweep_launches.fetch_add(1);
  if (v == "wglate") go(std::integral_constant<int, 1>{});
  else if (v == "wgsync") go(std::integral_constant<int, 2>{});
  else go(std::integral_constant<int, 0>{});
}

}  // namespace linattn::cuda
