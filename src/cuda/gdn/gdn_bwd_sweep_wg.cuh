// Shared pieces of the wgmma backward sweeps (gdn_bwd_sweep_wg.cu "wg3" / "wg" / "wglate" / "wgsync";
// the mbarrier pieces also serve the KDA "wgm" sweeps): the shared-memory layout (role 0's 3-stage k / v / Ab ring of
// gdn_fused_wgp_common.cuh, role 1's 2-stage q / k / Ab / P / dO ring with per-token scales, the
// fragment hand-off double buffer, the store warpgroup's staging tile, the mbarriers of the
// removed wg2, kept in the layout), role 1's loader and scales, role 0's chain (WG0; its ring a policy:
// FwdOwnRing) and the store warpgroup (WG1; kFastDv: the vectorized dv stores of wg3), both templated on
// the hand-off protocol: XNamed<kMode> (named barriers full 3-4 / empty 5-6, wg) or XMbar (mbarriers,
// the removed wg2's protocol). The store warpgroup also takes a producer hook (the removed wg2's WG1
// streamed role 1's input ring through it); NoProducer keeps WG1 a pure store warpgroup.
// Layouts and thread mapping: see gdn_bwd_sweep_wg.cu's header. GDN, BT 64, K 128, V-slice 64.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/tma.cuh"
#include "cuda/gdn/gdn_bwd_load.cuh"
#include "cuda/gdn/gdn_fused_wgp_common.cuh"

