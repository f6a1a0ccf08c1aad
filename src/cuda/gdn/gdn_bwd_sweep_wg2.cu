// wgmma backward sweeps, variant "wg2" (LINATTN_CUDA_GDN_BWD_SWEEP=wg2; sm_90a): the math, grid,
// layouts and outputs of gdn_bwd_sweep_wg.cu, with role 1's chain warpgroup (WG0) left only the
// chain: WG1 streams role 1's 2-stage q / k / Ab / P / dO ring by cp.async and computes its per-token
// scales (two chunks ahead of the store it is doing), and WG0 issues dS^T K^T first, then forms
// dO^T diag(osc) and the decay while that product runs. Every hand-off is an mbarrier:
//   in_full[b]  (128): WG1 thread waits for its own copies, writes its scales, fence.proxy.async, arrives;
//                      WG0 waits (parity (cc / 2) & 1) before chain step cc reads stage cc % 2.
//   in_empty[b] (128): WG0 arrives after step cc's last product completed; WG1 waits before it
//                      copies chunk step cc + 2 into that stage.
//   x_full / x_empty: the fragment double buffer (XMbar in gdn_bwd_sweep_wg.cuh), both roles.
// WG1's iteration cc: wait x_full, read chunk step cc's fragments, release x_empty, wait in_empty[cc % 2],
// issue step cc + 2's copies, write step cc's hS / vh / dv, wait its copies, scales, arrive in_full.
// So the copies of step cc + 2 get one chain step to land (as wg's loads issued by WG0 did). Role 0
// keeps wg's chain (its own 3-stage ring in WG0) on the mbarrier fragment hand-off.
// Same products on the same operands as wg (only their issue order and the protocol differ), so the
// outputs equal wg's bit for bit (tests/cuda/test_cuda_gdn_bwd.cc checks it).
// "wg3p": the same with the store warpgroup's vectorized dv stores (kFastDv); "wg3pf": wg3p with role 0's
// 2-stage k / v / Ab ring streamed by WG1 as well (RingProducer<T, false>, fwd_chain on FwdProducedRing).
#include <cuda_runtime.h>

#include <atomic>
#include <type_traits>

#include "core/check.h"
#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_bwd_sweep_wg.cuh"
#include "cuda/gdn/gdn_bwd_sweep_wg.h"

