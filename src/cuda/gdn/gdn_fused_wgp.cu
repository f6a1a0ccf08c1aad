// Pipelined wgmma fused GDN forward (sm_90a), the step after gdn_fused_wg.cu: same inputs and math
// (prep kernel's Ab, P, gam, rq, rk; one CTA per (V-slice of 64 columns, value head j, sequence n)),
// but the state is held transposed, S^T [v][key] (fp32 wgmma accumulator, 64 registers per thread of
// one warpgroup), so every product with the state or with V^ takes its A operand from registers and
// nothing on the state's critical path goes through shared memory or a CTA-wide barrier:
//   WG0 (state):  KS^T = S^T K^T,  X^T = V^T - KS^T diag(e^gam rk),  V^T = X^T Ab^T,
//                 S^T <- e^gam_L S^T + V^T diag(e^(gam_L - gam) rk) K       (A = S^T, X^T, V^T regs)
//   WG1 (output): O^T = S^T Q^T diag(scale e^gam rq) + V^T P^T, staged [token][v], 16-byte stores
// WG0 hands S^T and V^T (bf16 A fragments, fragment order, 24 KB) to WG1 through a double buffer
// guarded by named barriers (full: WG0 arrives / WG1 syncs; empty: the reverse), so WG1 computes the
// output of chunk c while WG0 runs the state chain of chunk c+1. Each warpgroup streams its own
// inputs by cp.async (WG0: k, v, Ab, 3 stages; WG1: q, P, 2 stages; rows past the chunk end
// zero-filled). Scope: as gdn_fused_wg.cu but V % 64 == 0 (V-slice 64 here; the opt-in V-slice 32 instance,
// S held [key][v], is gdn_fused_wgp_vs32.cu, launched from launch_gdn_fused_wgp). The shared
// layout, loaders and WG1 live in gdn_fused_wgp_common.cuh; this file is the step-3 state chain
// (LINATTN_CUDA_WGMMA=1).
// Gate policy KDA (opt-in, LINATTN_CUDA_KDA_WGMMA=1; gdn_fused_wg.h): the same chain on the KDA prep's
// gated operands (as gdn_fused.cu's KDA path): K S^T from kg, X^T = V^T - KS^T (the gate and rk are
// inside kg), S^T <- S^T diag(gl) + V^T Kl (B = the kgl tile MN-major; the per-key decay gl_d scales
// accumulator column d, which each thread knows from its fragment registers), O^T from qg with the
// plain scale. WG0's ring is 2 stages for KDA (the extra kgl tile), loading one chunk ahead.
// Tier-3 state pass (GdnFwdParams::seg_M; gdn_fused_wgp_seg_kernel, the default, opt-out
// LINATTN_CUDA_SEG_WGMMA=0): no output, so both warpgroups run the state chain, each on 64 columns
// of [S_loc | M] with its own input ring; final registers to seg_S / seg_M (docs/perf-notes.md,
// "Tier 3 on the pipelined kernel").
// P formed in WG1 (gdn_fused_wgp_pf_kernel, gdn_fused_wgp_pf.cuh): GDN without the state pass when the
// workspace has no P (LINATTN_CUDA_GDN_P=fused, gdn_fwd.cc); WG0's chain is the same code.
// Chain modes (GDN's fused forward; LINATTN_CUDA_GDN_CHAIN, opt-in, bitwise the same values): the rings
// filled by TMA (gdn_fused_wgp_tma_kernel, gdn_fused_wgp_tma.cuh; WG0's, and with tma2 WG1's too) and /
// or the register passes interleaved with the wgmma steps (state_warpgroup's MODE); "tma3": tma2 with the
// per-token scales taken from the prep's records (gdn_chain_scales.cuh) instead of formed in the chunk loops.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "core/env.h"
#include "core/util.h"
#include "cuda/common/launch.h"
#include "cuda/common/pdl.cuh"
#include "cuda/common/tma.h"
#include "cuda/gdn/gdn_fused_wg.h"
#include "cuda/gdn/gdn_fused_wgp_common.cuh"
#include "cuda/gdn/gdn_fused_wgp_pf.cuh"
#include "cuda/gdn/gdn_fused_wgp_tma.cuh"
#include "cuda/gdn/gdn_fused_wgp_chain.cuh"
#include "cuda/gdn/gdn_p_fused.h"

