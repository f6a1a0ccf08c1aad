// Reverse-sweep step of one chunk of the CPU chunk backward, and the writing of its rows.
// Per chunk (n rows, S = S_c from the slot as S^T, dS = dS_{c+1} on entry, dS_c on exit):
//   dV^ = Aqk^T dO + kg dS                     dk  = e^(gamL-gam) (V^ dS^T)   (inter)
//   dq  = e^gam (scale dO S^T)                 dW  = -dV^ S^T
//   dS <- Diag(e^gamL) dS + scale qg^T dO - W^T dV^
//   dAqk = tril(dO V^^T); X = A^-T dW; Y = A^-T dV^; dv = beta Y
//   dA = tril-(dW kbg^T + dV^ vb^T); dL = -tril-(A^-T dA A^-T); intra terms (bwd_intra.cc)
//   dgam = q.dq - k.(dk_inter + dka - r) + kbg.X, plus at the last row e^gamL <S, dS'> +
//   sum_j k_j dk_inter_j; dg = reverse cumsum of dgam over the chunk's rows.
#include <cmath>
#include <cstring>

#include "cpu/bwd_blas.h"
#include "cpu/bwd_io.h"
#include "cpu/bwd_worker.h"

namespace linattn::cpu::bwd {

void Worker::bwd_chunk(int n, const float* st, const float* vh, float* dS) {
  const int K = K_, V = V_, BT = BT_, gw = gw_;
  const float scale = p_.f.scale;
  WorkerBufs& b = b_;
  // dV^ = Aqk^T dO + kg dS
  gemm(n, V, n, 1.0f, b.aqk, BT, true, b.dout, V, b.dvh, V, false);
  gemm(n, V, K, 1.0f, b.kg, K, false, dS, V, b.dvh, V, true);
  // dk_inter = e^(gamL - gam) (V^ dS^T); tmp = dS^T [V, K]
  transpose(K, V, dS, V, b.tmp, K);
  gemm(n, K, V, 1.0f, vh, V, false, b.tmp, K, b.dk, K, false);
  scale_rows(n, K, b.egl, gw, b.dk, b.dk);
  // dgam = -k dk_inter; last row: + sum_j k_j dk_inter_j + e^gamL sum_v S dS
  float* dlast = b.dgam + (n - 1) * K;
  float* extra = b.t1;  // [K] scratch (t1 is free until the dL step)
  for (int d = 0; d < K; ++d) extra[d] = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float* k = b.k + i * K;
    const float* dk = b.dk + i * K;
    float* dg = b.dgam + i * K;
    for (int d = 0; d < K; ++d) {
      const float t = k[d] * dk[d];
      dg[d] = -t;
      extra[d] += t;
    }
  }
  for (int vv = 0; vv < V; ++vv) {
    const float* s = st + vv * K;
    const float* ds = b.tmp + vv * K;
    for (int d = 0; d < K; ++d) b.earg[d] = (vv == 0 ? 0.0f : b.earg[d]) + s[d] * ds[d];
  }
  for (int d = 0; d < K; ++d) dlast[d] += extra[d] + b.egL[gw == 1 ? 0 : d] * b.earg[d];
  // dq = e^gam (scale dO S^T); dW = -dV^ S^T
  gemm(n, K, V, scale, b.dout, V, false, st, K, b.dq, K, false);
  scale_rows(n, K, b.eg, gw, b.dq, b.dq);
  gemm(n, K, V, -1.0f, b.dvh, V, false, st, K, b.dw, K, false);
  // dS <- Diag(e^gamL) dS + scale qg^T dO - W^T dV^
  for (int d = 0; d < K; ++d) {
    const float f = b.egL[gw == 1 ? 0 : d];
    float* row = dS + d * V;
    for (int c = 0; c < V; ++c) row[c] *= f;
  }
  gemm(K, V, n, scale, b.qg, K, true, b.dout, V, dS, V, true);
  gemm(K, V, n, -1.0f, b.w, K, true, b.dvh, V, dS, V, true);
  // dAqk = tril(dO V^^T)
  transpose(n, V, vh, V, b.tmp, n);
  gemm(n, n, V, 1.0f, b.dout, V, false, b.tmp, n, b.daqk, BT, false);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) b.daqk[i * BT + j] = 0.0f;
  // X = A^-T dW, Y = A^-T dV^
  gemm(n, K, n, 1.0f, b.ainv, BT, true, b.dw, K, b.x, K, false);
  gemm(n, V, n, 1.0f, b.ainv, BT, true, b.dvh, V, b.y, V, false);
  // dbeta = v.Y + sum_d k e^gam X; dk += beta e^gam X; dgam += kbg X
  for (int i = 0; i < n; ++i) {
    const float* v = b.v + i * V;
    const float* y = b.y + i * V;
    float acc = 0.0f;
    for (int c = 0; c < V; ++c) acc += v[c] * y[c];
    const float* x = b.x + i * K;
    const float* kbg = b.kbg + i * K;
    const float* k = b.k + i * K;
    const float* eg = b.eg + i * gw;
    float* dk = b.dk + i * K;
    float* dg = b.dgam + i * K;
    const float beta = b.beta[i];
    float acc2 = 0.0f;
    for (int d = 0; d < K; ++d) {
      const float e = eg[gw == 1 ? 0 : d];
      acc2 += k[d] * e * x[d];
      dk[d] += beta * e * x[d];
      dg[d] += kbg[d] * x[d];
    }
    b.dbeta[i] = acc + acc2;
  }
  // dA = tril-(dW kbg^T + dV^ vb^T)
  transpose(n, K, b.kbg, K, b.tmp, n);
  gemm(n, n, K, 1.0f, b.dw, K, false, b.tmp, n, b.dA, BT, false);
  transpose(n, V, b.vb, V, b.tmp, n);
  gemm(n, n, V, 1.0f, b.dvh, V, false, b.tmp, n, b.dA, BT, true);
  for (int i = 0; i < n; ++i)
    for (int j = i; j < n; ++j) b.dA[i * BT + j] = 0.0f;
  // dL = -tril-(A^-T dA A^-T)
  gemm(n, n, n, 1.0f, b.ainv, BT, true, b.dA, BT, b.t1, BT, false);
  transpose(n, n, b.ainv, BT, b.tmp, n);
  gemm(n, n, n, -1.0f, b.t1, BT, false, b.tmp, n, b.dL, BT, false);
  for (int i = 0; i < n; ++i)
    for (int j = i; j < n; ++j) b.dL[i * BT + j] = 0.0f;
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
    for (int d = 0; d < K; ++d) {
      dk[d] += dka[d] + r[d];
      dg[d] += k[d] * (r[d] - dka[d]) + q[d] * dq[d];
    }
  }
  // dg = reverse cumsum of dgam (GDN: of its sum over K)
  if (gw == 1) {
    float acc = 0.0f;
    for (int i = n - 1; i >= 0; --i) {
      const float* dg = b.dgam + i * K;
      float s = 0.0f;
      for (int d = 0; d < K; ++d) s += dg[d];
      acc += s;
      b.dgtok[i] = acc;
    }
  } else {
    std::memcpy(b.dgtok + (n - 1) * K, b.dgam + (n - 1) * K, sizeof(float) * K);
    for (int i = n - 2; i >= 0; --i) {
      const float* dg = b.dgam + i * K;
      const float* nx = b.dgtok + (i + 1) * K;
      float* o = b.dgtok + i * K;
      for (int d = 0; d < K; ++d) o[d] = nx[d] + dg[d];
    }
  }
}

