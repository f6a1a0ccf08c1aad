// Chunk-parallel prep of the chunked GDN forward (ALGORITHMS.md 3.1), one CTA per (chunk, q/k head):
//   rq, rk  row scales of q and k (1/sqrt(sum x^2 + 1e-6) with in-kernel l2norm, else 1)
//   gam     chunk-local inclusive cumsum of the log-decay (gate in kernel applied), log2 units
//   Ab      (I + L)^-1 diag(beta), L_ij = beta_i e^(gam_i - gam_j) k_i . k_j  (i > j, normalised k)
//   P       scale * e^(gam_i - gam_j) q_i . k_j                              (i >= j, normalised q, k)
//           (only when ws.P is set: with LINATTN_CUDA_GDN_P=fused the pipelined fused kernel forms P
//           itself and the prep runs its WP = false instance: no Q K^T, no P stores, no qk tile,
//           3 CTAs per SM instead of 2; the default (LINATTN_CUDA_GDN_PREP=v2: the previous instance)
//           writes P of all value heads right after the Gram products, Q K^T in the shared union:
//           the same values, 3 CTAs per SM)
//   Ai      (I + L)^-1 (only when ws.Ai is set: the backward)
//   sc      the pipelined fused kernel's per-token scales per (chunk, value head) (only when ws.sc is set:
//           chain mode tma3, BT 64; the SC instances; gdn_chain_scales.cuh)
// v6 (LINATTN_CUDA_GDN_PREP=v6, gdn_prep_v6.h; gdn_prep_v6_kernel): the same values, 4 CTAs per SM (packed kk),
// interleaved row scales, 3 CTA barriers per value head instead of 6. v7 (opt-in, gdn_prep_v7.cu): one decay per
// element for L and P, packed L / X / Q K^T; the front half (prep_front, gdn_prep_parts.cuh) is shared.
// K K^T and Q K^T (fp32 accumulators, mma.sync) are shared by the G value heads of the q/k head;
// all G gate scans run at once (one warp per value head). Per value head: every thread builds 16
// contiguous entries of a row of L and P (P stored with 16-byte writes); (I + L) is inverted by
// invert_unit_lower (gdn_prep_common.cuh, shared with KDA); Ab rows are written with 16-byte stores.
// Rows past the chunk end are zero-filled, never written back; upper triangles are exact zeros.
// Shared memory: the bf16 q/k tiles are dead after K K^T and Q K^T and hold L and X afterwards.
// 256 threads = 8 warps; K = 128.
#include <cuda_runtime.h>

#include <atomic>

#include "core/util.h"
#include "cuda/common/launch.h"
#include "cuda/common/mma.cuh"
#include "cuda/gdn/gdn_chain_scales.cuh"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/gdn/gdn_kernels.h"
#include "cuda/gdn/gdn_p_fused.h"
#include "cuda/gdn/gdn_prep_common.cuh"
#include "cuda/gdn/gdn_prep_parts.cuh"
#include "cuda/gdn/gdn_prep_v6.h"
#include "cuda/gdn/gdn_prep_v7.h"

