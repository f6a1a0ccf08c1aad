// GDN forward prep v3 (opt-in, LINATTN_CUDA_GDN_PREP=v3; H200: no faster than v2, docs/perf-notes.md
// "Prep v3"): same outputs, grid and
// workspace as v2 (rq, rk, gam, Ab = (I + L)^-1 diag(beta), P, Ai when ws.Ai is set), one CTA per
// (chunk, q/k head), 256 threads. The q/k loads, G gate scans, row norms and the shared K K^T /
// Q K^T (mma.sync) run CTA-wide as in v2; then the CTA splits into two 128-thread slots (one slot
// of 256 when G = 1), each walking its own value heads (jj = slot, slot + 2, ...) with named
// barriers only, in four phases per value head:
//   A  all slot threads build the lower blocks of L (fp32, 16-column row segments)
//   B  warps 0-1: the 16x16 diagonal inverses (one column per thread), then the off-diagonal
//      merges by column chains (warp 0 column 0, warp 1 columns 1.. : a column depends only on itself)
//   C  warps 2..: P (lower segments computed, upper segments written as zeros), concurrent with B
//   D  all slot threads: Ab (+ Ai) rows, 16-byte stores
// Per element the arithmetic is v2's (same products, same TF32 merges in the same order).
// v4 (kFused, LINATTN_CUDA_GDN_PREP=v4; not yet run on a GPU): phase A forms each decay once for L
// and P (as v2), by ex2.approx.ftz (= exp2f for results >= 2^-126; smaller ones flush to zero),
// with the j <= i masks only in the diagonal segments; phase C then only stores P's zero segments.
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/common/mma.cuh"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/gdn/gdn_kernels.h"
#include "cuda/gdn/gdn_prep_common.cuh"

