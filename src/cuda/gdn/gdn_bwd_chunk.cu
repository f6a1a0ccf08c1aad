// Chunk-parallel gradients of the chunked GDN backward (ALGORITHMS.md 4.1 steps 4-8), one CTA per
// (chunk row r, q/k head h); the CTA walks the G value heads j of the group in order, so dq / dk
// are summed over the group in registers (deterministic, no HV-wide buffers), then pass through
// the L2-norm backward and are stored once. Per j, with q^ = rq q, k^ = rk k, the state S = S_c and
// dS' = d(state leaving the chunk) from the sweeps, V^, dV^ (sweeps), Ai = (I + L)^-1 (prep):
//   Y   = Ai^T dV^                      (dv = beta Y was written by the sweep)
//   dq^ = scale e^gam (dO S^T) + Pd K^            Pd = scale M o D o (dO V^^T)
//   xn  = Y S^T                                   R  = -M- o D o (Y V^^T)  (= dL o D)
//   dk^ = e^(gL-gam) (V^ dS'^T) + Pd^T Q^ + (beta R)^T K^ + beta (R K^) - beta e^gam xn
//   dgam_i = q^.dq_inter - k^.dk_inter - beta e^gam k^.xn + rowsum_i(M) - colsum_i(M),
//            + e^gL <S, dS'> + sum_i k^.dk_inter at the last valid row;  dg = reverse cumsum
//            M = Pd o (Q^ K^^T) + diag(beta) R o (K^ K^^T) (fp32, formed once: the row and column
//            sums of the same numbers cancel exactly in the cumsum; deriving them from q^.dq^ and
//            k^.dka instead left bf16-rounding residues that summed to 10-40% errors in dA_log)
//   dbeta_i = Y.v - e^gam k^.xn + k^.(R K^)
// Products run on mma.sync with fp32 accumulators; row dot products are reduced over the quad,
// then over the 4 column warps through shared memory in a fixed order. Rows past the chunk end
// are zero-filled and never stored. NW warps (16 for BT = 64, 8 for BT = 32) as WM = BT/16 row
// groups x 4 column groups. The next value head's tiles are prefetched (cp.async) while the
// intra-chunk products of the current one run. K = 128, V in {64, 128}. launch_gdn_bwd_chunk hands
// BT = 64 to the wgmma variant (gdn_bwd_chunk_wg.cu, same math) when gdn_bwd_chunk_wg_eligible says so.
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_bwd_chunk_common.cuh"
#include "cuda/gdn/gdn_bwd_chunk_wg.h"

