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
// Scope: GDN, BT 64, K 128, V % 64 == 0 (other shapes and KDA take gdn_bwd_sweep.cu). The default where
// sequences average >= kWgMinTokens tokens; racecheck reports hazards on the hand-off buffer that the
// protocol does not explain (docs/perf-notes.md "Sweeps on wgmma"); "wglate" / "wgsync" probe it.
// The layout, role 0's chain, role 1's loader and the store warpgroup live in gdn_bwd_sweep_wg.cuh;
// "wg3" (kMode 3, the default until session 15) is wg with the store warpgroup's dv stores vectorized (store_warpgroup's
// kFastDv), same values as wg (perf-notes "Sweeps: the store warpgroup set the reverse step"). wg2 / wg3p /
// wg3pf (WG1 streaming the input rings on mbarriers) measured 2-5% slower and were removed in session 12.
// "wg4" / "wg5" / "wg5p" (kMode 4 / 5 / 6; wg5 the default since session 15, sweep12): wg3 with role 1's ring prefetched to L2 / refilled by
// TMA / both (gdn_bwd_sweep_wg_ring.cuh); same values as wg3.
#include <cuda_runtime.h>

#include <atomic>
#include <string>
#include <type_traits>

#include "core/env.h"
#include "core/util.h"
#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_bwd_sweep_wg.cuh"
#include "cuda/gdn/gdn_bwd_sweep_wg.h"
#include "cuda/gdn/gdn_bwd_sweep_wg_ring.cuh"
#include "cuda/common/tma.h"