namespace linattn::cuda {
namespace {

constexpr int kK = 128, kThreads = 256, kWarps = kThreads / 32, kLdK = kK + 8, kSlots = 2;

template <class T, int BT>
struct PrepV3Smem {
  static constexpr int kLd = BT + 4;  // fp32 row stride: 16-byte aligned rows, conflict-free rows of 8
  struct Slot {
    float L[BT][kLd];         // strictly lower (I + L) part, lower blocks only
    float X[BT][kLd];         // (I + L)^-1, lower blocks only
    float tscr[2][16][20];    // merge scratch of the slot's warps 0-1
  };
  union {
    struct { T q[BT][kLdK]; T k[BT][kLdK]; } in;  // until the Gram products
    Slot slot[kSlots];
  } u;
  float kk[BT][kLd];  // (k_i . k_j) rk_i rk_j
  float qk[BT][kLd];  // (q_i . k_j) rq_i rk_j
  float rq[BT], rk[BT];
  // followed by gam[G][BT], beta[G][BT] (dynamic)
  static size_t bytes(int G) { return sizeof(PrepV3Smem) + size_t(G) * BT * 2 * sizeof(float); }
};

__device__ __forceinline__ float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// v4 phase A: one 16-column segment of row i (i < len) of L (shared memory) and P (registers),
// one decay per element. Off the diagonal block every j < i, so kDiag = false needs no masks; on
// it the decay of j > i is never used (its exponent is >= 0 and may overflow: selected away).
template <bool kDiag, int LD>
__device__ __forceinline__ void lp_segment(const float (*kk)[LD], const float (*qk)[LD], const float* gam,
                                           float* Lrow, int i, int c0, float bi, float sc, float (&pv)[16]) {
  const float gi = gam[i];
#pragma unroll
  for (int e4 = 0; e4 < 16; e4 += 4) {
    const float4 kk4 = *reinterpret_cast<const float4*>(&kk[i][c0 + e4]);
    const float4 qk4 = *reinterpret_cast<const float4*>(&qk[i][c0 + e4]);
    const float4 g4 = *reinterpret_cast<const float4*>(&gam[c0 + e4]);
    const float kkv[4] = {kk4.x, kk4.y, kk4.z, kk4.w}, qkv[4] = {qk4.x, qk4.y, qk4.z, qk4.w};
    const float gv[4] = {g4.x, g4.y, g4.z, g4.w};
    float lv[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int jc = c0 + e4 + e;
      float d = ex2_ftz(gi - gv[e]);
      if (kDiag) d = jc <= i ? d : 0.f;
      lv[e] = (!kDiag || jc < i) ? bi * d * kkv[e] : 0.f;
      pv[e4 + e] = sc * d * qkv[e];
    }
    *reinterpret_cast<float4*>(Lrow + e4) = make_float4(lv[0], lv[1], lv[2], lv[3]);
  }
}

__device__ __forceinline__ void named_bar(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

// Lower item it in [0, 8 NB (NB + 1)): row block rb holds 16 (rb + 1) items from 8 rb (rb + 1),
// ordered segment-major (consecutive items = consecutive rows of one 16-column segment).
template <int NB>
__device__ __forceinline__ void lower_item(int it, int& i, int& c0) {
  int rb = 0;
#pragma unroll
  for (int b = 1; b < NB; ++b) rb += it >= 8 * b * (b + 1);
  const int k = it - 8 * rb * (rb + 1);
  i = 16 * rb + (k & 15);
  c0 = 16 * (k >> 4);
}

// Upper item ut in [0, 8 NB (NB - 1)): segment s >= 1 holds rows 0 .. 16 s - 1 from 8 s (s - 1).
template <int NB>
__device__ __forceinline__ void upper_item(int ut, int& i, int& c0) {
  int s = 1;
#pragma unroll
  for (int b = 2; b < NB; ++b) s += ut >= 8 * b * (b - 1);
  i = ut - 8 * s * (s - 1);
  c0 = 16 * s;
}

template <class T, int BT>
__device__ __forceinline__ void gram_products_v3(PrepV3Smem<T, BT>& s, int warp, int lane) {
  constexpr int WM = BT / 16, WN = kWarps / WM, CW = BT / WN, NTW = CW / 8;
  const int wm = warp % WM, wn = warp / WM;
  float ak[NTW][4] = {}, aq[NTW][4] = {};
#pragma unroll
  for (int kt = 0; kt < kK / 16; ++kt) {
    uint32_t fk[4], fq[4];
    ldsm_x4(fk, a_addr_rowmajor(&s.u.in.k[0][0], kLdK, 16 * wm, 16 * kt, lane));
    ldsm_x4(fq, a_addr_rowmajor(&s.u.in.q[0][0], kLdK, 16 * wm, 16 * kt, lane));
#pragma unroll
    for (int np = 0; np < NTW / 2; ++np) {
      uint32_t b[4];
      ldsm_x4(b, b_addr_nk(&s.u.in.k[0][0], kLdK, 16 * kt, wn * CW + 16 * np, lane));
      mma16816<T>(ak[2 * np], fk, b[0], b[1]);
      mma16816<T>(ak[2 * np + 1], fk, b[2], b[3]);
      mma16816<T>(aq[2 * np], fq, b[0], b[1]);
      mma16816<T>(aq[2 * np + 1], fq, b[2], b[3]);
    }
    if constexpr (NTW % 2 == 1) {
      uint32_t b[2];
      ldsm_x2(b, b_addr_nk(&s.u.in.k[0][0], kLdK, 16 * kt, wn * CW + 16 * (NTW / 2), lane));
      mma16816<T>(ak[NTW - 1], fk, b[0], b[1]);
      mma16816<T>(aq[NTW - 1], fq, b[0], b[1]);
    }
  }
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NTW; ++nt) {
    const int col = wn * CW + nt * 8 + 2 * t;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = 16 * wm + g + 8 * half;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s.kk[row][col + e] = ak[nt][2 * half + e] * s.rk[row] * s.rk[col + e];
        s.qk[row][col + e] = aq[nt][2 * half + e] * s.rq[row] * s.rk[col + e];
      }
    }
  }
}