namespace linattn::cuda {
namespace {
using namespace gdn_bwd_chunk_detail;

constexpr int kK = 128, kLdK = kK + 8;

template <int BT, int V>
struct CTiling {
  static constexpr int NW = BT == 64 ? 16 : 8;
  static constexpr int NT = NW * 32;
  static constexpr int WM = BT / 16;
  static_assert(NW / WM == kWN, "4 column warps");
  static constexpr int CK = kK / kWN, NTK = CK / 8;  // BT x K products
  static constexpr int CV = V / kWN, NTV = CV / 8;   // BT x V products
  static constexpr int CB = BT / kWN, NTB = CB / 8;  // BT x BT products
};

template <class T, int BT, int V>
struct ChunkSmem {
  static constexpr int kLdV = V + 8, kLdA = BT + 8;
  T q[BT][kLdK], k[BT][kLdK];   // raw q / k rows of the chunk
  T S[kK][kLdV], dS[kK][kLdV];  // S_c, dS' of value head j
  T vh[BT][kLdV];
  T y[BT][kLdV];                // dV^, then Y
  T dO[BT][kLdV];
  T ai[BT][kLdA];
  T pk[BT][kLdA], pq[BT][kLdA], rm[BT][kLdA], rb[BT][kLdA];  // Pd rk_j, rq_i Pd, R rk_j, beta_i rk_i R
  float rq[BT], rk[BT], gam[BT], beta[BT];
  float red[6][BT][kWN];        // row-dot partials per column warp
  float redc[BT][BT / 16];      // column sums of M per row warp
  float wred[CTiling<BT, V>::NW];
};

template <class T, int BT, int V>
__device__ __forceinline__ void load_head(ChunkSmem<T, BT, V>& s, const GdnBwdParams& p, const GdnBwdWs& w,
                                          int64_t r, int64_t t0, int len, int j, int tid) {
  using Sm = ChunkSmem<T, BT, V>;
  constexpr int NT = CTiling<BT, V>::NT;
  const GdnFwdParams& f = p.f;
  const int64_t soff = (r * f.HV + j) * int64_t(kK) * V;
  load_rows_async<T, kK, V, Sm::kLdV, NT>(s.S, static_cast<const T*>(w.hS) + soff, V, kK, tid);
  load_rows_async<T, kK, V, Sm::kLdV, NT>(s.dS, static_cast<const T*>(w.hdS) + soff, V, kK, tid);
  const int64_t toff = (j * w.c.T_cap + t0) * V;
  load_rows_async<T, BT, V, Sm::kLdV, NT>(s.vh, static_cast<const T*>(w.vh) + toff, V, len, tid);
  load_rows_async<T, BT, V, Sm::kLdV, NT>(s.y, static_cast<const T*>(w.dvh) + toff, V, len, tid);
  load_rows_async<T, BT, BT, Sm::kLdA, NT>(s.ai, static_cast<const T*>(w.c.Ai) + (j * w.c.T_cap + t0) * BT, BT,
                                          len, tid);
  load_do_rows<T, BT, V, Sm::kLdV, NT>(s.dO, p, w.do_direct, t0, len, j, 0, tid);
}

// part[hf] += sum over this thread's columns of x * m (m: a bf16 / fp16 tile of BT rows).
template <class T, int NTW, int LD>
__device__ __forceinline__ void rowdot(float (&part)[2], const float (&x)[NTW][4], const T (*m)[LD], int r0,
                                       int cbase, int tq) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
#pragma unroll
    for (int nt = 0; nt < NTW; ++nt) {
      const float2 mv = ld_pair(&m[r0 + 8 * hf][cbase + nt * 8 + 2 * tq]);
      part[hf] += x[nt][2 * hf] * mv.x + x[nt][2 * hf + 1] * mv.y;
    }
}

template <class T, int BT, int V>
__global__ void __launch_bounds__(CTiling<BT, V>::NT, 1) gdn_bwd_chunk_kernel(GdnBwdParams p, GdnBwdWs w) {
  using Sm = ChunkSmem<T, BT, V>;
  using Tl = CTiling<BT, V>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Sm& s = *reinterpret_cast<Sm*>(smem_raw);
  const GdnFwdParams& f = p.f;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const int64_t r = blockIdx.x;
  const int h = blockIdx.y, G = f.HV / f.H;
  int64_t n, c;
  if (w.chunk_indices) {
    n = w.chunk_indices[2 * r];
    c = w.chunk_indices[2 * r + 1];
    if (n < 0) return;  // sentinel row: touch nothing
  } else {
    n = r / w.nts;
    c = r % w.nts;
  }
  int64_t bos, eos;
  seq_bounds(f, n, bos, eos);
  const int64_t t0 = bos + c * BT;
  const int len = static_cast<int>(min(int64_t(BT), eos - t0));
  if (len <= 0) return;
  const int wm = warp % Tl::WM, wn = warp / Tl::WM, r0 = 16 * wm + g;
  const int ck = wn * Tl::CK, cv = wn * Tl::CV, cb = wn * Tl::CB;

  const int64_t qoff = (t0 * f.H + h) * kK, qstride = int64_t(f.H) * kK;
  load_rows_async<T, BT, kK, kLdK, Tl::NT>(s.q, static_cast<const T*>(f.q) + qoff, qstride, len, tid);
  load_rows_async<T, BT, kK, kLdK, Tl::NT>(s.k, static_cast<const T*>(f.k) + qoff, qstride, len, tid);
  load_scalars_async<BT>(s.rq, w.c.rq + h * w.c.T_cap + t0, len, tid);
  load_scalars_async<BT>(s.rk, w.c.rk + h * w.c.T_cap + t0, len, tid - BT);
  load_head<T, BT, V>(s, p, w, r, t0, len, h * G, tid);
  cp_async_commit();

  float dqA[Tl::NTK][4] = {}, dkA[Tl::NTK][4] = {};
  for (int jj = 0; jj < G; ++jj) {
    const int j = h * G + jj;
    if (tid < BT) {
      const bool valid = tid < len;
      s.gam[tid] = valid ? w.c.gam[j * w.c.T_cap + t0 + tid] : 0.f;
      s.beta[tid] = valid ? gdn_beta(f, t0 + tid, j) : 0.f;
    }
    cp_async_wait<0>();
    __syncthreads();

    const float gl = s.gam[len - 1];
    float eg[2], egl[2], bv[2], neg_beg[2];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int rr = r0 + 8 * hf;
      const bool valid = rr < len;
      eg[hf] = valid ? exp2f(s.gam[rr]) : 0.f;
      egl[hf] = valid ? exp2f(gl - s.gam[rr]) : 0.f;
      bv[hf] = s.beta[rr];
      neg_beg[hf] = -bv[hf] * eg[hf];
    }
    // Row dots, flushed to s.red[q] as soon as complete: 0 Y.v, 1 q.dq_inter, 2 k.dk_inter,
    // 3 rowsum(M), 4 k.(R K^), 5 k.xn (q, k raw; the row scales are applied in finish_rows).

    // Y = Ai^T dV^ (registers until every warp has read dV^); Y.v
    float Y[Tl::NTV][4] = {};
    mma_tile<T, Tl::NTV, BT, true, false>(Y, &s.ai[0][0], Sm::kLdA, 16 * wm, &s.y[0][0], Sm::kLdV, cv, lane);
    {
      float yv[2] = {};
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int rr = r0 + 8 * hf;
        if (rr >= len) continue;
        const T* vrow = static_cast<const T*>(f.v) + ((t0 + rr) * f.HV + j) * int64_t(V);
#pragma unroll
        for (int nt = 0; nt < Tl::NTV; ++nt) {
          const float2 vv = ld_pair(vrow + cv + nt * 8 + 2 * tq);
          yv[hf] += Y[nt][2 * hf] * vv.x + Y[nt][2 * hf + 1] * vv.y;
        }
      }
      flush_rowdot<BT>(s.red, 0, yv, r0, wn, tq);
    }
    __syncthreads();  // every read of dV^ done: Y replaces it (registers -> shared)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
#pragma unroll
      for (int nt = 0; nt < Tl::NTV; ++nt)
        st_pair(&s.y[r0 + 8 * hf][cv + nt * 8 + 2 * tq], Y[nt][2 * hf], Y[nt][2 * hf + 1]);
    {  // dq_inter = scale e^gam (dO S^T)
      float t[Tl::NTK][4] = {};
      mma_tile<T, Tl::NTK, V, false, true>(t, &s.dO[0][0], Sm::kLdV, 16 * wm, &s.S[0][0], Sm::kLdV, ck, lane);
      const float sc[2] = {f.scale * eg[0], f.scale * eg[1]};
#pragma unroll
      for (int nt = 0; nt < Tl::NTK; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) t[nt][e] *= sc[e >> 1];
      {
        float pq1[2] = {};
        rowdot<T, Tl::NTK, kLdK>(pq1, t, s.q, r0, ck, tq);
        flush_rowdot<BT>(s.red, 1, pq1, r0, wn, tq);
      }
      const float one[2] = {1.f, 1.f};
      add_scaled(dqA, t, one);
    }
    {  // dk_inter = e^(gL - gam) (V^ dS'^T)
      float t[Tl::NTK][4] = {};
      mma_tile<T, Tl::NTK, V, false, true>(t, &s.vh[0][0], Sm::kLdV, 16 * wm, &s.dS[0][0], Sm::kLdV, ck, lane);
#pragma unroll
      for (int nt = 0; nt < Tl::NTK; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) t[nt][e] *= egl[e >> 1];
      {
        float pk[2] = {};
        rowdot<T, Tl::NTK, kLdK>(pk, t, s.k, r0, ck, tq);
        flush_rowdot<BT>(s.red, 2, pk, r0, wn, tq);
      }
      const float one[2] = {1.f, 1.f};
      add_scaled(dkA, t, one);
    }
    {  // <S, dS'> (block partials in a fixed order)
      float acc = 0.f;
      for (int idx = tid; idx < kK * (V / 8); idx += Tl::NT) {
        const int row = idx / (V / 8), ch = idx % (V / 8);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 a = ld_pair(&s.S[row][ch * 8 + 2 * e]);
          const float2 b = ld_pair(&s.dS[row][ch * 8 + 2 * e]);
          acc += a.x * b.x + a.y * b.y;
        }
      }
      acc = warp_sum(acc);
      if (lane == 0) s.wred[warp] = acc;
    }
    __syncthreads();  // Y visible to every warp

    {  // xn = Y S^T: dk^ -= beta e^gam xn
      float t[Tl::NTK][4] = {};
      mma_tile<T, Tl::NTK, V, false, true>(t, &s.y[0][0], Sm::kLdV, 16 * wm, &s.S[0][0], Sm::kLdV, ck, lane);
      {
        float pk[2] = {};
        rowdot<T, Tl::NTK, kLdK>(pk, t, s.k, r0, ck, tq);
        flush_rowdot<BT>(s.red, 5, pk, r0, wn, tq);
      }
      add_scaled(dkA, t, neg_beg);
    }
    {  // Pd = scale M o D o (dO V^^T), R = -M- o D o (Y V^^T), staged with their row / column scales
      float pm[Tl::NTB][4] = {}, lm[Tl::NTB][4] = {}, qk[Tl::NTB][4] = {}, kk[Tl::NTB][4] = {};
      mma_tile<T, Tl::NTB, V, false, true>(pm, &s.dO[0][0], Sm::kLdV, 16 * wm, &s.vh[0][0], Sm::kLdV, cb, lane);
      mma_tile<T, Tl::NTB, V, false, true>(lm, &s.y[0][0], Sm::kLdV, 16 * wm, &s.vh[0][0], Sm::kLdV, cb, lane);
      mma_tile<T, Tl::NTB, kK, false, true>(qk, &s.q[0][0], kLdK, 16 * wm, &s.k[0][0], kLdK, cb, lane);
      mma_tile<T, Tl::NTB, kK, false, true>(kk, &s.k[0][0], kLdK, 16 * wm, &s.k[0][0], kLdK, cb, lane);
      float rowM[2] = {}, colM[Tl::NTB][2] = {};
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int i = r0 + 8 * hf;
        const float gi = s.gam[i], rqi = s.rq[i], brk = bv[hf] * s.rk[i];
#pragma unroll
        for (int nt = 0; nt < Tl::NTB; ++nt) {
          const int c0 = cb + nt * 8 + 2 * tq;
          float P[2], R[2], rkc[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int jc = c0 + e;
            const float d = (i < len && jc <= i) ? exp2f(gi - s.gam[jc]) : 0.f;
            P[e] = f.scale * d * pm[nt][2 * hf + e];
            R[e] = jc < i ? -d * lm[nt][2 * hf + e] : 0.f;
            rkc[e] = s.rk[jc];
            const float m = P[e] * (qk[nt][2 * hf + e] * rqi * rkc[e]) + brk * R[e] * (kk[nt][2 * hf + e] * rkc[e]);
            rowM[hf] += m;
            colM[nt][e] += m;
          }
          st_pair(&s.pk[i][c0], P[0] * rkc[0], P[1] * rkc[1]);
          st_pair(&s.pq[i][c0], rqi * P[0], rqi * P[1]);
          st_pair(&s.rm[i][c0], R[0] * rkc[0], R[1] * rkc[1]);
          st_pair(&s.rb[i][c0], brk * R[0], brk * R[1]);
        }
      }
      flush_rowdot<BT>(s.red, 3, rowM, r0, wn, tq);
