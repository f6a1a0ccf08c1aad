// Token-by-token GDN / KDA backward (ALGORITHMS.md section 2 recurrence, differentiated per
// token), fp32 throughout: the fallback of every shape the chunked GDN / KDA backward does not take
// (and KDA with LINATTN_CUDA_KDA_BWD=token). The gate policy (f.kda, bwd_gate_width) is the only difference: a scalar decay per token
// (GDN, width 1) or one per key channel (KDA, width K); the kernel always works with a per-row
// decay a[kk] = e^g[kk] (the scalar repeated), so both share every line.
// CTA (value head j, V-slice sl, sequence n), 256 threads = 8 row groups x 32 columns: thread
// (kg, lane) holds state rows kk = kg + 8 i (i < R) of column v0 + lane in registers (S and dS).
// Columns are independent in the recurrence, so slices need no communication; the row sums
// (dq, dk, the gate rows) are per-slice partials that the finish kernels add in a fixed order.
// Forward pass: the state entering every chunk of BT tokens is checkpointed (fp32). Reverse
// pass per chunk: the chunk's states are recomputed once from its checkpoint into a per-CTA
// cache (BT states), then tokens run last to first. With Sd = diag(a) S, e = v - Sd^T k,
// S_t = Sd + beta k e^T, o = scale S_t^T q and the running dS = d S_t:
//   dS += scale q do^T;  s = dS^T k;  dv = de = beta s;  dbeta = e . s
//   dq = scale S_t do;   dk = beta dS e - Sd de;  dSd = dS - k de^T
//   dg[kk] = a[kk] <S[kk,:], dSd[kk,:]>;  dS = diag(a) dSd
// dq / dk are w.r.t. the normalised q / k. Gates of -1000 give a = 0 exactly (no division
// anywhere), so every gate down to -inf is finite. Inputs of a token are staged into one of two
// shared buffers (two barriers per token). K <= 256, V <= 256.
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_bwd_common.cuh"

namespace linattn::cuda {
namespace {

constexpr int kTT = 256, kKG = kTT / 32, kVS = 32, kKMax = 256;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
  return v;
}

struct TokBuf {
  float q[kKMax], k[kKMax], a[kKMax];
  float v[kVS], d[kVS];
  float beta;
};

struct TokSmem {
  TokBuf buf[2];
  float red[kKG][kVS][2];
};

// Inputs of token t into b (q and d_o only when `with_q`): normalised q / k rows, the per-row
// decays a[kk], the V-slice of v (and d_o), beta. The caller synchronises before using them.
__device__ __forceinline__ void stage_token(const GdnBwdParams& p, TokBuf& b, int64_t t, int j, int h, int v0,
                                            bool with_q, int warp, int lane) {
  const GdnFwdParams& f = p.f;
  if (warp < 2) {
    if (warp == 1 && !with_q) return;
    const void* src = warp == 0 ? f.k : f.q;
    float* dst = warp == 0 ? b.k : b.q;
    float ss = 0.f;
    for (int i = lane; i < f.K; i += 32) {
      const float x = load_elem(src, f.io, (t * f.H + h) * f.K + i);
      dst[i] = x;
      ss += x * x;
    }
    ss = warp_sum(ss);
    if (f.l2norm) {
      const float r = rsqrtf(ss + 1e-6f);
      for (int i = lane; i < f.K; i += 32) dst[i] *= r;
    }
  } else if (warp == 2) {
    if (!p.f.kda) {
      const float a = expf(bwd_gate_deriv(p, t, j, 0).g);
      for (int i = lane; i < f.K; i += 32) b.a[i] = a;
    } else {
      for (int i = lane; i < f.K; i += 32) b.a[i] = expf(bwd_gate_deriv(p, t, j, i).g);
    }
  } else if (warp == 3) {
    const int v = v0 + lane;
    const int64_t o = (t * f.HV + j) * int64_t(f.V) + v;
    b.v[lane] = v < f.V ? load_elem(f.v, f.io, o) : 0.f;
    b.d[lane] = with_q && v < f.V ? load_elem(p.d_o, p.do_type, o) : 0.f;
    if (lane == 0) b.beta = gdn_beta(f, t, j);
  }
}

// S <- diag(a) S + beta k (v - (diag(a) S)^T k)^T for the staged token (b visible to all).
template <int R>
__device__ __forceinline__ void fwd_step(float (&S)[R], const TokBuf& b, TokSmem& s, int K, int kg, int lane) {
  float part = 0.f;
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const int kk = kg + kKG * i;
    if (kk < K) part += b.a[kk] * S[i] * b.k[kk];
  }
  s.red[kg][lane][0] = part;
  __syncthreads();
  float dot = 0.f;
#pragma unroll
  for (int g = 0; g < kKG; ++g) dot += s.red[g][lane][0];
  const float be = b.beta * (b.v[lane] - dot);
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const int kk = kg + kKG * i;
    if (kk < K) S[i] = b.a[kk] * S[i] + b.k[kk] * be;
  }
}