// Phase B on one value head: warps 0-1 of the slot (u < 64). Diagonal blocks as in
// invert_unit_lower; then X_ab = -X_aa sum_{m=b}^{a-1} L_am X_mb down each column b (same
// products and accumulation order as invert_unit_lower's distance-ordered merges).
template <int BT, int LD>
__device__ __forceinline__ void solve_v3(const float (*L)[LD], float (*X)[LD], float (*tscr)[16][20], int u,
                                         int pair_bar) {
  constexpr int NB = BT / 16;
  if (u < BT) {
    const int o = 16 * (u / 16), col = u % 16;
    float x[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) x[r] = r == col ? 1.f : 0.f;
#pragma unroll
    for (int c = 0; c < 15; ++c)
#pragma unroll
      for (int r = c + 1; r < 16; ++r) x[r] -= L[o + r][o + c] * x[c];
#pragma unroll
    for (int r = 0; r < 16; ++r) X[o + r][o + col] = x[r];
  }
  named_bar(pair_bar, 64);
  const int w = u >> 5, lane = u & 31, g = lane >> 2, t = lane & 3;
  float (*tw)[20] = tscr[w];
  const int b_lo = w == 0 ? 0 : 1, b_hi = w == 0 ? 1 : NB - 1;  // columns [b_lo, b_hi)
  for (int b = b_lo; b < b_hi; ++b) {
    for (int a = b + 1; a < NB; ++a) {
      float acc[2][4] = {};
      for (int m = b; m < a; ++m) mma16x16_tf32<LD, LD>(acc, L, 16 * a, 16 * m, X, 16 * m, 16 * b, lane);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        tw[g][8 * nt + 2 * t] = acc[nt][0];
        tw[g][8 * nt + 2 * t + 1] = acc[nt][1];
        tw[g + 8][8 * nt + 2 * t] = acc[nt][2];
        tw[g + 8][8 * nt + 2 * t + 1] = acc[nt][3];
      }
      __syncwarp();
      float res[2][4] = {};
      mma16x16_tf32<LD, 20>(res, X, 16 * a, 16 * a, tw, 0, 0, lane);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int c = 16 * b + 8 * nt + 2 * t;
        X[16 * a + g][c] = -res[nt][0];
        X[16 * a + g][c + 1] = -res[nt][1];
        X[16 * a + g + 8][c] = -res[nt][2];
        X[16 * a + g + 8][c + 1] = -res[nt][3];
      }
      __syncwarp();  // X_ab is the next block's B operand; tw is rewritten next
    }
  }
}

