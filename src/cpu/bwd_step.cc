// Reverse-sweep step of one chunk of the CPU chunk backward, and the writing of its rows.
// Per chunk (n rows; S = S_c from the slot as S^T; dS = dS_{c+1} on entry, dS_c on exit), with
// dos = scale dO, aqk = q k E (unscaled), kbgn = -beta e^gam k, Xf = (I + L) V^:
//   dV^ = aqk^T dos + kg dS                  dk  = e^(gamL-gam) (V^ dS^T)        (inter)
//   dq  = e^gam (dos S^T)                     Y   = A^-T dV^;  dv = beta Y
//   xn  = Y S^T (= -X = A^-T dV^ S^T, since dW = -dV^ S^T)
//   dS <- Diag(e^gamL) dS + qg^T dos + kbgn^T Y            (W^T dV^ = kbg^T Y)
//   daqk = tril(dos V^^T); dA = tril-(dV^ Xf^T) (= dW kbg^T + dU vb^T)
//   dL = -tril-(A^-T dA A^-T); intra terms (bwd_intra.cc)
//   dgam = q.dq - k.(dk_inter + dka - r) + kbgn.xn, plus at the last row e^gamL <S, dS'>_rows +
//   sum_j k_j dk_inter_j; dg = reverse cumsum of dgam over the chunk's rows.
#include <cstring>

#include "cpu/bwd_blas.h"
#include "cpu/bwd_io.h"
#include "cpu/bwd_vec.h"
#include "cpu/bwd_worker.h"

