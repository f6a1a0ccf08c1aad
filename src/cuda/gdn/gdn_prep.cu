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
// interleaved row scales, 3 CTA barriers per value head instead of 6.
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
#include "cuda/gdn/gdn_prep_v6.h"

namespace linattn::cuda {
namespace {

constexpr int kK = 128, kThreads = 256, kWarps = kThreads / 32, kLdK = kK + 8;

// WP: P is written (ws.P set). PE (with WP; the default, LINATTN_CUDA_GDN_PREP=v2 turns it off): the P rows of every
// value head are written right after the Gram products, so Q K^T lives in the shared union (the dead
// q / k tiles, before L / X use it): ~65 KB at BT 64, 3 CTAs per SM as without P.
// V6 (prep v6): kk keeps only its lower 16x16 blocks (the only ones L reads), packed, and the merge scratch only
// the BT/16 - 1 warps of the column chains: ~51 KB at BT 64 and G 4 (~65 KB without), 4 CTAs per SM with the
// kernel's 64 registers. Block (a, b), a >= b, at kkb[(a (a + 1) / 2 + b) kKkBlk]: rows of 16 floats, blocks
// 260 floats apart, so a quarter warp's float4 loads (two rows x four blocks) hit eight distinct bank groups.
template <class T, int BT, bool WP = true, bool PE = false, bool V6 = false>
struct PrepSmem {
  static constexpr int kLd = BT + 4;  // fp32 row stride: 16-byte aligned rows
  static constexpr bool kPacked = V6;
  static constexpr int kNB = BT / 16, kKkBlk = 16 * 16 + 4, kKkFloats = V6 ? kNB * (kNB + 1) / 2 * kKkBlk : 4;
  union {
    struct { T q[BT][kLdK]; T k[BT][kLdK]; } in;     // until the Gram products
    struct { float L[BT][kLd]; float X[BT][kLd]; } sv;  // then L and X = (I + L)^-1
    float qk[PE ? BT : 1][kLd];                         // PE: Q K^T (as qk below) until P is stored
  } u;
  float kk[V6 ? 1 : BT][kLd];  // (k_i . k_j) rk_i rk_j (V6: kkb)
  float qk[(WP && !PE) ? BT : 1][kLd];  // (q_i . k_j) rq_i rk_j (WP without PE only)
  float tscr[V6 ? (kNB > 1 ? kNB - 1 : 1) : kWarps][16][20];  // per-warp 16x16 scratch of the merges
  float rq[BT], rk[BT];
  alignas(16) float kkb[kKkFloats];  // V6: kk's lower blocks, packed
  // followed by gam[G][BT], beta[G][BT] (dynamic)
  static size_t bytes(int G) { return sizeof(PrepSmem) + size_t(G) * BT * 2 * sizeof(float); }
  // kk[i][c0 ..] (c0 a multiple of 4 in the block of column c0; V6: only blocks with c0 / 16 <= i / 16)
  __device__ __forceinline__ float* kk_at(int i, int c0) {
    if constexpr (V6) return &kkb[((i >> 4) * ((i >> 4) + 1) / 2 + (c0 >> 4)) * kKkBlk + (i & 15) * 16 + (c0 & 15)];
    else return &kk[i][c0];
  }
};

template <class T, int BT, bool WP, bool PE, bool V6>
__device__ __forceinline__ void gram_products(PrepSmem<T, BT, WP, PE, V6>& s, int warp, int lane) {
  constexpr int WM = BT / 16, WN = kWarps / WM, CW = BT / WN, NTW = CW / 8;
  const int wm = warp % WM, wn = warp / WM;
  float ak[NTW][4] = {}, aq[NTW][4] = {};
#pragma unroll
  for (int kt = 0; kt < kK / 16; ++kt) {
    uint32_t fk[4], fq[4];
    ldsm_x4(fk, a_addr_rowmajor(&s.u.in.k[0][0], kLdK, 16 * wm, 16 * kt, lane));
    if constexpr (WP) ldsm_x4(fq, a_addr_rowmajor(&s.u.in.q[0][0], kLdK, 16 * wm, 16 * kt, lane));
#pragma unroll
    for (int np = 0; np < NTW / 2; ++np) {
      uint32_t b[4];
      ldsm_x4(b, b_addr_nk(&s.u.in.k[0][0], kLdK, 16 * kt, wn * CW + 16 * np, lane));
      mma16816<T>(ak[2 * np], fk, b[0], b[1]);
      mma16816<T>(ak[2 * np + 1], fk, b[2], b[3]);
      if constexpr (WP) {
        mma16816<T>(aq[2 * np], fq, b[0], b[1]);
        mma16816<T>(aq[2 * np + 1], fq, b[2], b[3]);
      }
    }
    if constexpr (NTW % 2 == 1) {
      uint32_t b[2];
      ldsm_x2(b, b_addr_nk(&s.u.in.k[0][0], kLdK, 16 * kt, wn * CW + 16 * (NTW / 2), lane));
      mma16816<T>(ak[NTW - 1], fk, b[0], b[1]);
      if constexpr (WP) mma16816<T>(aq[NTW - 1], fq, b[0], b[1]);
    }
  }
  const int g = lane >> 2, t = lane & 3;
  if constexpr (PE) __syncthreads();  // qk overwrites the q / k tiles every warp reads above
  float (*qk)[PrepSmem<T, BT, WP, PE, V6>::kLd] = PE ? s.u.qk : s.qk;
#pragma unroll
  for (int nt = 0; nt < NTW; ++nt) {
    const int col = wn * CW + nt * 8 + 2 * t;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = 16 * wm + g + 8 * half;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (!V6 || (col >> 4) <= (row >> 4)) *s.kk_at(row, col + e) = ak[nt][2 * half + e] * s.rk[row] * s.rk[col + e];
        if constexpr (WP) qk[row][col + e] = aq[nt][2 * half + e] * s.rq[row] * s.rk[col + e];
      }
    }
  }
}

