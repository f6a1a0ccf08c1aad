// Chunk-parallel gradients of the chunked KDA backward (per-key-channel gate), one CTA per (chunk
// row r, q/k head h) walking the G value heads j of the group (dq / dk group sums in registers, then
// the L2-norm backward, as gdn_bwd_chunk.cu). Per j, with q^ = rq q, k^ = rk k, a_td = e^(g_td) the
// per-token decay, eg_i = prod_{t<=i} a_t, egl_i = prod_{i<t<=L} a_t, E_ijd = prod_{j<t<=i} a_td,
// S = S_c, dS' = d(state leaving), V^, dV^ (sweeps), Ai = (I + L)^-1 (KDA prep):
//   Y = Ai^T dV^;  xn = Y S^T;  daqk = tril(scale dO V^^T);  dL = -tril-(Y V^^T)
//   dq^ = eg (.) scale (dO S^T) + sum_j daqk_ij k^_j (.) E_ij
//   dk^ = egl (.) (V^ dS'^T) - beta eg (.) xn + beta_i sum_j dL_ij k^_j E_ij   (row side, r)
//         + sum_i (daqk_ij q^_i + beta_i dL_ij k^_i) (.) E_ij                  (column side, dka)
//   dgam = q^ (.) dq^ - k^ (.) (egl (.) V^ dS'^T + dka - r) - beta eg k^ (.) xn, and at the last row
//          egL (.) <S, dS'>_rows + sum_i k^_i (.) egl (V^ dS'^T)_i;  dg = reverse cumsum (per channel)
//   dbeta_i = Y_i.v_i - (eg k^)_i.xn_i + k^_i.r'_i
// Products on mma.sync (fp32 accumulators); the intra-chunk per-channel sums run per element in the
// mma fragment layout (thread: rows r0, r0 + 8, 8 channels) with running products of a (every factor
// <= 1: no exponent is ever positive, exact at gates -1000 and lower_bound -5, no NaN / Inf), fp32.
// Rows past the chunk end read no gate and are masked. K = 128, V in {64, 128}, BT in {32, 64}.
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/kda/kda_bwd_chunk_common.cuh"

