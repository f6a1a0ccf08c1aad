// Head-level sweeps of the chunked KDA backward on wgmma (sm_90a; the default, LINATTN_CUDA_KDA_SWEEP=wg2 / wg / wgm):
// the two roles, outputs and grid of gdn_bwd_sweep.cu's KDA policy, laid out as the GDN wgmma sweeps
// (gdn_bwd_sweep_wg.cu): the fp32 state is held transposed (S^T / dS^T [v][key], one warpgroup's
// accumulator, 64 registers per thread), every product that starts from the state or a per-chunk
// result takes its A operand from registers, and the chain warpgroup has no CTA-wide barrier:
//   role 0 (chunks in order):  KS^T = S^T kg^T, X^T = V^T - KS^T, V^T = X^T Ab^T,
//                              S^T <- S^T diag(gl) + V^T kgl
//   role 1 (chunks reversed):  dV^T = dS^T kgl^T + dO^T P, dv^T = dV^T Ab,
//                              dS^T <- dS^T diag(gl) + scale dO^T qg - dv^T kg
// (gl = 2^gam_L per key of the chunk, GdnChunkWs::gl; the gate and rq / rk are inside qg / kg / kgl.)
// CTA = (2 * slice + role, value head j, sequence ws_sequence(z)), V-slice 64, 256 threads. WG0 runs
// the chain and streams its inputs by cp.async, one chunk ahead (2 stages: role 0 the KDA forward's
// kg / kgl / v / Ab / gl stage of gdn_fused_wgp_common.cuh; role 1 qg / kg / kgl / Ab / P / dO / gl).
// WG1 (the store warpgroup, as sweep_wg::store_warpgroup) takes each chunk's results from a hand-off
// buffer in fragment order and writes hS / hdS, vh / dvh and dv one chunk behind WG0. Role 0 hands
// off through a double buffer; role 1's stage holds three K-wide tiles (75 KB), so only a single
// buffer fits next to its 2-stage ring (full / empty of buffer 0 only then). w.dstate_only: role 1
// only, one CTA per (slice, head, sequence). Scope: KDA, BT 64, K 128, V % 64 == 0, bf16 / fp16
// (BT 32 keeps the mma.sync sweeps). Not bitwise the mma.sync sweeps (accumulation order differs).
// wg2 (flag kSt2): wg with role 1's store warpgroup on store_rev2 (two barriers a chunk, 16-byte dv stores; bitwise wg).
// Hand-off protocol (kernel template flag kMbar): named barriers (XS, "wg", the default) or mbarriers
// (XM, "wgm": the mbarrier protocol of gdn_bwd_sweep_wg.cuh's XMbar, which racecheck verifies); same products on the
// same operands in the same order, so wgm's outputs equal wg's bit for bit.
#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "core/env.h"
#include "core/util.h"
#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_bwd_sweep_wg.cuh"
#include "cuda/kda/kda_bwd_sweep_wg.h"

