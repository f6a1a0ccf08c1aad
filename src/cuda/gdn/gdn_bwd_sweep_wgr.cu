// "wgr" / "wgrl" (LINATTN_CUDA_GDN_BWD_SWEEP, opt-in): wg3 (gdn_bwd_sweep_wg.cu) with role 1's reverse
// chain step reordered so that only the products dv^T depends on sit between the chain's round trips.
// It tests the assumption behind the dS^T key split (perf-notes "Sweeps: the dS^T key split (sweepsplit)"):
// that the step is set by its dependent wgmma round trips dS^T K^T -> dV^T -> dv^T -> update.
//   wg3:  [dS^T K^T, dO^T P, dS^T += dO^T diag(osc) Q] wait -> dV^T -> [dv^T] wait -> [update] wait
//   wgr:  [dS^T K^T, dO^T P] wait -> dV^T -> [dv^T] [dS^T += dO^T diag(osc) Q] wait<1> -> [update] wait
// dO^T diag(osc) is formed while dS^T K^T runs (wg3: before it), and the dO^T Q product (256 of the step's
// 1024 tensor-pipe cycles) runs on the pipe while dv^T is packed for the update. dS^T still takes decay, dO^T Q, update
// in that order, so every output is bitwise wg3's. "wgrl": also issues the next chunk's input ring after
// the first group (as role 0 does), not before it. Role 0 and the store warpgroup are wg3's code.
#include <cuda_runtime.h>

#include <atomic>

#include "core/util.h"
#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_bwd_sweep_wg.cuh"
#include "cuda/gdn/gdn_bwd_sweep_wg.h"