template <int R>
__global__ void __launch_bounds__(kTT) gdn_bwd_token_kernel(GdnBwdParams p, GdnBwdTokenWs w) {
  __shared__ TokSmem s;
  const GdnFwdParams& f = p.f;
  const int K = f.K, V = f.V, BT = f.BT, ns = w.ns;
  const int tid = threadIdx.x, kg = tid >> 5, lane = tid & 31;
  const int j = blockIdx.x / ns, sl = blockIdx.x % ns, h = j / (f.HV / f.H), v0 = sl * kVS, v = v0 + lane;
  const int64_t n = blockIdx.y;
  int64_t bos, eos;
  seq_bounds(f, n, bos, eos);
  const int64_t nck = (eos - bos + BT - 1) / BT;
  const int64_t rbase = chunk_row_base(w.chunk_offsets, w.nts, n);
  if (rbase + nck > w.nt_cap) return;  // never for valid layouts (capacity covers every chunk)
  const int64_t KV = int64_t(K) * V;
  float* cache = w.cache + ((n * f.HV + j) * ns + sl) * int64_t(BT) * K * kVS;

  float S[R], dS[R];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const int kk = kg + kKG * i;
    const bool ok = kk < K && v < V;
    S[i] = ok && f.h0 ? load_elem(f.h0, f.h0_type, state_index(f, n, j, kk, v)) : 0.f;
    dS[i] = ok && p.dht ? load_elem(p.dht, p.dht_type, state_index(f, n, j, kk, v)) : 0.f;
  }
  int par = 0;
  for (int64_t t = bos; t < eos; ++t) {
    if ((t - bos) % BT == 0 && v < V) {
      float* ck = w.ck + ((rbase + (t - bos) / BT) * f.HV + j) * KV + v;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const int kk = kg + kKG * i;
        if (kk < K) ck[int64_t(kk) * V] = S[i];
      }
    }
    stage_token(p, s.buf[par], t, j, h, v0, false, kg, lane);
    __syncthreads();
    fwd_step<R>(S, s.buf[par], s, K, kg, lane);
    par ^= 1;
  }

  for (int64_t c = nck - 1; c >= 0; --c) {
    const int64_t tc0 = bos + c * BT, tc1 = min(eos, tc0 + BT);
    const float* ck = w.ck + ((rbase + c) * f.HV + j) * KV + v;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int kk = kg + kKG * i;
      S[i] = kk < K && v < V ? ck[int64_t(kk) * V] : 0.f;
    }
    // States entering each token of the chunk (each thread re-reads only what it wrote).
    for (int64_t t = tc0; t < tc1; ++t) {
      float* cs = cache + (t - tc0) * K * kVS;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const int kk = kg + kKG * i;
        if (kk < K) cs[kk * kVS + lane] = S[i];
      }
      if (t + 1 == tc1) break;
      stage_token(p, s.buf[par], t, j, h, v0, false, kg, lane);
      __syncthreads();
      fwd_step<R>(S, s.buf[par], s, K, kg, lane);
      par ^= 1;
    }
    for (int64_t t = tc1 - 1; t >= tc0; --t) {
      const float* cs = cache + (t - tc0) * K * kVS;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const int kk = kg + kKG * i;
        S[i] = kk < K ? cs[kk * kVS + lane] : 0.f;
      }
      TokBuf& b = s.buf[par];
      stage_token(p, b, t, j, h, v0, true, kg, lane);
      __syncthreads();
      const float sdo = f.scale * b.d[lane];
      float ps = 0.f, pd = 0.f;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const int kk = kg + kKG * i;
        if (kk >= K) continue;
        dS[i] += b.q[kk] * sdo;
        ps += dS[i] * b.k[kk];
        pd += b.a[kk] * S[i] * b.k[kk];
      }
      s.red[kg][lane][0] = ps;
      s.red[kg][lane][1] = pd;
      __syncthreads();
      float sv = 0.f, dot = 0.f;