#pragma unroll
      for (int nt = 0; nt < Tl::NTB; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float c = colM[nt][e];  // sum over the 16 rows of this warp: lanes with the same tq
          c += __shfl_xor_sync(0xffffffffu, c, 4);
          c += __shfl_xor_sync(0xffffffffu, c, 8);
          c += __shfl_xor_sync(0xffffffffu, c, 16);
          if (g == 0) s.redc[cb + nt * 8 + 2 * tq + e][wm] = c;
        }
    }
    __syncthreads();  // staged intra matrices visible; S, dS', V^, Y, dO, Ai of head j are dead
    if (jj + 1 < G) load_head<T, BT, V>(s, p, w, r, t0, len, j + 1, tid);
    cp_async_commit();

    {  // dq^ += Pd K^
      float t[Tl::NTK][4] = {};
      mma_tile<T, Tl::NTK, BT, false, false>(t, &s.pk[0][0], Sm::kLdA, 16 * wm, &s.k[0][0], kLdK, ck, lane);
      const float one[2] = {1.f, 1.f};
      add_scaled(dqA, t, one);
    }
    {  // dk^ += beta (R K^)
      float t[Tl::NTK][4] = {};
      mma_tile<T, Tl::NTK, BT, false, false>(t, &s.rm[0][0], Sm::kLdA, 16 * wm, &s.k[0][0], kLdK, ck, lane);
      {
        float pk[2] = {};
        rowdot<T, Tl::NTK, kLdK>(pk, t, s.k, r0, ck, tq);
        flush_rowdot<BT>(s.red, 4, pk, r0, wn, tq);
      }
      add_scaled(dkA, t, bv);
    }
    {  // dk^ += Pd^T Q^ + (beta R)^T K^
      float t[Tl::NTK][4] = {};
      mma_tile<T, Tl::NTK, BT, true, false>(t, &s.pq[0][0], Sm::kLdA, 16 * wm, &s.q[0][0], kLdK, ck, lane);
      mma_tile<T, Tl::NTK, BT, true, false>(t, &s.rb[0][0], Sm::kLdA, 16 * wm, &s.k[0][0], kLdK, ck, lane);
      const float one[2] = {1.f, 1.f};
      add_scaled(dkA, t, one);
    }
    __syncthreads();
    if (warp == 0) finish_rows<BT, Tl::NW>(s, p, w, r, t0, len, j, lane);
    __syncthreads();
  }
  cp_async_wait<0>();

  // L2-norm backward of the group sums: dx = r dy - r^3 (dy . x) x (x raw, y = r x); store.
  float pq2[2] = {}, pk2[2] = {};
  rowdot<T, Tl::NTK, kLdK>(pq2, dqA, s.q, r0, ck, tq);
  rowdot<T, Tl::NTK, kLdK>(pk2, dkA, s.k, r0, ck, tq);
  flush_rowdot<BT>(s.red, 0, pq2, r0, wn, tq);
  flush_rowdot<BT>(s.red, 1, pk2, r0, wn, tq);
  __syncthreads();
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int rr = r0 + 8 * hf;
    if (rr >= len) continue;
    float fq = 1.f, cq = 0.f, fk = 1.f, cpk = 0.f;
    if (f.l2norm) {
      const float sq = ((s.red[0][rr][0] + s.red[0][rr][1]) + s.red[0][rr][2]) + s.red[0][rr][3];
      const float sk = ((s.red[1][rr][0] + s.red[1][rr][1]) + s.red[1][rr][2]) + s.red[1][rr][3];
      fq = s.rq[rr];
      fk = s.rk[rr];
      cq = fq * fq * fq * sq;
      cpk = fk * fk * fk * sk;
    }
    const int64_t base = ((t0 + rr) * f.H + h) * int64_t(kK);