namespace linattn::cuda {
namespace {
using namespace wgp;

// The kPdl instances' prologue before the wait (independent of the previous kernel): thread 0 prefetches the
// launch's tensor maps (q / P with `wg1`), so the first TMA boxes after the wait find them cached.
template <bool kPdl>
__device__ __forceinline__ void pdl_prefetch_maps(const StateMaps& m, bool wg1) {
  if constexpr (kPdl) {
    if (threadIdx.x == 0) {
      const CUtensorMap* maps[] = {&m.k, &m.v, &m.ab, &m.q, &m.p};
      for (int i = 0; i < (wg1 ? 5 : 3); ++i)
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(maps[i])) : "memory");
    }
  }
}

template <class T, bool KDA, int MODE = 0>
__global__ void __launch_bounds__(kThreads, 1) gdn_fused_wgp_kernel(GdnFwdParams p, GdnChunkWs ws) {
  extern __shared__ unsigned char smem_raw[];
  // Aligned by pointer arithmetic on the __shared__ array (no integer round trip), so the compiler
  // keeps the shared address space: LDS / STS instead of generic loads and stores.
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  WgpSmem<T, KDA>& s = *reinterpret_cast<WgpSmem<T, KDA>*>(base);
  const int tid = threadIdx.x, t = tid & 127;
  const int v0 = blockIdx.x * kVS, j = blockIdx.y, h = j / (p.HV / p.H);
  const int64_t n = ws_sequence(ws, blockIdx.z);
  int64_t bos, eos;
  seq_bounds(p, n, bos, eos);
  const int nchunks = static_cast<int>((eos - bos + kBT - 1) / kBT);
  if (tid < 128) state_warpgroup<T, KDA, false, MODE>(s, p, ws, n, bos, eos, nchunks, h, j, v0, t);
  else output_warpgroup<T, KDA>(s, p, ws, bos, eos, nchunks, h, j, v0, t);
}

// GDN with WG0's ring filled by TMA (MODE has kChainTma; kChainTma1: WG1's too): the tensor maps as a
// parameter, the stages' mbarriers after the shared layout (64 bytes more dynamic shared memory).
// kPdl (LINATTN_CUDA_PDL=1, tma3 only): launched with PDL; waits for the prep before anything else.
template <class T, int MODE, bool kPdl = false>
__global__ void __launch_bounds__(kThreads, 1)
    gdn_fused_wgp_tma_kernel(GdnFwdParams p, GdnChunkWs ws, const __grid_constant__ StateMaps maps) {
  pdl_prefetch_maps<kPdl>(maps, (MODE & kChainTma1) != 0);
  pdl_wait<kPdl>();
  pdl_launch_dependents<kPdl>();
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  WgpSmem<T>& s = *reinterpret_cast<WgpSmem<T>*>(base);
  uint64_t* mbar = reinterpret_cast<uint64_t*>(base + sizeof(WgpSmem<T>));  // WG0's 3, then WG1's 2
  const int tid = threadIdx.x, t = tid & 127;
  const int v0 = blockIdx.x * kVS, j = blockIdx.y, h = j / (p.HV / p.H);
  const int64_t n = ws_sequence(ws, blockIdx.z);
  int64_t bos, eos;
  seq_bounds(p, n, bos, eos);
  const int nchunks = static_cast<int>((eos - bos + kBT - 1) / kBT);
  if (tid < 128) state_warpgroup<T, false, false, MODE>(s, p, ws, n, bos, eos, nchunks, h, j, v0, t, 0, &maps, mbar);
  else output_warpgroup<T, false, (MODE & kChainTma1) != 0, (MODE & kChainSc) != 0, (MODE & kChainOst) != 0>(
      s, p, ws, bos, eos, nchunks, h, j, v0, t, &maps.q, &maps.p, mbar + kStages0<false>, n, &maps.o);
}