#pragma unroll
      for (int g = 0; g < kKG; ++g) {
        sv += s.red[g][lane][0];
        dot += s.red[g][lane][1];
      }
      const float bb = b.beta, e = b.v[lane] - dot, de = bb * sv;
      const int64_t row = (t * f.HV + j) * ns + sl;
      if (kg == 0) {
        if (p.dv.p && v < V) store_out(p.dv.p, p.dv.t, (t * f.HV + j) * int64_t(V) + v, de);
        const float db = warp_sum(e * sv);
        if (lane == 0) w.dbh[row] = db;
      }
      float* dqr = w.dqh + row * K;
      float* dkr = w.dkh + row * K;
      float* dgr = w.dgh + row * K;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const int kk = kg + kKG * i;
        if (kk >= K) continue;
        const float a = b.a[kk], kv = b.k[kk], sp = S[i];
        const float dq = warp_sum((a * sp + bb * kv * e) * b.d[lane]);
        const float dk = warp_sum(bb * dS[i] * e - a * sp * de);
        const float dsd = dS[i] - kv * de;
        const float dg = warp_sum(sp * dsd);
        dS[i] = a * dsd;
        if (lane == 0) {
          dqr[kk] = f.scale * dq;
          dkr[kk] = dk;
          dgr[kk] = a * dg;
        }
      }
      par ^= 1;
    }
  }
  if (p.dh0.p && v < V) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int kk = kg + kKG * i;
      if (kk < K) store_out(p.dh0.p, p.dh0.t, state_index(f, n, j, kk, v), dS[i]);
    }
  }
}

// Warp per (row t < end, q/k head h): sum of the G x ns (value head, V-slice) rows in order,
// L2-norm backward with the raw row (dx = r dy - r^3 (dy . x) x), store. K <= 256.
__global__ void __launch_bounds__(256) gdn_bwd_token_finish_kernel(GdnBwdParams p, GdnBwdTokenWs w) {
  const GdnFwdParams& f = p.f;
  const int K = f.K, G = f.HV / f.H, rows = G * w.ns;
  int64_t end = f.T_total;
  if (f.cu_seqlens) end = min(max(load_cu(f.cu_seqlens, f.cu_i64, f.N), int64_t(0)), f.T_total);
  const int lane = threadIdx.x & 31;
  const int64_t nwarps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; item < end * f.H * 2; item += nwarps) {
    const int which = int(item % 2);  // 0: dq, 1: dk
    const int64_t rh = item / 2, t = rh / f.H;
    const int h = int(rh % f.H);
    const GradOut& out = which ? p.dk : p.dq;
    if (!out.p) continue;
    const float* acc = (which ? w.dkh : w.dqh) + (t * f.HV + int64_t(h) * G) * w.ns * K;
    const void* src = which ? f.k : f.q;
    float sum[8], x[8], ss = 0.f, dot = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int kk = lane + 32 * i;
      sum[i] = x[i] = 0.f;
      if (kk < K) {
        for (int gi = 0; gi < rows; ++gi) sum[i] += acc[int64_t(gi) * K + kk];
        x[i] = load_elem(src, f.io, (t * f.H + h) * K + kk);
        ss += x[i] * x[i];
        dot += sum[i] * x[i];
      }
    }
    float r = 1.f, c3 = 0.f;
    if (f.l2norm) {
      r = rsqrtf(warp_sum(ss) + 1e-6f);
      c3 = r * r * r * warp_sum(dot);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int kk = lane + 32 * i;
      if (kk < K) store_out(out.p, out.t, (t * f.H + h) * K + kk, r * sum[i] - c3 * x[i]);
    }
  }
}

// Block (64-token block tb, value head j): dg and dbeta of its valid tokens, and the gate
// partials of the block per channel in token order: part[tb, j, c] = (sum dg dA, sum dg_raw).
// Channel c < width is thread c; with the scalar gate the K x ns row sums are split over the
// block and added in a fixed tree.
__global__ void __launch_bounds__(256) gdn_bwd_token_gate_kernel(GdnBwdParams p, GdnBwdTokenWs w) {
  __shared__ float red[256];
  const GdnFwdParams& f = p.f;
  const int W = bwd_gate_width(f), K = f.K, ns = w.ns, j = blockIdx.y, tid = threadIdx.x;
  int64_t end = f.T_total;
  if (f.cu_seqlens) end = min(max(load_cu(f.cu_seqlens, f.cu_i64, f.N), int64_t(0)), f.T_total);
  const int64_t tb = blockIdx.x, t0 = tb * 64, t1 = min(end, t0 + 64);
  float pA = 0.f, pT = 0.f;
  for (int64_t t = t0; t < t1; ++t) {
    const float* dgr = w.dgh + (t * f.HV + j) * int64_t(ns) * K;
    float dg = 0.f;
    if (W == 1) {
      for (int i = tid; i < ns * K; i += 256) dg += dgr[i];
      red[tid] = dg;
      __syncthreads();
      for (int d = 128; d > 0; d >>= 1) {
        if (tid < d) red[tid] += red[tid + d];
        __syncthreads();
      }
      dg = red[0];
      __syncthreads();
    } else if (tid < W) {
      for (int sl = 0; sl < ns; ++sl) dg += dgr[sl * K + tid];
    }
    if (tid < W) {
      const GateDeriv gd = bwd_gate_deriv(p, t, j, tid);
      const float dgo = dg * gd.draw;
      pA += dg * gd.dA;
      pT += dgo;
      if (p.dg.p) store_out(p.dg.p, p.dg.t, (t * f.HV + j) * W + tid, dgo);
    }
    if (tid == 0 && p.dbeta.p) {
      float db = 0.f;
      for (int sl = 0; sl < ns; ++sl) db += w.dbh[(t * f.HV + j) * ns + sl];
      store_out(p.dbeta.p, p.dbeta.t, t * f.HV + j, db * gdn_beta_draw(f, t, j));
    }
  }
  if (tid < W) {
    float* o = w.part + ((tb * f.HV + j) * W + tid) * 2;
    o[0] = pA;
    o[1] = pT;
  }
}