#pragma unroll
    for (int nt = 0; nt < Tl::NTK; ++nt) {
      const int col = ck + nt * 8 + 2 * tq;
      const float2 qv = ld_pair(&s.q[rr][col]), kv = ld_pair(&s.k[rr][col]);
      if (p.dq.p) {
        store_out(p.dq.p, p.dq.t, base + col, fq * dqA[nt][2 * hf] - cq * qv.x);
        store_out(p.dq.p, p.dq.t, base + col + 1, fq * dqA[nt][2 * hf + 1] - cq * qv.y);
      }
      if (p.dk.p) {
        store_out(p.dk.p, p.dk.t, base + col, fk * dkA[nt][2 * hf] - cpk * kv.x);
        store_out(p.dk.p, p.dk.t, base + col + 1, fk * dkA[nt][2 * hf + 1] - cpk * kv.y);
      }
    }
  }
}

template <class T, int BT, int V>
void launch_t(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  launch(gdn_bwd_chunk_kernel<T, BT, V>, dim3(static_cast<unsigned>(w.nt_cap), p.f.H), dim3(CTiling<BT, V>::NT),
         sizeof(ChunkSmem<T, BT, V>), stream, p, w);
}

template <class T, int BT>
void launch_bt(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  if (p.f.V == 128) return launch_t<T, BT, 128>(p, w, stream);
  if (p.f.V == 64) return launch_t<T, BT, 64>(p, w, stream);
  LINATTN_UNSUPPORTED("gdn bwd chunk kernel: V = ", p.f.V, " (supported: 64, 128)");
}

}  // namespace

void launch_gdn_bwd_chunk(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  LINATTN_CHECK(p.f.K == kK, "gdn bwd chunk kernel: K must be ", kK, ", got ", p.f.K);
  LINATTN_CHECK(w.nt_cap < (int64_t(1) << 31), "gdn bwd chunk kernel: too many chunks: ", w.nt_cap);
  const bool bf = p.f.io == ElemType::kBF16;
  LINATTN_CHECK(bf || p.f.io == ElemType::kF16, "gdn bwd chunk kernel: io dtype must be bf16 or fp16");
  if (gdn_bwd_chunk_wg_eligible(p.f)) return launch_gdn_bwd_chunk_wg(p, w, stream);
  if (p.f.BT == 64) {
    bf ? launch_bt<__nv_bfloat16, 64>(p, w, stream) : launch_bt<__half, 64>(p, w, stream);
  } else if (p.f.BT == 32) {
    bf ? launch_bt<__nv_bfloat16, 32>(p, w, stream) : launch_bt<__half, 32>(p, w, stream);
  } else {
    LINATTN_UNSUPPORTED("gdn bwd chunk kernel: chunk_size ", p.f.BT, " (supported: 32, 64)");
  }
}

}  // namespace linattn::cuda
