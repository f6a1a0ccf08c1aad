// Central finite differences in fp64 for EVERY gradient of the reference backward, over every
// option: GDN and KDA, GVA, in-kernel L2 norm, gate in kernel (GDN, KDA default, lower_bound with
// and without A_log, dt_bias flat / 2-D / absent), beta sigmoid and allow_neg_eigval, h0 and d(ht)
// present or absent, state_v_first, varlen with ragged lengths, zero-length sequences and padding
// rows (whose gradients must be exactly 0). Loss = sum(o d_o) over valid rows + sum(ht d_ht).
// Every element of every input is perturbed (tiny shapes keep this to milliseconds).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/chunk_attn_check.h"

namespace linattn::test {
namespace {

struct GradCase {
  std::string name{};
  ChunkOp op = ChunkOp::kGdn;
  int64_t H = 1, HV = 2;
  std::vector<int64_t> seqlens{};  // empty: B = 2, T = 5
  int64_t pad = 0;
  bool l2norm = false, gate = false, lower_bound = false, A_log = true, dt_bias = true;
  bool dt_bias_2d = false, sigmoid = false, neg = false, h0 = true, dht = true, v_first = false;
  GateDist dist = GateDist::kLogSigmoid;
  double scale = 0.0;
};

void PrintTo(const GradCase& c, std::ostream* os) { *os << c.name; }

double loss(const ChunkAttnData& d, const ChunkAttnCotangents& c) {
  const ChunkAttnOutTensors out = ref_forward(d);
  const int64_t per_row = d.spec.HV * d.spec.V;
  const int64_t valid = d.spec.B * d.valid_tokens * per_row;  // varlen: B = 1, rows first
  double L = 0;
  for (int64_t i = 0; i < valid; ++i) L += out.o.get(i) * c.d_o.get(i);
  if (c.d_final_state.defined())
    for (int64_t i = 0; i < out.final_state.numel(); ++i)
      L += out.final_state.get(i) * c.d_final_state.get(i);
  return L;
}

// Perturbs every element of `x` (a tensor inside d) and compares with the analytic gradient.
void check_tensor(ChunkAttnData& d, Tensor& x, const Tensor& grad, const ChunkAttnCotangents& c,
                  const std::string& name) {
  if (!x.defined()) return;
  ASSERT_TRUE(grad.defined()) << name << ": analytic gradient missing";
  ASSERT_EQ(grad.numel(), x.numel()) << name;
  const double eps = 1e-5;
  double worst = 0;
  int64_t worst_i = -1;
  double worst_fd = 0, worst_an = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double x0 = x.get(i);
    x.set(i, x0 + eps);
    const double hi = x.get(i) - x0;  // the step actually stored (fp32 tensors round it)
    const double lp = loss(d, c);
    x.set(i, x0 - eps);
    const double lo = x0 - x.get(i);
    const double lm = loss(d, c);
    x.set(i, x0);
    const double fd = (lp - lm) / (hi + lo), an = grad.get(i);
    const double err = std::fabs(fd - an) / (1e-6 + 1e-6 * std::fabs(an));
    if (std::isnan(err) || err > worst) {
      worst = std::isnan(err) ? INFINITY : err;
      worst_i = i;
      worst_fd = fd;
      worst_an = an;
    }
  }
  EXPECT_LE(worst, 1.0) << name << ": worst element " << worst_i << " finite-difference "
                        << worst_fd << " vs analytic " << worst_an
                        << " (allowed 1e-6 + 1e-6 |analytic|)";
}

class RefGrad : public ::testing::TestWithParam<GradCase> {};

TEST_P(RefGrad, MatchesFiniteDifferences) {
  const GradCase& gc = GetParam();
  ChunkAttnSpec s;
  s.opt.op = gc.op;
  s.opt.output_final_state = true;
  s.opt.use_qk_l2norm_in_kernel = gc.l2norm;
  s.opt.use_gate_in_kernel = gc.gate;
  s.opt.has_lower_bound = gc.lower_bound;
  s.opt.lower_bound = -2.5;
  s.opt.use_beta_sigmoid_in_kernel = gc.sigmoid;
  s.opt.allow_neg_eigval = gc.neg;
  s.opt.state_v_first = gc.v_first;
  s.opt.scale = gc.scale;
  s.H = gc.H;
  s.HV = gc.HV;
  s.K = 3;
  s.V = 2;
  if (gc.seqlens.empty()) {
    s.B = 2;
    s.T = 5;
  }
  s.seqlens = gc.seqlens;
  s.pad_tokens = gc.pad;
  s.has_h0 = gc.h0;
  s.has_A_log = gc.A_log;
  s.has_dt_bias = gc.dt_bias;
  s.dt_bias_2d = gc.dt_bias_2d;
  s.gate = gc.dist;
  s.seed = std::hash<std::string>{}(gc.name);
  s.all_dtypes(DType::kF64);
  ChunkAttnData d = make_chunk_attn(s);
  if (gc.gate && gc.op == ChunkOp::kGdn) d.g.set(3, 23.0);  // softplus identity branch
  Rng rng(s.seed + 1);
  const ChunkAttnCotangents c = random_cotangents(d, rng, DType::kF64, gc.dht);
  const ChunkAttnGradTensors g = ref_backward(d, c);
  check_tensor(d, d.q, g.dq, c, "dq");
  check_tensor(d, d.k, g.dk, c, "dk");
  check_tensor(d, d.v, g.dv, c, "dv");
  check_tensor(d, d.g, g.dg, c, "dg");
  check_tensor(d, d.beta, g.dbeta, c, "dbeta");
  check_tensor(d, d.A_log, g.dA_log, c, "dA_log");
  check_tensor(d, d.dt_bias, g.ddt_bias, c, "ddt_bias");
  check_tensor(d, d.initial_state, g.dinitial_state, c, "dinitial_state");
  // Padding rows: the op never reads them, their gradients are exactly 0.
  if (gc.pad > 0) {
    for (const Tensor* t : {&g.dq, &g.dk, &g.dv, &g.dg, &g.dbeta}) {
      const int64_t w = t->numel() / d.T();
      for (int64_t i = d.valid_tokens * w; i < t->numel(); ++i) EXPECT_EQ(t->get(i), 0.0) << i;
    }
  }
}

std::vector<GradCase> cases() {
  std::vector<GradCase> out;
  for (ChunkOp op : {ChunkOp::kGdn, ChunkOp::kKda}) {
    const std::string p = op == ChunkOp::kGdn ? "gdn_" : "kda_";
    auto add = [&](GradCase c) {
      c.name = p + c.name;
      c.op = op;
      out.push_back(c);
    };
    add({.name = "plain"});
    add({.name = "no_h0_no_dht", .h0 = false, .dht = false});
    add({.name = "no_h0_dht", .h0 = false});
    add({.name = "h0_no_dht", .dht = false});
    add({.name = "scale", .scale = 0.37});
    add({.name = "gva_varlen", .H = 1, .HV = 3, .seqlens = {3, 0, 4}, .pad = 2});
    add({.name = "gva2_l2norm", .H = 2, .HV = 4, .l2norm = true});
    add({.name = "mixed_decay_heads", .HV = 3, .dist = GateDist::kMixedHeads});
    add({.name = "gate", .gate = true});
    add({.name = "gate_no_dt_bias", .gate = true, .dt_bias = false});
    add({.name = "sigmoid", .sigmoid = true});
    add({.name = "sigmoid_neg_eigval", .sigmoid = true, .neg = true});
    add({.name = "v_first", .v_first = true});
    add({.name = "v_first_varlen_zero_len", .seqlens = {0, 4, 0, 3, 0}, .pad = 1, .v_first = true});
    add({.name = "everything",
         .H = 1,
         .HV = 2,
         .seqlens = {2, 0, 5},
         .pad = 1,
         .l2norm = true,
         .gate = true,
         .sigmoid = true,
         .neg = true,
         .v_first = true});
    if (op == ChunkOp::kKda) {
      add({.name = "gate_dt_bias_2d", .gate = true, .dt_bias_2d = true});
      add({.name = "lower_bound", .gate = true, .lower_bound = true});
      add({.name = "lower_bound_no_A_log", .gate = true, .lower_bound = true, .A_log = false});
      add({.name = "lower_bound_only",
           .gate = true,
           .lower_bound = true,
           .A_log = false,
           .dt_bias = false});
      add({.name = "lower_bound_everything",
           .H = 1,
           .HV = 2,
           .seqlens = {3, 0, 2},
           .pad = 1,
           .l2norm = true,
           .gate = true,
           .lower_bound = true,
           .sigmoid = true,
           .v_first = true});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cases, RefGrad, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace linattn::test
