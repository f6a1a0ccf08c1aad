// Shared pieces of the chunked KDA backward's chunk-gradient kernel (kda_bwd_chunk2_kernel.cuh): the CTA
// tiling (4 column warps x BT / 16 row warps, thread rows r0 / r0 + 8, 8 channels per thread), the
// shared-memory layout, the per-head tile loads and the fp32 per-element intra-chunk sums in the mma
// fragment layout (running products of the per-token decays a <= 1, so no exponent is ever positive).
// intra_rows walks j from the row down to jlo, intra_cols walks i from the column up to ihi - 1 (the
// kernel walks only the diagonal 16 x 16 block, adding to its off-diagonal sums with init = false).
#pragma once
#include <cuda_runtime.h>

#include "cuda/gdn/gdn_bwd_load.cuh"
#include "cuda/gdn/gdn_prep_common.cuh"

namespace linattn::cuda {
namespace kda_bwd {
constexpr int kK = 128, kLdK = kK + 8, kWN = 4, kLdF = kK + 4;

template <int BT, int V>
struct KTiling {
  static constexpr int NW = BT == 64 ? 16 : 8;
  static constexpr int NT = NW * 32;
  static constexpr int WM = BT / 16;
  static_assert(NW / WM == kWN, "4 column warps");
  static constexpr int CK = kK / kWN, NTK = CK / 8;
  static constexpr int CV = V / kWN, NTV = CV / 8;
  static constexpr int CB = BT / kWN, NTB = CB / 8;
};

template <class T, int BT, int V>
struct KdaChunkSmem {
  static constexpr int kLdV = V + 8, kLdA = BT + 8, kLdB = BT + 4;
  T q[BT][kLdK], k[BT][kLdK];  // raw q / k rows
  union {
    struct {
      T S[kK][kLdV], dS[kK][kLdV];  // S_c, dS' of value head j
    } st;
    struct {
      float daqk[BT][kLdB], dL[BT][kLdB];  // then the intra-chunk cotangents (fp32)
    } in;
  } u;
  T vh[BT][kLdV];
  T y[BT][kLdV];  // dV^, then Y
  T dO[BT][kLdV];
  T ai[BT][kLdA];
  float a[BT][kLdF];  // per-token decays e^g, then dgam
  float rq[BT], rk[BT], beta[BT];
  float egL[kK], sd[kK];
  float zsum[BT / 16][kK];
  float red[3][BT][kWN];
};

// dst[row][0..COLS) <- src[row * stride + 0..COLS) for row < len, zeros for len <= row < ROWS: the
// pieces of load_rows_async in the same order, in a rolled loop.
template <class T, int ROWS, int COLS, int LD, int NT>
__device__ __forceinline__ void load_rows_async_r(T (*dst)[LD], const T* src, int64_t stride, int len, int tid) {
  constexpr int P = COLS / 8;
#pragma unroll 1
  for (int idx = tid; idx < ROWS * P; idx += NT) {
    const int row = idx / P, ch = idx % P;
    const bool valid = row < len;
    cp_async16(&dst[row][ch * 8], src + (valid ? row * stride + ch * 8 : 0), valid);
  }
}

// A head's tiles: S, dS (K x V), vh, dvh, dO (BT x V), Ai (BT x BT), in rolled loops; d_o through the
// converting loader only when it is not loadable directly. TWO (chunked14): S and dS last, in a cp.async group of
// their own (committed here after the others; the caller commits S / dS).
template <class T, int BT, int V, bool TWO = false>
__device__ __forceinline__ void load_head(KdaChunkSmem<T, BT, V>& s, const GdnBwdParams& p, const GdnBwdWs& w,
                                          int64_t r, int64_t t0, int len, int j, int tid) {
  using Sm = KdaChunkSmem<T, BT, V>;
  constexpr int NT = KTiling<BT, V>::NT;
  const GdnFwdParams& f = p.f;
  const int64_t soff = (r * f.HV + j) * int64_t(kK) * V;
  const auto states = [&] {
    load_rows_async_r<T, kK, V, Sm::kLdV, NT>(s.u.st.S, static_cast<const T*>(w.hS) + soff, V, kK, tid);
    load_rows_async_r<T, kK, V, Sm::kLdV, NT>(s.u.st.dS, static_cast<const T*>(w.hdS) + soff, V, kK, tid);
  };
  if constexpr (!TWO) states();
  const int64_t toff = (j * w.c.T_cap + t0) * V;
  load_rows_async_r<T, BT, V, Sm::kLdV, NT>(s.vh, static_cast<const T*>(w.vh) + toff, V, len, tid);
  load_rows_async_r<T, BT, V, Sm::kLdV, NT>(s.y, static_cast<const T*>(w.dvh) + toff, V, len, tid);
  load_rows_async_r<T, BT, BT, Sm::kLdA, NT>(s.ai, static_cast<const T*>(w.c.Ai) + (j * w.c.T_cap + t0) * BT, BT,
                                             len, tid);
  if (w.do_direct) {
    const int64_t base = (t0 * f.HV + j) * int64_t(V);
    load_rows_async_r<T, BT, V, Sm::kLdV, NT>(s.dO, static_cast<const T*>(p.d_o) + base, int64_t(f.HV) * V, len,
                                              tid);
  } else {
    load_do_rows<T, BT, V, Sm::kLdV, NT>(s.dO, p, false, t0, len, j, 0, tid);
  }
  if constexpr (TWO) {
    cp_async_commit();
    states();
  }
}

__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// red[q][row][wn] = quad sum of part (rows r0, r0 + 8 of this warp).
template <int BT>
__device__ __forceinline__ void flush_rowdot(float (*red)[BT][kWN], int q, const float (&part)[2], int r0, int wn,
                                             int tq) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float v = quad_sum(part[hf]);
    if (tq == 0) red[q][r0 + 8 * hf][wn] = v;
  }
}

