// The two sweeps of one (sequence, value head) task of the CPU chunk backward (bwd_worker.h).
// Forward sweep, per chunk: V^ = A^-1 (beta v) - W S_c, stored with S_c^T in the chunk's slot,
// then S <- Diag(e^gamL) S + kg^T V^. Reverse sweep, per chunk with dS = dS_{c+1} resident:
// dV^, dq / dk inter terms, dS <- Diag(e^gamL) dS + scale qg^T dO - W^T dV^, the WY backward
// (X, Y, dA, dL) and the intra terms (bwd_intra.cc), then dgam -> dg by a reverse cumsum.
#include "cpu/bwd_worker.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/bwd_blas.h"
#include "core/check.h"
#include "cpu/bwd_io.h"

namespace linattn::cpu::bwd {
namespace {

struct Carver {
  float* base;
  size_t used = 0;
  float* take(size_t n) {  // every buffer starts on a 16-float (64-byte) boundary
    float* p = base ? base + used : nullptr;
    used += (n + 15) / 16 * 16;
    return p;
  }
};

float sigmoidf(float x) {
  if (x >= 0) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

}  // namespace

void scale_rows(int n, int cols, const float* f, int gw, const float* src, float* dst) {
  for (int i = 0; i < n; ++i) {
    const float* s = src + static_cast<int64_t>(i) * cols;
    float* d = dst + static_cast<int64_t>(i) * cols;
    if (gw == 1) {
      const float a = f[i];
      for (int c = 0; c < cols; ++c) d[c] = a * s[c];
    } else {
      const float* a = f + static_cast<int64_t>(i) * gw;
      for (int c = 0; c < cols; ++c) d[c] = a[c] * s[c];
    }
  }
}

size_t carve_worker(const ChunkBwdParams& p, int64_t max_chunks, float* base, WorkerBufs* o) {
  Carver c{base};
  const size_t BT = p.f.BT, K = p.f.K, V = p.f.V, gw = p.gate_width();
  const size_t mx = std::max({K, V, BT});
  o->q = c.take(BT * K);
  o->k = c.take(BT * K);
  o->v = c.take(BT * V);
  o->dout = c.take(BT * V);
  o->q_rstd = c.take(BT);
  o->k_rstd = c.take(BT);
  o->beta = c.take(BT);
  o->dbeta_draw = c.take(BT);
  o->g = c.take(BT * gw);
  o->dg_draw = c.take(BT * gw);
  o->dg_dA = c.take(BT * gw);
  o->gam = reinterpret_cast<double*>(c.take(2 * BT * gw));
  o->eg = c.take(BT * gw);
  o->egl = c.take(BT * gw);
  o->egL = c.take(gw);
  o->D = c.take(BT * BT);
  o->earg = c.take(BT * std::max(K, BT));
  o->kbg = c.take(BT * K);
  o->kg = c.take(BT * K);
  o->qg = c.take(BT * K);
  o->vb = c.take(BT * V);
  o->aqk = c.take(BT * BT);
  o->L = c.take(BT * BT);
  o->ainv = c.take(BT * BT);
  o->w = c.take(BT * K);
  o->dvh = c.take(BT * V);
  o->dq = c.take(BT * K);
  o->dk = c.take(BT * K);
  o->dw = c.take(BT * K);
  o->x = c.take(BT * K);
  o->y = c.take(BT * V);
  o->dka = c.take(BT * K);
  o->r = c.take(BT * K);
  o->daqk = c.take(BT * BT);
  o->dA = c.take(BT * BT);
  o->dL = c.take(BT * BT);
  o->t1 = c.take(BT * BT);
  o->dgam = c.take(BT * K);
  o->dbeta = c.take(BT);
  o->dgtok = c.take(BT * gw);
  o->tmp = c.take(mx * mx);
  o->S = c.take(K * V);
  o->dS = c.take(K * V);
  o->slots = c.take(static_cast<size_t>(max_chunks) * (V * K + BT * V));
  return c.used;
}

Worker::Worker(const ChunkBwdParams& p, float* mem, int64_t max_chunks, float* dqk_acc)
    : p_(p), K_(static_cast<int>(p.f.K)), V_(static_cast<int>(p.f.V)), BT_(p.f.BT),
      gw_(static_cast<int>(p.gate_width())), max_chunks_(max_chunks), dqk_acc_(dqk_acc) {
  carve_worker(p, max_chunks, mem, &b_);
}

void Worker::load(int64_t row0, int n, bool bwd) {
  const int64_t H = p_.f.H, HV = p_.f.HV, K = K_, V = V_, gw = gw_;
  auto qk = [&](const BwdBuf& src, float* dst, float* rstd) {
    load_rows(src, (row0 * H + hq_) * K, H * K, n, K_, dst, K_);
    if (!p_.f.l2norm) return;
    for (int i = 0; i < n; ++i) {
      float* x = dst + i * K;
      float ss = 0;
      for (int c = 0; c < K_; ++c) ss += x[c] * x[c];
      const float r = 1.0f / std::sqrt(ss + 1e-6f);
      rstd[i] = r;
      for (int c = 0; c < K_; ++c) x[c] *= r;
    }
  };
  qk(p_.k(), b_.k, b_.k_rstd);
  load_rows(p_.v(), (row0 * HV + hv_) * V, HV * V, n, V_, b_.v, V_);
  load_rows(p_.beta(), row0 * HV + hv_, HV, n, 1, b_.beta, 1);
  if (p_.f.beta_sigmoid) {
    const float c = p_.f.neg_eigval ? 2.0f : 1.0f;
    for (int i = 0; i < n; ++i) {
      const float s = sigmoidf(b_.beta[i]);
      b_.beta[i] = c * s;
      b_.dbeta_draw[i] = c * s * (1.0f - s);
    }
  }
  load_rows(p_.g(), (row0 * HV + hv_) * gw, HV * gw, n, gw_, b_.g, gw_);
  if (p_.f.gate_in_kernel) {
    const bool lb = p_.f.kda && p_.f.has_lower_bound;
    const float A = p_.f.A_log ? p_.f.A_log[hv_] : 0.0f;
    const float a = p_.f.A_log ? std::exp(A) : 1.0f;
    const float* bias = p_.f.dt_bias ? p_.f.dt_bias + hv_ * gw : nullptr;
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < gw_; ++c) {
        const int64_t gi = i * gw + c;
        const float x = b_.g[gi] + (bias ? bias[c] : 0.0f);
        if (!lb) {  // -exp(A_log) softplus(x), softplus = identity above 20
          const float sp = x > 20.0f ? x : std::log1p(std::exp(x));
          b_.g[gi] = -a * sp;
          b_.dg_draw[gi] = -a * (x > 20.0f ? 1.0f : sigmoidf(x));
          b_.dg_dA[gi] = b_.g[gi];
        } else {  // lower_bound * sigmoid(a x)
          const float s = sigmoidf(a * x), ds = p_.f.lower_bound * s * (1.0f - s);
          b_.g[gi] = p_.f.lower_bound * s;
          b_.dg_draw[gi] = ds * a;
          b_.dg_dA[gi] = p_.f.A_log ? ds * a * x : 0.0f;
        }
      }
  }
  if (!bwd) return;
  qk(p_.q(), b_.q, b_.q_rstd);
  load_rows(p_.d_o, (row0 * HV + hv_) * V, HV * V, n, V_, b_.dout, V_);
}

void Worker::gates(int n) {
  const int gw = gw_;
  for (int c = 0; c < gw; ++c) {
    double s = 0;
    for (int i = 0; i < n; ++i) {
      s += b_.g[i * gw + c];
      b_.gam[i * gw + c] = s;
    }
  }
  const double* last = b_.gam + (n - 1) * gw;
  for (int i = 0; i < n * gw; ++i) b_.earg[i] = static_cast<float>(b_.gam[i]);
  vexp(n * gw, b_.earg, b_.eg);
  for (int c = 0; c < gw; ++c) b_.egL[c] = b_.eg[(n - 1) * gw + c];
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < gw; ++c) b_.earg[i * gw + c] = static_cast<float>(last[c] - b_.gam[i * gw + c]);
  vexp(n * gw, b_.earg, b_.egl);
  if (p_.f.kda) return;
  for (int i = 0; i < n; ++i) {
    float* a = b_.earg + i * BT_;
    for (int j = 0; j < n; ++j) a[j] = j <= i ? static_cast<float>(b_.gam[i] - b_.gam[j]) : -1e4f;
  }
  for (int i = 0; i < n; ++i) vexp(n, b_.earg + i * BT_, b_.D + i * BT_);
}