namespace linattn::cuda {
namespace {
using namespace wgp;
using namespace sweep_wg;

// WG1's producer of a chain's 2-stage input ring: kRev, role 1's (chain step cc = chunk nchunks - 1 - cc;
// q / k / Ab / P / dO); else role 0's ("wg3pf"; step cc = chunk cc; the forward's k / v / Ab stage, two of
// the union's three).
template <class T, bool kRev>
struct RingProducer {
  SweepWgSmem<T>& s;
  const GdnBwdParams& p;
  const GdnBwdWs& w;
  const Ids& id;
  int t;
  __device__ __forceinline__ int64_t start(int cc) const { return id.bos + int64_t(id.nchunks - 1 - cc) * kBT; }
  __device__ __forceinline__ int len(int cc) const { return cc == 0 ? static_cast<int>(id.eos - start(0)) : kBT; }
  __device__ __forceinline__ void load(int cc) const {
    if constexpr (kRev)
      load_rev_inputs<T>(s.ring.r[cc & 1], p, w, start(cc), len(cc), id, t);
    else
      load_state_inputs<T>(s.ring.f[cc & 1], p.f, w.c, id.bos + int64_t(cc) * kBT, chunk_len(id.bos, id.eos, cc), id.h,
                           id.j, id.v0, t);
  }
  // The thread's copies of step cc have landed (cp.async waited): scales, proxy fence, arrive.
  __device__ __forceinline__ void publish(int cc) const {
    if constexpr (kRev)
      rev_scales<T>(s.ring.r[cc & 1], p.f.scale, len(cc), t);
    else
      state_scales<T>(s.ring.f[cc & 1], chunk_len(id.bos, id.eos, cc), t);
    fence_view_async_shared();
    mbar_arrive(&s.bar.in_full[cc & 1]);
  }
  __device__ __forceinline__ void prologue() const {  // both stages start free
    if (id.nchunks > 0) load(0);
    cp_async_commit();
    if (id.nchunks > 1) load(1);
    cp_async_commit();
    cp_async_wait<1>();
    if (id.nchunks > 0) publish(0);
    cp_async_wait<0>();
    if (id.nchunks > 1) publish(1);
  }
  __device__ __forceinline__ void issue(int cc) const {
    if (cc + 2 >= id.nchunks) return;
    mbar_wait(&s.bar.in_empty[cc & 1], uint32_t((cc >> 1) & 1));  // WG0 finished step cc
    load(cc + 2);
    cp_async_commit();
  }
  __device__ __forceinline__ void finish(int cc) const {
    if (cc + 2 >= id.nchunks) return;
    cp_async_wait<0>();
    publish(cc + 2);
  }
};

// Role 0's ring as WG0 sees it under wg3pf: WG1's producer fills stage c % 2 (in_full), WG0 frees it after
// the step's last product (in_empty); the scales come with the stage.
template <class T>
struct FwdProducedRing {
  static constexpr int kStages = kRevStages;
  SweepWgSmem<T>& s;
  __device__ __forceinline__ void prologue() const {}
  __device__ __forceinline__ void acquire(int c) const { mbar_wait(&s.bar.in_full[c & 1], uint32_t((c >> 1) & 1)); }
  __device__ __forceinline__ void ahead(int, int) const {}
  __device__ __forceinline__ void next_scales(int, int) const {}
  __device__ __forceinline__ void release(int c) const { mbar_arrive(&s.bar.in_empty[c & 1]); }
  __device__ __forceinline__ void finish() const {}
};

// Role 1 (WG0): the reverse dS chain on WG1's ring; dS^T, dV^T and dv^T to the hand-off buffer,
// dh0 at the end. Issue order per step: dS^T K^T (A = dS^T as it enters), then the dO^T fragments
// and dO^T diag(osc) (loaded / formed while it runs), dO^T P, the decay of dS^T, dS^T += dO^T
// diag(osc) Q: the operands and accumulation order of each product are wg's.
template <class T>
__device__ void rev_chain2(SweepWgSmem<T>& s, const GdnBwdParams& p, const Ids& id, int t, const XMbar xs) {
  const GdnFwdParams& f = p.f;
  RevStage<T>* const ring = s.ring.r;
  float dS[64];
  load_acc_state(dS, p.dht, p.dht_type, f, id, t);
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
    mbar_wait(&s.bar.in_full[stage], uint32_t((cc >> 1) & 1));
    uint32_t sf[32];  // dS^T leaving this chunk: A of dS^T K^T, and hdS
    acc_to_frag<T, 64>(sf, dS);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_at(dk0, soff + kmaj_step(kk, kBT)), kk > 0);
    wgmma_commit();
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
    const float decay = st.decay;
#pragma unroll
    for (int i = 0; i < 64; ++i) dS[i] *= decay;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 128, 1>(dS, dos + 4 * kk, desc_at(dqt0, soff + uint32_t(kk) * 2048u), 1);
    wgmma_commit();
    Xch& x = s.x[cc & 1];
    xs.wait_empty(cc);
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
    // Stored before the product that reads vf is issued (reading an in-flight wgmma's A registers
    // made ptxas serialize every wgmma of the kernel, C7520).
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
    wgmma_wait<0>();
    wgmma_fence_operands(dS);
    wgmma_fence_regs(ef);
    mbar_arrive(&s.bar.in_empty[stage]);  // every read of this stage (products, scales, dO) is done
  }
  if (p.dh0.p) {
#pragma unroll
    for (int i = 0; i < 64; ++i)
      store_out(p.dh0.p, p.dh0.t, state_index(f, id.n, id.j, acc_col(t, i), id.v0 + acc_row(t, i)), dS[i]);
  }
}