namespace linattn::cuda {
namespace {
using namespace wgp;
using sweep_wg::Ids;
using sweep_wg::kBarChain;
using sweep_wg::kBarStore;
using sweep_wg::kBarXEmpty;
using sweep_wg::kBarXFull;
using sweep_wg::kLdF;
using sweep_wg::load_acc_state;
using sweep_wg::mbar_arrive;
using sweep_wg::Xch;

template <class T>
struct alignas(1024) KRevStage {            // role 1's inputs of one chunk
  alignas(1024) uint8_t q[kBT * kK * 2];    // qg [token][key] K-major panels (read MN-major: update's B)
  alignas(1024) uint8_t k[kBT * kK * 2];    // kg (MN-major: the update's B)
  alignas(1024) uint8_t kl[kBT * kK * 2];   // kgl (K-major: B of dS^T kgl^T)
  alignas(1024) uint8_t a[kBT * kBT * 2];   // Ab [t][s] (MN-major B of dv^T = dV^T Ab)
  alignas(1024) uint8_t p[kBT * kBT * 2];   // P [t][s] (MN-major B of dO^T P)
  T d[kBT][kLdV];                           // dO [token][v]
  float gk[kK];                             // 2^gam_L per key
};

template <class T>
struct KSmem {
  using FStage = typename WgpSmem<T, true>::Stage0;
  struct Fwd {
    FStage f[2];
    Xch x[2];
  };
  struct Rev {
    KRevStage<T> r[2];
    Xch x[1];
  };
  union U {
    Fwd fwd;
    Rev rev;
  } u;
  T stg[kK][kLdV];  // WG1's staging: [key][v], [token][v], or fp32 [token][kVS + 4] for dv
};
template <class T>
constexpr size_t kda_smem_bytes() { return sizeof(KSmem<T>) + 1024; }
static_assert(kda_smem_bytes<__nv_bfloat16>() <= 227 * 1024, "kda bwd sweep (wg): shared memory over the sm_90 limit");

// wgm's mbarriers, right after KSmem (so wg's layout is untouched): role 0 uses both buffers' pairs,
// role 1 (single buffer) full[0] / empty[0].
struct KBars {
  uint64_t full[2], empty[2];
};
template <class T>
__device__ __forceinline__ KBars* kbars(unsigned char* base) { return reinterpret_cast<KBars*>(base + sizeof(KSmem<T>)); }
template <class T, bool kMbar>
constexpr size_t kda_smem_bytes_m() { return kda_smem_bytes<T>() + (kMbar ? sizeof(KBars) : 0); }
static_assert(kda_smem_bytes_m<__nv_bfloat16, true>() <= 227 * 1024, "kda bwd sweep (wgm): shared memory over the limit");
// wg2's second staging tile [row][v] (dV^ rows 0..63, dv rows 64..127), right after KSmem (wg's layout untouched).
template <class T>
using Stg2 = T[kK][kLdV];
template <class T>
constexpr size_t kda_smem_bytes_2() { return kda_smem_bytes<T>() + sizeof(Stg2<T>); }
static_assert(kda_smem_bytes_2<__nv_bfloat16>() <= 227 * 1024, "kda bwd sweep (wg2): shared memory over the limit");

// Hand-off of NX fragment buffers (producer WG0, consumer WG1): full kBarXFull + c % NX, empty
// kBarXEmpty + c % NX (bar.arrive by one side, bar.sync by the other, 256 threads). With NX = 1 the
// producer's fill of chunk c + 1 waits for the consumer's release of chunk c, which follows its wait
// for chunk c, so a barrier never has two phases in flight.
template <int NX>
struct XS {
  static constexpr int kN = NX;
  __device__ __forceinline__ void wait_empty(int c) const {
    if (c >= NX) named_barrier(kBarXEmpty + c % NX, 256);
  }
  __device__ __forceinline__ void fill(int c) const { named_barrier_arrive(kBarXFull + c % NX, 256); }
  __device__ __forceinline__ void wait_full(int cc) const { named_barrier(kBarXFull + cc % NX, 256); }
  __device__ __forceinline__ void release(int cc, int n) const {
    if (cc + NX < n) named_barrier_arrive(kBarXEmpty + cc % NX, 256);
  }
};
// The same hand-off on mbarriers (wgm): full[b] / empty[b] count 128 (every thread of one warpgroup
// arrives once per use: mbarrier.arrive releases its stores / loads, try_wait acquires them). Use
// u = c / NX of buffer b = c % NX waits for completion u of full[b] (parity u & 1) and, for c >= NX,
// completion u - 1 of empty[b]. No waiter can see its barrier two phases ahead: the fill of chunk
// c + NX waits for the release of chunk c, which follows the wait for chunk c. With NX = 2 this is
// XMbar of gdn_bwd_sweep_wg.cuh, which is fixed at two buffers.
template <int NX>
struct XM {
  static constexpr int kN = NX;
  KBars* b;
  __device__ __forceinline__ void wait_empty(int c) const {
    if (c >= NX) mbar_wait(&b->empty[c % NX], uint32_t((c / NX + 1) & 1));
  }
  __device__ __forceinline__ void fill(int c) const { mbar_arrive(&b->full[c % NX]); }
  __device__ __forceinline__ void wait_full(int cc) const { mbar_wait(&b->full[cc % NX], uint32_t((cc / NX) & 1)); }
  __device__ __forceinline__ void release(int cc, int n) const {
    if (cc + NX < n) mbar_arrive(&b->empty[cc % NX]);
  }
};

// Chunk row r of ws.gl, or row 0 past the capacity (its results are never stored).
__device__ __forceinline__ int64_t gl_row(const GdnBwdWs& w, int64_t r) { return r < w.nt_cap ? r : 0; }

__device__ __forceinline__ void load_vt(uint32_t (&vv)[16], const void* tile, int ld_row, int ld_col) {
  const auto* v = static_cast<const uint8_t*>(tile);
#pragma unroll
  for (int kk = 0; kk < kBT / 16; ++kk) {
    uint32_t r[4];
    ldsm_x4_t(r, v + (size_t(16 * kk + ld_row) * kLdV + ld_col) * 2);
    vv[4 * kk] = r[0], vv[4 * kk + 1] = r[1], vv[4 * kk + 2] = r[2], vv[4 * kk + 3] = r[3];
  }
}

// acc[4m + {0, 2}] / [4m + {1, 3}] hold keys 8m + 2 (t % 4) + 0 / 1: the per-key decay.
__device__ __forceinline__ void decay_keys(float (&S)[64], const float* gk, int t) {
#pragma unroll
  for (int m = 0; m < 16; ++m) {
    const float2 g2 = *reinterpret_cast<const float2*>(&gk[8 * m + 2 * (t & 3)]);
    S[4 * m] *= g2.x, S[4 * m + 1] *= g2.y, S[4 * m + 2] *= g2.x, S[4 * m + 3] *= g2.y;
  }
}

// Role 0 (WG0): the forward state chain on kg / kgl; S^T and V^T fragments to the hand-off buffer.
template <class T, class XSync>
__device__ void fwd_chain(KSmem<T>& s, const GdnBwdParams& p, const GdnBwdWs& w, const Ids& id, int t, const XSync xs) {
  using Stage0 = typename KSmem<T>::FStage;
  const GdnFwdParams& f = p.f;
  Stage0* const ring = s.u.fwd.f;
  static_assert(XSync::kN == 2);
  float S[64];
  load_acc_state(S, f.h0, f.h0_type, f, id, t);
  if (id.nchunks > 0)
    load_state_inputs<T, true>(ring[0], f, w.c, id.bos, chunk_len(id.bos, id.eos, 0), id.h, id.j, id.v0, t,
                               gl_row(w, id.rbase));
  cp_async_commit();
  const int lane = t & 31, mat = lane >> 3;  // ldmatrix.trans lane address of V^T's fragments
  const int ld_row = 8 * (mat >> 1) + (lane & 7), ld_col = 16 * (t >> 5) + 8 * (mat & 1);
  const uint64_t dk0 = desc_kmaj0(ring[0].k), da0 = desc_kmaj0(ring[0].a), dkt0 = desc_mnmaj0(ring[0].kda.kl, kBT);
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  for (int c = 0; c < id.nchunks; ++c) {
    const int stage = c & 1;
    Stage0& st = ring[stage];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(Stage0));
    cp_async_wait<0>();
    fence_view_async_shared();
    named_barrier(kBarChain, 128);  // chunk c's copies visible; all of WG0 is past chunk c - 1
    uint32_t sf[32];
    acc_to_frag<T, 64>(sf, S);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_at(dk0, soff + kmaj_step(kk, kBT)), kk > 0);
    wgmma_commit();
    if (c + 1 < id.nchunks)  // into chunk c - 1's stage, whose readers all finished
      load_state_inputs<T, true>(ring[stage ^ 1], f, w.c, id.bos + int64_t(c + 1) * kBT, chunk_len(id.bos, id.eos, c + 1),
                                 id.h, id.j, id.v0, t, gl_row(w, id.rbase + c + 1));
    cp_async_commit();
    Xch& x = s.u.fwd.x[c & 1];
    xs.wait_empty(c);
#pragma unroll
    for (int i = 0; i < 8; ++i) x.s[i][t] = make_uint4(sf[4 * i], sf[4 * i + 1], sf[4 * i + 2], sf[4 * i + 3]);
    uint32_t vv[16];
    load_vt(vv, &st.v[0][0], ld_row, ld_col);
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_regs(sf);
    uint32_t xf[16];  // X^T = V^T - KS^T (the gate and rk are inside kg)
#pragma unroll
    for (int i = 0; i < 16; ++i)
      xf[i] = MmaType<T>::pack(MmaType<T>::to_float(lo_half<T>(vv[i])) - acc[2 * i],
                               MmaType<T>::to_float(hi_half<T>(vv[i])) - acc[2 * i + 1]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, xf + 4 * kk, desc_at(da0, soff + kmaj_step(kk, kBT)), kk > 0);
    wgmma_commit();
    decay_keys(S, st.kda.gk, t);
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_regs(xf);
    uint32_t vf[16];  // V^T: hS's partner and the update's A (kgl carries e^(gam_L - gam) rk, 0 past the end)
    acc_to_frag<T, 32>(vf, acc);
    // Stored before the product that reads vf is issued (reading an in-flight wgmma's A registers
    // made ptxas serialize every wgmma of the GDN kernel, C7520).
#pragma unroll
    for (int i = 0; i < 4; ++i) x.v[i][t] = make_uint4(vf[4 * i], vf[4 * i + 1], vf[4 * i + 2], vf[4 * i + 3]);
    xs.fill(c);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 128, 1>(S, vf + 4 * kk, desc_at(dkt0, soff + uint32_t(kk) * 2048u), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(S);
    wgmma_fence_regs(vf);
  }
  cp_async_wait<0>();
}

// Role 1's inputs of the chunk at t0 (len valid rows, chunk row r) into st; t: WG0's thread.
template <class T>
__device__ __forceinline__ void load_rev_inputs(KRevStage<T>& st, const GdnBwdParams& p, const GdnBwdWs& w, int64_t t0,
                                                int len, int64_t r, const Ids& id, int t) {
  const GdnFwdParams& f = p.f;
  const int64_t goff = (id.j * w.c.T_cap + t0) * kK;
  const T* q = static_cast<const T*>(w.c.qg) + goff;
  const T* k = static_cast<const T*>(w.c.kg) + goff;
  const T* kl = static_cast<const T*>(w.c.kgl) + goff;
  const int64_t aoff = (id.j * w.c.T_cap + t0) * kBT;
  const T* A = static_cast<const T*>(w.c.Ab) + aoff;
  const T* P = static_cast<const T*>(w.c.P) + aoff;
  const int kr = t >> 4, kc = (t & 15) * 8, vr = t >> 3, vc = (t & 7) * 8;
  copy_rows<8>(st.q + kmaj(kr, kc, kBT), 1024u, q + kr * kK + kc, 8 * kK, q, kr, 8, len);
  copy_rows<8>(st.k + kmaj(kr, kc, kBT), 1024u, k + kr * kK + kc, 8 * kK, k, kr, 8, len);
  copy_rows<8>(st.kl + kmaj(kr, kc, kBT), 1024u, kl + kr * kK + kc, 8 * kK, kl, kr, 8, len);
  copy_rows<4>(st.a + sw128_offset(vr, vc), 2048u, A + vr * kBT + vc, 16 * kBT, A, vr, 16, len);
  copy_rows<4>(st.p + sw128_offset(vr, vc), 2048u, P + vr * kBT + vc, 16 * kBT, P, vr, 16, len);
  if (w.do_direct) {
    const int64_t dstride = int64_t(f.HV) * f.V;
    const T* d = static_cast<const T*>(p.d_o) + (t0 * f.HV + id.j) * int64_t(f.V) + id.v0;
    copy_rows<4>(reinterpret_cast<uint8_t*>(&st.d[vr][vc]), 16u * kLdV * sizeof(T), d + vr * dstride + vc, 16 * dstride,
                 d, vr, 16, len);
  } else {  // converted on load (plain stores, published with the chunk's copies)
    load_do_rows<T, kBT, kVS, kLdV, 128>(st.d, p, false, t0, len, id.j, id.v0, t);
  }
  if (t < kK / 4) {  // zeros past the capacity, as the mma.sync sweep
    const bool ok = r < w.nt_cap;
    cp_async16(&st.gk[4 * t], w.c.gl + ((ok ? r : 0) * f.HV + id.j) * kK + 4 * t, ok);
  }
}

// Role 1 (WG0): the reverse dS chain; dS^T, dV^T and dv^T to the (single) hand-off buffer, dh0 at the end.
template <class T, class XSync>
__device__ void rev_chain(KSmem<T>& s, const GdnBwdParams& p, const GdnBwdWs& w, const Ids& id, int t, const XSync xs) {
  const GdnFwdParams& f = p.f;
  KRevStage<T>* const ring = s.u.rev.r;
  static_assert(XSync::kN == 1);
  float dS[64];
  load_acc_state(dS, p.dht, p.dht_type, f, id, t);
  auto start = [&](int cc) { return id.bos + int64_t(id.nchunks - 1 - cc) * kBT; };
  auto row = [&](int cc) { return id.rbase + (id.nchunks - 1 - cc); };
  if (id.nchunks > 0) load_rev_inputs<T>(ring[0], p, w, start(0), static_cast<int>(id.eos - start(0)), row(0), id, t);
  cp_async_commit();
  const int lane = t & 31, mat = lane >> 3;
  const int ld_row = 8 * (mat >> 1) + (lane & 7), ld_col = 16 * (t >> 5) + 8 * (mat & 1);
  const uint64_t dkl0 = desc_kmaj0(ring[0].kl), dkt0 = desc_mnmaj0(ring[0].k, kBT), dqt0 = desc_mnmaj0(ring[0].q, kBT);
  const uint64_t dat0 = desc_mnmaj0(ring[0].a, kBT), dpt0 = desc_mnmaj0(ring[0].p, kBT);
  const float scale = f.scale;
  float acc[32], acc2[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = acc2[i] = 0.f;
  for (int cc = 0; cc < id.nchunks; ++cc) {
    const int stage = cc & 1;
    KRevStage<T>& st = ring[stage];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(KRevStage<T>));
    cp_async_wait<0>();
    fence_view_async_shared();
    named_barrier(kBarChain, 128);
    if (cc + 1 < id.nchunks) load_rev_inputs<T>(ring[stage ^ 1], p, w, start(cc + 1), kBT, row(cc + 1), id, t);
    cp_async_commit();
    uint32_t sf[32];  // dS^T leaving this chunk: A of dS^T kgl^T, and hdS
    acc_to_frag<T, 64>(sf, dS);
    uint32_t dof[16];
    load_vt(dof, &st.d[0][0], ld_row, ld_col);
    decay_keys(dS, st.gk, t);
    uint32_t dos[16];  // scale dO^T (rows past the end are zero-filled)
#pragma unroll
    for (int i = 0; i < 16; ++i)
      dos[i] = MmaType<T>::pack(MmaType<T>::to_float(lo_half<T>(dof[i])) * scale,
                                MmaType<T>::to_float(hi_half<T>(dof[i])) * scale);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_at(dkl0, soff + kmaj_step(kk, kBT)), kk > 0);
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 1>(acc2, dof + 4 * kk, desc_at(dpt0, soff + uint32_t(kk) * 2048u), kk > 0);
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 128, 1>(dS, dos + 4 * kk, desc_at(dqt0, soff + uint32_t(kk) * 2048u), 1);
    wgmma_commit();
    Xch& x = s.u.rev.x[0];
    xs.wait_empty(cc);
#pragma unroll
    for (int i = 0; i < 8; ++i) x.s[i][t] = make_uint4(sf[4 * i], sf[4 * i + 1], sf[4 * i + 2], sf[4 * i + 3]);
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_operands(acc2);
    wgmma_fence_operands(dS);
    wgmma_fence_regs(sf);
    wgmma_fence_regs(dof);
    wgmma_fence_regs(dos);
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] += acc2[i];
    uint32_t vf[16];  // dV^T
    acc_to_frag<T, 32>(vf, acc);
#pragma unroll
    for (int i = 0; i < 4; ++i) x.v[i][t] = make_uint4(vf[4 * i], vf[4 * i + 1], vf[4 * i + 2], vf[4 * i + 3]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 1>(acc2, vf + 4 * kk, desc_at(dat0, soff + uint32_t(kk) * 2048u), kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(acc2);
    wgmma_fence_regs(vf);
    uint32_t ef[16];  // -dv^T
#pragma unroll
    for (int i = 0; i < 16; ++i) ef[i] = MmaType<T>::pack(-acc2[2 * i], -acc2[2 * i + 1]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 128, 1>(dS, ef + 4 * kk, desc_at(dkt0, soff + uint32_t(kk) * 2048u), 1);
    wgmma_commit();
#pragma unroll
    for (int i = 0; i < 8; ++i) x.d[i][t] = make_float4(acc2[4 * i], acc2[4 * i + 1], acc2[4 * i + 2], acc2[4 * i + 3]);
    xs.fill(cc);
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

// The store warpgroup's state pieces: x's S^T / dS^T fragments (128 keys) to stg [key][v] by stmatrix.trans, and
// stg's rows to hS / hdS at chunk row r (16-byte pieces, rows orow + 16u; nothing past the capacity).
template <class T>
__device__ __forceinline__ void stage_state(KSmem<T>& s, const Xch& x, int t, int st_row, int st_col) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const uint4 u = x.s[kk][t];
    const uint32_t rr[4] = {u.x, u.y, u.z, u.w};
    stmatrix_x4_trans(&s.stg[16 * kk + st_row][st_col], rr);
  }
}
template <class T>
__device__ __forceinline__ void store_state(T* sdst, const KSmem<T>& s, const GdnBwdWs& w, const GdnFwdParams& f,
                                            const Ids& id, int64_t r, int orow, int och) {
  if (r < w.nt_cap) {
    T* base = sdst + ((r * f.HV + id.j) * int64_t(kK)) * f.V + id.v0;
#pragma unroll
    for (int u = 0; u < kK / 16; ++u)
      *reinterpret_cast<uint4*>(base + int64_t(orow + 16 * u) * f.V + och) =
          *reinterpret_cast<const uint4*>(&s.stg[orow + 16 * u][och]);
  }
}

// WG1: one chunk behind WG0, writes the state (hS / hdS), V^ / dV^ (vh / dvh) and dv of each chunk
// (sweep_wg::store_warpgroup's stores, over XSync::kN hand-off buffers xb).
template <class T, class XSync>
__device__ void store_warpgroup(KSmem<T>& s, Xch* xb, const GdnBwdParams& p, const GdnBwdWs& w, const Ids& id, int role,
                                int t, const XSync xs) {
  constexpr int NX = XSync::kN;
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
    Xch& x = xb[cc % NX];
    xs.wait_full(cc);
    stage_state(s, x, t, st_row, st_col);
    uint4 vfr[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) vfr[i] = x.v[i][t];
    float4 dvr[8];
    if (role) {
#pragma unroll
      for (int i = 0; i < 8; ++i) dvr[i] = x.d[i][t];
    }
    xs.release(cc, id.nchunks);
    named_barrier(kBarStore, 128);
    store_state(sdst, s, w, f, id, r, orow, och);
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
  }
}

// wg2's store warpgroup of role 1 (the dS chain), where dv has the io type T: two CTA barriers per chunk instead of
// eight, 16-byte dv stores instead of 32 typed scalar ones. dS^T's fragments go to stg ([key][v]), dV^T's and dv^T's
// (packed to T: the rounding store_out gives dv) to stg2 rows 0..63 / 64..127 ([token][v]) by stmatrix.trans;
// then each thread writes its 16-byte pieces of hdS, dvh and dv. Same values and rows as store_warpgroup.
template <class T>
__device__ void store_rev2(KSmem<T>& s, Stg2<T>& stg2, const GdnBwdParams& p, const GdnBwdWs& w, const Ids& id, int t) {
  const XS<1> xs;
  const GdnFwdParams& f = p.f;
  const int lane = t & 31, mat = lane >> 3;  // stmatrix.trans lane address
  const int st_row = 8 * (mat >> 1) + (lane & 7), st_col = 16 * (t >> 5) + 8 * (mat & 1);
  const int orow = t >> 3, och = (t & 7) * 8;  // 16-byte pieces: rows t / 8 + 16u, chunk t % 8
  T* const vdst = static_cast<T*>(w.dvh) + int64_t(id.j) * w.c.T_cap * f.V + id.v0;
  T* const ddst = static_cast<T*>(p.dv.p);
  Xch& x = s.u.rev.x[0];
  for (int cc = 0; cc < id.nchunks; ++cc) {
    const int c = id.nchunks - 1 - cc;
    const int64_t t0 = id.bos + int64_t(c) * kBT, r = id.rbase + c;
    const int len = chunk_len(id.bos, id.eos, c);
    xs.wait_full(cc);
    stage_state(s, x, t, st_row, st_col);
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk) {
      const uint4 u = x.v[kk][t];
      const uint32_t rr[4] = {u.x, u.y, u.z, u.w};
      stmatrix_x4_trans(&stg2[16 * kk + st_row][st_col], rr);
    }
    if (ddst) {  // x.d[i] = dv^T accumulator registers 4i .. 4i + 3: fragment 2i + {0, 1} as acc_to_frag packs them
#pragma unroll
      for (int kk = 0; kk < kBT / 16; ++kk) {
        const float4 a = x.d[2 * kk][t], b = x.d[2 * kk + 1][t];
        const uint32_t rr[4] = {MmaType<T>::pack(a.x, a.y), MmaType<T>::pack(a.z, a.w), MmaType<T>::pack(b.x, b.y),
                                MmaType<T>::pack(b.z, b.w)};
        stmatrix_x4_trans(&stg2[kBT + 16 * kk + st_row][st_col], rr);
      }
    }
    xs.release(cc, id.nchunks);
    named_barrier(kBarStore, 128);
    store_state(static_cast<T*>(w.hdS), s, w, f, id, r, orow, och);
#pragma unroll
    for (int u = 0; u < kBT / 16; ++u) {
      const int row = orow + 16 * u;
      if (row < len) {
        *reinterpret_cast<uint4*>(vdst + (t0 + row) * f.V + och) = *reinterpret_cast<const uint4*>(&stg2[row][och]);
        if (ddst)
          *reinterpret_cast<uint4*>(ddst + ((t0 + row) * f.HV + id.j) * int64_t(f.V) + id.v0 + och) =
              *reinterpret_cast<const uint4*>(&stg2[kBT + row][och]);
      }
    }
    named_barrier(kBarStore, 128);
  }
}

