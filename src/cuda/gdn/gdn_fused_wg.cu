// Fused head-level GDN forward on Hopper warpgroup MMA (wgmma, sm_90a): the same math, inputs
// and grid as gdn_fused.cu (one CTA per (V-slice of VS columns, value head j, sequence n), fp32
// state in registers for the whole sequence, the prep kernel's Ab, P, gam, rq, rk), but every
// product is one warpgroup-wide wgmma reading its operands from 128-byte-swizzled shared memory
// once per warpgroup instead of once per warp through ldmatrix (the mma.sync kernel is bound by
// that shared-memory traffic; docs/perf-notes.md "CUDA (H200, GDN forward)").
// Two warpgroups, split by product rather than by tile: per chunk of 64 tokens
//   WG0: KS = K S,  X = V - diag(e^gam rk) KS,  V^ = Ab X  (V^ and e^(gam_L - gam) rk V^ to smem)
//   WG1: O  = diag(scale e^gam rq) Q S + P V^              (staged in smem, 16-byte stores)
//   both: S[64 wg.., :] <- e^gam_L S + K^T diag(e^(gam_L - gam) rk) V^ (WG w owns key rows 64w..)
// Layouts: q / k tiles K-major [token][key] (two 64-key panels), Ab / P K-major [token][token];
// the state [key][v], X / V^ / the output [token][v] MN-major (64-column blocks). The k tile read
// with the transpose bit is K^T for the state update, so it is stored once. Inputs of chunk c+1
// arrive by cp.async (zero-filled past the chunk end) while chunk c computes.
// Scope: GDN (scalar gate), BT = 64, K = 128, VS = 64 / 128, bf16 / fp16 operands; anything else
// (and the tier-3 state pass, seg_M / seg_S) takes gdn_fused.cu. Kept for A/B runs (LINATTN_CUDA_WGMMA=v1);
// its pipelined successor gdn_fused_wgp.cu is the default (gdn_fused_wg.h).
#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "core/env.h"
#include "core/util.h"
#include "cuda/common/launch.h"
#include "cuda/common/mma.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/gdn/gdn_fused_wg.h"