// GDN with P formed by WG1 (ws.P null): the same grid and WG0; WG1 streams q / k instead of q / P.
template <class T>
__global__ void __launch_bounds__(kThreads, 1) gdn_fused_wgp_pf_kernel(GdnFwdParams p, GdnChunkWs ws) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  WgpSmemPf<T>& s = *reinterpret_cast<WgpSmemPf<T>*>(base);
  const int tid = threadIdx.x, t = tid & 127;
  const int v0 = blockIdx.x * kVS, j = blockIdx.y, h = j / (p.HV / p.H);
  const int64_t n = ws_sequence(ws, blockIdx.z);
  int64_t bos, eos;
  seq_bounds(p, n, bos, eos);
  const int nchunks = static_cast<int>((eos - bos + kBT - 1) / kBT);
  if (tid < 128) state_warpgroup<T, false>(s, p, ws, n, bos, eos, nchunks, h, j, v0, t);
  else output_warpgroup_pf<T>(s, p, ws, bos, eos, nchunks, h, j, v0, t);
}

// A tier-3 state pass thread's work item: warpgroup wg on the 64 columns 128 blockIdx.x + 64 wg of [S | M]
// (V + K columns) of value head j in segment n; false when the warpgroup is past them or the segment skipped.
struct SegItem {
  int wg, t, col, j, h, nchunks;
  int64_t n, bos, eos;
};
__device__ __forceinline__ bool seg_item(const GdnFwdParams& p, SegItem& it) {
  const int tid = threadIdx.x;
  it.wg = tid >> 7;
  it.t = tid & 127;
  it.col = (2 * static_cast<int>(blockIdx.x) + it.wg) * kVS;
  it.j = blockIdx.y;
  it.h = it.j / (p.HV / p.H);
  it.n = blockIdx.z;
  if (it.col >= p.V + p.K || (p.seg_flags && (p.seg_flags[it.n] & p.seg_skip))) return false;
  seq_bounds(p, it.n, it.bos, it.eos);
  it.nchunks = static_cast<int>((it.eos - it.bos + kBT - 1) / kBT);
  return true;
}

// Tier-3 state pass (p.seg_M): both warpgroups run the state chain, warpgroup wg on the 64 columns
// 128 blockIdx.x + 64 wg of [S | M] (V + K columns; a warpgroup past them exits), each on its own
// ring (WG1's follows WG0's, over WG1's usual inputs / hand-off space). Segments whose
// seg_flags & seg_skip is set exit at once.
template <class T, bool KDA>
__global__ void __launch_bounds__(kThreads, 1) gdn_fused_wgp_seg_kernel(GdnFwdParams p, GdnChunkWs ws) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  WgpSmem<T, KDA>& s = *reinterpret_cast<WgpSmem<T, KDA>*>(base);
  SegItem it;
  if (!seg_item(p, it)) return;
  state_warpgroup<T, KDA, true>(s, p, ws, it.n, it.bos, it.eos, it.nchunks, it.h, it.j, it.col, it.t, it.wg);
}

template <class T, bool KDA>
constexpr size_t seg_body_bytes() {  // the two rings, or the usual layout if larger (1024-byte multiple)
  constexpr size_t rings = 2 * kStages0<KDA> * sizeof(typename WgpSmem<T, KDA>::Stage0);
  return rings > sizeof(WgpSmem<T, KDA>) ? rings : sizeof(WgpSmem<T, KDA>);
}
template <class T, bool KDA>
constexpr size_t seg_smem_bytes() {
  return seg_body_bytes<T, KDA>() + 1024;
}

// The state pass with tma3's rings (LINATTN_CUDA_SEG_CHAIN=tma3, GDN): as gdn_fused_wgp_seg_kernel, but each
// warpgroup's ring is filled by TMA boxes (k, Ab; v only for S_loc columns) and the prep's scale records on
// its own 3 mbarriers (after the rings), issued by the warpgroup's thread 0: no per-thread cp.async and no
// per-token scales formed in the loop. Same products and operands: bitwise the cp.async state pass.
// kPdl (LINATTN_CUDA_PDL=1): launched with PDL; waits for the prep (and the table) before anything else.
template <class T, bool kPdl = false>
__global__ void __launch_bounds__(kThreads, 1)
    gdn_fused_wgp_seg_tma_kernel(GdnFwdParams p, GdnChunkWs ws, const __grid_constant__ StateMaps maps) {
  pdl_prefetch_maps<kPdl>(maps, false);
  pdl_wait<kPdl>();
  pdl_launch_dependents<kPdl>();
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  WgpSmem<T>& s = *reinterpret_cast<WgpSmem<T>*>(base);
  uint64_t* mbar = reinterpret_cast<uint64_t*>(base + seg_body_bytes<T, false>());  // WG0's 3, then WG1's 3
  SegItem it;
  if (!seg_item(p, it)) return;
  state_warpgroup<T, false, true, kChainTma | kChainSc>(s, p, ws, it.n, it.bos, it.eos, it.nchunks, it.h, it.j, it.col,
                                                        it.t, it.wg, &maps, mbar + it.wg * kStages0<false>);
}