// The hand-off of NX buffers: XM on the mbarriers after KSmem (wgm) or XS (wg).
template <int NX, bool kMbar, class T>
__device__ __forceinline__ auto hand_off(unsigned char* base) {
  if constexpr (kMbar) return XM<NX>{kbars<T>(base)};
  else return XS<NX>{};
}

// kSt2 (wg2, named barriers only): role 1's store warpgroup is store_rev2 when dv is absent or of the io type and
// 16-byte aligned (else store_warpgroup, as wg).
template <class T, bool kMbar, bool kSt2 = false>
__global__ void __launch_bounds__(256, 1) kda_bwd_sweep_wg_kernel(GdnBwdParams p, GdnBwdWs w) {
  static_assert(!(kMbar && kSt2), "wg2 runs the named-barrier hand-off");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  KSmem<T>& s = *reinterpret_cast<KSmem<T>*>(base);
  const int tid = threadIdx.x, t = tid & 127;
  if constexpr (kMbar) {
    if (tid == 0) {
      uint64_t* const b = &kbars<T>(base)->full[0];
      for (int i = 0; i < int(sizeof(KBars) / sizeof(uint64_t)); ++i) mbar_init(b + i, 128);
      fence_barrier_init();
    }
    __syncthreads();
  }
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
  const auto x2 = hand_off<2, kMbar, T>(base);  // role 0: double buffer
  const auto x1 = hand_off<1, kMbar, T>(base);  // role 1: single buffer
  if (tid >= 128) {
    if constexpr (kSt2) {
      if (role && (!p.dv.p || (p.dv.t == p.f.io && (reinterpret_cast<uintptr_t>(p.dv.p) & 15) == 0))) {
        store_rev2<T>(s, *reinterpret_cast<Stg2<T>*>(base + sizeof(KSmem<T>)), p, w, id, t);
        return;
      }
    }
    if (role) store_warpgroup<T>(s, s.u.rev.x, p, w, id, role, t, x1);
    else store_warpgroup<T>(s, s.u.fwd.x, p, w, id, role, t, x2);
  } else if (role) {
    rev_chain<T>(s, p, w, id, t, x1);
  } else {
    fwd_chain<T>(s, p, w, id, t, x2);
  }
}