namespace linattn::cuda {
namespace {
using namespace wgp;
using namespace sweep_wg;

// Role 1 (WG0): the reverse dS chain; dS^T, dV^T and dv^T to the hand-off buffer, dh0 at the end.
// kPf (wg4, wg5p): prefetch_rev_inputs of chunk cc + 2 after step cc's first commit; kTma (wg5, wg5p): chunks
// cc + 1 >= 1 take q / k / Ab / P by TMA (tma_rev_tiles, maps) on in_full[stage]; otherwise wg3's code.
// kEarly (wg7, with kTma): chunk cc + 2's dO tile and raw scalars (load_rev_rest) are issued in step cc, into this
// step's stage once every warp has read its dO (the x-empty barrier; an extra chain barrier at cc < 2), one cp.async
// group per step, so the end-of-step wait (wait_group 1) finds chunk cc + 1's issued a whole step earlier (the H200
// profile at 75a0119: role 1's end-of-step DEPBAR held 18% of its samples, long_sb). Same values (bitwise wg5).
// XSync: the hand-off protocol of x[c % 2] (XNamed: named barriers, every mode but wg7m; XMbar: wg7m, whose
// x-empty wait is not a rendezvous of WG0's warps, so its kEarly refill takes the chain barrier at every step).
template <class T, bool kPf, bool kTma, bool kEarly, class XSync>
__device__ void rev_chain(SweepWgSmem<T>& s, const GdnBwdParams& p, const GdnBwdWs& w, const Ids& id, int t,
                          const RevMaps* maps, const XSync xs) {
  constexpr bool kNamed = !std::is_same_v<XSync, XMbar>;
  const GdnFwdParams& f = p.f;
  RevStage<T>* const ring = s.ring.r;
  float dS[64];
  load_acc_state(dS, p.dht, p.dht_type, f, id, t);
  auto start = [&](int cc) { return id.bos + int64_t(id.nchunks - 1 - cc) * kBT; };
  if (id.nchunks > 0) load_rev_inputs<T>(ring[0], p, w, start(0), static_cast<int>(id.eos - start(0)), id, t);
  cp_async_commit();
  cp_async_wait<0>();
  if (id.nchunks > 0) rev_scales<T>(ring[0], f.scale, static_cast<int>(id.eos - start(0)), t);
  if constexpr (kEarly) {  // chunk 1's dO / scalars (full: only chunk 0, the sequence's last, may be partial)
    static_assert(kTma, "wg7: early dO / scalars with the TMA tiles");
    if (id.nchunks > 1) load_rev_rest<T>(ring[1], p, w, start(1), kBT, id, t);
    cp_async_commit();
  }
  const int lane = t & 31, mat = lane >> 3;
  const int ld_row = 8 * (mat >> 1) + (lane & 7), ld_col = 16 * (t >> 5) + 8 * (mat & 1);
  const uint64_t dk0 = desc_kmaj0(ring[0].k), dkt0 = desc_mnmaj0(ring[0].k, kBT), dqt0 = desc_mnmaj0(ring[0].q, kBT);
  const uint64_t dat0 = desc_mnmaj0(ring[0].a, kBT), dpt0 = desc_mnmaj0(ring[0].p, kBT);
  float acc[32], acc2[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = acc2[i] = 0.f;
  if constexpr (kTma) {  // ordered before the first refill by the chain barrier at cc = 0
    if (t == 0) {
      mbar_init(&s.bar.in_full[0], 1);
      mbar_init(&s.bar.in_full[1], 1);
      fence_barrier_init();
    }
  }
  for (int cc = 0; cc < id.nchunks; ++cc) {
    const int stage = cc & 1;
    RevStage<T>& st = ring[stage];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(RevStage<T>));
    if constexpr (kEarly) cp_async_wait<1>();  // wg7: chunk cc + 1's rest may stay in flight
    else cp_async_wait<0>();
    fence_view_async_shared();
    named_barrier(kBarChain, 128);
    if (cc + 1 < id.nchunks) {  // a full chunk
      if constexpr (kTma) {
        tma_rev_tiles<T>(ring[stage ^ 1], *maps, &s.bar.in_full[stage ^ 1], w, start(cc + 1), id, t);
        if constexpr (!kEarly) load_rev_rest<T>(ring[stage ^ 1], p, w, start(cc + 1), kBT, id, t);
      } else {
        load_rev_inputs<T>(ring[stage ^ 1], p, w, start(cc + 1), kBT, id, t);
      }
    }
    if constexpr (!kEarly) cp_async_commit();
    if constexpr (kTma) {  // the stage's TMA fill u = (cc - 1) / 2 (stage 1: chunks 1, 3, ..; stage 0: 2, 4, ..)
      if (cc >= 1) mbar_wait(&s.bar.in_full[stage], uint32_t(((cc - 1) >> 1) & 1));
    }
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
    if constexpr (kPf) {
      if (cc + 2 < id.nchunks) prefetch_rev_inputs<T>(p, w, start(cc + 2), id, t);
    }
    Xch& x = s.x[cc & 1];
    xs.wait_empty(cc);
    if constexpr (kEarly) {  // wg7: every warp has read this stage's dO (the barrier above; cc < 2: this one)
      if (cc < 2 || !kNamed) named_barrier(kBarChain, 128);
      if (cc + 2 < id.nchunks) load_rev_rest<T>(st, p, w, start(cc + 2), kBT, id, t);
      cp_async_commit();
    }
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
    xs.fill(cc);
    if constexpr (kEarly) cp_async_wait<1>();  // wg7: chunk cc + 1's rest (chunk cc + 2's stays in flight)
    else cp_async_wait<0>();  // the next chunk's inputs: its scales while the update runs
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

// kMode: 0 wg, 1 wglate, 2 wgsync, 3 wg3, 4 wg4 (wg3 + kPf), 5 wg5 (wg3 + kTma), 6 wg5p (wg3 + kTma + kPf),
// 7 wg7 (wg5 + kEarly), 8 wg7m (wg7 with the x[c % 2] hand-off on mbarriers: XMbar, racecheck models it).
template <class T, int kMode>
__device__ __forceinline__ void sweep_body(const GdnBwdParams& p, const GdnBwdWs& w, const RevMaps* maps) {
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
  // >= 3: wg's protocol, WG1's vectorized dv stores (wg3); 4-6 change role 1's ring only; 8 (wg7m): wg7 on XMbar
  if constexpr (kMode == 8) {
    if (tid == 0) {
      for (uint64_t* b : {&s.bar.x_full[0], &s.bar.x_full[1], &s.bar.x_empty[0], &s.bar.x_empty[1]}) mbar_init(b, 128);
      fence_barrier_init();
    }
    __syncthreads();
  }
  const auto xs = [&] {
    if constexpr (kMode == 8) return XMbar{&s.bar};
    else return XNamed<kMode >= 3 ? 0 : kMode>{};
  }();
  if (tid >= 128) store_warpgroup<T, kMode >= 3>(s, p, w, id, role, t, xs, NoProducer{});
  else if (role) rev_chain<T, kMode == 4 || kMode == 6, kMode >= 5, kMode == 7 || kMode == 8>(s, p, w, id, t, maps, xs);
  else fwd_chain<T>(s, p, id, t, xs, FwdOwnRing<T>{s, p.f, w, id, t});
}

template <class T, int kMode>
__global__ void __launch_bounds__(256, 1) gdn_bwd_sweep_wg_kernel(GdnBwdParams p, GdnBwdWs w) {
  sweep_body<T, kMode>(p, w, nullptr);
}

template <class T, int kMode>  // wg5 / wg5p / wg7 / wg7m
__global__ void __launch_bounds__(256, 1)
    gdn_bwd_sweep_wg_tma_kernel(GdnBwdParams p, GdnBwdWs w, const __grid_constant__ RevMaps maps) {
  sweep_body<T, kMode>(p, w, &maps);
}

}  // namespace

namespace {
std::atomic<int64_t> g_wg_sweep_launches{0}, g_wg3_sweep_launches{0}, g_wg4_sweep_launches{0}, g_wg5_sweep_launches{0},
    g_wg7_sweep_launches{0}, g_wg7m_sweep_launches{0};

// The switch's value, checked: a value that names no sweep is an error, not a silent mma.sync sweep.
enum Sweep { kSweepAuto = -1, kSweepWg3, kSweepWg, kSweepWgLate, kSweepWgSync, kSweepWgr, kSweepWgrl, kSweepWg4, kSweepWg5, kSweepWg5p,
            kSweepMma, kSweepWg7, kSweepWg7m };
int sweep_switch() {  // the list in Sweep's order
  return env_choice("LINATTN_CUDA_GDN_BWD_SWEEP", {"wg3", "wg", "wglate", "wgsync", "wgr", "wgrl", "wg4", "wg5", "wg5p", "mma",
                                                  "wg7", "wg7m"}, kSweepAuto,
                    "unset: wg7 where sequences are long enough, else mma; wg2, wg3p and wg3pf were removed");
}
}  // namespace

bool gdn_bwd_sweep_wg_enabled(const GdnFwdParams& f) {
  const int v = sweep_switch();
  if (v == kSweepMma) return false;
  if (v != kSweepAuto) return true;
  // Default: the wgmma sweeps (wg7) where sequences average >= kWgMinTokens tokens (capacity in graph mode).
  // H200 at 73035b5: 1x32768 5.43 -> 4.23 ms, 4096x8 -14%, 1x8192 -21%, but 512x16 +7.5% (per-CTA
  // pipeline fill and drain over 8 chunks).
  return f.N > 0 && f.T_total / f.N >= kWgMinTokens;
}

int64_t gdn_bwd_sweep_wg_launches() { return g_wg_sweep_launches.load(); }
int64_t gdn_bwd_sweep_wg3_launches() { return g_wg3_sweep_launches.load(); }
int64_t gdn_bwd_sweep_wg4_launches() { return g_wg4_sweep_launches.load(); }
int64_t gdn_bwd_sweep_wg5_launches() { return g_wg5_sweep_launches.load(); }
int64_t gdn_bwd_sweep_wg7_launches() { return g_wg7_sweep_launches.load(); }
int64_t gdn_bwd_sweep_wg7m_launches() { return g_wg7m_sweep_launches.load(); }

bool gdn_bwd_sweep_wg_supported(const GdnFwdParams& f) {
  return !f.kda && f.BT == kBT && f.K == kK && f.V % kVS == 0 &&
         (f.io == ElemType::kBF16 || f.io == ElemType::kF16);
}

void launch_gdn_bwd_sweeps_wg(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  LINATTN_CHECK(gdn_bwd_sweep_wg_supported(p.f), "gdn bwd sweeps (wg): needs GDN, BT 64, K 128, V % 64 == 0, bf16 / fp16");
  const dim3 grid((w.dstate_only ? 1 : 2) * (p.f.V / kVS), p.f.HV, p.f.N);
  const int v = sweep_switch();
  const bool bf = p.f.io == ElemType::kBF16;
  auto go = [&](auto mode) {
    constexpr int kMode = decltype(mode)::value;
    bf ? launch(gdn_bwd_sweep_wg_kernel<__nv_bfloat16, kMode>, grid, dim3(256), smem_bytes<__nv_bfloat16>(), stream, p, w)
       : launch(gdn_bwd_sweep_wg_kernel<__half, kMode>, grid, dim3(256), smem_bytes<__half>(), stream, p, w);
  };
  auto go_tma = [&](auto mode) {  // wg5 / wg5p / wg7: role 1's q / k / Ab / P by TMA (maps built per call)
    constexpr int kMode = decltype(mode)::value;
    RevMaps m;
    m.q = make_tma_2d_sw128(p.f.q, bf, uint64_t(p.f.T_total), uint64_t(p.f.H) * kK, uint64_t(p.f.H) * kK, kBT);
    m.k = make_tma_2d_sw128(p.f.k, bf, uint64_t(p.f.T_total), uint64_t(p.f.H) * kK, uint64_t(p.f.H) * kK, kBT);
    m.ab = make_tma_2d_sw128(w.c.Ab, bf, uint64_t(p.f.HV) * uint64_t(w.c.T_cap), kBT, kBT, kBT);
    m.p = make_tma_2d_sw128(w.c.P, bf, uint64_t(p.f.HV) * uint64_t(w.c.T_cap), kBT, kBT, kBT);
    const dim3 b(256);
    if (bf) launch(gdn_bwd_sweep_wg_tma_kernel<__nv_bfloat16, kMode>, grid, b, smem_bytes<__nv_bfloat16>(), stream, p, w, m);
    else launch(gdn_bwd_sweep_wg_tma_kernel<__half, kMode>, grid, b, smem_bytes<__half>(), stream, p, w, m);
  };
  g_wg_sweep_launches.fetch_add(1);
  if (v == kSweepWgr || v == kSweepWgrl) return launch_gdn_bwd_sweeps_wgr(p, w, stream, v == kSweepWgrl);  // _wgr.cu
  if (v == kSweepWg3) g_wg3_sweep_launches.fetch_add(1);
  if (v == kSweepWg3) go(std::integral_constant<int, 3>{});  // wg3: the default from 1ec4943's A/B to session 15
  else if (v == kSweepWg4) g_wg4_sweep_launches.fetch_add(1), go(std::integral_constant<int, 4>{});
  // wg5: the default from session 15 (H200 at b089b04, two rounds: backward 2.813 / 2.795 -> 2.764 / 2.742 ms) to 16
  else if (v == kSweepWg5) g_wg5_sweep_launches.fetch_add(1), go_tma(std::integral_constant<int, 5>{});
  else if (v == kSweepWg5p) g_wg5_sweep_launches.fetch_add(1), go_tma(std::integral_constant<int, 6>{});
  // wg7, the default since session 17 (H200 at 71bc22c, two rounds: backward 2.567 / 2.550 -> 2.433 / 2.428 ms)
  else if (v == kSweepWg7 || v == kSweepAuto) g_wg7_sweep_launches.fetch_add(1), go_tma(std::integral_constant<int, 7>{});
  // wg7m (session 18): wg7 with the fragment hand-off on mbarriers (racecheck-clean by construction), same values
  else if (v == kSweepWg7m) g_wg7m_sweep_launches.fetch_add(1), go_tma(std::integral_constant<int, 8>{});
  else if (v == kSweepWgLate) go(std::integral_constant<int, 1>{});
  else if (v == kSweepWgSync) go(std::integral_constant<int, 2>{});
  else go(std::integral_constant<int, 0>{});
}

}  // namespace linattn::cuda