namespace linattn::cuda {
namespace {

using namespace kda_bwd;

template <class T, int BT, int V>
__global__ void __launch_bounds__(KTiling<BT, V>::NT, 1) kda_bwd_chunk_kernel(GdnBwdParams p, GdnBwdWs w) {
  using Sm = KdaChunkSmem<T, BT, V>;
  using Tl = KTiling<BT, V>;
  constexpr int NTK = Tl::NTK;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Sm& s = *reinterpret_cast<Sm*>(smem_raw);
  const GdnFwdParams& f = p.f;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const int64_t r = blockIdx.x;
  const int h = blockIdx.y, G = f.HV / f.H;
  int64_t t0;
  int len;
  if (!chunk_span(f, w.chunk_indices, w.nts, r, BT, t0, len)) return;  // sentinel row / empty chunk
  const int wm = warp % Tl::WM, wn = warp / Tl::WM, r0 = 16 * wm + g;
  const int ck = wn * Tl::CK, cv = wn * Tl::CV, cb = wn * Tl::CB;

  const int64_t qoff = (t0 * f.H + h) * kK, qstride = int64_t(f.H) * kK;
  load_rows_async<T, BT, kK, kLdK, Tl::NT>(s.q, static_cast<const T*>(f.q) + qoff, qstride, len, tid);
  load_rows_async<T, BT, kK, kLdK, Tl::NT>(s.k, static_cast<const T*>(f.k) + qoff, qstride, len, tid);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  for (int i = warp; i < 2 * BT; i += Tl::NW) {  // row scales (the forward prep's formula)
    const T* row = i < BT ? &s.q[i][0] : &s.k[i - BT][0];
    const float ss = row_sumsq_warp<T, kK>(row, lane);
    if (lane == 0) (i < BT ? s.rq : s.rk)[i < BT ? i : i - BT] = f.l2norm ? rsqrtf(ss + 1e-6f) : 1.f;
  }

  float dqA[NTK][4] = {}, dkA[NTK][4] = {};
  for (int jj = 0; jj < G; ++jj) {
    const int j = h * G + jj;
    load_head<T, BT, V>(s, p, w, r, t0, len, j, tid);
    cp_async_commit();
    if (tid < BT) s.beta[tid] = tid < len ? gdn_beta(f, t0 + tid, j) : 0.f;
    if (tid < kK) {  // per-token decays of channel tid; rows past the end read no gate
      float prod = 1.f;
      for (int i = 0; i < BT; ++i) {
        float av = 0.f;
        if (i < len) {
          av = expf(bwd_gate_deriv(p, t0 + i, j, tid).g);
          prod *= av;
        }
        s.a[i][tid] = av;
      }
      s.egL[tid] = prod;
    }
    cp_async_wait<0>();
    __syncthreads();

    float dgam[NTK][4], dbp[2] = {0.f, 0.f}, xh[NTK][4], eg[NTK][4];
    {  // Y = Ai^T dV^ (registers until every warp has read dV^); Y.v
      float Y[Tl::NTV][4] = {};
      mma_tile<T, Tl::NTV, BT, true, false>(Y, &s.ai[0][0], Sm::kLdA, 16 * wm, &s.y[0][0], Sm::kLdV, cv, lane);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int rr = r0 + 8 * hf;
        if (rr >= len) continue;
        const T* vrow = static_cast<const T*>(f.v) + ((t0 + rr) * f.HV + j) * int64_t(V);
#pragma unroll
        for (int nt = 0; nt < Tl::NTV; ++nt) {
          const float2 vv = ld_pair(vrow + cv + nt * 8 + 2 * tq);
          dbp[hf] += Y[nt][2 * hf] * vv.x + Y[nt][2 * hf + 1] * vv.y;
        }
      }
      if (tid < kK) {  // <S_d, dS'_d> per key row
        float acc = 0.f;
        for (int cc = 0; cc < V; cc += 2) {
          const float2 a = ld_pair(&s.u.st.S[tid][cc]), b = ld_pair(&s.u.st.dS[tid][cc]);
          acc += a.x * b.x + a.y * b.y;
        }
        s.sd[tid] = acc;
      }
      __syncthreads();
#pragma unroll
      for (int hf = 0; hf < 2; ++hf)
#pragma unroll
        for (int nt = 0; nt < Tl::NTV; ++nt)
          st_pair(&s.y[r0 + 8 * hf][cv + nt * 8 + 2 * tq], Y[nt][2 * hf], Y[nt][2 * hf + 1]);
    }
    frag_eg<NTK>(eg, s.a, r0, ck, tq);
    {  // dq_inter = eg (.) scale (dO S^T)
      float t[NTK][4] = {};
      mma_tile<T, NTK, V, false, true>(t, &s.dO[0][0], Sm::kLdV, 16 * wm, &s.u.st.S[0][0], Sm::kLdV, ck, lane);
      frag_rows<T, NTK>(xh, s.q, s.rq, r0, ck, tq);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float v = f.scale * eg[nt][e] * t[nt][e];
          dqA[nt][e] += v;
          dgam[nt][e] = xh[nt][e] * v;
        }
    }
    frag_rows<T, NTK>(xh, s.k, s.rk, r0, ck, tq);  // k^ from here on
    {  // dk_inter = egl (.) (V^ dS'^T); its column sums of k^ (.) dk_inter feed the last row
      float t[NTK][4] = {}, egl[NTK][4];
      mma_tile<T, NTK, V, false, true>(t, &s.vh[0][0], Sm::kLdV, 16 * wm, &s.u.st.dS[0][0], Sm::kLdV, ck, lane);
      frag_egl<NTK>(egl, s.a, r0, ck, tq, len);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt) {
        float z[2] = {0.f, 0.f};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float v = egl[nt][e] * t[nt][e];
          dkA[nt][e] += v;
          dgam[nt][e] -= xh[nt][e] * v;
          z[e & 1] += xh[nt][e] * v;
        }
#pragma unroll
        for (int x = 0; x < 2; ++x) {
          float v = z[x];
          v += __shfl_xor_sync(0xffffffffu, v, 4);
          v += __shfl_xor_sync(0xffffffffu, v, 8);
          v += __shfl_xor_sync(0xffffffffu, v, 16);
          if (g == 0) s.zsum[wm][ck + nt * 8 + 2 * tq + x] = v;
        }
      }
    }
    __syncthreads();  // Y visible to every warp

    {  // xn = Y S^T: dk^ -= beta eg xn; dgam -= beta eg k^ xn; dbeta -= eg k^ . xn
      float t[NTK][4] = {};
      mma_tile<T, NTK, V, false, true>(t, &s.y[0][0], Sm::kLdV, 16 * wm, &s.u.st.S[0][0], Sm::kLdV, ck, lane);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float bi = s.beta[r0 + 8 * (e >> 1)];
          const float kex = eg[nt][e] * t[nt][e];
          dkA[nt][e] -= bi * kex;
          dgam[nt][e] -= bi * xh[nt][e] * kex;
          dbp[e >> 1] -= xh[nt][e] * kex;
        }
    }
    float pm[Tl::NTB][4] = {}, lm[Tl::NTB][4] = {};
    mma_tile<T, Tl::NTB, V, false, true>(pm, &s.dO[0][0], Sm::kLdV, 16 * wm, &s.vh[0][0], Sm::kLdV, cb, lane);
    mma_tile<T, Tl::NTB, V, false, true>(lm, &s.y[0][0], Sm::kLdV, 16 * wm, &s.vh[0][0], Sm::kLdV, cb, lane);
    __syncthreads();  // S, dS' dead: the union takes daqk / dL
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i = r0 + 8 * hf;
#pragma unroll
      for (int nt = 0; nt < Tl::NTB; ++nt)