namespace linattn::cuda {
namespace sweep_wg {
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

// The removed wg2's mbarriers (wg / wg3 leave them unused; the layout keeps them): role 1's input ring (full: WG1's 128 threads arrive
// after their copies landed and the scales are stored; empty: WG0's 128 threads arrive after the
// chunk's last product) and the fragment hand-off (full: WG0 arrives after its stores; empty: WG1
// arrives after its loads).
struct Bars {
  uint64_t in_full[kRevStages], in_empty[kRevStages], x_full[2], x_empty[2];
};

template <class T>
struct SweepWgSmem {
  union Ring {
    typename WgpSmem<T>::Stage0 f[kFwdStages];
    RevStage<T> r[kRevStages];
  } ring;
  Xch x[2];
  T stg[kK][kLdV];  // WG1's staging: [key][v], [token][v], or fp32 [token][kVS + 4] for dv
  Bars bar;
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

// The CTA's (slice, head, sequence) ids (the kernels of gdn_bwd_sweep_wgr.cu). wg3's and the KDA sweeps' kernels spell
// them out: calling this there changes their register allocation (checked with cuobjdump in session 12).
__device__ __forceinline__ Ids sweep_ids(const GdnBwdParams& p, const GdnBwdWs& w, int slice) {
  Ids id;
  id.v0 = slice * kVS;
  id.j = blockIdx.y;
  id.h = id.j / (p.f.HV / p.f.H);
  id.n = ws_sequence(w.c, blockIdx.z);
  seq_bounds(p.f, id.n, id.bos, id.eos);
  id.nchunks = static_cast<int>((id.eos - id.bos + kBT - 1) / kBT);
  id.rbase = chunk_row_base(w.chunk_offsets, w.nts, id.n);
  return id;
}

// Role 1's dh0 (the transposed dS^T accumulator) at the end of the reverse chain.
__device__ __forceinline__ void store_dh0(const float (&dS)[64], const GdnBwdParams& p, const Ids& id, int t) {
  if (p.dh0.p) {
#pragma unroll
    for (int i = 0; i < 64; ++i)
      store_out(p.dh0.p, p.dh0.t, state_index(p.f, id.n, id.j, acc_col(t, i), id.v0 + acc_row(t, i)), dS[i]);
  }
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
#endif
}

// Hand-off protocols of the fragment double buffer x[c % 2] (producer WG0, consumer WG1).
// Named barriers (wg): kMode 0 arrives on "empty" right after the fragment loads, 1 ("wglate")
// after the chunk's stores, 2 ("wgsync") waits there with bar.sync instead of bar.arrive.
template <int kMode>
struct XNamed {
  static constexpr bool kLate = kMode == 1;
  __device__ __forceinline__ void wait_empty(int c) const {
    if (c >= 2) named_barrier(kBarXEmpty + (c & 1), 256);
  }
  __device__ __forceinline__ void fill(int c) const { named_barrier_arrive(kBarXFull + (c & 1), 256); }
  __device__ __forceinline__ void wait_full(int cc) const { named_barrier(kBarXFull + (cc & 1), 256); }
  __device__ __forceinline__ void release(int cc, int n) const {
    if (cc + 2 < n) {
      if (kMode == 2) named_barrier(kBarXEmpty + (cc & 1), 256);
      else named_barrier_arrive(kBarXEmpty + (cc & 1), 256);
    }
  }
};
// mbarriers (the removed wg2's protocol): x_full[b] / x_empty[b] count 128 (every thread of one warpgroup arrives once
// per chunk); the use u = c / 2 of buffer b waits for completion u of x_full (parity u & 1) and,
// for c >= 2, for completion u - 1 of x_empty. Neither side can run two completions ahead: WG0's
// fill of chunk c + 2 waits for WG1's release of chunk c, which follows WG1's wait for chunk c.
struct XMbar {
  static constexpr bool kLate = false;
  Bars* b;
  __device__ __forceinline__ void wait_empty(int c) const {
    if (c >= 2) mbar_wait(&b->x_empty[c & 1], uint32_t(((c >> 1) + 1) & 1));
  }
  __device__ __forceinline__ void fill(int c) const { mbar_arrive(&b->x_full[c & 1]); }
  __device__ __forceinline__ void wait_full(int cc) const { mbar_wait(&b->x_full[cc & 1], uint32_t((cc >> 1) & 1)); }
  __device__ __forceinline__ void release(int cc, int n) const {
    if (cc + 2 < n) mbar_arrive(&b->x_empty[cc & 1]);
  }
};

// Store warpgroup hook for role 1's inputs (wg: none).
struct NoProducer {
  __device__ __forceinline__ void prologue() const {}
  __device__ __forceinline__ void issue(int) const {}
  __device__ __forceinline__ void finish(int) const {}
};

__device__ __forceinline__ void load_acc_state(float (&S)[64], const void* src, ElemType ty, const GdnFwdParams& f,
                                               const Ids& id, int t) {
#pragma unroll
  for (int i = 0; i < 64; ++i)
    S[i] = src ? load_elem(src, ty, state_index(f, id.n, id.j, acc_col(t, i), id.v0 + acc_row(t, i))) : 0.f;
}

// Role 0's input ring as WG0 streams it itself (wg, wg3): the forward's 3-stage k / v / Ab ring by
// cp.async, two chunks ahead, the next chunk's scales while the update runs, the chain barrier.
template <class T>
struct FwdOwnRing {
  static constexpr int kStages = kFwdStages;
  SweepWgSmem<T>& s;
  const GdnFwdParams& f;
  const GdnBwdWs& w;
  const Ids& id;
  int t;
  __device__ __forceinline__ void prologue() const {
    for (int c = 0; c < kFwdStages - 1; ++c) {
      if (c < id.nchunks)
        load_state_inputs<T>(s.ring.f[c], f, w.c, id.bos + c * kBT, chunk_len(id.bos, id.eos, c), id.h, id.j, id.v0, t);
      cp_async_commit();
    }
    cp_async_wait<1>();
    if (id.nchunks > 0) state_scales<T>(s.ring.f[0], chunk_len(id.bos, id.eos, 0), t);
  }
  __device__ __forceinline__ void acquire(int) const {
    cp_async_wait<1>();
    fence_view_async_shared();
    named_barrier(kBarChain, 128);
  }
  __device__ __forceinline__ void ahead(int c, int stage) const {  // after the step's first product is issued
    const int a = c + kFwdStages - 1, ld_stage = stage == 0 ? kFwdStages - 1 : stage - 1;
    if (a < id.nchunks)
      load_state_inputs<T>(s.ring.f[ld_stage], f, w.c, id.bos + int64_t(a) * kBT, chunk_len(id.bos, id.eos, a), id.h,
                           id.j, id.v0, t);
    cp_async_commit();
  }
  __device__ __forceinline__ void next_scales(int c, int stage) const {  // before the step's last wait
    cp_async_wait<1>();
    if (c + 1 < id.nchunks)
      state_scales<T>(s.ring.f[stage == kFwdStages - 1 ? 0 : stage + 1], chunk_len(id.bos, id.eos, c + 1), t);
  }
  __device__ __forceinline__ void release(int) const {}
  __device__ __forceinline__ void finish() const { cp_async_wait<0>(); }
};

// Role 0 (WG0): the forward state chain; S^T and V^T fragments to the hand-off buffer. ring: where its
// inputs come from (FwdOwnRing; the removed wg3pf had WG1 produce it).
template <class T, class XSync, class Ring>
__device__ void fwd_chain(SweepWgSmem<T>& s, const GdnBwdParams& p, const Ids& id, int t, const XSync xs,
                          const Ring& rg) {
  using Stage0 = typename WgpSmem<T>::Stage0;
  const GdnFwdParams& f = p.f;
  Stage0* const ring = s.ring.f;
  float S[64];
  load_acc_state(S, f.h0, f.h0_type, f, id, t);
  rg.prologue();
  const int lane = t & 31, mat = lane >> 3;  // ldmatrix.trans lane address of V^T's fragments
  const int ld_row = 8 * (mat >> 1) + (lane & 7), ld_col = 16 * (t >> 5) + 8 * (mat & 1);
  const uint64_t dk0 = desc_kmaj0(ring[0].k), da0 = desc_kmaj0(ring[0].a), dkt0 = desc_mnmaj0(ring[0].k, kBT);
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  for (int c = 0, stage = 0; c < id.nchunks; ++c, stage = stage == Ring::kStages - 1 ? 0 : stage + 1) {
    Stage0& st = ring[stage];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(Stage0));
    rg.acquire(c);
    uint32_t sf[32];
    acc_to_frag<T, 64>(sf, S);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_at(dk0, soff + kmaj_step(kk, kBT)), kk > 0);
    wgmma_commit();
    rg.ahead(c, stage);
    Xch& x = s.x[c & 1];
    xs.wait_empty(c);
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
    xs.fill(c);
    rg.next_scales(c, stage);
    wgmma_wait<0>();
    wgmma_fence_operands(S);
    wgmma_fence_regs(hf);
    rg.release(c);
  }
  rg.finish();
}

template <class T>
__device__ __forceinline__ void load_rev_rest(RevStage<T>& st, const GdnBwdParams& p, const GdnBwdWs& w, int64_t t0,
                                              int len, const Ids& id, int t);

// Role 1's inputs of the chunk at t0 (len valid rows) into stage st; t: the issuing warpgroup's thread.
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
  load_rev_rest<T>(st, p, w, t0, len, id, t);
}

