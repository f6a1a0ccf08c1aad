// Loading, gate factors and the forward sweep of the CPU chunk backward (bwd_worker.h).
// Forward sweep, per chunk: L, A^-1 = (I + L)^-1, Xf = vb - kbg S_c, V^ = A^-1 Xf (= U - W S_c,
// W itself is never formed); the slot keeps S_c^T, V^, Xf and A^-1; then
// S <- Diag(e^gamL) S + kg^T V^ (skipped after the last chunk).
// GDN gate factors come from the fp64 chunk cumsum through exp of differences that are never
// positive; KDA factors are running products of e^g <= 1 (no e^{+gam} anywhere, exact zeros
// for gates of -1000).
#include "cpu/bwd_worker.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "cpu/bwd_blas.h"
#include "cpu/bwd_io.h"
#include "cpu/bwd_vec.h"
#include "cpu/gemm.h"

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

}  // namespace

void scale_rows(int n, int cols, const float* f, int gw, const float* src, float* dst) {
  for (int i = 0; i < n; ++i) {
    if (gw == 1) vscale(f[i], src + static_cast<int64_t>(i) * cols, dst + static_cast<int64_t>(i) * cols, cols);
    else vmul(f + static_cast<int64_t>(i) * gw, src + static_cast<int64_t>(i) * cols, dst + static_cast<int64_t>(i) * cols, cols);
  }
}

int64_t slot_floats(const ChunkBwdParams& p) {
  const int64_t BT = p.f.BT, K = p.f.K, V = p.f.V;
  return V * K + 2 * BT * V + BT * BT;
}

size_t carve_worker(const ChunkBwdParams& p, int64_t max_chunks, bool group_acc, float* base,
                    WorkerBufs* o) {
  Carver c{base};
  const size_t BT = p.f.BT, K = p.f.K, V = p.f.V, gw = p.gate_width();
  const size_t mx = std::max({K, V, BT});
  const bool kda = p.f.kda;
  o->q = c.take(BT * K);
  o->k = c.take(BT * K);
  o->v = c.take(BT * V);
  o->dos = c.take(2 * BT * V);  // dos rows, then Y rows (one GEMM operand)
  o->y = nullptr;
  o->q_rstd = c.take(BT);
  o->k_rstd = c.take(BT);
  o->beta = c.take(BT);
  o->dbeta_draw = c.take(BT);
  o->g = c.take(BT * gw);
  o->dg_draw = c.take(BT * gw);
  o->dg_dA = c.take(BT * gw);
  o->eg = c.take(BT * gw);
  o->egl = c.take(BT * gw);
  o->egL = c.take(gw);
  o->gam = reinterpret_cast<double*>(c.take(2 * BT));
  o->D = kda ? nullptr : c.take(BT * BT);
  o->ag = kda ? c.take(BT * K) : nullptr;
  o->rho = kda ? c.take(BT * K) : nullptr;
  o->kap = kda ? c.take(BT * K) : nullptr;
  o->bp = kda ? c.take(4 * K) : nullptr;
  o->px = kda ? c.take(K) : nullptr;
  o->z = kda ? c.take(32 * K) : nullptr;
  o->zo = kda ? c.take(32 * std::max<size_t>(16, K)) : nullptr;
  o->irho = kda ? c.take(BT * K) : nullptr;
  o->colfac = kda ? c.take(BT * K) : nullptr;
  o->col = kda ? c.take(BT * K) : nullptr;
  o->zc = kda ? c.take(BT * K) : nullptr;
  o->qr = kda ? c.take(BT * K) : nullptr;
  o->bkr = kda ? c.take(BT * K) : nullptr;
  o->kg = c.take(BT * K);
  o->qg = c.take(2 * BT * K);  // qg rows, then kbgn rows
  o->kbgn = nullptr;
  o->vb = c.take(BT * V);
  o->aqk = c.take(BT * BT);
  o->Ln = c.take(BT * BT);
  o->kT = c.take(K * BT);
  o->dvh = c.take(BT * V);
  o->dq = c.take(2 * BT * K);  // dq rows, then xn rows
  o->xn = nullptr;
  o->dk = c.take(BT * K);
  o->dka = c.take(BT * K);
  o->r = c.take(BT * K);
  o->daqk = c.take(BT * BT);
  o->dA = c.take(BT * BT);
  o->dL = c.take(BT * BT);
  o->t1 = c.take(BT * BT);
  o->dgam = c.take(BT * K);
  o->dbeta = c.take(BT);
  o->dgtok = c.take(BT * gw);
  o->last = c.take(K);
  o->tmp = c.take(mx * mx);
  o->S = c.take(K * V);
  o->dS = c.take(K * V);
  o->slots = c.take(static_cast<size_t>(max_chunks) * static_cast<size_t>(slot_floats(p)));
  o->gacc = group_acc ? c.take(2 * static_cast<size_t>(max_chunks) * BT * K) : nullptr;
  const int64_t mkv = static_cast<int64_t>(std::max({K, V, 2 * BT}));
  o->pk_a = p.bf16_dot ? reinterpret_cast<uint32_t*>(c.take(bf16_pack_words(mkv, mkv))) : nullptr;
  o->pk_b = p.bf16_dot ? reinterpret_cast<uint32_t*>(c.take(bf16_pack_words(mkv, mkv))) : nullptr;
  return c.used;
}