#pragma unroll
        for (int x = 0; x < 2; ++x) {
          const int jc = cb + nt * 8 + 2 * tq + x;
          s.u.in.daqk[i][jc] = (i < len && jc <= i) ? f.scale * pm[nt][2 * hf + x] : 0.f;
          s.u.in.dL[i][jc] = (i < len && jc < i) ? -lm[nt][2 * hf + x] : 0.f;
        }
    }
    __syncthreads();

    {  // row side: dq^ += dq2; r = beta rp into dk^; dbeta += k^ . rp
      float dq2[NTK][4], rp[NTK][4];
      intra_rows<T, BT, V, NTK>(s, dq2, rp, r0, ck, tq, 0);
      float qh[NTK][4];
      frag_rows<T, NTK>(qh, s.q, s.rq, r0, ck, tq);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float bi = s.beta[r0 + 8 * (e >> 1)];
          dqA[nt][e] += dq2[nt][e];
          dkA[nt][e] += bi * rp[nt][e];
          dgam[nt][e] += qh[nt][e] * dq2[nt][e] + xh[nt][e] * bi * rp[nt][e];
          dbp[e >> 1] += xh[nt][e] * rp[nt][e];
        }
    }
    {  // column side: dk^ += dka; dgam -= k^ (.) dka
      float ca[NTK][4];
      intra_cols<T, BT, V, NTK>(s, ca, r0, ck, tq, len, len);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          dkA[nt][e] += ca[nt][e];
          dgam[nt][e] -= xh[nt][e] * ca[nt][e];
        }
    }
    __syncthreads();  // every read of a / daqk / dL done: a takes dgam
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i = r0 + 8 * hf;
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt) {
        const int col = ck + nt * 8 + 2 * tq;
        s.a[i][col] = i < len ? dgam[nt][2 * hf] : 0.f;
        s.a[i][col + 1] = i < len ? dgam[nt][2 * hf + 1] : 0.f;
      }
    }
    flush_rowdot<BT>(s.red, 0, dbp, r0, wn, tq);
    __syncthreads();

    if (tid < kK) {  // channel tid: reverse cumsum, gate chain, per-chunk gate partials
      float zs = 0.f;
#pragma unroll
      for (int m = 0; m < BT / 16; ++m) zs += s.zsum[m][tid];
      float acc = s.egL[tid] * s.sd[tid] + zs, pA = 0.f, pT = 0.f;
      for (int i = len - 1; i >= 0; --i) {
        acc += s.a[i][tid];
        const int64_t t = t0 + i;
        const GateDeriv gd = bwd_gate_deriv(p, t, j, tid);
        const float dgo = acc * gd.draw;
        if (f.gate_in_kernel) {
          pA += acc * gd.dA;
          pT += dgo;
        }
        if (p.dg.p) store_out(p.dg.p, p.dg.t, (t * f.HV + j) * int64_t(kK) + tid, dgo);
      }
      float* o = w.part + ((r * f.HV + j) * kK + tid) * 2;
      o[0] = pA;
      o[1] = pT;
    } else if (tid < kK + BT) {
      const int i = tid - kK;
      if (i < len && p.dbeta.p) {
        const float db = ((s.red[0][i][0] + s.red[0][i][1]) + s.red[0][i][2]) + s.red[0][i][3];
        store_out(p.dbeta.p, p.dbeta.t, (t0 + i) * f.HV + j, db * gdn_beta_draw(f, t0 + i, j));
      }
    }
    __syncthreads();
  }

  // L2-norm backward of the group sums: dx = r dy - r^3 (dy . x) x (x raw, y = r x); store.
  float pq2[2] = {}, pk2[2] = {};
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int rr = r0 + 8 * hf, col = ck + nt * 8 + 2 * tq;
      const float2 qv = ld_pair(&s.q[rr][col]), kv = ld_pair(&s.k[rr][col]);
      pq2[hf] += dqA[nt][2 * hf] * qv.x + dqA[nt][2 * hf + 1] * qv.y;
      pk2[hf] += dkA[nt][2 * hf] * kv.x + dkA[nt][2 * hf + 1] * kv.y;
    }
  flush_rowdot<BT>(s.red, 1, pq2, r0, wn, tq);
  flush_rowdot<BT>(s.red, 2, pk2, r0, wn, tq);
  __syncthreads();
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int rr = r0 + 8 * hf;
    if (rr >= len) continue;
    float fq = 1.f, cq = 0.f, fk = 1.f, cpk = 0.f;
    if (f.l2norm) {
      const float sq = ((s.red[1][rr][0] + s.red[1][rr][1]) + s.red[1][rr][2]) + s.red[1][rr][3];
      const float sk = ((s.red[2][rr][0] + s.red[2][rr][1]) + s.red[2][rr][2]) + s.red[2][rr][3];
      fq = s.rq[rr];
      fk = s.rk[rr];
      cq = fq * fq * fq * sq;
      cpk = fk * fk * fk * sk;
    }
    const int64_t base = ((t0 + rr) * f.H + h) * int64_t(kK);
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
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