namespace linattn::cpu::bwd {

void Worker::bwd_chunk(int n, const float* slot, float* dS) {
  using namespace simd;
  const int K = K_, V = V_, BT = BT_, gw = gw_;
  WorkerBufs& b = b_;
  const float* st = slot;
  const float* vh = st + static_cast<int64_t>(V) * K;
  const float* xf = vh + static_cast<int64_t>(BT) * V;
  const float* ai = xf + static_cast<int64_t>(BT) * V;
  intra_fwd(n, true);
  // dV^ = aqk^T dos + kg dS
  mm_lower_t(n, V, b.aqk, BT, b.dos, V, b.dvh, V, false);
  big(n, V, K, b.kg, K, false, dS, V, b.dvh, V, true);
  // dk_inter = e^(gamL - gam) (V^ dS^T), with tmp = dS^T [V, K]
  transpose(K, V, dS, V, b.tmp, K);
  mm(n, K, V, vh, V, 1, b.tmp, K, b.dk, K, false);  // fp32 (see Worker::big)
  scale_rows(n, K, b.egl, gw, b.dk, b.dk);
  // dgam = -k dk_inter; last = sum_j k_j dk_inter_j + e^gamL sum_v S dS
  vfill(b.last, 0.0f, K);
  for (int vv = 0; vv < V; ++vv) {
    const float* s = st + vv * K;
    const float* ds = b.tmp + vv * K;
    for (int d = 0; d < K; d += kW) {
      const Tail t = tail_of(K - d);
      store(b.last + d, fma(load(s + d, t), load(ds + d, t), load(b.last + d, t)), t);
    }
  }
  if (gw == 1) vscale(b.egL[0], b.last, b.last, K);
  else vmul(b.egL, b.last, b.last, K);
  for (int i = 0; i < n; ++i) {
    const float* k = b.k + i * K;
    const float* dk = b.dk + i * K;
    float* dg = b.dgam + i * K;
    for (int d = 0; d < K; d += kW) {
      const Tail t = tail_of(K - d);
      const VF p = mul(load(k + d, t), load(dk + d, t));
      store(dg + d, sub(zero(), p), t);
      store(b.last + d, add(load(b.last + d, t), p), t);
    }
  }
  // Y = A^-T dV^; [dq; xn] = [dos; Y] S^T, then dq *= e^gam
  mm_lower_t(n, V, ai, BT, b.dvh, V, b.y, V, false);
  big(2 * n, K, V, b.dos, V, false, st, K, b.dq, K, false);
  scale_rows(n, K, b.eg, gw, b.dq, b.dq);
  // dS <- Diag(e^gamL) dS + [qg; kbgn]^T [dos; Y]
  if (gw == 1) big(K, V, 2 * n, b.qg, K, true, b.dos, V, dS, V, true, b.egL[0]);
  else big(K, V, 2 * n, b.qg, K, true, b.dos, V, dS, V, true, 1.0f, b.egL);
  // daqk = dos V^^T on and below the diagonal
  transpose(n, V, vh, V, b.tmp, BT);
  mm_to_lower(n, V, b.dos, V, b.tmp, BT, b.daqk, BT, false);
  // dbeta = v.Y - sum_d k e^gam xn; dk -= beta e^gam xn; dgam += kbgn xn
  for (int i = 0; i < n; ++i) {
    const float* x = b.xn + i * K;
    const float* k = b.k + i * K;
    const float* kbgn = b.kbgn + i * K;
    float* dk = b.dk + i * K;
    float* dg = b.dgam + i * K;
    const float beta = b.beta[i];
    VF kex = zero();
    for (int d = 0; d < K; d += kW) {
      const Tail t = tail_of(K - d);
      const VF xv = load(x + d, t);
      const VF e = gw == 1 ? set1(b.eg[i]) : load(b.eg + i * K + d, t);
      const VF ke = mul(load(k + d, t), e);
      kex = fma(ke, xv, kex);
      store(dk + d, fnma(mul(set1(beta), e), xv, load(dk + d, t)), t);
      store(dg + d, fma(load(kbgn + d, t), xv, load(dg + d, t)), t);
    }
    b.dbeta[i] = vdot(b.v + i * V, b.y + i * V, V) - hsum(kex);
  }
  // dA = tril-(dV^ Xf^T)
  transpose(n, V, xf, V, b.tmp, BT);
  mm_to_lower(n, V, b.dvh, V, b.tmp, BT, b.dA, BT, false);
  for (int i = 0; i < n; ++i) vfill(b.dA + i * BT + i, 0.0f, n - i);
  // dL = -tril-(A^-T dA A^-T)
  mm_lower_t(n, n, ai, BT, b.dA, BT, b.t1, BT, false);
  transpose(n, n, ai, BT, b.tmp, BT);
  mm_to_lower(n, n, b.t1, BT, b.tmp, BT, b.dL, BT, false);
  for (int i = 0; i < n; ++i) {
    vscale(-1.0f, b.dL + i * BT, b.dL + i * BT, i);
    vfill(b.dL + i * BT + i, 0.0f, n - i);
  }
  // Intra terms: dq += dq2, dka = dk2 + t, r (beta-scaled), dbeta += k.r'
  intra_bwd(n);
  for (int i = 0; i < n; ++i) {
    const float* k = b.k + i * K;
    const float* q = b.q + i * K;
    const float* dq = b.dq + i * K;
    const float* dka = b.dka + i * K;
    const float* r = b.r + i * K;
    float* dk = b.dk + i * K;
    float* dg = b.dgam + i * K;
    for (int d = 0; d < K; d += kW) {
      const Tail t = tail_of(K - d);
      const VF ka = load(dka + d, t), rv = load(r + d, t);
      store(dk + d, add(load(dk + d, t), add(ka, rv)), t);
      const VF gv = fma(load(k + d, t), sub(rv, ka), load(dg + d, t));
      store(dg + d, fma(load(q + d, t), load(dq + d, t), gv), t);
    }
  }
  vadd(b.dgam + (n - 1) * K, b.last, b.dgam + (n - 1) * K, K);
  // dg = reverse cumsum of dgam (GDN: of its sum over K)
  if (gw == 1) {
    float acc = 0.0f;
    for (int i = n - 1; i >= 0; --i) {
      acc += vsum(b.dgam + i * K, K);
      b.dgtok[i] = acc;
    }
  } else {
    std::memcpy(b.dgtok + (n - 1) * K, b.dgam + (n - 1) * K, sizeof(float) * K);
    for (int i = n - 2; i >= 0; --i) vadd(b.dgtok + (i + 1) * K, b.dgam + i * K, b.dgtok + i * K, K);
  }
}

void Worker::finish_rows(int64_t row0, int n, TaskPartials part) {
  const int K = K_, V = V_, gw = gw_;
  const int64_t H = p_.f.H, HV = p_.f.HV;
  WorkerBufs& b = b_;
  if (p_.dv.data) {
    for (int i = 0; i < n; ++i) vscale(b.beta[i], b.y + i * V, b.y + i * V, V);
    store_rows(p_.dv, (row0 * HV + hv_) * V, HV * V, n, V, b.y, V);
  }
  if (p_.dbeta.data) {
    if (p_.f.beta_sigmoid)
      for (int i = 0; i < n; ++i) b.dbeta[i] *= b.dbeta_draw[i];
    store_rows(p_.dbeta, row0 * HV + hv_, HV, n, 1, b.dbeta, 1);
  }
  if (p_.f.gate_in_kernel) {
    double dA = 0.0;
    for (int i = 0; i < n; ++i) {
      float* dg = b.dgtok + i * gw;
      const float* dA_row = b.dg_dA + i * gw;
      dA += vdot(dg, dA_row, gw);
      vmul(dg, b.dg_draw + i * gw, dg, gw);
      for (int c = 0; c < gw; ++c) part.ddt_bias[c] += dg[c];
    }
    part.dA_log[0] += dA;
  }
  if (p_.dg.data) store_rows(p_.dg, (row0 * HV + hv_) * gw, HV * gw, n, gw, b.dgtok, gw);
  // dq / dk: in-task group sums, per value head into the global group accumulators, or
  // (G == 1) finished here.
  for (int which = 0; which < 2; ++which) {
    float* x = which == 0 ? b.dq : b.dk;
    const BwdOut& out = which == 0 ? p_.dq : p_.dk;
    if (!out.data) continue;
    if (b.gacc) {
      const int64_t cap = max_chunks_ * BT_ * static_cast<int64_t>(K);
      float* acc = b.gacc + (which == 0 ? 0 : cap) + (row0 - task_bos_) * K;
      if (group_first_) std::memcpy(acc, x, sizeof(float) * n * K);
      else vadd(acc, x, acc, static_cast<int64_t>(n) * K);
      continue;
    }
    if (dqk_acc_) {
      float* acc = dqk_acc_ + (which == 0 ? 0 : p_.f.rows * HV * K);
      for (int i = 0; i < n; ++i)
        std::memcpy(acc + ((row0 + i) * HV + hv_) * K, x + i * K, sizeof(float) * K);
      continue;
    }
    if (p_.f.l2norm) {
      const float* y = which == 0 ? b.q : b.k;
      const float* rs = which == 0 ? b.q_rstd : b.k_rstd;
      for (int i = 0; i < n; ++i) l2norm_bwd_row(x + i * K, y + i * K, rs[i], K);
    }
    store_rows(out, (row0 * H + hq_) * K, H * K, n, K, x, K);
  }
}

void Worker::finish_group(int64_t bos, int64_t len, int64_t hq) {
  const int64_t cap = max_chunks_ * BT_ * static_cast<int64_t>(K_);
  for (int which = 0; which < 2; ++which) {
    const BwdOut& out = which == 0 ? p_.dq : p_.dk;
    if (!out.data) continue;
    float* acc = b_.gacc + (which == 0 ? 0 : cap);
    for (int64_t i = 0; i < len; ++i)
      finish_qk_row(p_, acc + i * K_, which == 0 ? p_.q() : p_.k(), out, bos + i, hq, b_.tmp);
  }
}

void finish_qk_row(const ChunkBwdParams& p, float* s, const BwdBuf& x, const BwdOut& out,
                   int64_t row, int64_t hq, float* tmp) {
  const int K = static_cast<int>(p.f.K);
  const int64_t off = (row * p.f.H + hq) * p.f.K;
  if (p.f.l2norm) {
    load_rows(x, off, 0, 1, K, tmp, K);
    const float r = l2norm_row(tmp, K);
    l2norm_bwd_row(s, tmp, r, K);
  }
  store_rows(out, off, 0, 1, K, s, K);
}

}  // namespace linattn::cpu::bwd
