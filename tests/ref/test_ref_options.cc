// The reference's in-kernel transforms against their precomputed equivalents (q/k L2 norm, GDN
// gate, KDA default / lower_bound gates with and without A_log and dt_bias, beta sigmoid and
// allow_neg_eigval), and extreme gates: -1000 stays finite and resets the state exactly.
#include <gtest/gtest.h>

#include <cmath>

#include "common/chunk_attn_check.h"
#include "common/compare.h"

namespace linattn::test {
namespace {

constexpr Tolerance kExact{1e-14, 0.0};

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }

ChunkAttnSpec base(ChunkOp op, uint64_t seed) {
  ChunkAttnSpec s;
  s.opt.op = op;
  s.opt.output_final_state = true;
  s.seqlens = {5, 0, 8};
  s.pad_tokens = 1;
  s.H = 1;
  s.HV = 2;
  s.K = 4;
  s.V = 3;
  s.seed = seed;
  s.all_dtypes(DType::kF64);
  return s;
}

void expect_same(const ChunkAttnData& a, const ChunkAttnData& b, const Tolerance& tol) {
  const ChunkAttnOutTensors oa = ref_forward(a), ob = ref_forward(b);
  EXPECT_TRUE(fwd_close(a, oa, ob, DType::kF64));
  EXPECT_TRUE(tensors_close("o", narrow(oa.o.view(), 1, 0, a.valid_tokens),
                            narrow(ob.o.view(), 1, 0, a.valid_tokens), tol));
  EXPECT_TRUE(tensors_close("final_state", oa.final_state, ob.final_state, tol));
}

class RefOptions : public ::testing::TestWithParam<ChunkOp> {};

TEST_P(RefOptions, L2NormInKernel) {
  ChunkAttnSpec s = base(GetParam(), 3);
  s.opt.use_qk_l2norm_in_kernel = true;
  const ChunkAttnData a = make_chunk_attn(s);
  ChunkAttnData b = a;
  b.spec.opt.use_qk_l2norm_in_kernel = false;
  for (Tensor* t : {&b.q, &b.k}) {
    for (int64_t r = 0; r < t->numel() / 4; ++r) {
      double ss = 0;
      for (int i = 0; i < 4; ++i) ss += t->get(r * 4 + i) * t->get(r * 4 + i);
      for (int i = 0; i < 4; ++i) t->set(r * 4 + i, t->get(r * 4 + i) / std::sqrt(ss + 1e-6));
    }
  }
  expect_same(a, b, kExact);
}

TEST_P(RefOptions, BetaSigmoidAndNegEigval) {
  for (bool neg : {false, true}) {
    ChunkAttnSpec s = base(GetParam(), 5);
    s.opt.use_beta_sigmoid_in_kernel = true;
    s.opt.allow_neg_eigval = neg;
    const ChunkAttnData a = make_chunk_attn(s);
    ChunkAttnData b = a;
    b.spec.opt.use_beta_sigmoid_in_kernel = b.spec.opt.allow_neg_eigval = false;
    for (int64_t i = 0; i < b.beta.numel(); ++i)
      b.beta.set(i, (neg ? 2 : 1) * sigmoid(a.beta.get(i)));
    expect_same(a, b, kExact);
  }
}

struct GateCase {
  const char* name;
  ChunkOp op;
  bool lower_bound, A_log, dt_bias, dt_bias_2d;
};

class RefGate : public ::testing::TestWithParam<GateCase> {};

TEST_P(RefGate, InKernelEqualsPrecomputed) {
  const GateCase c = GetParam();
  ChunkAttnSpec s = base(c.op, 7);
  s.opt.use_gate_in_kernel = true;
  s.opt.has_lower_bound = c.lower_bound;
  s.opt.lower_bound = -3.0;
  s.has_A_log = c.A_log;
  s.has_dt_bias = c.dt_bias;
  s.dt_bias_2d = c.dt_bias_2d;
  ChunkAttnData a = make_chunk_attn(s);
  a.g.set(1, 25.0);  // softplus is the identity above 20
  a.g.set(7, 21.5);
  ChunkAttnData b = a;
  b.spec.opt.use_gate_in_kernel = b.spec.opt.has_lower_bound = false;
  b.A_log = Tensor();
  b.dt_bias = Tensor();
  const int64_t gw = c.op == ChunkOp::kKda ? 4 : 1;
  for (int64_t i = 0; i < a.g.numel(); ++i) {
    const int64_t j = (i / gw) % 2, ch = j * gw + i % gw;
    const double x = a.g.get(i) + (c.dt_bias ? a.dt_bias.get(ch) : 0.0);
    const double A = c.A_log ? std::exp(a.A_log.get(j)) : 1.0;
    b.g.set(i, c.lower_bound ? -3.0 * sigmoid(A * x) : -A * softplus(x));
  }
  expect_same(a, b, kExact);
}

INSTANTIATE_TEST_SUITE_P(
    Gates, RefGate,
    ::testing::Values(GateCase{"gdn", ChunkOp::kGdn, false, true, true, false},
                      GateCase{"gdn_no_dt_bias", ChunkOp::kGdn, false, true, false, false},
                      GateCase{"kda", ChunkOp::kKda, false, true, true, false},
                      GateCase{"kda_dt_bias_2d", ChunkOp::kKda, false, true, true, true},
                      GateCase{"kda_lower_bound", ChunkOp::kKda, true, true, true, false},
                      GateCase{"kda_lower_bound_no_A_log", ChunkOp::kKda, true, false, true, false},
                      GateCase{"kda_lower_bound_only", ChunkOp::kKda, true, false, false, false}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_P(RefOptions, ExtremeGatesStayFinite) {
  ChunkAttnSpec s = base(GetParam(), 9);
  s.seqlens = {40, 0, 33};
  s.gate = GateDist::kMixedHeads;
  s.HV = 3;
  s.extreme_gate_frac = 0.2;
  const ChunkAttnData d = make_chunk_attn(s);
  const ChunkAttnOutTensors out = ref_forward(d);
  EXPECT_TRUE(all_finite(narrow(out.o.view(), 1, 0, d.valid_tokens)));
  EXPECT_TRUE(all_finite(out.final_state.view()));
}

// A gate of -1000 on every channel wipes the state (e^-1000 is 0 in fp64): the outputs from that
// token on equal a fresh run from a zero state.
TEST_P(RefOptions, GateMinus1000ResetsState) {
  ChunkAttnSpec s = base(GetParam(), 11);
  s.seqlens.clear();
  s.T = 9;
  s.HV = 1;
  ChunkAttnData a = make_chunk_attn(s);
  const int64_t gw = a.kda() ? 4 : 1, cut = 4;
  for (int64_t c = 0; c < gw; ++c) a.g.set(cut * gw + c, -1000.0);
  ChunkAttnSpec tail = s;
  tail.T = 9 - cut;
  tail.has_h0 = false;
  ChunkAttnData b = make_chunk_attn(tail);
  for (Tensor* dst : {&b.q, &b.k, &b.v, &b.g, &b.beta}) {
    const Tensor& src = dst == &b.q   ? a.q
                        : dst == &b.k ? a.k
                        : dst == &b.v ? a.v
                        : dst == &b.g ? a.g
                                      : a.beta;
    const int64_t w = src.numel() / 9;
    for (int64_t i = 0; i < dst->numel(); ++i) dst->set(i, src.get(cut * w + i));
  }
  const ChunkAttnOutTensors oa = ref_forward(a), ob = ref_forward(b);
  for (int64_t i = 0; i < ob.o.numel(); ++i) EXPECT_EQ(ob.o.get(i), oa.o.get(cut * 3 + i)) << i;
  EXPECT_TRUE(tensors_close("final_state", ob.final_state, oa.final_state, kExact));
}

INSTANTIATE_TEST_SUITE_P(Ops, RefOptions, ::testing::Values(ChunkOp::kGdn, ChunkOp::kKda),
                         [](const auto& info) {
                           return info.param == ChunkOp::kGdn ? "gdn" : "kda";
                         });

}  // namespace
}  // namespace linattn::test