// Block per value head j, thread = channel c: dA_log[j] = sum over rows, then channels, of
// part[., j, c, 0]; ddt_bias[j, c] = sum over rows of part[., j, c, 1] (double, fixed order).
__global__ void __launch_bounds__(kK) kda_bwd_gate_reduce_kernel(GdnBwdParams p, const float* part, int64_t rows,
                                                                 const int32_t* count) {
  __shared__ double red[kK];
  const int j = blockIdx.x, c = threadIdx.x;
  const int64_t nr = count ? min(int64_t(max(*count, 0)), rows) : rows;
  double a = 0.0, b = 0.0;
  for (int64_t r = 0; r < nr; ++r) {
    const float* o = part + ((r * p.f.HV + j) * kK + c) * 2;
    a += o[0];
    b += o[1];
  }
  if (p.ddt_bias.p) store_out(p.ddt_bias.p, p.ddt_bias.t, j * kK + c, static_cast<float>(b));
  red[c] = a;
  __syncthreads();
  if (c == 0 && p.dA_log.p) {
    double s = 0.0;
    for (int i = 0; i < kK; ++i) s += red[i];
    store_out(p.dA_log.p, p.dA_log.t, j, static_cast<float>(s));
  }
}

template <class T, int BT, int V>
void launch_t(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  launch(kda_bwd_chunk_kernel<T, BT, V>, dim3(static_cast<unsigned>(w.nt_cap), p.f.H), dim3(KTiling<BT, V>::NT),
         sizeof(KdaChunkSmem<T, BT, V>), stream, p, w);
}

template <class T, int BT>
void launch_bt(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  if (p.f.V == 128) return launch_t<T, BT, 128>(p, w, stream);
  if (p.f.V == 64) return launch_t<T, BT, 64>(p, w, stream);
  LINATTN_UNSUPPORTED("kda bwd chunk kernel: V = ", p.f.V, " (supported: 64, 128)");
}

}  // namespace

void launch_kda_bwd_chunk(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  LINATTN_CHECK(p.f.kda && p.f.K == kK, "kda bwd chunk kernel: K must be ", kK, ", got ", p.f.K);
  LINATTN_CHECK(w.nt_cap < (int64_t(1) << 31), "kda bwd chunk kernel: too many chunks: ", w.nt_cap);
  const bool bf = p.f.io == ElemType::kBF16;
  LINATTN_CHECK(bf || p.f.io == ElemType::kF16, "kda bwd chunk kernel: io dtype must be bf16 or fp16");
  if (p.f.BT == 64) {
    bf ? launch_bt<__nv_bfloat16, 64>(p, w, stream) : launch_bt<__half, 64>(p, w, stream);
  } else if (p.f.BT == 32) {
    bf ? launch_bt<__nv_bfloat16, 32>(p, w, stream) : launch_bt<__half, 32>(p, w, stream);
  } else {
    LINATTN_UNSUPPORTED("kda bwd chunk kernel: chunk_size ", p.f.BT, " (supported: 32, 64)");
  }
}

void launch_kda_bwd_gate_reduce(const GdnBwdParams& p, const float* part, int64_t rows, const int32_t* count,
                                cudaStream_t stream) {
  if (!p.dA_log.p && !p.ddt_bias.p) return;
  launch(kda_bwd_gate_reduce_kernel, dim3(p.f.HV), dim3(kK), 0, stream, p, part, rows, count);
}

}  // namespace linattn::cuda
