// Token-by-token GDN backward (ALGORITHMS.md section 2 recurrence, differentiated per token): the
// fallback for every shape the chunked backward does not take (any K, V <= 256, fp32 inputs,
// BT = 16, unaligned pointers), fp32 throughout. One CTA of 256 threads per (value head j,
// sequence n). Forward pass: the state entering every chunk of BT tokens is checkpointed (fp32).
// Reverse pass, token t (last to first): the state before t is recomputed from its chunk's
// checkpoint (O(BT) token steps), then with Sd = e^g S, e = v - Sd^T k, S_t = Sd + beta k e^T,
// o = scale S_t^T q and the running dS = d S_t:
//   dS += scale q do^T;  s = dS^T k;  dv = de = beta s;  dbeta = e . s
//   dq = scale S_t do;   dk = beta dS e - Sd de;  dSd = dS - k de^T;  dg = e^g <S, dSd>;  dS = e^g dSd
// dq / dk are w.r.t. the normalised q / k, per value head, into fp32 rows that the finish kernel
// sums over the group (in order) and passes through the L2-norm backward. State and dS live in
// shared memory when they fit (K x V <= 128 x 128), else in the per-task global scratch.
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_bwd_common.cuh"

namespace linattn::cuda {
namespace {

constexpr int kTT = 256, kTW = kTT / 32;
constexpr size_t kStateInSmemMax = 2 * 128 * 128 * sizeof(float);

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
  return v;
}

// k (and q when `with_q`) of token t, normalised when asked, and v (and d_o) into shared memory.
__device__ __forceinline__ void stage_token(const GdnBwdParams& p, int64_t t, int j, int h, float* qs, float* ks,
                                            float* vs, float* dos, bool with_q, int tid) {
  const GdnFwdParams& f = p.f;
  const int warp = tid >> 5, lane = tid & 31;
  if (warp < 2 && (warp == 0 || with_q)) {
    const void* src = warp == 0 ? f.k : f.q;
    float* dst = warp == 0 ? ks : qs;
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
    for (int i = lane; i < f.V; i += 32) vs[i] = load_elem(f.v, f.io, (t * f.HV + j) * int64_t(f.V) + i);
  } else if (warp == 3 && with_q) {
    for (int i = lane; i < f.V; i += 32) dos[i] = load_elem(p.d_o, p.do_type, (t * f.HV + j) * int64_t(f.V) + i);
  }
  __syncthreads();
}

// S <- e^g S + beta k (v - e^g S^T k)^T for token t (k, v staged).
__device__ __forceinline__ void fwd_step(const GdnFwdParams& f, int64_t t, int j, float* S, const float* ks,
                                         const float* vs, int tid) {
  const float a = expf(gdn_gate(f, t, j)), b = gdn_beta(f, t, j);
  for (int vv = tid; vv < f.V; vv += kTT) {
    float dot = 0.f;
    for (int kk = 0; kk < f.K; ++kk) dot += S[kk * f.V + vv] * ks[kk];
    const float be = b * (vs[vv] - a * dot);
    for (int kk = 0; kk < f.K; ++kk) S[kk * f.V + vv] = a * S[kk * f.V + vv] + ks[kk] * be;
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kTT) gdn_bwd_token_kernel(GdnBwdParams p, GdnBwdTokenWs w, bool state_in_smem) {
  extern __shared__ float sm[];
  const GdnFwdParams& f = p.f;
  const int K = f.K, V = f.V, BT = f.BT;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int j = blockIdx.x, h = j / (f.HV / f.H);
  const int64_t n = blockIdx.y;
  float* qs = sm;
  float* ks = qs + K;
  float* vs = ks + K;
  float* dos = vs + V;
  float* es = dos + V;
  float* des = es + V;
  float* ssv = des + V;
  float* red = ssv + V;  // [2 * kTW]
  const int64_t KV = int64_t(K) * V;
  float* S = state_in_smem ? red + 2 * kTW : w.scr + (n * f.HV + j) * 2 * KV;
  float* dS = S + KV;
  int64_t bos, eos;
  seq_bounds(f, n, bos, eos);
  const int64_t nck = (eos - bos + BT - 1) / BT;
  const int64_t rbase = chunk_row_base(w.chunk_offsets, w.nts, n);
  const bool ck_ok = rbase + nck <= w.nt_cap;  // always for valid layouts

  for (int64_t i = tid; i < KV; i += kTT)
    S[i] = f.h0 ? load_elem(f.h0, f.h0_type, state_index(f, n, j, int(i / V), int(i % V))) : 0.f;
  __syncthreads();
  for (int64_t t = bos; t < eos && ck_ok; ++t) {
    if ((t - bos) % BT == 0) {
      float* ck = w.ck + ((rbase + (t - bos) / BT) * f.HV + j) * KV;
      for (int64_t i = tid; i < KV; i += kTT) ck[i] = S[i];
    }
    stage_token(p, t, j, h, qs, ks, vs, dos, false, tid);
    fwd_step(f, t, j, S, ks, vs, tid);
  }

  for (int64_t i = tid; i < KV; i += kTT)
    dS[i] = p.dht ? load_elem(p.dht, p.dht_type, state_index(f, n, j, int(i / V), int(i % V))) : 0.f;
  float pA = 0.f, pT = 0.f;  // thread 0: gate partials in token order
  for (int64_t c = nck - 1; c >= 0 && ck_ok; --c) {
    const int64_t tc0 = bos + c * BT, tc1 = min(eos, tc0 + BT);
    const float* ck = w.ck + ((rbase + c) * f.HV + j) * KV;
    for (int64_t t = tc1 - 1; t >= tc0; --t) {
      __syncthreads();
      for (int64_t i = tid; i < KV; i += kTT) S[i] = ck[i];
      __syncthreads();
      for (int64_t u = tc0; u < t; ++u) {
        stage_token(p, u, j, h, qs, ks, vs, dos, false, tid);
        fwd_step(f, u, j, S, ks, vs, tid);
      }
      stage_token(p, t, j, h, qs, ks, vs, dos, true, tid);
      const float a = expf(gdn_gate(f, t, j)), b = gdn_beta(f, t, j);
      for (int vv = tid; vv < V; vv += kTT) {
        float dot = 0.f, sacc = 0.f;
        const float sdo = f.scale * dos[vv];
        for (int kk = 0; kk < K; ++kk) {
          dot += S[kk * V + vv] * ks[kk];
          const float d = dS[kk * V + vv] + qs[kk] * sdo;
          dS[kk * V + vv] = d;
          sacc += d * ks[kk];
        }
        es[vv] = vs[vv] - a * dot;
        ssv[vv] = sacc;
        des[vv] = b * sacc;
        if (p.dv.p) store_out(p.dv.p, p.dv.t, (t * f.HV + j) * int64_t(V) + vv, b * sacc);
      }
      __syncthreads();
      for (int kk = warp; kk < K; kk += kTW) {
        float dq = 0.f, dk = 0.f;
        for (int vv = lane; vv < V; vv += 32) {
          const float sp = S[kk * V + vv];
          dq += (a * sp + b * ks[kk] * es[vv]) * dos[vv];
          dk += b * dS[kk * V + vv] * es[vv] - a * sp * des[vv];
        }
        dq = warp_sum(dq);
        dk = warp_sum(dk);
        if (lane == 0) {
          w.dqh[(t * f.HV + j) * K + kk] = f.scale * dq;
          w.dkh[(t * f.HV + j) * K + kk] = dk;
        }
      }
      __syncthreads();
      float da = 0.f, db = 0.f;
      for (int64_t i = tid; i < KV; i += kTT) {
        const int kk = int(i / V), vv = int(i % V);
        const float dsd = dS[i] - ks[kk] * des[vv];
        da += S[i] * dsd;
        dS[i] = a * dsd;
      }
      for (int vv = tid; vv < V; vv += kTT) db += es[vv] * ssv[vv];
      da = warp_sum(da);
      db = warp_sum(db);
      if (lane == 0) {
        red[2 * warp] = da;
        red[2 * warp + 1] = db;
      }
      __syncthreads();
      if (tid == 0) {
        float sa = 0.f, sb = 0.f;
        for (int i = 0; i < kTW; ++i) {
          sa += red[2 * i];
          sb += red[2 * i + 1];
        }
        const float dg = a * sa;
        const GateDeriv gd = gdn_gate_deriv(f, t, j);
        const float dgo = dg * gd.draw;
        if (f.gate_in_kernel) {
          pA += dg * gd.dA;
          pT += dgo;
        }
        if (p.dg.p) store_out(p.dg.p, p.dg.t, t * f.HV + j, dgo);
        if (p.dbeta.p) store_out(p.dbeta.p, p.dbeta.t, t * f.HV + j, sb * gdn_beta_draw(f, t, j));
      }
    }
  }
  __syncthreads();
  if (p.dh0.p)
    for (int64_t i = tid; i < KV; i += kTT)
      store_out(p.dh0.p, p.dh0.t, state_index(f, n, j, int(i / V), int(i % V)), dS[i]);
  if (tid == 0) {
    w.part[(n * f.HV + j) * 2] = pA;
    w.part[(n * f.HV + j) * 2 + 1] = pT;
  }
}

// Warp per (row t < end, q/k head h): sum of the G value-head rows in order, L2-norm backward
// with the raw row (dx = r dy - r^3 (dy . x) x), store. K <= 256: 8 elements per lane.
__global__ void __launch_bounds__(256) gdn_bwd_token_finish_kernel(GdnBwdParams p, GdnBwdTokenWs w) {
  const GdnFwdParams& f = p.f;
  const int K = f.K, G = f.HV / f.H;
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
    const float* acc = (which ? w.dkh : w.dqh) + (t * f.HV + int64_t(h) * G) * K;
    const void* src = which ? f.k : f.q;
    float s[8], x[8], ss = 0.f, dot = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int kk = lane + 32 * i;
      s[i] = x[i] = 0.f;
      if (kk < K) {
        for (int gi = 0; gi < G; ++gi) s[i] += acc[int64_t(gi) * K + kk];
        x[i] = load_elem(src, f.io, (t * f.H + h) * K + kk);
        ss += x[i] * x[i];
        dot += s[i] * x[i];
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
      if (kk < K) store_out(out.p, out.t, (t * f.H + h) * K + kk, r * s[i] - c3 * x[i]);
    }
  }
}

}  // namespace

void launch_gdn_bwd_token(const GdnBwdParams& p, const GdnBwdTokenWs& w, cudaStream_t stream) {
  const size_t base = (2 * size_t(p.f.K) + 5 * size_t(p.f.V) + 2 * kTW) * sizeof(float);
  const size_t state = 2 * size_t(p.f.K) * p.f.V * sizeof(float);
  const bool in_smem = state <= kStateInSmemMax;
  launch(gdn_bwd_token_kernel, dim3(p.f.HV, p.f.N), dim3(kTT), base + (in_smem ? state : 0), stream, p, w,
         in_smem);
}

void launch_gdn_bwd_token_finish(const GdnBwdParams& p, const GdnBwdTokenWs& w, cudaStream_t stream) {
  if (!p.dq.p && !p.dk.p) return;
  launch(gdn_bwd_token_finish_kernel, dim3(264), dim3(256), 0, stream, p, w);
}

}  // namespace linattn::cuda