namespace linattn::cuda {
namespace {

constexpr int kBT = 64, kK = 128, kThreads = 256;

template <class T, int VS>
struct WgSmem {
  static constexpr int kLdV = VS + 8;
  struct alignas(1024) Stage {
    alignas(1024) uint8_t q[kBT * kK * 2];  // [token][key] K-major, panels of 64 keys
    alignas(1024) uint8_t k[kBT * kK * 2];
    alignas(1024) uint8_t a[kBT * kBT * 2];  // Ab [token][token]
    alignas(1024) uint8_t p[kBT * kBT * 2];  // P
    T v[kBT][kLdV];
    float gam[kBT], rq[kBT], rk[kBT];
  };
  Stage st[2];
  alignas(1024) uint8_t s[kK * VS * 2];     // state [key][v] MN-major (B of K S and Q S)
  alignas(1024) uint8_t x[kBT * VS * 2];    // X [token][v] MN-major, later the output tile
  alignas(1024) uint8_t vh[kBT * VS * 2];   // V^
  alignas(1024) uint8_t vhs[kBT * VS * 2];  // e^(gam_L - gam) rk V^
};

// K-major tile of `rows` rows: element (row, col) -> byte offset (panels of 64 columns).
__device__ __forceinline__ uint32_t kmaj(int row, int col, int rows) {
  return uint32_t(col >> 6) * uint32_t(rows) * 128u + sw128_offset(row, col & 63);
}
// MN-major tile with `krows` rows along K: element (krow, mn) -> byte offset (blocks of 64 MN).
__device__ __forceinline__ uint32_t mnmaj(int krow, int mn, int krows) {
  return uint32_t(mn >> 6) * uint32_t(krows) * 128u + sw128_offset(krow, mn & 63);
}
// Descriptors of k16 step kk.
__device__ __forceinline__ uint64_t desc_kmaj(const uint8_t* base, int kk, int rows) {
  return wgmma_desc_sw128(smem_u32(base) + uint32_t(kk >> 2) * uint32_t(rows) * 128u + uint32_t(kk & 3) * 32u, 16u,
                          1024u);
}
__device__ __forceinline__ uint64_t desc_mnmaj(const uint8_t* base, int kk, int krows) {
  return wgmma_desc_sw128(smem_u32(base) + uint32_t(kk) * 2048u, uint32_t(krows) * 128u, 1024u);
}

template <class T>
__device__ __forceinline__ void store_pair(uint8_t* tile, uint32_t off, float a, float b) {
  *reinterpret_cast<uint32_t*>(tile + off) = MmaType<T>::pack(a, b);
}

template <class T, int VS>
__device__ __forceinline__ void load_stage(typename WgSmem<T, VS>::Stage& st, const GdnFwdParams& p,
                                           const GdnChunkWs& ws, int64_t t0, int len, int h, int j, int v0,
                                           int tid) {
  const T* q = static_cast<const T*>(p.q) + (t0 * p.H + h) * kK;
  const T* k = static_cast<const T*>(p.k) + (t0 * p.H + h) * kK;
  const T* v = static_cast<const T*>(p.v) + (t0 * p.HV + j) * int64_t(p.V) + v0;
  const int qstride = p.H * kK, vstride = p.HV * p.V;
#pragma unroll
  for (int idx = tid; idx < kBT * (kK / 8); idx += kThreads) {
    const int row = idx / (kK / 8), ch = idx % (kK / 8);
    const bool valid = row < len;
    const int off = valid ? row * qstride + ch * 8 : 0;
    const uint32_t dst = kmaj(row, ch * 8, kBT);
    cp_async16(st.q + dst, q + off, valid);
    cp_async16(st.k + dst, k + off, valid);
  }
#pragma unroll
  for (int idx = tid; idx < kBT * (VS / 8); idx += kThreads) {
    const int row = idx / (VS / 8), ch = idx % (VS / 8);
    const bool valid = row < len;
    cp_async16(&st.v[row][ch * 8], v + (valid ? row * vstride + ch * 8 : 0), valid);
  }
  const int64_t abase = (j * ws.T_cap + t0) * kBT;
  const T* A = static_cast<const T*>(ws.Ab) + abase;
  const T* P = static_cast<const T*>(ws.P) + abase;
#pragma unroll
  for (int idx = tid; idx < kBT * (kBT / 8); idx += kThreads) {
    const int row = idx / (kBT / 8), ch = idx % (kBT / 8);
    const bool valid = row < len;
    const int off = valid ? row * kBT + ch * 8 : 0;
    const uint32_t dst = sw128_offset(row, ch * 8);
    cp_async16(st.a + dst, A + off, valid);
    cp_async16(st.p + dst, P + off, valid);
  }
  if (tid < 3 * kBT) {
    const int which = tid / kBT, row = tid % kBT;
    const bool valid = row < len;
    const float* src = which == 0 ? ws.gam + j * ws.T_cap : (which == 1 ? ws.rq : ws.rk) + h * ws.T_cap;
    float* dst = which == 0 ? st.gam : (which == 1 ? st.rq : st.rk);
    cp_async4(dst + row, src + (valid ? t0 + row : 0), valid);
  }
}

template <class T, int VS>
__global__ void __launch_bounds__(kThreads, 1) gdn_fused_wg_kernel(GdnFwdParams p, GdnChunkWs ws) {
  using Smem = WgSmem<T, VS>;
  constexpr int R = VS / 2;  // accumulator registers per thread of an m64 x VS product
  extern __shared__ unsigned char smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int tid = threadIdx.x, wg = tid >> 7, t = tid & 127;
  const int v0 = blockIdx.x * VS, j = blockIdx.y, h = j / (p.HV / p.H);
  const int64_t n = ws_sequence(ws, blockIdx.z);
  int64_t bos, eos;
  seq_bounds(p, n, bos, eos);
  const int64_t nchunks = (eos - bos + kBT - 1) / kBT;

  float S[R];  // key rows 64 wg + acc_row, columns v0 + acc_col
#pragma unroll
  for (int i = 0; i < R; ++i)
    S[i] = p.h0 ? load_elem(p.h0, p.h0_type, state_index(p, n, j, 64 * wg + acc_row(t, i), v0 + acc_col(t, i))) : 0.f;

  if (nchunks > 0) load_stage<T, VS>(s.st[0], p, ws, bos, static_cast<int>(min(int64_t(kBT), eos - bos)), h, j, v0, tid);
  cp_async_commit();
  T* o_base = static_cast<T*>(p.o) + int64_t(j) * p.V + v0;
  for (int64_t c = 0; c < nchunks; ++c) {
    cp_async_wait<0>();
    fence_view_async_shared();
    __syncthreads();
    if (c + 1 < nchunks) {
      const int64_t t1 = bos + (c + 1) * kBT;
      load_stage<T, VS>(s.st[(c + 1) & 1], p, ws, t1, static_cast<int>(min(int64_t(kBT), eos - t1)), h, j, v0, tid);
    }
    cp_async_commit();
    auto& st = s.st[c & 1];
    const int64_t t0 = bos + c * kBT;
    const int len = static_cast<int>(min(int64_t(kBT), eos - t0));

    // The state as the B operand of K S and Q S (each warpgroup its key rows).
#pragma unroll
    for (int i = 0; i < R; i += 2) store_pair<T>(s.s, mnmaj(64 * wg + acc_row(t, i), acc_col(t, i), kK), S[i], S[i + 1]);
    fence_view_async_shared();
    __syncthreads();

    float acc[R];  // WG0: K S, X, then V^; WG1: Q S, then O
#pragma unroll
    for (int i = 0; i < R; ++i) acc[i] = 0.f;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_m64k16<T, VS, 0, 1>(acc, desc_kmaj(wg == 0 ? st.k : st.q, kk, kBT), desc_mnmaj(s.s, kk, kK), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(acc);

    const float gl = st.gam[len - 1];
    if (wg == 0) {
#pragma unroll
      for (int i = 0; i < R; i += 2) {
        const int r = acc_row(t, i), col = acc_col(t, i);
        const float erk = exp2f(st.gam[r]) * st.rk[r];
        const uint32_t vw = *reinterpret_cast<const uint32_t*>(&st.v[r][col]);
        const T* vp = reinterpret_cast<const T*>(&vw);
        store_pair<T>(s.x, mnmaj(r, col, kBT), MmaType<T>::to_float(vp[0]) - erk * acc[i],
                      MmaType<T>::to_float(vp[1]) - erk * acc[i + 1]);
        acc[i] = acc[i + 1] = 0.f;
      }
      fence_view_async_shared();
      named_barrier(1, 128);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBT / 16; ++kk) wgmma_m64k16<T, VS, 0, 1>(acc, desc_kmaj(st.a, kk, kBT), desc_mnmaj(s.x, kk, kBT), 1);
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operands(acc);
#pragma unroll
      for (int i = 0; i < R; i += 2) {
        const int r = acc_row(t, i), col = acc_col(t, i);
        const float wsc = r < len ? exp2f(gl - st.gam[r]) * st.rk[r] : 0.f;
        store_pair<T>(s.vh, mnmaj(r, col, kBT), acc[i], acc[i + 1]);
        store_pair<T>(s.vhs, mnmaj(r, col, kBT), wsc * acc[i], wsc * acc[i + 1]);
      }
      fence_view_async_shared();
    } else {
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const int r = acc_row(t, i);
        acc[i] *= p.scale * exp2f(st.gam[r]) * st.rq[r];
      }
    }
    __syncthreads();  // V^ and its scaled copy are in shared memory; X is dead

    if (wg == 1) {
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBT / 16; ++kk) wgmma_m64k16<T, VS, 0, 1>(acc, desc_kmaj(st.p, kk, kBT), desc_mnmaj(s.vh, kk, kBT), 1);
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operands(acc);
    }
    // State update: the k tile with the transpose bit is K^T (key rows of this warpgroup = panel wg).
    const float decay = exp2f(gl);
#pragma unroll
    for (int i = 0; i < R; ++i) S[i] *= decay;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16<T, VS, 1, 1>(S, wgmma_desc_sw128(smem_u32(st.k) + uint32_t(wg) * (kBT * 128u) + uint32_t(kk) * 2048u,
                                                     kBT * 128u, 1024u),
                                desc_mnmaj(s.vhs, kk, kBT), 1);
    wgmma_commit();
    if (wg == 1) {  // the output tile -> shared memory (X's buffer) -> 16-byte stores of the valid rows
#pragma unroll
      for (int i = 0; i < R; i += 2) store_pair<T>(s.x, mnmaj(acc_row(t, i), acc_col(t, i), kBT), acc[i], acc[i + 1]);
      named_barrier(2, 128);
      for (int idx = t; idx < kBT * (VS / 8); idx += 128) {
        const int row = idx / (VS / 8), ch = idx % (VS / 8);
        if (row < len)
          *reinterpret_cast<uint4*>(o_base + (t0 + row) * int64_t(p.HV) * p.V + ch * 8) =
              *reinterpret_cast<const uint4*>(s.x + mnmaj(row, ch * 8, kBT));
      }
    }
    wgmma_wait<0>();
    wgmma_fence_operands(S);
  }
  cp_async_wait<0>();
  if (p.ht) {
#pragma unroll
    for (int i = 0; i < R; ++i) p.ht[state_index(p, n, j, 64 * wg + acc_row(t, i), v0 + acc_col(t, i))] = S[i];
  }
}