namespace linattn::cuda {
namespace {

// Value head j's L (strictly lower; rows past len zero) into s.u.sv.L and, with zero_upper, zeros into the upper
// blocks of X (invert_unit_lower leaves them: they stay zero for the next value heads); P of the head too in the
// WP-without-PE instance. V6 (packed kk): the upper 16x16 blocks of L are skipped (no instance there writes P).
template <class T, int BT, bool WP, bool PE, class Smem>
__device__ __forceinline__ void build_L(const GdnFwdParams& p, const GdnChunkWs& ws, Smem& s, const float* gam,
                                        const float* beta, int j, int64_t t0, int len, bool zero_upper, int tid) {
  constexpr int kSegs = BT / kSeg;
  static_assert(BT * kSegs <= kThreads * 2, "row-segment mapping");
  T* P = static_cast<T*>(ws.P);
  for (int item = tid; item < BT * kSegs; item += kThreads) {
    const int i = item / kSegs, c0 = (item % kSegs) * kSeg;
    if (Smem::kPacked && (c0 >> 4) > (i >> 4)) {  // V6: upper blocks of L are never read; X's are zeroed once
      if (zero_upper)
#pragma unroll
        for (int e4 = 0; e4 < kSeg; e4 += 4)
          *reinterpret_cast<float4*>(&s.u.sv.X[i][c0 + e4]) = make_float4(0.f, 0.f, 0.f, 0.f);
      continue;
    }
    const float gi = gam[i], bi = beta[i];
    float pv[kSeg];
#pragma unroll
    for (int e4 = 0; e4 < kSeg; e4 += 4) {
      const float4 kk4 = *reinterpret_cast<const float4*>(s.kk_at(i, c0 + e4));
      float4 qk4 = make_float4(0.f, 0.f, 0.f, 0.f);
      if constexpr (WP && !PE) qk4 = *reinterpret_cast<const float4*>(&s.qk[i][c0 + e4]);
      const float kkv[4] = {kk4.x, kk4.y, kk4.z, kk4.w}, qkv[4] = {qk4.x, qk4.y, qk4.z, qk4.w};
      float lv[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int jc = c0 + e4 + e;
        const float d = (jc <= i && i < len) ? exp2f(gi - gam[jc]) : 0.f;
        lv[e] = jc < i ? bi * d * kkv[e] : 0.f;
        if constexpr (WP && !PE) pv[e4 + e] = p.scale * d * qkv[e];
      }
      *reinterpret_cast<float4*>(&s.u.sv.L[i][c0 + e4]) = make_float4(lv[0], lv[1], lv[2], lv[3]);
      if (zero_upper && (i >> 4) < (c0 >> 4))
        *reinterpret_cast<float4*>(&s.u.sv.X[i][c0 + e4]) = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    if constexpr (WP && !PE)
      if (i < len) store16<T>(P + (j * ws.T_cap + t0 + i) * BT + c0, pv);
  }
}

// Value head j's rows of Ab = X diag(beta) (and Ai = X for the backward) from s.u.sv.X.
template <class T, int BT, class Smem>
__device__ __forceinline__ void store_Ab(const GdnChunkWs& ws, const Smem& s, const float* beta, int j, int64_t t0,
                                         int len, int tid) {
  constexpr int kSegs = BT / kSeg;
  T* Ab = static_cast<T*>(ws.Ab);
  for (int item = tid; item < BT * kSegs; item += kThreads) {
    const int i = item / kSegs, c0 = (item % kSegs) * kSeg;
    if (i >= len) continue;
    float av[kSeg];
#pragma unroll
    for (int e = 0; e < kSeg; ++e) av[e] = s.u.sv.X[i][c0 + e] * beta[c0 + e];
    store16<T>(Ab + (j * ws.T_cap + t0 + i) * BT + c0, av);
    if (ws.Ai) {  // the backward also needs the unscaled inverse
#pragma unroll
      for (int e = 0; e < kSeg; ++e) av[e] = s.u.sv.X[i][c0 + e];
      store16<T>(static_cast<T*>(ws.Ai) + (j * ws.T_cap + t0 + i) * BT + c0, av);
    }
  }
}

// WP false (ws.P null): no Q K^T, no P; the qk tile is gone (~65 KB at BT 64: 3 CTAs per SM, 64
// registers). No minimum-blocks bound: with one, ptxas gives the WP instance 152 registers (1 CTA / SM).
// SC (ws.sc set, BT 64 only: chain mode tma3): the fused kernel's per-token scale records are written too
// (an instance of its own, so the other instances compile as before).
// V6 (LINATTN_CUDA_GDN_PREP=v6, opt-in; gdn_prep_v6_kernel): packed kk (PrepSmem), row_scales' interleaved rows,
// the inverse by column chains, and value head j's Ab stores in one phase with head j+1's L: 3 CTA barriers per
// value head instead of 6 (same bits).
template <class T, int BT, bool WP, bool PE, bool SC, bool V6>
__device__ __forceinline__ void prep_body(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                                          int nts) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using Smem = PrepSmem<T, BT, WP, PE, V6>;
  auto& s = *reinterpret_cast<Smem*>(smem_raw);
  const int G = p.HV / p.H;
  float* gam_all = reinterpret_cast<float*>(smem_raw + sizeof(Smem));  // [G][BT]
  float* beta_all = gam_all + G * BT;                                   // [G][BT]
  const int tid = threadIdx.x, h = blockIdx.y;
  int64_t t0;
  int len;
  if (!prep_front<T, BT, WP, PE, SC, V6>(p, ws, chunk_indices, nts, s, gam_all, beta_all, t0, len)) return;

  if constexpr (PE) {  // every value head's P rows (the expressions of the per-head loop below), then qk dies
    constexpr int kSegs = BT / kSeg;
    T* P = static_cast<T*>(ws.P);
    for (int jj = 0; jj < G; ++jj) {
      const int j = h * G + jj;
      const float* gam = gam_all + jj * BT;
      for (int item = tid; item < BT * kSegs; item += kThreads) {
        const int i = item / kSegs, c0 = (item % kSegs) * kSeg;
        if (i >= len) continue;
        const float gi = gam[i];
        float pv[kSeg];
#pragma unroll
        for (int e4 = 0; e4 < kSeg; e4 += 4) {
          const float4 qk4 = *reinterpret_cast<const float4*>(&s.u.qk[i][c0 + e4]);
          const float qkv[4] = {qk4.x, qk4.y, qk4.z, qk4.w};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int jc = c0 + e4 + e;
            const float d = jc <= i ? exp2f(gi - gam[jc]) : 0.f;
            pv[e4 + e] = p.scale * d * qkv[e];
          }
        }
        store16<T>(P + (j * ws.T_cap + t0 + i) * BT + c0, pv);
      }
    }
    __syncthreads();
  }
  if constexpr (!V6) {
    for (int jj = 0; jj < G; ++jj) {
      const int j = h * G + jj;
      build_L<T, BT, WP, PE>(p, ws, s, gam_all + jj * BT, beta_all + jj * BT, j, t0, len, true, tid);
      __syncthreads();
      invert_unit_lower<BT, Smem::kLd>(s.u.sv.L, s.u.sv.X, s.tscr, tid);
      store_Ab<T, BT>(ws, s, beta_all + jj * BT, j, t0, len, tid);
      __syncthreads();
    }
  } else {  // phase jj: Ab of head jj - 1 beside L of head jj (L is read only by the inverse, Ab only reads X)
    for (int jj = 0; jj <= G; ++jj) {
      if (jj > 0) store_Ab<T, BT>(ws, s, beta_all + (jj - 1) * BT, h * G + jj - 1, t0, len, tid);
      if (jj == G) break;
      build_L<T, BT, WP, PE>(p, ws, s, gam_all + jj * BT, beta_all + jj * BT, h * G + jj, t0, len, jj == 0, tid);
      __syncthreads();
      invert_unit_lower_cols<BT, Smem::kLd>(s.u.sv.L, s.u.sv.X, s.tscr, tid);
      __syncthreads();
    }
  }
}

template <class T, int BT, bool WP, bool PE = false, bool SC = false>
__global__ void __launch_bounds__(kThreads) gdn_prep_kernel(GdnFwdParams p, GdnChunkWs ws, const int32_t* chunk_indices,
                                                            int nts) {
  prep_body<T, BT, WP, PE, SC, false>(p, ws, chunk_indices, nts);
}
// v6: P first (PE) when P is written; 4 CTAs per SM at BT 64 (64 registers, ~51 KB at G 4), 3 at BT 32.
template <class T, int BT, bool WP, bool SC>
__global__ void __launch_bounds__(kThreads, BT == 64 ? 4 : 3) gdn_prep_v6_kernel(GdnFwdParams p, GdnChunkWs ws,
                                                                                const int32_t* chunk_indices, int nts) {
  prep_body<T, BT, WP, WP, SC, true>(p, ws, chunk_indices, nts);
}

std::atomic<int64_t> g_v6_launches{0};

template <class T, int BT, bool SC = false>
void launch_prep_t(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* ci, int64_t nt_cap,
                   cudaStream_t stream) {
  if constexpr (!SC) {
    if (gdn_prep_v7_env()) {  // the default (gdn_prep_v7.cu); LINATTN_CUDA_GDN_PREP=v6 keeps v6
      launch_gdn_prep_v7<T, BT>(p, ws, ci, nt_cap, stream);
      return;
    }
  }
  if constexpr (BT == chain_sc::kTok && !SC) {
    if (ws.sc) {
      launch_prep_t<T, BT, true>(p, ws, ci, nt_cap, stream);
      return;
    }
  }
  const int nts = p.cu_seqlens ? 0 : static_cast<int>((p.T_seq + BT - 1) / BT);
  const dim3 grid(static_cast<unsigned>(nt_cap), p.H);
  if (ws.P && !gdn_prep_v5_env()) {
    launch(gdn_prep_kernel<T, BT, true, false, SC>, grid, dim3(kThreads), PrepSmem<T, BT, true>::bytes(p.HV / p.H), stream,
           p, ws, ci, nts);
    return;
  }
  // The 3-CTAs-per-SM instances (no P, or P first): a hint for the largest shared-memory split.
  const bool v6 = gdn_prep_v6_env();
  if (v6) g_v6_launches.fetch_add(1);
  auto kernel = ws.P ? (v6 ? gdn_prep_v6_kernel<T, BT, true, SC> : gdn_prep_kernel<T, BT, true, true, SC>)
                     : (v6 ? gdn_prep_v6_kernel<T, BT, false, SC> : gdn_prep_kernel<T, BT, false, false, SC>);
  prefer_max_shared_carveout(reinterpret_cast<const void*>(kernel));
  const int G = p.HV / p.H;
  const size_t bytes = ws.P ? (v6 ? PrepSmem<T, BT, true, true, true>::bytes(G) : PrepSmem<T, BT, true, true>::bytes(G))
                            : (v6 ? PrepSmem<T, BT, false, false, true>::bytes(G) : PrepSmem<T, BT, false>::bytes(G));
  launch(kernel, grid, dim3(kThreads), bytes, stream, p, ws, ci, nts);
}

}  // namespace