template <class T, int BT, bool kFused>
__global__ void __launch_bounds__(kThreads, 2) gdn_prep_v3_kernel(GdnFwdParams p, GdnChunkWs ws,
                                                                  const int32_t* chunk_indices, int nts) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using Smem = PrepV3Smem<T, BT>;
  constexpr int NB = BT / 16, kSeg = 16, kLower = 8 * NB * (NB + 1), kAll = 16 * NB * NB;
  auto& s = *reinterpret_cast<Smem*>(smem_raw);
  const int G = p.HV / p.H;
  float* gam_all = reinterpret_cast<float*>(smem_raw + sizeof(Smem));  // [G][BT]
  float* beta_all = gam_all + G * BT;                                   // [G][BT]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t r = blockIdx.x;
  const int h = blockIdx.y;
  int64_t n, c;
  if (chunk_indices) {
    n = chunk_indices[2 * r];
    c = chunk_indices[2 * r + 1];
    if (n < 0) return;  // sentinel row: touch nothing
  } else {
    n = r / nts;
    c = r % nts;
  }
  int64_t bos, eos;
  seq_bounds(p, n, bos, eos);
  const int64_t t0 = bos + c * BT;
  const int len = static_cast<int>(min(int64_t(BT), eos - t0));
  if (len <= 0) return;

  const T* qg = static_cast<const T*>(p.q) + (t0 * p.H + h) * kK;
  const T* kg = static_cast<const T*>(p.k) + (t0 * p.H + h) * kK;
  for (int idx = tid; idx < BT * (kK / 8); idx += kThreads) {
    const int row = idx / (kK / 8), ch = idx % (kK / 8);
    const bool valid = row < len;
    const int off = valid ? row * p.H * kK + ch * 8 : 0;
    cp_async16(&s.u.in.q[row][ch * 8], qg + off, valid);
    cp_async16(&s.u.in.k[row][ch * 8], kg + off, valid);
  }
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
  __syncthreads();
  gram_products_v3<T, BT>(s, warp, lane);
  __syncthreads();  // q/k tiles dead from here: their space holds the slots' L and X

  const int nslots = G >= 2 ? kSlots : 1, NT = kThreads / nslots;
  const int slot = tid / NT, u = tid % NT, uw = u >> 5;
  const int slot_bar = 1 + slot, pair_bar = 1 + kSlots + slot;
  auto& sl = s.u.slot[slot];
  T* Ab = static_cast<T*>(ws.Ab);
  T* P = static_cast<T*>(ws.P);
  T* Ai = static_cast<T*>(ws.Ai);
  for (int jj = slot; jj < G; jj += nslots) {
    const int j = h * G + jj;
    const float* gam = gam_all + jj * BT;
    const float* beta = beta_all + jj * BT;
    // A: lower blocks of L (rows past len are zero: d = 0). Started at warp 2 so that a partial
    // last round falls on the P warps, not on the solve warps 0-1.
    for (int it = (u + 64) % NT; it < kLower; it += NT) {
      int i, c0;
      lower_item<NB>(it, i, c0);
      if constexpr (kFused) {
        float* Lrow = &sl.L[i][c0];
        if (i >= len) {  // zero rows (the solve reads them); P rows past len are not stored
#pragma unroll
          for (int e4 = 0; e4 < kSeg; e4 += 4)
            *reinterpret_cast<float4*>(Lrow + e4) = make_float4(0.f, 0.f, 0.f, 0.f);
          continue;
        }
        float pv[kSeg];
        if (c0 == (i & ~15)) lp_segment<true, Smem::kLd>(s.kk, s.qk, gam, Lrow, i, c0, beta[i], p.scale, pv);
        else lp_segment<false, Smem::kLd>(s.kk, s.qk, gam, Lrow, i, c0, beta[i], p.scale, pv);
        store16<T>(P + (j * ws.T_cap + t0 + i) * BT + c0, pv);
        continue;
      }
      const float gi = gam[i], bi = beta[i];
#pragma unroll
      for (int e4 = 0; e4 < kSeg; e4 += 4) {
        const float4 kk4 = *reinterpret_cast<const float4*>(&s.kk[i][c0 + e4]);
        const float4 g4 = *reinterpret_cast<const float4*>(&gam[c0 + e4]);
        const float kkv[4] = {kk4.x, kk4.y, kk4.z, kk4.w}, gv[4] = {g4.x, g4.y, g4.z, g4.w};
        float lv[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int jc = c0 + e4 + e;
          const float d = (jc <= i && i < len) ? exp2f(gi - gv[e]) : 0.f;
          lv[e] = jc < i ? bi * d * kkv[e] : 0.f;
        }
        *reinterpret_cast<float4*>(&sl.L[i][c0 + e4]) = make_float4(lv[0], lv[1], lv[2], lv[3]);
      }
    }
    named_bar(slot_bar, NT);  // L complete; the previous head's X reads (phase D) are done
    if (uw < 2) {
      solve_v3<BT, Smem::kLd>(sl.L, sl.X, sl.tscr, u, pair_bar);
    } else if constexpr (kFused) {
      // C (v4): only P's zero segments (the lower ones were stored in phase A).
      for (int it = u - 64; it < kAll - kLower; it += NT - 64) {
        int i, c0;
        upper_item<NB>(it, i, c0);
        if (i >= len) continue;
        float pv[kSeg];
#pragma unroll
        for (int e = 0; e < kSeg; ++e) pv[e] = 0.f;
        store16<T>(P + (j * ws.T_cap + t0 + i) * BT + c0, pv);
      }
    } else {
      // C: P rows, 16 columns per item; lower segments computed, upper ones zero.
      for (int it = u - 64; it < kAll; it += NT - 64) {
        int i, c0;
        if (it < kLower) lower_item<NB>(it, i, c0);
        else upper_item<NB>(it - kLower, i, c0);
        if (i >= len) continue;
        float pv[kSeg];
        if (it < kLower) {
          const float gi = gam[i];
#pragma unroll
          for (int e4 = 0; e4 < kSeg; e4 += 4) {
            const float4 qk4 = *reinterpret_cast<const float4*>(&s.qk[i][c0 + e4]);
            const float4 g4 = *reinterpret_cast<const float4*>(&gam[c0 + e4]);
            const float qkv[4] = {qk4.x, qk4.y, qk4.z, qk4.w}, gv[4] = {g4.x, g4.y, g4.z, g4.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int jc = c0 + e4 + e;
              const float d = jc <= i ? exp2f(gi - gv[e]) : 0.f;
              pv[e4 + e] = p.scale * d * qkv[e];
            }
          }
        } else {
#pragma unroll
          for (int e = 0; e < kSeg; ++e) pv[e] = 0.f;
        }
        store16<T>(P + (j * ws.T_cap + t0 + i) * BT + c0, pv);
      }
    }
    named_bar(slot_bar, NT);  // X complete
    // D: Ab = X diag(beta) (and the unscaled X when the backward asks), zeros above the blocks.
    for (int it = u; it < kAll; it += NT) {
      int i, c0;
      if (it < kLower) lower_item<NB>(it, i, c0);
      else upper_item<NB>(it - kLower, i, c0);
      if (i >= len) continue;
      float xv[kSeg], av[kSeg];
      if (it < kLower) {
#pragma unroll
        for (int e4 = 0; e4 < kSeg; e4 += 4) {
          const float4 x4 = *reinterpret_cast<const float4*>(&sl.X[i][c0 + e4]);
          const float4 b4 = *reinterpret_cast<const float4*>(&beta[c0 + e4]);
          xv[e4] = x4.x, xv[e4 + 1] = x4.y, xv[e4 + 2] = x4.z, xv[e4 + 3] = x4.w;
          av[e4] = x4.x * b4.x, av[e4 + 1] = x4.y * b4.y, av[e4 + 2] = x4.z * b4.z, av[e4 + 3] = x4.w * b4.w;
        }
      } else {
#pragma unroll
        for (int e = 0; e < kSeg; ++e) xv[e] = av[e] = 0.f;
      }
      store16<T>(Ab + (j * ws.T_cap + t0 + i) * BT + c0, av);
      if (Ai) store16<T>(Ai + (j * ws.T_cap + t0 + i) * BT + c0, xv);
    }
  }
}