std::atomic<int64_t> g_launches{0}, g_wgm_launches{0}, g_wg2_launches{0};

template <class T, bool kMbar, bool kSt2>
void launch_t(const GdnBwdParams& p, const GdnBwdWs& w, dim3 grid, cudaStream_t stream) {
  launch(kda_bwd_sweep_wg_kernel<T, kMbar, kSt2>, grid, dim3(256),
         kSt2 ? kda_smem_bytes_2<T>() : kda_smem_bytes_m<T, kMbar>(), stream, p, w);
}
template <bool kMbar, bool kSt2 = false>
void launch_m(const GdnBwdParams& p, const GdnBwdWs& w, dim3 grid, cudaStream_t stream) {
  if (p.f.io == ElemType::kBF16) launch_t<__nv_bfloat16, kMbar, kSt2>(p, w, grid, stream);
  else launch_t<__half, kMbar, kSt2>(p, w, grid, stream);
}

}  // namespace

namespace {
enum KdaSweep { kSweepWg, kSweepWgm, kSweepMma, kSweepWg2 };  // the order of kda_sweep's list
// Unset: wg2 (the default since session 15: role 1's one-pass stores, bitwise wg; H200 A/B at a438559, 32/32 1x32768
// --saved 1 backward 7.106 / 7.113 -> 6.902 / 6.906 ms); "wg" keeps the session-14 sweeps.
int kda_sweep() { return env_choice("LINATTN_CUDA_KDA_SWEEP", {"wg", "wgm", "mma", "wg2"}, kSweepWg2); }
}  // namespace