// v5 is the default since the H200 A/B at 73035b5 (bitwise v2's outputs, forward 16/64 1x32768 1.665 ->
// 1.588 ms); LINATTN_CUDA_GDN_PREP=v2 keeps the 2-CTAs-per-SM instance.
bool gdn_prep_v5_env() { return gdn_prep_switch() != "v2"; }
// v6 is the default since the H200 A/B at accc55a (same arithmetic, bitwise equal on every test case; forward
// 16/64 1x32768 1.455 -> 1.376 ms, 4096x8 1.503 -> 1.435, 1x2048 0.121 -> 0.112); "v5" keeps the previous prep.
bool gdn_prep_v6_env() {
  const std::string v = gdn_prep_switch();
  return v.empty() || v == "v6";
}
int64_t gdn_prep_v6_launches() { return g_v6_launches.load(); }
int gdn_prep_v6_ctas_per_sm(int G) {
  auto kernel = gdn_prep_v6_kernel<__nv_bfloat16, 64, true, false>;
  const size_t bytes = PrepSmem<__nv_bfloat16, 64, true, true, true>::bytes(G);
  prefer_max_shared_carveout(reinterpret_cast<const void*>(kernel));  // as launch_prep_t and launch() set them
  if (bytes > 48 * 1024) ensure_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes);
  int n = 0;
  LINATTN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, bytes));
  return n;
}

void launch_gdn_prep(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                     int64_t nt_cap, cudaStream_t stream) {
  LINATTN_CHECK(p.K == kK, "gdn prep: K must be ", kK, ", got ", p.K);
  LINATTN_CHECK(nt_cap < (int64_t(1) << 31), "gdn prep: too many chunks: ", nt_cap);
  const bool bf = p.io == ElemType::kBF16;
  LINATTN_CHECK(bf || p.io == ElemType::kF16, "gdn prep: io dtype must be bf16 or fp16");
  if (p.BT == 64) {
    bf ? launch_prep_t<__nv_bfloat16, 64>(p, ws, chunk_indices, nt_cap, stream)
       : launch_prep_t<__half, 64>(p, ws, chunk_indices, nt_cap, stream);
  } else if (p.BT == 32) {
    bf ? launch_prep_t<__nv_bfloat16, 32>(p, ws, chunk_indices, nt_cap, stream)
       : launch_prep_t<__half, 32>(p, ws, chunk_indices, nt_cap, stream);
  } else {
    LINATTN_UNSUPPORTED("gdn prep: chunk_size ", p.BT, " (supported: 32, 64)");
  }
}

}  // namespace linattn::cuda