template <class T>
constexpr size_t seg_tma_smem_bytes() {
  return seg_smem_bytes<T, false>() + 2 * kStages0<false> * sizeof(uint64_t);
}
static_assert(seg_tma_smem_bytes<__nv_bfloat16>() <= 227 * 1024,
              "gdn fused (pipelined): the tma3 state pass's rings and mbarriers exceed the sm_90 shared-memory limit");

static_assert(seg_smem_bytes<__nv_bfloat16, false>() <= 227 * 1024 && seg_smem_bytes<__nv_bfloat16, true>() <= 227 * 1024,
              "gdn fused (pipelined): the state pass's two rings exceed the sm_90 shared-memory limit");
static_assert(sizeof(WgpSmem<__nv_bfloat16, false>) + 1024 <= 227 * 1024 &&
                  sizeof(WgpSmem<__nv_bfloat16, true>) + 1024 <= 227 * 1024,
              "gdn fused (pipelined): shared memory per CTA over the sm_90 limit");
static_assert(sizeof(WgpSmemPf<__nv_bfloat16>) + 1024 <= 227 * 1024,
              "gdn fused (pipelined, P formed in WG1): shared memory per CTA over the sm_90 limit");

std::atomic<int64_t> g_pf_launches{0};

// The chain mode of this launch: the switch, without TMA where its maps cannot describe the tensors.
int gdn_chain_mode(const GdnFwdParams& p, const GdnChunkWs& ws) {
  int mode = gdn_chain_mode_env();
  // TMA boxes: 32-bit row coordinates, and the 16-byte aligned bases the maps need (k / v are by the
  // chunked path's plan; Ab is carved at 256 bytes).
  const bool tma_ok = int64_t(p.HV) * ws.T_cap < (int64_t(1) << 31) && p.T_total < (int64_t(1) << 31) &&
                      reinterpret_cast<uintptr_t>(ws.Ab) % 16 == 0 && reinterpret_cast<uintptr_t>(p.k) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(p.v) % 16 == 0 && p.T_total > 0;
  if (!tma_ok) mode &= ~(kChainTma | kChainTma1);
  const bool tma1_ok = ws.P != nullptr && reinterpret_cast<uintptr_t>(ws.P) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(p.q) % 16 == 0;
  if (!tma1_ok) mode &= ~kChainTma1;
  // Scale records (tma3): carved by the forward (gdn_chain_scales_floats) and written by this call's prep;
  // varlen rows through the chunk offsets; the records ride on both TMA rings.
  const bool sc_ok = ws.sc != nullptr && reinterpret_cast<uintptr_t>(ws.sc) % 16 == 0 &&
                     (!p.cu_seqlens || ws.chunk_offsets != nullptr) && (mode & kChainTma) && (mode & kChainTma1);
  if (!sc_ok) mode &= ~kChainSc;
  if (!(mode & kChainSc)) mode &= ~(kChainSplit | kChainOst);  // instances of tma3 only
  if (reinterpret_cast<uintptr_t>(p.o) % 16 != 0) mode &= ~kChainOst;  // the output map's base
  return mode;
}

std::atomic<int64_t> g_tma_launches{0}, g_sc_launches{0}, g_split_launches{0}, g_ost_launches{0};

// The launch's tensor maps: k, v, Ab; q and P too with `wg1` (kChainTma1).
StateMaps state_maps(const GdnFwdParams& p, const GdnChunkWs& ws, bool wg1) {
  const bool bf = p.io == ElemType::kBF16;
  StateMaps m;
  m.k = make_tma_2d_sw128(p.k, bf, uint64_t(p.T_total), uint64_t(p.H) * kK, uint64_t(p.H) * kK, kBT);
  m.v = make_tma_2d_sw128(p.v, bf, uint64_t(p.T_total), uint64_t(p.HV) * p.V, uint64_t(p.HV) * p.V, kBT);
  m.ab = make_tma_2d_sw128(ws.Ab, bf, uint64_t(p.HV) * uint64_t(ws.T_cap), kBT, kBT, kBT);
  if (wg1) {
    m.q = make_tma_2d_sw128(p.q, bf, uint64_t(p.T_total), uint64_t(p.H) * kK, uint64_t(p.H) * kK, kBT);
    m.p = make_tma_2d_sw128(ws.P, bf, uint64_t(p.HV) * uint64_t(ws.T_cap), kBT, kBT, kBT);
  }
  return m;
}