// Fragment element (nt, e) of this thread: row r0 + 8 (e >> 1), channel ck + 8 nt + 2 tq + (e & 1).
// x[nt][e] <- scale_row * x_raw of the bf16 / fp16 row tile m.
template <class T, int NTK>
__device__ __forceinline__ void frag_rows(float (&x)[NTK][4], const T (*m)[kLdK], const float* rs, int r0, int ck,
                                          int tq) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float sc = rs[r0 + 8 * hf];
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const float2 v = ld_pair(&m[r0 + 8 * hf][ck + nt * 8 + 2 * tq]);
      x[nt][2 * hf] = sc * v.x;
      x[nt][2 * hf + 1] = sc * v.y;
    }
  }
}

// Row side of the intra-chunk sums for rows i = r0, r0 + 8: dq2_i = sum_{j<=i} daqk_ij k^_j E_ij,
// rp_i = sum_{j<i} dL_ij k^_j E_ij, walking j down from i (E_{i,j-1} = E_ij a_j).
template <class T, int BT, int V, int NTK>
__device__ __forceinline__ void intra_rows(const KdaChunkSmem<T, BT, V>& s, float (&dq2)[NTK][4],
                                           float (&rp)[NTK][4], int r0, int ck, int tq, int jlo,
                                           bool init = true) {
  float e[NTK][4];
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      e[nt][x] = 1.f;
      if (init) {
        dq2[nt][x] = 0.f;
        rp[nt][x] = 0.f;
      }
    }
  for (int jr = r0 + 8; jr >= jlo; --jr) {
    const float rkj = s.rk[jr];
    const bool lo = jr <= r0;
    const float c1 = s.u.in.daqk[r0 + 8][jr] * rkj, l1 = s.u.in.dL[r0 + 8][jr] * rkj;
    const float c0 = lo ? s.u.in.daqk[r0][jr] * rkj : 0.f, l0 = lo ? s.u.in.dL[r0][jr] * rkj : 0.f;
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int col = ck + nt * 8 + 2 * tq;
      const float2 kv = ld_pair(&s.k[jr][col]);
      const float2 av = *reinterpret_cast<const float2*>(&s.a[jr][col]);
      const float kx[2] = {kv.x, kv.y}, ax[2] = {av.x, av.y};
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const float t1 = kx[x] * e[nt][2 + x];
        dq2[nt][2 + x] += c1 * t1;
        rp[nt][2 + x] += l1 * t1;
        e[nt][2 + x] *= ax[x];
        if (lo) {
          const float t0 = kx[x] * e[nt][x];
          dq2[nt][x] += c0 * t0;
          rp[nt][x] += l0 * t0;
          e[nt][x] *= ax[x];
        }
      }
    }
  }
}

// Column side for columns j = r0, r0 + 8: dka_j = sum_{i>=j} (daqk_ij q^_i + beta_i dL_ij k^_i) E_ij,
// walking i up from j (E_{i+1,j} = E_ij a_{i+1}).
template <class T, int BT, int V, int NTK>
__device__ __forceinline__ void intra_cols(const KdaChunkSmem<T, BT, V>& s, float (&ca)[NTK][4], int r0, int ck,
                                           int tq, int len, int ihi, bool init = true) {
  float e[NTK][4];
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      e[nt][x] = 1.f;
      if (init) ca[nt][x] = 0.f;
    }
  for (int i = r0; i < ihi; ++i) {
    const float rqi = s.rq[i], bki = s.beta[i] * s.rk[i];
    const bool hi = i >= r0 + 8;
    const float gq0 = s.u.in.daqk[i][r0] * rqi, gk0 = s.u.in.dL[i][r0] * bki;
    const float gq1 = hi ? s.u.in.daqk[i][r0 + 8] * rqi : 0.f, gk1 = hi ? s.u.in.dL[i][r0 + 8] * bki : 0.f;
    const bool more = i + 1 < len;
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int col = ck + nt * 8 + 2 * tq;
      const float2 qv = ld_pair(&s.q[i][col]), kv = ld_pair(&s.k[i][col]);
      float2 av = make_float2(0.f, 0.f);
      if (more) av = *reinterpret_cast<const float2*>(&s.a[i + 1][col]);
      const float qx[2] = {qv.x, qv.y}, kx[2] = {kv.x, kv.y}, ax[2] = {av.x, av.y};
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        ca[nt][x] += (gq0 * qx[x] + gk0 * kx[x]) * e[nt][x];
        e[nt][x] *= ax[x];
        if (hi) {
          ca[nt][2 + x] += (gq1 * qx[x] + gk1 * kx[x]) * e[nt][2 + x];
          e[nt][2 + x] *= ax[x];
        }
      }
    }
  }
}

}  // namespace kda_bwd
}  // namespace linattn::cuda