template <class T, int BT, bool kFused>
void launch_prep_v3_t(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* ci, int64_t nt_cap,
                      cudaStream_t stream) {
  const int nts = p.cu_seqlens ? 0 : static_cast<int>((p.T_seq + BT - 1) / BT);
  // Two 110 KB CTAs per SM need the largest shared-memory carveout (a hint; set once per process).
  static const bool carveout = [] {
    LINATTN_CUDA_CHECK(cudaFuncSetAttribute(gdn_prep_v3_kernel<T, BT, kFused>,
                                            cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    return true;
  }();
  (void)carveout;
  launch(gdn_prep_v3_kernel<T, BT, kFused>, dim3(static_cast<unsigned>(nt_cap), p.H), dim3(kThreads),
         PrepV3Smem<T, BT>::bytes(p.HV / p.H), stream, p, ws, ci, nts);
}

template <class T, int BT>
void launch_prep_v3_f(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* ci, int64_t nt_cap,
                      cudaStream_t stream, bool fused) {
  fused ? launch_prep_v3_t<T, BT, true>(p, ws, ci, nt_cap, stream)
        : launch_prep_v3_t<T, BT, false>(p, ws, ci, nt_cap, stream);
}

}  // namespace

// Checked by launch_gdn_prep (gdn_prep.cu): K = 128, bf16 / fp16, BT 32 / 64, nt_cap < 2^31.
// fused: v4 (one decay per element for L and P), else v3.
void launch_gdn_prep_v3(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                        int64_t nt_cap, cudaStream_t stream, bool fused) {
  const bool bf = p.io == ElemType::kBF16;
  if (p.BT == 64) {
    bf ? launch_prep_v3_f<__nv_bfloat16, 64>(p, ws, chunk_indices, nt_cap, stream, fused)
       : launch_prep_v3_f<__half, 64>(p, ws, chunk_indices, nt_cap, stream, fused);
  } else {
    bf ? launch_prep_v3_f<__nv_bfloat16, 32>(p, ws, chunk_indices, nt_cap, stream, fused)
       : launch_prep_v3_f<__half, 32>(p, ws, chunk_indices, nt_cap, stream, fused);
  }
}

}  // namespace linattn::cuda