Worker::Worker(const ChunkBwdParams& p, float* mem, int64_t max_chunks, bool group_acc, float* dqk_acc)
    : p_(p), K_(static_cast<int>(p.f.K)), V_(static_cast<int>(p.f.V)), BT_(p.f.BT),
      gw_(static_cast<int>(p.gate_width())), max_chunks_(max_chunks), dqk_acc_(dqk_acc) {
  carve_worker(p, max_chunks, group_acc, mem, &b_);
}

void Worker::big(int M, int N, int Kd, const float* A, int64_t lda, bool a_t, const float* B, int64_t ldb,
                 float* C, int64_t ldc, bool acc, float c_scale, const float* row_scale) {
  if (p_.bf16_dot)
    mm_bf16(M, N, Kd, A, lda, a_t, B, ldb, C, ldc, acc, c_scale, row_scale, b_.pk_a, b_.pk_b);
  else if (a_t)
    mm(M, N, Kd, A, 1, lda, B, ldb, C, ldc, acc, c_scale, row_scale);
  else
    mm(M, N, Kd, A, lda, 1, B, ldb, C, ldc, acc, c_scale, row_scale);
}

void Worker::load_inputs(int64_t row0, int n, bool bwd) {
  const int64_t H = p_.f.H, HV = p_.f.HV, K = K_, V = V_, gw = gw_;
  auto qk = [&](const BwdBuf& src, float* dst, float* rstd) {
    load_rows(src, (row0 * H + hq_) * K, H * K, n, K_, dst, K_);
    if (p_.f.l2norm)
      for (int i = 0; i < n; ++i) rstd[i] = l2norm_row(dst + i * K, K_);
  };
  qk(p_.k(), b_.k, b_.k_rstd);
  load_rows(p_.v(), (row0 * HV + hv_) * V, HV * V, n, V_, b_.v, V_);
  load_rows(p_.beta(), row0 * HV + hv_, HV, n, 1, b_.beta, 1);
  if (p_.f.beta_sigmoid) {
    const float c = p_.f.neg_eigval ? 2.0f : 1.0f;
    for (int i = 0; i < n; ++i) {
      const float s = sigmoid1(b_.beta[i]);
      b_.beta[i] = c * s;
      b_.dbeta_draw[i] = c * s * (1.0f - s);
    }
  }
  load_rows(p_.g(), (row0 * HV + hv_) * gw, HV * gw, n, gw_, b_.g, gw_);
  if (p_.f.gate_in_kernel) gate_transform(n);
  if (!bwd) return;
  qk(p_.q(), b_.q, b_.q_rstd);
  load_rows(p_.d_o, (row0 * HV + hv_) * V, HV * V, n, V_, b_.dos, V_);
  vscale(p_.f.scale, b_.dos, b_.dos, n * V_);
}