// Block per value head: dA_log[j] = sum over blocks, then channels, of part[., j, ., 0];
// ddt_bias[j, c] = sum over blocks of part[., j, c, 1]; both in a fixed order (double).
__global__ void __launch_bounds__(256) gdn_bwd_token_gate_reduce_kernel(GdnBwdParams p, GdnBwdTokenWs w,
                                                                        int64_t blocks) {
  __shared__ double red[256];
  const int W = bwd_gate_width(p.f), j = blockIdx.x, tid = threadIdx.x;
  double a = 0.0, b = 0.0;
  if (tid < W) {
    for (int64_t tb = 0; tb < blocks; ++tb) {
      const float* o = w.part + ((tb * p.f.HV + j) * W + tid) * 2;
      a += o[0];
      b += o[1];
    }
    if (p.ddt_bias.p) store_out(p.ddt_bias.p, p.ddt_bias.t, j * W + tid, static_cast<float>(b));
  }
  red[tid] = a;
  __syncthreads();
  if (tid == 0 && p.dA_log.p) {
    double s = 0.0;
    for (int c = 0; c < W; ++c) s += red[c];
    store_out(p.dA_log.p, p.dA_log.t, j, static_cast<float>(s));
  }
}

}  // namespace

int gdn_bwd_token_slices(int V) { return (V + kVS - 1) / kVS; }

void launch_gdn_bwd_token(const GdnBwdParams& p, const GdnBwdTokenWs& w, cudaStream_t stream) {
  const int K = p.f.K;
  LINATTN_CHECK(K <= kKMax && p.f.V <= 256, "gdn bwd token: K = ", K, ", V = ", p.f.V, " (supported: <= 256)");
  LINATTN_CHECK(w.ns == gdn_bwd_token_slices(p.f.V), "gdn bwd token: ", w.ns, " V-slices for V = ", p.f.V);
  const dim3 grid(p.f.HV * w.ns, p.f.N);
  if (K <= 32) launch(gdn_bwd_token_kernel<4>, grid, dim3(kTT), 0, stream, p, w);
  else if (K <= 64) launch(gdn_bwd_token_kernel<8>, grid, dim3(kTT), 0, stream, p, w);
  else if (K <= 128) launch(gdn_bwd_token_kernel<16>, grid, dim3(kTT), 0, stream, p, w);
  else launch(gdn_bwd_token_kernel<32>, grid, dim3(kTT), 0, stream, p, w);
}

void launch_gdn_bwd_token_finish(const GdnBwdParams& p, const GdnBwdTokenWs& w, cudaStream_t stream) {
  if (p.dq.p || p.dk.p) launch(gdn_bwd_token_finish_kernel, dim3(264), dim3(256), 0, stream, p, w);
  const int64_t blocks = (p.f.T_total + 63) / 64;
  LINATTN_CHECK(bwd_gate_width(p.f) <= 256, "gdn bwd token: gate width ", bwd_gate_width(p.f), " (supported: <= 256)");
  launch(gdn_bwd_token_gate_kernel, dim3(static_cast<unsigned>(blocks), p.f.HV), dim3(256), 0, stream, p, w);
  if (p.dA_log.p || p.ddt_bias.p)
    launch(gdn_bwd_token_gate_reduce_kernel, dim3(p.f.HV), dim3(256), 0, stream, p, w, blocks);
}

}  // namespace linattn::cuda