template <class T, int VS>
void launch_t(const GdnFwdParams& p, const GdnChunkWs& ws, cudaStream_t stream) {
  launch(gdn_fused_wg_kernel<T, VS>, dim3(p.V / VS, p.HV, p.N), dim3(kThreads), sizeof(WgSmem<T, VS>) + 1024, stream,
         p, ws);
}

std::atomic<int64_t> g_launches{0};

// LINATTN_CUDA_WGMMA is read once per call of the functions below (the forward's choice and its
// launch each read it once): "0" off, "1" / "v1" forced, unset or empty the default; anything else an error.
enum WgSwitch { kWgDefault = -1, kWgOn, kWgV1, kWgOff };  // the order of wg_switch's list
int wg_switch() { return env_choice("LINATTN_CUDA_WGMMA", {"1", "v1", "0"}, kWgDefault); }

// KDA runs only the pipelined kernel (its KDA gate policy), the default since the H200 A/B at 7c12eef
// (32/32 1x32768 3.53 -> 2.80 ms, every KDA test passing with it); LINATTN_CUDA_KDA_WGMMA=0 keeps
// gdn_fused.cu. LINATTN_CUDA_WGMMA does not apply to KDA.
bool eligible_for(const GdnFwdParams& p, int vs, bool pipelined) {
  if (p.kda) pipelined = true;
  const bool tier3_state_pass = (p.seg_M != nullptr || p.seg_S != nullptr || p.seg_flags != nullptr) &&
                                !(pipelined && gdn_fused_wgp_seg_enabled());
  const bool slice = pipelined ? p.V % 64 == 0 : (vs == 64 || vs == 128) && p.V % vs == 0;
  return (!p.kda || gdn_fused_wg_kda_enabled()) && !tier3_state_pass && p.BT == kBT && p.K == kK && slice &&
         (p.io == ElemType::kBF16 || p.io == ElemType::kF16);
}

}  // namespace