void Worker::gate_transform(int n) {
  const int gw = gw_;
  const float* bias = p_.f.dt_bias ? p_.f.dt_bias + hv_ * gw : nullptr;
  if (bias)
    for (int i = 0; i < n; ++i) vadd(b_.g + i * gw, bias, b_.g + i * gw, gw);
  const float a = p_.f.A_log ? std::exp(p_.f.A_log[hv_]) : 1.0f;
  if (p_.f.kda && p_.f.has_lower_bound)
    gate_lower_bound(n * gw, a, p_.f.lower_bound, p_.f.A_log != nullptr, b_.g, b_.dg_draw, b_.dg_dA);
  else
    gate_softplus(n * gw, a, b_.g, b_.dg_draw, b_.dg_dA);
}

void Worker::gates(int n) {
  const int K = K_;
  if (!p_.f.kda) {
    double s = 0;
    for (int i = 0; i < n; ++i) b_.gam[i] = s += b_.g[i];
    const double last = b_.gam[n - 1];
    float* arg = b_.tmp;
    for (int i = 0; i < n; ++i) arg[i] = static_cast<float>(b_.gam[i]);
    for (int i = 0; i < n; ++i) arg[BT_ + i] = static_cast<float>(last - b_.gam[i]);
    vexp(n, arg, b_.eg);
    vexp(n, arg + BT_, b_.egl);
    b_.egL[0] = b_.eg[n - 1];
    for (int i = 0; i < n; ++i) {
      float* a = b_.D + i * BT_;
      for (int j = 0; j <= i; ++j) a[j] = static_cast<float>(b_.gam[i] - b_.gam[j]);
      vexp(i + 1, a, a);
      for (int j = i + 1; j < n; ++j) a[j] = 0.0f;
    }
    return;
  }
  vexp(n * K, b_.g, b_.ag);
  float* cum = b_.egL;
  vfill(cum, 1.0f, K);
  for (int i = 0; i < n; ++i) {
    vmul(cum, b_.ag + i * K, cum, K);
    std::memcpy(b_.eg + i * K, cum, sizeof(float) * K);
  }
  float* suf = b_.px;
  vfill(suf, 1.0f, K);
  for (int i = n - 1; i >= 0; --i) {
    std::memcpy(b_.egl + i * K, suf, sizeof(float) * K);
    vmul(suf, b_.ag + i * K, suf, K);
  }
  // Sub-chunk relative factors (16 rows): rho to the sub-chunk's first row, kap to its last.
  for (int s0 = 0, sc = 0; s0 < n; s0 += 16, ++sc) {
    const int s1 = std::min(n, s0 + 16);
    vfill(suf, 1.0f, K);
    for (int i = s0; i < s1; ++i) {
      if (i > s0) vmul(suf, b_.ag + i * K, suf, K);
      std::memcpy(b_.rho + i * K, suf, sizeof(float) * K);
    }
    vfill(suf, 1.0f, K);
    for (int j = s1 - 1; j >= s0; --j) {
      std::memcpy(b_.kap + j * K, suf, sizeof(float) * K);
      vmul(suf, b_.ag + j * K, suf, K);
    }
    std::memcpy(b_.bp + sc * K, suf, sizeof(float) * K);
  }
  kda_block_factors(n);
}

void Worker::solve(int n, float* ainv) {
  for (int i = 0; i < n; ++i) {
    vfill(ainv + i * BT_, 0.0f, n);
    ainv[i * BT_ + i] = 1.0f;
  }
  trsm_unit_lower(n, n, b_.Ln, BT_, ainv, BT_);
}