// Role 1's dO tile and per-token scalars of the chunk at t0 (load_rev_inputs' part after the q / k / Ab / P tiles).
template <class T>
__device__ __forceinline__ void load_rev_rest(RevStage<T>& st, const GdnBwdParams& p, const GdnBwdWs& w, int64_t t0,
                                              int len, const Ids& id, int t) {
  const GdnFwdParams& f = p.f;
  const int vr = t >> 3, vc = (t & 7) * 8;
  if (w.do_direct) {
    const int64_t dstride = int64_t(f.HV) * f.V;
    const T* d = static_cast<const T*>(p.d_o) + (t0 * f.HV + id.j) * int64_t(f.V) + id.v0;
    copy_rows<4>(reinterpret_cast<uint8_t*>(&st.d[vr][vc]), 16u * kLdV * sizeof(T), d + vr * dstride + vc, 16 * dstride,
                 d, vr, 16, len);
  } else {  // converted on load (plain stores, published with the chunk's copies)
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

// WG1: one chunk behind WG0, writes the state (hS / hdS), V^ / dV^ (vh / dvh) and dv of each chunk.
// prod (the removed wg2, role 1): streams role 1's input ring; issue(cc) runs after chunk cc's fragments are
// read, finish(cc) after its stores.
// kFastDv (wg3): dv in the io type is packed from the fragments (the same round-to-nearest as
// store_out) and written through the vh staging pass (stmatrix.trans into rows 64-127 of the tile, 16-byte
// rows, no extra barrier); fp32 dv keeps the fp32 staging tile but stores float4s. Other dv types, or a
// dv pointer not 16-byte aligned, take the scalar path. Without it (wg) dv is staged fp32 and
// written by scalar store_out (~380 instructions per chunk on WG1: the H200 profile at 3d3a678 shows the
// reverse chain waiting on "empty" for ~1/3 of its samples, i.e. WG1 sets role 1's step).
template <class T, bool kFastDv = false, class XSync, class Prod>
__device__ void store_warpgroup(SweepWgSmem<T>& s, const GdnBwdParams& p, const GdnBwdWs& w, const Ids& id, int role,
                                int t, const XSync xs, const Prod& prod) {
  const GdnFwdParams& f = p.f;
  bool dv_io = false, dv_f4 = false;  // kFastDv: dv via the vh pass / as float4
  T* dvo = nullptr;                    // kFastDv: this slice's dv, token stride HV * V
  if constexpr (kFastDv) {
    constexpr ElemType kIo = std::is_same_v<T, __nv_bfloat16> ? ElemType::kBF16 : ElemType::kF16;
    const bool ok = role && p.dv.p && (reinterpret_cast<uintptr_t>(p.dv.p) & 15u) == 0;
    dv_io = ok && p.dv.t == kIo;
    dv_f4 = ok && p.dv.t == ElemType::kF32;
    dvo = static_cast<T*>(p.dv.p) + int64_t(id.j) * f.V + id.v0;
  }
  const int lane = t & 31, mat = lane >> 3;  // stmatrix.trans lane address
  const int st_row = 8 * (mat >> 1) + (lane & 7), st_col = 16 * (t >> 5) + 8 * (mat & 1);
  const int orow = t >> 3, och = (t & 7) * 8;  // 16-byte pieces: rows t / 8 + 16u, chunk t % 8
  T* const sdst = static_cast<T*>(role ? w.hdS : w.hS);
  T* const vdst = static_cast<T*>(role ? w.dvh : w.vh) + int64_t(id.j) * w.c.T_cap * f.V + id.v0;
  float(*stf)[kLdF] = reinterpret_cast<float(*)[kLdF]>(&s.stg[0][0]);
  prod.prologue();
  for (int cc = 0; cc < id.nchunks; ++cc) {
    const int c = role ? id.nchunks - 1 - cc : cc;
    const int64_t t0 = id.bos + int64_t(c) * kBT, r = id.rbase + c;
    const int len = chunk_len(id.bos, id.eos, c);
    Xch& x = s.x[cc & 1];
    xs.wait_full(cc);
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
    [[maybe_unused]] uint32_t dpk[16];  // dv_io: dv^T packed as A fragments (acc_to_frag's pairs)
    if constexpr (kFastDv) {
      if (dv_io) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float4 q4 = x.d[i][t];
          dpk[2 * i] = MmaType<T>::pack(q4.x, q4.y);
          dpk[2 * i + 1] = MmaType<T>::pack(q4.z, q4.w);
        }
      }
    }
    if (role && !dv_io) {
#pragma unroll
      for (int i = 0; i < 8; ++i) dvr[i] = x.d[i][t];
    }
    if constexpr (!XSync::kLate) xs.release(cc, id.nchunks);
    prod.issue(cc);
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
    if constexpr (kFastDv) {
      if (dv_io) {
#pragma unroll
        for (int kk = 0; kk < kBT / 16; ++kk) {
          const uint32_t rr[4] = {dpk[4 * kk], dpk[4 * kk + 1], dpk[4 * kk + 2], dpk[4 * kk + 3]};
          stmatrix_x4_trans(&s.stg[kBT + 16 * kk + st_row][st_col], rr);
        }
      }
    }
    named_barrier(kBarStore, 128);
#pragma unroll
    for (int u = 0; u < kBT / 16; ++u)
      if (orow + 16 * u < len)
        *reinterpret_cast<uint4*>(vdst + (t0 + orow + 16 * u) * f.V + och) =
            *reinterpret_cast<const uint4*>(&s.stg[orow + 16 * u][och]);
    if constexpr (kFastDv) {
      if (dv_io) {
        const int64_t dstride = int64_t(f.HV) * f.V;
#pragma unroll
        for (int u = 0; u < kBT / 16; ++u)
          if (orow + 16 * u < len)
            *reinterpret_cast<uint4*>(dvo + (t0 + orow + 16 * u) * dstride + och) =
                *reinterpret_cast<const uint4*>(&s.stg[kBT + orow + 16 * u][och]);
      }
    }
    named_barrier(kBarStore, 128);
    if (role && p.dv.p && !dv_io) {
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
          if constexpr (kFastDv) {
            if (dv_f4) {
              *reinterpret_cast<float4*>(static_cast<float*>(p.dv.p) + o) = v;
              continue;
            }
          }
          store_out(p.dv.p, p.dv.t, o, v.x);
          store_out(p.dv.p, p.dv.t, o + 1, v.y);
          store_out(p.dv.p, p.dv.t, o + 2, v.z);
          store_out(p.dv.p, p.dv.t, o + 3, v.w);
        }
      }
      named_barrier(kBarStore, 128);
    }
    prod.finish(cc);
    if constexpr (XSync::kLate) xs.release(cc, id.nchunks);
  }
}

}  // namespace sweep_wg
}  // namespace linattn::cuda