void Worker::solve(int n) {
  float* A = b_.ainv;
  const float* L = b_.L;
  for (int i = 0; i < n; ++i) {
    float* row = A + i * BT_;
    for (int j = 0; j < n; ++j) row[j] = 0.0f;
    for (int m = 0; m < i; ++m) {
      const float l = -L[i * BT_ + m];
      const float* am = A + m * BT_;
      for (int j = 0; j <= m; ++j) row[j] += l * am[j];
    }
    row[i] = 1.0f;
  }
}

void Worker::prepare(int64_t row0, int n, bool bwd) {
  load(row0, n, bwd);
  gates(n);
  scale_rows(n, K_, b_.eg, gw_, b_.k, b_.kbg);
  for (int i = 0; i < n; ++i) {
    float* r = b_.kbg + i * K_;
    for (int c = 0; c < K_; ++c) r[c] *= b_.beta[i];
    const float* v = b_.v + i * V_;
    float* vb = b_.vb + i * V_;
    for (int c = 0; c < V_; ++c) vb[c] = b_.beta[i] * v[c];
  }
  scale_rows(n, K_, b_.egl, gw_, b_.k, b_.kg);
  if (bwd) scale_rows(n, K_, b_.eg, gw_, b_.q, b_.qg);
  intra_fwd(n, bwd);
  solve(n);
  gemm(n, K_, n, 1.0f, b_.ainv, BT_, false, b_.kbg, K_, b_.w, K_, false);
}