namespace linattn::cuda {
namespace {
using namespace wgp;
using namespace sweep_wg;

template <class T, bool kLateLoads>
__device__ void rev_chain_r(SweepWgSmem<T>& s, const GdnBwdParams& p, const GdnBwdWs& w, const Ids& id, int t) {
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
  auto next_inputs = [&](int cc, int stage) {
    if (cc + 1 < id.nchunks) load_rev_inputs<T>(ring[stage ^ 1], p, w, start(cc + 1), kBT, id, t);  // full chunk
    cp_async_commit();
  };
  for (int cc = 0; cc < id.nchunks; ++cc) {
    const int stage = cc & 1;
    RevStage<T>& st = ring[stage];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(RevStage<T>));
    cp_async_wait<0>();
    fence_view_async_shared();
    named_barrier(kBarChain, 128);
    if constexpr (!kLateLoads) next_inputs(cc, stage);
    uint32_t sf[32];  // dS^T leaving this chunk: A of dS^T K^T, and hdS
    acc_to_frag<T, 64>(sf, dS);
    // The decay before the first product (as wg3): done while dS^T K^T / dO^T P were in flight (no product
    // reads dS^T then), ptxas serialized every wgmma of the kernel (C7518, WG.DP in a divergent path).
    const float decay = st.decay;
#pragma unroll
    for (int i = 0; i < 64; ++i) dS[i] *= decay;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_at(dk0, soff + kmaj_step(kk, kBT)), kk > 0);
    // dO^T and dO^T diag(osc) while dS^T K^T runs (no in-flight product's registers are touched), then dO^T P.
    uint32_t dof[16];
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk) {
      uint32_t r[4];
      ldsm_x4_t(r, &st.d[16 * kk + ld_row][ld_col]);
      dof[4 * kk] = r[0], dof[4 * kk + 1] = r[1], dof[4 * kk + 2] = r[2], dof[4 * kk + 3] = r[3];
    }
    uint32_t dos[16];
    float sc[16];
    load_scales(sc, st.osc, t);
#pragma unroll
    for (int i = 0; i < 16; ++i)
      dos[i] = MmaType<T>::pack(MmaType<T>::to_float(lo_half<T>(dof[i])) * sc[reg_slot(2 * i)],
                                MmaType<T>::to_float(hi_half<T>(dof[i])) * sc[reg_slot(2 * i + 1)]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 1>(acc2, dof + 4 * kk, desc_at(dpt0, soff + uint32_t(kk) * 2048u), kk > 0);
    wgmma_commit();
    if constexpr (kLateLoads) next_inputs(cc, stage);
    Xch& x = s.x[cc & 1];
    if (cc >= 2) named_barrier(kBarXEmpty + (cc & 1), 256);
#pragma unroll
    for (int i = 0; i < 8; ++i) x.s[i][t] = make_uint4(sf[4 * i], sf[4 * i + 1], sf[4 * i + 2], sf[4 * i + 3]);
    load_scales(sc, st.wsc, t);
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_operands(acc2);
    wgmma_fence_regs(sf);
    wgmma_fence_regs(dof);
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = fmaf(acc[i], sc[reg_slot(i)], acc2[i]);
    uint32_t vf[16];  // dV^T
    acc_to_frag<T, 32>(vf, acc);
#pragma unroll
    for (int i = 0; i < 4; ++i) x.v[i][t] = make_uint4(vf[4 * i], vf[4 * i + 1], vf[4 * i + 2], vf[4 * i + 3]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 1>(acc2, vf + 4 * kk, desc_at(dat0, soff + uint32_t(kk) * 2048u), kk > 0);
    wgmma_commit();
    // dS^T += dO^T diag(osc) Q: off the dv^T path, on the pipe while dv^T is packed below.
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 128, 1>(dS, dos + 4 * kk, desc_at(dqt0, soff + uint32_t(kk) * 2048u), 1);
    wgmma_commit();
    load_scales(sc, st.esc, t);
    wgmma_wait<1>();
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
    wgmma_fence_regs(dos);
    wgmma_fence_regs(ef);
  }
  cp_async_wait<0>();
  store_dh0(dS, p, id, t);
}

template <class T, bool kLateLoads>
__global__ void __launch_bounds__(256, 1) gdn_bwd_sweep_wgr_kernel(GdnBwdParams p, GdnBwdWs w) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  SweepWgSmem<T>& s = *reinterpret_cast<SweepWgSmem<T>*>(base);
  const int tid = threadIdx.x, t = tid & 127;
  const int role = w.dstate_only ? 1 : int(blockIdx.x & 1);
  const Ids id = sweep_ids(p, w, w.dstate_only ? int(blockIdx.x) : int(blockIdx.x >> 1));
  const XNamed<0> xs;  // wg3's hand-off and stores
  if (tid >= 128) store_warpgroup<T, true>(s, p, w, id, role, t, xs, NoProducer{});
  else if (role) rev_chain_r<T, kLateLoads>(s, p, w, id, t);
  else fwd_chain<T>(s, p, id, t, xs, FwdOwnRing<T>{s, p.f, w, id, t});
}

std::atomic<int64_t> g_wgr_sweep_launches{0};
}  // namespace

int64_t gdn_bwd_sweep_wgr_launches() { return g_wgr_sweep_launches.load(); }

void launch_gdn_bwd_sweeps_wgr(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream, bool late_loads) {
  const dim3 grid((w.dstate_only ? 1 : 2) * (p.f.V / kVS), p.f.HV, p.f.N);
  auto go = [&](auto* kb, auto* kh) {
    p.f.io == ElemType::kBF16 ? launch(kb, grid, dim3(256), smem_bytes<__nv_bfloat16>(), stream, p, w)
                              : launch(kh, grid, dim3(256), smem_bytes<__half>(), stream, p, w);
  };
  g_wgr_sweep_launches.fetch_add(1);
  if (late_loads) go(gdn_bwd_sweep_wgr_kernel<__nv_bfloat16, true>, gdn_bwd_sweep_wgr_kernel<__half, true>);
  else go(gdn_bwd_sweep_wgr_kernel<__nv_bfloat16, false>, gdn_bwd_sweep_wgr_kernel<__half, false>);
}

}  // namespace linattn::cuda