// q / k row scales (rq, rk in shared memory and the workspace), one warp per row: row i = warp + 8 u.
// V6: a warp's 2 BT / 8 rows at once (one 8-byte load per row and lane, the butterflies of all rows
// interleaved) instead of one row after another (~20% of the prep's stall samples at 3d3a678: each row a
// chain of 4 loads, 5 dependent shuffles, a predicated store); the same sums in the same order (same bits).
template <bool V6, class T, int BT, class Smem>
__device__ __forceinline__ void row_scales(const GdnFwdParams& p, const GdnChunkWs& ws, Smem& s, int h, int64_t t0,
                                           int len, int warp, int lane) {
  if constexpr (!V6) {
    for (int i = warp; i < 2 * BT; i += kWarps) {
      const T* row = i < BT ? &s.u.in.q[i][0] : &s.u.in.k[i - BT][0];
      const float ss = row_sumsq_warp<T, kK>(row, lane);
      const float rs = p.l2norm ? rsqrtf(ss + 1e-6f) : 1.f;
      if (lane == 0) {
        const int ri = i < BT ? i : i - BT;
        (i < BT ? s.rq : s.rk)[ri] = rs;
        if (ri < len) (i < BT ? ws.rq : ws.rk)[h * ws.T_cap + t0 + ri] = rs;
      }
    }
  } else {
    constexpr int R = 2 * BT / kWarps, RQ = BT / kWarps;  // rows per warp; the first RQ are q rows
    static_assert(kK / 32 == 4, "one 8-byte load per row and lane");
    float ss[R];
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const int i = warp + kWarps * u;
      const T* row = u < RQ ? &s.u.in.q[i][0] : &s.u.in.k[i - BT][0];
      const uint2 w = *reinterpret_cast<const uint2*>(row + 4 * lane);
      const T* e2 = reinterpret_cast<const T*>(&w);
      ss[u] = 0.f;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = MmaType<T>::to_float(e2[e]);
        ss[u] += x * x;
      }
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1)
#pragma unroll
      for (int u = 0; u < R; ++u) ss[u] += __shfl_xor_sync(0xffffffffu, ss[u], d);
    float mine = 0.f;  // lane u < R stores row u's scale
#pragma unroll
    for (int u = 0; u < R; ++u)
      if (lane == u) mine = ss[u];
    if (lane < R) {
      const bool isq = lane < RQ;
      const int ri = warp + kWarps * lane - (isq ? 0 : BT);
      const float rs = p.l2norm ? rsqrtf(mine + 1e-6f) : 1.f;
      (isq ? s.rq : s.rk)[ri] = rs;
      if (ri < len) (isq ? ws.rq : ws.rk)[h * ws.T_cap + t0 + ri] = rs;
    }
  }
}

constexpr int kSeg = 16;  // each thread: 16 contiguous columns of one row of L / P / Ab

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
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t r = blockIdx.x;
  const int h = blockIdx.y;
  int64_t t0;
  int len;
  if (!chunk_span(p, chunk_indices, nts, r, BT, t0, len)) return;  // sentinel row / empty chunk: touch nothing
  load_qk_rows<kThreads, BT>(p, t0, h, len, s.u.in.q, s.u.in.k, tid);
  cp_async_commit();

  // All G gate scans and betas while the copies fly: warp w owns value heads w, w + 8, ...
  for (int jj = warp; jj < G; jj += kWarps) {
    const int j = h * G + jj;
    float gsum = 0.f;
#pragma unroll
    for (int half = 0; half < BT / 32; ++half) {
      const int i = lane + 32 * half;
      float gv = i < len ? gdn_gate(p, t0 + i, j) : 0.f;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const float o = __shfl_up_sync(0xffffffffu, gv, d);
        if (lane >= d) gv += o;
      }
      gv += gsum;
      gsum = __shfl_sync(0xffffffffu, gv, 31);
      gam_all[jj * BT + i] = gv * kLog2e;
      beta_all[jj * BT + i] = i < len ? gdn_beta(p, t0 + i, j) : 0.f;
      if (i < len) ws.gam[j * ws.T_cap + t0 + i] = gv * kLog2e;
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  row_scales<V6, T, BT>(p, ws, s, h, t0, len, warp, lane);
  __syncthreads();
  if constexpr (SC) {  // chain mode tma3: the fused kernel's per-token scales, by its expressions
    static_assert(BT == chain_sc::kTok, "the scale records are per 64-token chunk");
    chain_sc::write_records<kThreads>(ws.sc, r, p.HV, h, G, gam_all, s.rk, s.rq, len, p.scale, tid);
  }
  gram_products<T, BT, WP, PE, V6>(s, warp, lane);
  __syncthreads();  // q/k tiles dead from here: their space holds L and X (PE: first Q K^T)

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
bool gdn_prep_v5_env() { return env_or("LINATTN_CUDA_GDN_PREP", "") != "v2"; }
// v6 is the default since the H200 A/B at accc55a (same arithmetic, bitwise equal on every test case; forward
// 16/64 1x32768 1.455 -> 1.376 ms, 4096x8 1.503 -> 1.435, 1x2048 0.121 -> 0.112); "v5" keeps the previous prep.
bool gdn_prep_v6_env() {
  const std::string v = env_or("LINATTN_CUDA_GDN_PREP", "");
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
