// Seeded GDN / KDA test inputs (see chunk_attn_gen.h).
#include "common/chunk_attn_gen.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace linattn::test {

int64_t Rng::integer(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(gen_);
}

double log_sigmoid(double x) {
  return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
}

Tensor randn(Rng& rng, DType dtype, std::vector<int64_t> shape, double stddev) {
  Tensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, stddev * rng.normal());
  return t;
}

Tensor uniform(Rng& rng, DType dtype, std::vector<int64_t> shape, double lo, double hi) {
  Tensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, rng.uniform(lo, hi));
  return t;
}

Tensor full(DType dtype, std::vector<int64_t> shape, double value) {
  Tensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, value);
  return t;
}

Tensor nan_tensor(DType dtype, std::vector<int64_t> shape) {
  return full(dtype, std::move(shape), std::numeric_limits<double>::quiet_NaN());
}

Tensor cu_seqlens_tensor(const std::vector<int64_t>& seqlens, DType dtype) {
  Tensor t(dtype, {static_cast<int64_t>(seqlens.size()) + 1});
  int64_t acc = 0;
  t.set(0, 0);
  for (size_t i = 0; i < seqlens.size(); ++i) t.set(static_cast<int64_t>(i) + 1, acc += seqlens[i]);
  return t;
}

std::vector<int64_t> random_seqlens(Rng& rng, int64_t N, int64_t total, double p_zero) {
  std::vector<double> w(N);
  for (auto& x : w) x = rng.bernoulli(p_zero) ? 0.0 : rng.uniform(0.1, 1.0);
  if (total > 0 && std::all_of(w.begin(), w.end(), [](double x) { return x == 0.0; }))
    w[rng.integer(0, N - 1)] = 1.0;
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<int64_t> len(N, 0);
  int64_t used = 0, last = -1;
  for (int64_t i = 0; i < N; ++i) {
    if (w[i] == 0.0) continue;
    len[i] = static_cast<int64_t>(std::floor(total * w[i] / sum));
    used += len[i];
    last = i;
  }
  if (last >= 0) len[last] += total - used;
  return len;
}

std::vector<int64_t> edge_seqlens(int64_t BT) { return {0, 1, BT - 1, BT, BT + 1, 2 * BT + 3}; }

namespace {

void fill_qk(Rng& rng, Tensor& t, int64_t K, QkDist dist) {
  const int64_t rows = t.numel() / std::max<int64_t>(K, 1);
  std::vector<double> x(K);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (auto& e : x) {
      e = dist == QkDist::kUniform ? rng.uniform() : rng.normal();
      ss += e * e;
    }
    const double s = dist == QkDist::kUnitNorm ? 1.0 / std::sqrt(ss) : 1.0;
    for (int64_t i = 0; i < K; ++i) t.set(r * K + i, x[i] * s);
  }
}

double gate_value(Rng& rng, GateDist dist, int64_t head) {
  if (dist == GateDist::kMixedHeads) {
    dist = head % 3 == 0   ? GateDist::kLogSigmoid
           : head % 3 == 1 ? GateDist::kStrong
                           : GateDist::kNoDecay;
  }
  switch (dist) {
    case GateDist::kLogSigmoid:
      return log_sigmoid(rng.normal());
    case GateDist::kStrong:
      return log_sigmoid(rng.uniform()) / 0.01;
    case GateDist::kNoDecay:
      return 0.0;
    case GateDist::kMixedHeads:
      break;
  }
  return 0.0;
}

}  // namespace