void Worker::prepare(int64_t row0, int n, bool bwd) {
  // Row-stacked pairs, so that the products sharing an operand run as one GEMM.
  b_.kbgn = b_.qg + static_cast<int64_t>(n) * K_;
  b_.y = b_.dos + static_cast<int64_t>(n) * V_;
  b_.xn = b_.dq + static_cast<int64_t>(n) * K_;
  load_inputs(row0, n, bwd);
  gates(n);
  scale_rows(n, K_, b_.eg, gw_, b_.k, b_.kbgn);
  for (int i = 0; i < n; ++i) {
    vscale(-b_.beta[i], b_.kbgn + i * K_, b_.kbgn + i * K_, K_);
    if (!bwd) vscale(b_.beta[i], b_.v + i * V_, b_.vb + i * V_, V_);
  }
  scale_rows(n, K_, b_.egl, gw_, b_.k, b_.kg);
  if (bwd) scale_rows(n, K_, b_.eg, gw_, b_.q, b_.qg);
  if (!p_.f.kda || !bwd) return;
  vmul(b_.q, b_.rho, b_.qr, static_cast<int64_t>(n) * K_);
  for (int i = 0; i < n; ++i) vscale(b_.beta[i], b_.k + i * K_, b_.bkr + i * K_, K_);
  vmul(b_.bkr, b_.rho, b_.bkr, static_cast<int64_t>(n) * K_);
}

void Worker::fwd_chunk(int n, float* S, float* slot, bool update_state) {
  const int K = K_, V = V_, BT = BT_;
  float* st = slot;
  float* vh = st + static_cast<int64_t>(V) * K;
  float* xf = vh + static_cast<int64_t>(BT) * V;
  float* ai = xf + static_cast<int64_t>(BT) * V;
  // Computed in worker buffers (free during the forward sweep), then copied into the slot.
  float* ai_w = b_.t1;
  float* xf_w = b_.vb;
  float* vh_w = b_.dvh;
  intra_fwd(n, false);
  solve(n, ai_w);
  // Xf = beta v - kbg S = (I + L) V^, then V^ = A^-1 Xf
  big(n, V, K, b_.kbgn, K, false, S, V, xf_w, V, true);
  mm_lower(n, V, ai_w, BT, xf_w, V, vh_w, V, false);
  transpose(K, V, S, V, st, K, 1.0f, stream_slots_);
  copy_rows(n, V, vh_w, V, vh, V, stream_slots_);
  copy_rows(n, V, xf_w, V, xf, V, stream_slots_);
  copy_rows(n, n, ai_w, BT, ai, BT, stream_slots_);
  if (!update_state) return;
  // S <- Diag(e^gamL) S + kg^T V^ (fp32 even with bf16 dots: the recomputed states feed every
  // later chunk, and bf16 here moved dA_log / ddt_bias past their bf16 bars, measured)
  if (gw_ == 1) mm(K, V, n, b_.kg, 1, K, vh_w, V, S, V, true, b_.egL[0]);
  else mm(K, V, n, b_.kg, 1, K, vh_w, V, S, V, true, 1.0f, b_.egL);
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
  const int64_t slot = slot_floats(p_);
  // Slots bigger than a core's L2 are read back from memory anyway: write them non-temporally.
  stream_slots_ = nc * slot * static_cast<int64_t>(sizeof(float)) > (int64_t{3} << 19);
  load_state(p_.h0(), n, b_.S);
  for (int64_t c = 0; c < nc; ++c) {
    const int cn = static_cast<int>(std::min<int64_t>(BT_, len - c * BT_));
    prepare(bos + c * BT_, cn, false);
    fwd_chunk(cn, b_.S, b_.slots + c * slot, c + 1 < nc);
  }
  if (stream_slots_) store_fence();
  load_state(p_.dht, n, b_.dS);
  for (int64_t c = nc - 1; c >= 0; --c) {
    const int cn = static_cast<int>(std::min<int64_t>(BT_, len - c * BT_));
    prepare(bos + c * BT_, cn, true);
    bwd_chunk(cn, b_.slots + c * slot, b_.dS);
    finish_rows(bos + c * BT_, cn, part);
  }
  if (p_.dh0.data) store_state(p_.dh0, n, b_.dS);
}

}  // namespace linattn::cpu::bwd