void Worker::fwd_chunk(int n, float* S, float* slot_st, float* slot_vh, bool update_state) {
  // V^ = A^-1 (beta v) - W S
  gemm(n, V_, n, 1.0f, b_.ainv, BT_, false, b_.vb, V_, slot_vh, V_, false);
  gemm(n, V_, K_, -1.0f, b_.w, K_, false, S, V_, slot_vh, V_, true);
  transpose(K_, V_, S, V_, slot_st, K_);
  if (!update_state) return;
  // S <- Diag(e^gamL) S + kg^T V^
  for (int d = 0; d < K_; ++d) {
    const float f = b_.egL[gw_ == 1 ? 0 : d];
    float* row = S + d * V_;
    for (int c = 0; c < V_; ++c) row[c] *= f;
  }
  gemm(K_, V_, n, 1.0f, b_.kg, K_, true, slot_vh, V_, S, V_, true);
}

void Worker::load_state(const BwdBuf& src, int64_t n, float* S) {
  const int64_t off = (n * p_.f.HV + hv_) * K_ * V_;
  if (!src.data) {
    std::memset(S, 0, sizeof(float) * K_ * V_);
  } else if (p_.f.state_v_first) {
    load_rows(src, off, K_, V_, K_, b_.tmp, K_);
    transpose(V_, K_, b_.tmp, K_, S, V_);
  } else {
    load_rows(src, off, V_, K_, V_, S, V_);
  }
}

void Worker::store_state(const BwdOut& dst, int64_t n, const float* S) {
  const int64_t off = (n * p_.f.HV + hv_) * K_ * V_;
  if (p_.f.state_v_first) {
    transpose(K_, V_, S, V_, b_.tmp, K_);
    store_rows(dst, off, K_, V_, K_, b_.tmp, K_);
  } else {
    store_rows(dst, off, V_, K_, V_, S, V_);
  }
}

void Worker::run(int64_t n, int64_t bos, int64_t len, int64_t hv, TaskPartials part) {
  hv_ = hv;
  hq_ = hv / (p_.f.HV / p_.f.H);
  const int64_t nc = (len + BT_ - 1) / BT_;
  LINATTN_ASSERT(nc <= max_chunks_, "chunk_bwd: ", nc, " chunks exceed the scratch capacity ", max_chunks_);
  const int64_t slot = static_cast<int64_t>(V_) * K_ + static_cast<int64_t>(BT_) * V_;
  load_state(p_.h0(), n, b_.S);
  for (int64_t c = 0; c < nc; ++c) {
    const int cn = static_cast<int>(std::min<int64_t>(BT_, len - c * BT_));
    float* st = b_.slots + c * slot;
    prepare(bos + c * BT_, cn, false);
    fwd_chunk(cn, b_.S, st, st + static_cast<int64_t>(V_) * K_, c + 1 < nc);
  }
  load_state(p_.dht, n, b_.dS);
  for (int64_t c = nc - 1; c >= 0; --c) {
    const int cn = static_cast<int>(std::min<int64_t>(BT_, len - c * BT_));
    const float* st = b_.slots + c * slot;
    prepare(bos + c * BT_, cn, true);
    bwd_chunk(cn, st, st + static_cast<int64_t>(V_) * K_, b_.dS);
    finish_rows(bos + c * BT_, cn, part);
  }
  if (p_.dh0.data) store_state(p_.dh0, n, b_.dS);
}

}  // namespace linattn::cpu::bwd