// Default since the H200 A/B at 3d4b025 (tests pass with it; KDA backward 32/32 1x32768 11.20 -> 9.98 ms, fwd+bwd
// graph 13.47 -> 12.24, 1x4096 backward 1.463 -> 1.341); LINATTN_CUDA_KDA_SWEEP=mma keeps the mma.sync sweeps,
// =wgm takes the mbarrier hand-off; any other value is an error (it was a silent mma until session 13).
bool kda_bwd_sweep_wg_enabled() { return kda_sweep() != kSweepMma; }

bool kda_bwd_sweep_wg_supported(const GdnFwdParams& f) {
  return f.kda && f.BT == kBT && f.K == kK && f.V % kVS == 0 && (f.io == ElemType::kBF16 || f.io == ElemType::kF16);
}

int64_t kda_bwd_sweep_wg_launches() { return g_launches.load(); }
int64_t kda_bwd_sweep_wgm_launches() { return g_wgm_launches.load(); }
int64_t kda_bwd_sweep_wg2_launches() { return g_wg2_launches.load(); }

void launch_kda_bwd_sweeps_wg(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  LINATTN_CHECK(kda_bwd_sweep_wg_supported(p.f), "kda bwd sweeps (wg): needs KDA, BT 64, K 128, V % 64 == 0, bf16 / fp16");
  const dim3 grid((w.dstate_only ? 1 : 2) * (p.f.V / kVS), p.f.HV, p.f.N);
  g_launches.fetch_add(1);
  const int v = kda_sweep();
  if (v == kSweepWgm) {
    g_wgm_launches.fetch_add(1);
    launch_m<true>(p, w, grid, stream);
  } else if (v == kSweepWg2) {
    g_wg2_launches.fetch_add(1);
    launch_m<false, true>(p, w, grid, stream);
  } else {
    launch_m<false>(p, w, grid, stream);
  }
}

}  // namespace linattn::cuda