ChunkAttnData make_chunk_attn(const ChunkAttnSpec& spec_in) {
  ChunkAttnData d;
  d.spec = spec_in;
  ChunkAttnSpec& s = d.spec;
  const ChunkAttnOptions& o = s.opt;
  Rng rng(s.seed);
  if (!s.seqlens.empty()) {
    s.B = 1;
    d.N = static_cast<int64_t>(s.seqlens.size());
    d.valid_tokens = std::accumulate(s.seqlens.begin(), s.seqlens.end(), int64_t{0});
    s.T = d.valid_tokens + s.pad_tokens;
    d.cu_seqlens = cu_seqlens_tensor(s.seqlens, s.cu_dtype);
  } else {
    d.N = s.B;
    d.valid_tokens = s.T;
  }
  const bool kda = o.op == ChunkOp::kKda;
  const int64_t gw = kda ? s.K : 1;
  const QkDist auto_dist = o.use_qk_l2norm_in_kernel ? QkDist::kRandn : QkDist::kUnitNorm;
  d.q = Tensor(s.dtype, {s.B, s.T, s.H, s.K});
  d.k = Tensor(s.dtype, {s.B, s.T, s.H, s.K});
  fill_qk(rng, d.q, s.K, s.q_dist == QkDist::kAuto ? auto_dist : s.q_dist);
  fill_qk(rng, d.k, s.K, s.k_dist == QkDist::kAuto ? auto_dist : s.k_dist);
  d.v = randn(rng, s.dtype, {s.B, s.T, s.HV, s.V});

  std::vector<int64_t> gshape = {s.B, s.T, s.HV};
  if (kda) gshape.push_back(s.K);
  if (o.use_gate_in_kernel) {
    d.g = randn(rng, s.gate_dtype, gshape);  // raw gate logits
    if (s.has_A_log) d.A_log = randn(rng, s.param_dtype, {s.HV});
    if (s.has_dt_bias) {
      d.dt_bias = kda ? (s.dt_bias_2d ? randn(rng, s.param_dtype, {s.HV, s.K})
                                      : randn(rng, s.param_dtype, {s.HV * s.K}))
                      : randn(rng, s.param_dtype, {s.HV});
    }
  } else {
    d.g = Tensor(s.gate_dtype, gshape);
    const bool clamp = kda && (o.has_lower_bound || o.safe_gate);
    const double lb = o.has_lower_bound ? o.lower_bound : -5.0;
    for (int64_t i = 0; i < d.g.numel(); ++i) {
      const int64_t head = (i / gw) % s.HV;
      double x = gate_value(rng, s.gate, head);
      if (s.extreme_gate_frac > 0 && rng.bernoulli(s.extreme_gate_frac)) x = -1000.0;
      if (clamp) x = std::clamp(x, lb, 0.0);
      d.g.set(i, x);
    }
  }
  d.beta = Tensor(s.gate_dtype, {s.B, s.T, s.HV});
  for (int64_t i = 0; i < d.beta.numel(); ++i) {
    const double x = rng.normal();
    d.beta.set(i, o.use_beta_sigmoid_in_kernel ? x : 1.0 / (1.0 + std::exp(-x)));
  }
  if (s.has_h0) d.initial_state = randn(rng, s.state_dtype, state_shape(d));
  return d;
}

ChunkAttnData with_qkv_dtype(const ChunkAttnData& d, DType dtype) {
  ChunkAttnData r = d;
  r.spec.dtype = dtype;
  r.q = d.q.to(dtype);
  r.k = d.k.to(dtype);
  r.v = d.v.to(dtype);
  return r;
}

ChunkAttnInputs ChunkAttnData::inputs() const {
  ChunkAttnInputs in;
  in.q = q.view();
  in.k = k.view();
  in.v = v.view();
  in.g = g.view();
  in.beta = beta.view();
  in.A_log = A_log.view();
  in.dt_bias = dt_bias.view();
  in.initial_state = initial_state.view();
  in.cu_seqlens = cu_seqlens.view();
  return in;
}

std::vector<int64_t> state_shape(const ChunkAttnData& d) {
  const ChunkAttnSpec& s = d.spec;
  if (s.opt.state_v_first) return {d.N, s.HV, s.V, s.K};
  return {d.N, s.HV, s.K, s.V};
}

ChunkAttnOutTensors alloc_outputs(const ChunkAttnData& d, DType o_dtype, DType state_dtype) {
  const ChunkAttnSpec& s = d.spec;
  ChunkAttnOutTensors r;
  r.o = nan_tensor(o_dtype, {s.B, s.T, s.HV, s.V});
  if (s.opt.output_final_state) r.final_state = nan_tensor(state_dtype, state_shape(d));
  return r;
}

namespace {
Tensor nan_like(const Tensor& t, DType dtype) {
  return t.defined() ? nan_tensor(dtype, t.shape()) : Tensor();
}
}  // namespace

ChunkAttnGradTensors alloc_grads(const ChunkAttnData& d, DType grad_dtype, DType param_dtype) {
  ChunkAttnGradTensors r;
  r.dq = nan_like(d.q, grad_dtype);
  r.dk = nan_like(d.k, grad_dtype);
  r.dv = nan_like(d.v, grad_dtype);
  r.dg = nan_like(d.g, grad_dtype);
  r.dbeta = nan_like(d.beta, grad_dtype);
  r.dA_log = nan_like(d.A_log, param_dtype);
  r.ddt_bias = nan_like(d.dt_bias, param_dtype);
  r.dinitial_state = nan_like(d.initial_state, param_dtype);
  return r;
}

ChunkAttnGrads ChunkAttnGradTensors::views() const {
  ChunkAttnGrads g;
  g.dq = dq.view();
  g.dk = dk.view();
  g.dv = dv.view();
  g.dg = dg.view();
  g.dbeta = dbeta.view();
  g.dA_log = dA_log.view();
  g.ddt_bias = ddt_bias.view();
  g.dinitial_state = dinitial_state.view();
  return g;
}

ChunkAttnCotangents random_cotangents(const ChunkAttnData& d, Rng& rng, DType dtype,
                                      bool with_final_state) {
  const ChunkAttnSpec& s = d.spec;
  ChunkAttnCotangents c;
  c.d_o = randn(rng, dtype, {s.B, s.T, s.HV, s.V});
  if (with_final_state) c.d_final_state = randn(rng, dtype, state_shape(d));
  return c;
}

}  // namespace linattn::test