// kFastDv: "wg3p" (the store warpgroup's vectorized dv stores); kFwdProd: "wg3pf" (also role 0's ring
// streamed by WG1).
template <class T, bool kFastDv, bool kFwdProd>
__global__ void __launch_bounds__(256, 1) gdn_bwd_sweep_wg2_kernel(GdnBwdParams p, GdnBwdWs w) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  SweepWgSmem<T>& s = *reinterpret_cast<SweepWgSmem<T>*>(base);
  const int tid = threadIdx.x, t = tid & 127;
  const int role = w.dstate_only ? 1 : int(blockIdx.x & 1);
  const int slice = w.dstate_only ? int(blockIdx.x) : int(blockIdx.x >> 1);
  if (tid == 0) {
    uint64_t* const b = &s.bar.in_full[0];
    for (int i = 0; i < int(sizeof(Bars) / sizeof(uint64_t)); ++i) mbar_init(b + i, 128);
    fence_barrier_init();
  }
  __syncthreads();
  Ids id;
  id.v0 = slice * kVS;
  id.j = blockIdx.y;
  id.h = id.j / (p.f.HV / p.f.H);
  id.n = ws_sequence(w.c, blockIdx.z);
  seq_bounds(p.f, id.n, id.bos, id.eos);
  id.nchunks = static_cast<int>((id.eos - id.bos + kBT - 1) / kBT);
  id.rbase = chunk_row_base(w.chunk_offsets, w.nts, id.n);
  const XMbar xs{&s.bar};
  if (tid >= 128) {
    if (role) store_warpgroup<T, kFastDv>(s, p, w, id, role, t, xs, RingProducer<T, true>{s, p, w, id, t});
    else if constexpr (kFwdProd) store_warpgroup<T, kFastDv>(s, p, w, id, role, t, xs, RingProducer<T, false>{s, p, w, id, t});
    else store_warpgroup<T, kFastDv>(s, p, w, id, role, t, xs, NoProducer{});
  } else if (role) {
    rev_chain2<T>(s, p, id, t, xs);
  } else if constexpr (kFwdProd) {
    fwd_chain<T>(s, p, id, t, xs, FwdProducedRing<T>{s});
  } else {
    fwd_chain<T>(s, p, id, t, xs, FwdOwnRing<T>{s, p.f, w, id, t});
  }
}

std::atomic<int64_t> g_wg2_launches{0};

}  // namespace

int64_t gdn_bwd_sweep_wg2_launches() { return g_wg2_launches.load(); }

void launch_gdn_bwd_sweeps_wg2(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream, int variant) {
  LINATTN_CHECK(gdn_bwd_sweep_wg_supported(p.f), "gdn bwd sweeps (wg2): needs GDN, BT 64, K 128, V % 64 == 0, bf16 / fp16");
  const dim3 grid((w.dstate_only ? 1 : 2) * (p.f.V / kVS), p.f.HV, p.f.N);
  g_wg2_launches.fetch_add(1);
  auto go = [&](auto fast, auto fwd_prod) {
    constexpr bool kFast = decltype(fast)::value, kFwd = decltype(fwd_prod)::value;
    if (p.f.io == ElemType::kBF16)
      launch(gdn_bwd_sweep_wg2_kernel<__nv_bfloat16, kFast, kFwd>, grid, dim3(256), smem_bytes<__nv_bfloat16>(), stream, p,
             w);
    else
      launch(gdn_bwd_sweep_wg2_kernel<__half, kFast, kFwd>, grid, dim3(256), smem_bytes<__half>(), stream, p, w);
  };
  if (variant == 2) go(std::true_type{}, std::true_type{});
  else if (variant == 1) go(std::true_type{}, std::false_type{});
  else go(std::false_type{}, std::false_type{});
}

}  // namespace linattn::cuda