void Worker::finish_rows(int64_t row0, int n, TaskPartials part) {
  const int K = K_, V = V_, gw = gw_;
  const int64_t H = p_.f.H, HV = p_.f.HV;
  WorkerBufs& b = b_;
  if (p_.dv.data) {
    for (int i = 0; i < n; ++i) {
      float* y = b.y + i * V;
      for (int c = 0; c < V; ++c) y[c] *= b.beta[i];
    }
    store_rows(p_.dv, (row0 * HV + hv_) * V, HV * V, n, V, b.y, V);
  }
  if (p_.dbeta.data) {
    if (p_.f.beta_sigmoid)
      for (int i = 0; i < n; ++i) b.dbeta[i] *= b.dbeta_draw[i];
    store_rows(p_.dbeta, row0 * HV + hv_, HV, n, 1, b.dbeta, 1);
  }
  if (p_.f.gate_in_kernel) {
    double dA = 0.0;
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < gw; ++c) {
        const int gi = i * gw + c;
        dA += static_cast<double>(b.dgtok[gi]) * b.dg_dA[gi];
        b.dgtok[gi] *= b.dg_draw[gi];
        part.ddt_bias[c] += b.dgtok[gi];
      }
    part.dA_log[0] += dA;
  }
  if (p_.dg.data) store_rows(p_.dg, (row0 * HV + hv_) * gw, HV * gw, n, gw, b.dgtok, gw);
  // dq / dk: per value head into the fp32 group accumulators, or (G == 1) finished here.
  const bool grouped = dqk_acc_ != nullptr;
  for (int which = 0; which < 2; ++which) {
    float* x = which == 0 ? b.dq : b.dk;
    const BwdOut& out = which == 0 ? p_.dq : p_.dk;
    if (!out.data) continue;
    if (grouped) {
      float* acc = dqk_acc_ + (which == 0 ? 0 : p_.f.rows * HV * K);
      for (int i = 0; i < n; ++i)
        std::memcpy(acc + ((row0 + i) * HV + hv_) * K, x + i * K, sizeof(float) * K);
      continue;
    }
    if (p_.f.l2norm) {
      const float* y = which == 0 ? b.q : b.k;
      const float* rs = which == 0 ? b.q_rstd : b.k_rstd;
      for (int i = 0; i < n; ++i) {
        float* dx = x + i * K;
        const float* yy = y + i * K;
        float dot = 0.0f;
        for (int d = 0; d < K; ++d) dot += dx[d] * yy[d];
        for (int d = 0; d < K; ++d) dx[d] = rs[i] * (dx[d] - dot * yy[d]);
      }
    }
    store_rows(out, (row0 * H + hq_) * K, H * K, n, K, x, K);
  }
}

}  // namespace linattn::cpu::bwd