template <class T>
void launch_chain_mode(const GdnFwdParams& p, const GdnChunkWs& ws, int mode, cudaStream_t stream) {
  const dim3 grid(p.V / kVS, p.HV, p.N);
  if (mode == kChainIl) {
    launch(gdn_fused_wgp_kernel<T, false, kChainIl>, grid, dim3(kThreads), sizeof(WgpSmem<T>) + 1024, stream, p, ws);
    return;
  }
  StateMaps m = state_maps(p, ws, (mode & kChainTma1) != 0);
  if (mode & kChainOst)
    m.o = make_tma_2d_sw128(p.o, p.io == ElemType::kBF16, uint64_t(p.T_total), uint64_t(p.HV) * p.V,
                            uint64_t(p.HV) * p.V, kBT);
  const size_t bytes = sizeof(WgpSmem<T>) + 1024 + (kStages0<false> + kStages1) * sizeof(uint64_t);
  g_tma_launches.fetch_add(1);
  constexpr int kT = kChainTma, kI = kChainIl, kT1 = kChainTma1, kSc = kChainSc, kSp = kChainSplit, kO = kChainOst;
  if (mode & kSc) {  // tma3 / tma4 / tma3 with split or ost (il, if also asked for, is not instantiated with them)
    g_sc_launches.fetch_add(1);
    if (mode & kSp) g_split_launches.fetch_add(1);
    if (mode & kO) g_ost_launches.fetch_add(1);
    constexpr int k3 = kT | kT1 | kSc;
    if ((mode & (kSp | kO)) == (kSp | kO))
      launch(gdn_fused_wgp_tma_kernel<T, k3 | kSp | kO>, grid, dim3(kThreads), bytes, stream, p, ws, m);
    else if (mode & kSp) launch(gdn_fused_wgp_tma_kernel<T, k3 | kSp>, grid, dim3(kThreads), bytes, stream, p, ws, m);
    else if (mode & kO) launch(gdn_fused_wgp_tma_kernel<T, k3 | kO>, grid, dim3(kThreads), bytes, stream, p, ws, m);
    else if (pdl_enabled())
      launch_pdl(true, gdn_fused_wgp_tma_kernel<T, k3, true>, grid, dim3(kThreads), bytes, stream, p, ws, m);
    else launch(gdn_fused_wgp_tma_kernel<T, k3>, grid, dim3(kThreads), bytes, stream, p, ws, m);
  } else if (mode == kT) launch(gdn_fused_wgp_tma_kernel<T, kT>, grid, dim3(kThreads), bytes, stream, p, ws, m);
  else if (mode == (kT | kI)) launch(gdn_fused_wgp_tma_kernel<T, kT | kI>, grid, dim3(kThreads), bytes, stream, p, ws, m);
  else if (mode == (kT | kT1)) launch(gdn_fused_wgp_tma_kernel<T, kT | kT1>, grid, dim3(kThreads), bytes, stream, p, ws, m);
  else launch(gdn_fused_wgp_tma_kernel<T, kT | kT1 | kI>, grid, dim3(kThreads), bytes, stream, p, ws, m);
}

std::atomic<int64_t> g_seg_tma_launches{0};

// The state pass takes tma3's rings: the switch, and this launch's maps and records (gdn_chain_mode: TMA-able
// tensors, records carved and written by this problem's prep; so LINATTN_CUDA_GDN_CHAIN must be tma3, the default).
bool seg_tma3(const GdnFwdParams& p, const GdnChunkWs& ws) {
  constexpr int kNeed = kChainTma | kChainSc;
  return !p.kda && gdn_fused_wgp_seg_tma_enabled() && (gdn_chain_mode(p, ws) & kNeed) == kNeed;
}

