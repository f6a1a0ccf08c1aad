// fp64 reference backward of GDN / KDA: reverse mode through the token recurrence.
// Per (sequence, value head) the forward is replayed storing every state S_0..S_L (tiny shapes
// only), then walked backwards with dS (gradient w.r.t. the state after token t):
//   P = Diag(D) S_{t-1}, e = v - P^T k, S_t = P + beta k e^T, o = scale S_t^T q
//   dS += scale q do^T; dq = scale S_t do; dbeta = k^T dS e; de = beta dS^T k; dv = de
//   dk = beta dS e - P de; dP = dS - k de^T; dg_d = sum_v dP P; dS_{t-1} = Diag(D) dP
// then chained through the in-kernel transforms (L2 norm, gate, sigmoid). dq / dk accumulate over
// the G value heads of a group. Gradients of padding rows are written as 0.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ref/chunk_attn_detail.h"
#include "ref/chunk_attn_ref.h"

namespace linattn::ref {
namespace {

using detail::HeadInputs;

// Full-size fp64 gradient buffers, written to the caller's tensors at the end.
struct GradAcc {
  std::vector<double> dq, dk, dv, dg, dbeta, dA_log, ddt_bias;
};

// dx of y = x * r with r = 1/sqrt(sum x^2 + eps), given y and dy: r (dy - (dy . y) y).
void l2norm_bwd(const double* y, double r, int64_t K, double* dy_to_dx) {
  double dot = 0;
  for (int64_t i = 0; i < K; ++i) dot += dy_to_dx[i] * y[i];
  for (int64_t i = 0; i < K; ++i) dy_to_dx[i] = r * (dy_to_dx[i] - dot * y[i]);
}

void write_all(const TensorView& t, const std::vector<double>& buf) {
  if (!t.defined()) return;
  for (size_t i = 0; i < buf.size(); ++i) detail::write(t, static_cast<int64_t>(i), buf[i]);
}

void backprop_head(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in, const TensorView& d_o,
                   const TensorView& d_final_state, const ChunkAttnGrads& grads,
                   const detail::SeqRange& s, int64_t n, int64_t j, GradAcc& acc) {
  const HeadInputs h = detail::load_head(d, in, s, j);
  const int64_t K = d.K, V = d.V, L = h.L, KV = K * V, hq = j / d.G;
  std::vector<double> states((L + 1) * KV, 0.0);  // states[t] = S after t tokens
  if (d.has_h0) detail::load_state(d, in.initial_state, n, j, states.data());
  for (int64_t t = 0; t < L; ++t) {
    std::copy(states.begin() + t * KV, states.begin() + (t + 1) * KV,
              states.begin() + (t + 1) * KV);
    detail::step(h, t, &states[(t + 1) * KV]);
  }
  std::vector<double> dS(KV, 0.0);
  if (d_final_state.defined()) detail::load_state(d, d_final_state, n, j, dS.data());
  std::vector<double> P(KV), e(V), de(V), dov(V), dqt(K), dkt(K), dgt(K);
  for (int64_t t = L - 1; t >= 0; --t) {
    const double* Sp = &states[t * KV];
    const double* Sc = &states[(t + 1) * KV];
    const double* q = &h.q[t * K];
    const double* k = &h.k[t * K];
    const double beta = h.beta[t];
    const int64_t row = s.b * d.T + s.t0 + t;
    for (int64_t vv = 0; vv < V; ++vv) dov[vv] = detail::read(d_o, (row * d.HV + j) * V + vv);
    for (int64_t vv = 0; vv < V; ++vv) e[vv] = h.v[t * V + vv];
    for (int64_t kk = 0; kk < K; ++kk) {
      const double f = std::exp(h.log_decay(t, kk));
      for (int64_t vv = 0; vv < V; ++vv) {
        P[kk * V + vv] = f * Sp[kk * V + vv];
        e[vv] -= P[kk * V + vv] * k[kk];
      }
    }
    // o = scale S_t^T q
    for (int64_t kk = 0; kk < K; ++kk) {
      double a = 0;
      for (int64_t vv = 0; vv < V; ++vv) {
        dS[kk * V + vv] += d.scale * q[kk] * dov[vv];
        a += Sc[kk * V + vv] * dov[vv];
      }
      dqt[kk] = d.scale * a;
    }
    // S_t = P + beta k e^T
    double dbeta = 0;
    for (int64_t vv = 0; vv < V; ++vv) de[vv] = 0;
    for (int64_t kk = 0; kk < K; ++kk) {
      double a = 0;
      for (int64_t vv = 0; vv < V; ++vv) {
        a += dS[kk * V + vv] * e[vv];
        de[vv] += beta * dS[kk * V + vv] * k[kk];
      }
      dbeta += k[kk] * a;
      dkt[kk] = beta * a;
    }
    // e = v - P^T k, P = Diag(D) S_{t-1}
    for (int64_t kk = 0; kk < K; ++kk) {
      double g = 0;
      for (int64_t vv = 0; vv < V; ++vv) {
        dkt[kk] -= P[kk * V + vv] * de[vv];
        const double dP = dS[kk * V + vv] - k[kk] * de[vv];
        g += dP * P[kk * V + vv];
        dS[kk * V + vv] = std::exp(h.log_decay(t, kk)) * dP;
      }
      dgt[kk] = g;
    }
    // Chain through the in-kernel transforms and accumulate.
    if (d.l2norm) {
      l2norm_bwd(q, h.q_rstd[t], K, dqt.data());
      l2norm_bwd(k, h.k_rstd[t], K, dkt.data());
    }
    const int64_t qk0 = (row * d.H + hq) * K;
    for (int64_t kk = 0; kk < K; ++kk) {
      acc.dq[qk0 + kk] += dqt[kk];
      acc.dk[qk0 + kk] += dkt[kk];
    }
    for (int64_t vv = 0; vv < V; ++vv) acc.dv[(row * d.HV + j) * V + vv] = de[vv];
    acc.dbeta[row * d.HV + j] = dbeta * h.dbeta_draw[t];
    if (h.gw == 1) {  // GDN: one scalar decay shared by all key rows
      for (int64_t kk = 1; kk < K; ++kk) dgt[0] += dgt[kk];
    }
    for (int64_t c = 0; c < h.gw; ++c) {
      const int64_t gi = t * h.gw + c;
      const double dgraw = dgt[c] * h.dg_draw[gi];
      acc.dg[(row * d.HV + j) * h.gw + c] = dgraw;
      if (d.gate_in_kernel) {
        if (d.has_A_log) acc.dA_log[j] += dgt[c] * h.dg_dA[gi];
        if (d.has_dt_bias) acc.ddt_bias[j * h.gw + c] += dgraw;
      }
    }
  }
  if (grads.dinitial_state.defined()) detail::store_state(d, grads.dinitial_state, n, j, dS.data());
}

}  // namespace

void chunk_attn_bwd(const ChunkAttnInputs& in, const TensorView& d_o,
                    const TensorView& d_final_state, const ChunkAttnGrads& grads,
                    const ChunkAttnOptions& opt) {
  const meta::ChunkAttnDesc d = detail::describe_and_validate(in, opt);
  meta::check_bwd_args(d, d_o, d_final_state, grads);
  const int64_t rows = d.B * d.T;
  GradAcc acc;
  acc.dq.assign(rows * d.H * d.K, 0.0);
  acc.dk.assign(rows * d.H * d.K, 0.0);
  acc.dv.assign(rows * d.HV * d.V, 0.0);
  acc.dg.assign(rows * d.HV * d.gate_width(), 0.0);
  acc.dbeta.assign(rows * d.HV, 0.0);
  acc.dA_log.assign(d.HV, 0.0);
  acc.ddt_bias.assign(d.HV * d.gate_width(), 0.0);
  const std::vector<detail::SeqRange> seqs = detail::sequences(d, in);
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t j = 0; j < d.HV; ++j)
      backprop_head(d, in, d_o, d_final_state, grads, seqs[n], n, j, acc);
  write_all(grads.dq, acc.dq);
  write_all(grads.dk, acc.dk);
  write_all(grads.dv, acc.dv);
  write_all(grads.dg, acc.dg);
  write_all(grads.dbeta, acc.dbeta);
  write_all(grads.dA_log, acc.dA_log);
  write_all(grads.ddt_bias, acc.ddt_bias);
}

}  // namespace linattn::ref