int64_t gdn_fused_wg_launches() { return g_launches.load(); }

bool gdn_fused_wg_pipelined() { return wg_switch() != kWgV1; }

bool gdn_fused_wg_forced() {
  const int v = wg_switch();
  return v == kWgOn || v == kWgV1;
}

bool gdn_fused_wg_eligible(const GdnFwdParams& p, int vs) { return eligible_for(p, vs, gdn_fused_wg_pipelined()); }

bool gdn_fused_wg_enabled() { return wg_switch() != kWgOff; }

bool gdn_fused_wg_kda_enabled() { return env_flag("LINATTN_CUDA_KDA_WGMMA", true); }

bool gdn_fused_wg_chosen(const GdnFwdParams& p, int vs) {
  if (p.kda) return eligible_for(p, vs, true);  // wherever eligible (no short-sequence rule yet)
  const int v = wg_switch();
  if (v == kWgOff || !eligible_for(p, vs, v != kWgV1)) return false;
  if (v == kWgOn || v == kWgV1 || p.seg_M) return true;  // seg_M: the state pass (eligible only when switched on)
  // H200 A/B (bench/results/h200x2-final-20261130-7bf64cf.md): the pipelined kernel's chunk step is
  // the shorter one whatever the CTA count (2/8 1x32768 with 16 CTAs: 1.07 vs 1.66 ms for mma.sync's
  // 32), but its pipeline start costs more than a 1-chunk sequence saves (16 x 64 tokens: 0.124 vs
  // 0.083 ms; 4 sequences of 2-3 chunks: equal). So mma.sync keeps batches whose sequences average
  // under two chunks (with fixed capacity: T_max / N_max, a static choice).
  return p.T_total >= 2 * int64_t(p.BT) * p.N;
}

void launch_gdn_fused_wg(const GdnFwdParams& p, const GdnChunkWs& ws, int vs, cudaStream_t stream) {
  const bool pipelined = p.kda || gdn_fused_wg_pipelined();
  LINATTN_CHECK(eligible_for(p, vs, pipelined), "gdn fused (wgmma): needs GDN (or KDA without LINATTN_CUDA_KDA_WGMMA=0), "
                "BT 64, K 128, V % 64 == 0 (pipelined) or V-slice 64 / 128 dividing V (v1), bf16 / fp16, no tier-3 "
                "state pass; got kda ", p.kda, ", BT ", p.BT, ", K ", p.K, ", V ", p.V, ", V-slice ", vs);
  g_launches.fetch_add(1);
  if (pipelined) {
    launch_gdn_fused_wgp(p, ws, stream, gdn_fused_wgp_vs(p, ws, vs));
    return;
  }
  const bool bf = p.io == ElemType::kBF16;
  if (vs == 128) bf ? launch_t<__nv_bfloat16, 128>(p, ws, stream) : launch_t<__half, 128>(p, ws, stream);
  else bf ? launch_t<__nv_bfloat16, 64>(p, ws, stream) : launch_t<__half, 64>(p, ws, stream);
}

}  // namespace linattn::cuda