template <class T, bool KDA>
void launch_t(const GdnFwdParams& p, const GdnChunkWs& ws, cudaStream_t stream) {
  if (p.seg_M) {
    const unsigned ctas = static_cast<unsigned>((p.V + p.K + 2 * kVS - 1) / (2 * kVS));
    if constexpr (!KDA) {
      if (seg_tma3(p, ws)) {
        g_seg_tma_launches.fetch_add(1);
        const dim3 grid(ctas, p.HV, p.N);
        if (pdl_enabled())
          launch_pdl(true, gdn_fused_wgp_seg_tma_kernel<T, true>, grid, dim3(kThreads), seg_tma_smem_bytes<T>(), stream,
                     p, ws, state_maps(p, ws, false));
        else
          launch(gdn_fused_wgp_seg_tma_kernel<T>, grid, dim3(kThreads), seg_tma_smem_bytes<T>(), stream, p, ws,
                 state_maps(p, ws, false));
        return;
      }
    }
    launch(gdn_fused_wgp_seg_kernel<T, KDA>, dim3(ctas, p.HV, p.N), dim3(kThreads), seg_smem_bytes<T, KDA>(), stream, p, ws);
    return;
  }
  if constexpr (!KDA) {
    if (!ws.P) {
      g_pf_launches.fetch_add(1);
      launch(gdn_fused_wgp_pf_kernel<T>, dim3(p.V / kVS, p.HV, p.N), dim3(kThreads), sizeof(WgpSmemPf<T>) + 1024, stream,
             p, ws);
      return;
    }
  }
  if constexpr (!KDA) {
    const int mode = gdn_chain_mode(p, ws);  // read per call
    if (mode != 0) {
      launch_chain_mode<T>(p, ws, mode, stream);
      return;
    }
  }
  launch(gdn_fused_wgp_kernel<T, KDA>, dim3(p.V / kVS, p.HV, p.N), dim3(kThreads), sizeof(WgpSmem<T, KDA>) + 1024, stream,
         p, ws);
}

}  // namespace

// The tier-3 state pass's kernel when LINATTN_CUDA_SEG_WGMMA (0 / 1) is unset: this mode since
// the H200 A/B at a339a0c (GDN 2/8 1x32768 s = 8 0.548 -> 0.395 ms, KDA 1.053 -> 0.811; every tier-3
// test passing with it; docs/perf-notes.md "Tier 3 on the pipelined kernel").
constexpr bool kSegWgmmaDefault = true;

bool gdn_fused_wgp_seg_enabled() { return env_flag("LINATTN_CUDA_SEG_WGMMA", kSegWgmmaDefault); }

int64_t gdn_fused_wgp_pf_launches() { return g_pf_launches.load(); }

// LINATTN_CUDA_SEG_CHAIN ("tma3" / "v3") unset: this. On (the tma3 state pass) since the H200 A/B at
// d3f84ad: tier 3 GDN 2/8 1x32768 0.336 -> 0.315 ms graph, pass 1 123 -> 103 us; "v3" keeps the cp.async pass.
constexpr bool kSegTmaDefault = true;

bool gdn_fused_wgp_seg_tma_enabled() {
  return env_choice("LINATTN_CUDA_SEG_CHAIN", {"tma3", "v3"}, kSegTmaDefault ? 0 : 1) == 0;
}

int64_t gdn_fused_wgp_seg_tma_launches() { return g_seg_tma_launches.load(); }

int64_t gdn_fused_wgp_tma_launches() { return g_tma_launches.load(); }

int64_t gdn_fused_wgp_sc_launches() { return g_sc_launches.load(); }

int64_t gdn_fused_wgp_split_launches() { return g_split_launches.load(); }

int64_t gdn_fused_wgp_ost_launches() { return g_ost_launches.load(); }

// The state chain's mode when LINATTN_CUDA_GDN_CHAIN is unset or empty (gdn_fused_wg.h):
// "tma2" (both warpgroups' rings by TMA, bitwise equal to "v3") since the H200 A/B at 755404e: GDN forward
// 16/64 1x32768 1.580 -> 1.439 ms graph (tma2+il 1.464, tma+il 1.479), 4096x8 1.647 -> 1.502 and 1x2048
// 0.134 -> 0.122 (tma2+il), tier 3 2/8 0.379 -> 0.359. "v3" keeps the per-thread cp.async rings.
constexpr const char* kGdnChainDefault = "tma3";  // since the H200 A/B at accc55a (1.455 -> 1.374 ms at 16/64 1x32768)

// "v3" alone -> 0; else '+'-joined tokens il / tma / tma2 (tma2 = both rings by TMA) / tma3 (tma2 with the prep's
// scale records) / tma4 (tma3 + split + ost) / split (WG0's update split over the chunk boundary) / ost (WG1's
// output by TMA box stores; split and ost apply with tma3 only). A value naming no mode is an error (session 12),
// never a silent default; so is the removed "pers" (the persistent chain CTAs of session 12, +7% on the H200 at
// ee5c88b).
int gdn_chain_mode_env() {
  const std::string set = env_or("LINATTN_CUDA_GDN_CHAIN", "");
  const std::string_view v = set.empty() ? std::string_view(kGdnChainDefault) : std::string_view(set);
  if (v == "v3") return 0;
  constexpr int kBits[] = {kChainIl,
                           kChainTma,
                           kChainTma | kChainTma1,
                           kChainTma | kChainTma1 | kChainSc,
                           kChainTma | kChainTma1 | kChainSc | kChainSplit | kChainOst,
                           kChainSplit,
                           kChainOst};
  const uint64_t named =
      choice_tokens("LINATTN_CUDA_GDN_CHAIN", v, {"il", "tma", "tma2", "tma3", "tma4", "split", "ost"},
                    "or v3 alone (the cp.async rings); unset or empty: tma3 (the default); pers (the persistent chain "
                    "CTAs) was removed");
  int mode = 0;
  for (int i = 0; i < 7; ++i)
    if (named >> i & 1) mode |= kBits[i];
  return mode;
}

// Independent of the V-slice and of the tier-3 fields, so every gdn_fwd call on one virtual problem
// (tier 3's prep, state pass and output pass run on different plans) carves the same workspace.
size_t gdn_chain_scales_floats(const GdnFwdParams& p, int64_t nt_cap) {
  if (p.kda || p.BT != kBT || p.K != kK || p.V % kVS != 0 || !gdn_fused_wg_enabled() || !gdn_fused_wg_pipelined() ||
      !(gdn_chain_mode_env() & kChainSc))
    return 0;
  return size_t(nt_cap) * size_t(p.HV) * size_t(chain_sc::kRec);
}



int gdn_fused_wgp_vs(const GdnFwdParams& p, const GdnChunkWs& ws, int planned_vs) {
  // V-slice 32 where planned is the default since the H200 A/B at accc55a (KDA 32/32 1x32768 2.06 -> 1.92 ms,
  // GDN 16/32 1x32768 1.218 -> 1.151); LINATTN_CUDA_WGP_VS=64 keeps V-slice 64.
  if (env_choice("LINATTN_CUDA_WGP_VS", {"32", "64"}, 0) == 1) return 64;
  // The V-slice 32 instance covers the output forward only: the tier-3 state pass and GDN with P formed in
  // WG1 (no P in the workspace) keep V-slice 64, as do plans of wider slices (enough CTAs already).
  return planned_vs == 32 && p.V % 32 == 0 && !p.seg_M && (p.kda || ws.P != nullptr) ? 32 : 64;
}

void launch_gdn_fused_wgp(const GdnFwdParams& p, const GdnChunkWs& ws, cudaStream_t stream, int vs) {
  LINATTN_CHECK(!p.seg_M || (p.seg_S && p.V % kVS == 0 && p.K == kK), "gdn fused (pipelined) state pass: needs seg_S, ",
                "V % 64 == 0 and K 128");
  LINATTN_CHECK(vs == 64 || (vs == 32 && !p.seg_M && p.V % 32 == 0 && (p.kda || ws.P)),
                "gdn fused (pipelined): V-slice 32 needs the output forward (no tier-3 state pass), V % 32 == 0 and, for "
                "GDN, P in the workspace; got V-slice ", vs);
  if (vs == 32) {  // gdn_fused_wgp_vs32.cu, any chain mode (its cp.async rings)
    launch_gdn_fused_wgp_vs32(p, ws, stream);
    return;
  }
  const bool bf = p.io == ElemType::kBF16;
  if (p.kda) bf ? launch_t<__nv_bfloat16, true>(p, ws, stream) : launch_t<__half, true>(p, ws, stream);
  else bf ? launch_t<__nv_bfloat16, false>(p, ws, stream) : launch_t<__half, false>(p, ws, stream);
}

}  // namespace linattn::cuda
