// Tests of the shared test helpers: generators (seeded, distributions of ALGORITHMS.md section 8,
// never zeros), seqlen layouts, the FLA-style comparison (metric, worst element, NaN), the
// tolerance table's floors, and fwd_close / bwd_close on the reference's own results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>
#include <utility>

#include "common/chunk_attn_check.h"
#include "common/compare.h"
#include "common/tolerances.h"

namespace linattn::test {
namespace {

ChunkAttnSpec small(ChunkOp op) {
  ChunkAttnSpec s;
  s.opt.op = op;
  s.opt.output_final_state = true;
  s.B = 2;
  s.T = 20;
  s.H = 2;
  s.HV = 6;
  s.K = 8;
  s.V = 4;
  return s;
}

int64_t count_zeros(const Tensor& t) {
  int64_t z = 0;
  for (int64_t i = 0; i < t.numel(); ++i) z += t.get(i) == 0.0;
  return z;
}

TEST(Generators, SeededAndNeverZero) {
  for (ChunkOp op : {ChunkOp::kGdn, ChunkOp::kKda}) {
    ChunkAttnSpec s = small(op);
    s.opt.use_gate_in_kernel = true;
    const ChunkAttnData a = make_chunk_attn(s), b = make_chunk_attn(s);
    s.seed = 2;
    const ChunkAttnData c = make_chunk_attn(s);
    for (auto [x, y, z] : {std::tuple{&a.q, &b.q, &c.q},
                           {&a.v, &b.v, &c.v},
                           {&a.g, &b.g, &c.g},
                           {&a.initial_state, &b.initial_state, &c.initial_state}}) {
      EXPECT_TRUE(tensors_close("same seed", x->view(), y->view(), {0.0, 0.0}));
      EXPECT_FALSE(tensors_close("other seed", x->view(), z->view(), {1e-3, 0.0}));
    }
    for (const Tensor* t :
         {&a.q, &a.k, &a.v, &a.g, &a.beta, &a.A_log, &a.dt_bias, &a.initial_state})
      EXPECT_EQ(count_zeros(*t), 0);
  }
}

TEST(Generators, Distributions) {
  ChunkAttnSpec s = small(ChunkOp::kGdn);
  const ChunkAttnData d = make_chunk_attn(s);
  for (int64_t r = 0; r < d.q.numel() / 8; ++r) {  // unit-norm rows without the in-kernel norm
    double ss = 0;
    for (int i = 0; i < 8; ++i) ss += d.q.get(r * 8 + i) * d.q.get(r * 8 + i);
    EXPECT_NEAR(ss, 1.0, 1e-6);
  }
  for (int64_t i = 0; i < d.beta.numel(); ++i) {
    EXPECT_GT(d.beta.get(i), 0.0);
    EXPECT_LT(d.beta.get(i), 1.0);
  }
  s.gate = GateDist::kMixedHeads;
  const ChunkAttnData m = make_chunk_attn(s);
  for (int64_t i = 0; i < m.g.numel(); ++i) {
    const double g = m.g.get(i);
    switch ((i % 6) % 3) {
      case 0:
        EXPECT_TRUE(g < 0 && g > -30);
        break;
      case 1:
        EXPECT_TRUE(g <= -31.3 && g >= -69.4) << g;
        break;
      default:
        EXPECT_EQ(g, 0.0);
    }
  }
  ChunkAttnSpec k = small(ChunkOp::kKda);
  k.extreme_gate_frac = 0.25;
  const ChunkAttnData e = make_chunk_attn(k);
  int64_t extreme = 0;
  for (int64_t i = 0; i < e.g.numel(); ++i) extreme += e.g.get(i) == -1000.0;
  EXPECT_NEAR(static_cast<double>(extreme) / e.g.numel(), 0.25, 0.05);
  k.extreme_gate_frac = 0;
  k.gate = GateDist::kStrong;
  k.opt.has_lower_bound = true;
  k.opt.lower_bound = -5;
  const ChunkAttnData lb = make_chunk_attn(k);
  for (int64_t i = 0; i < lb.g.numel(); ++i) EXPECT_EQ(lb.g.get(i), -5.0);  // clamped
}

TEST(Generators, Seqlens) {
  Rng rng(3);
  int zero_seen = 0;
  for (int it = 0; it < 200; ++it) {
    const int64_t N = rng.integer(1, 6), total = rng.integer(0, 300);
    const auto l = random_seqlens(rng, N, total, 0.3);
    ASSERT_EQ(static_cast<int64_t>(l.size()), N);
    EXPECT_EQ(std::accumulate(l.begin(), l.end(), int64_t{0}), total);
    for (int64_t x : l) EXPECT_GE(x, 0);
    zero_seen += std::count(l.begin(), l.end(), 0);
  }
  EXPECT_GT(zero_seen, 50);
  const Tensor cu = cu_seqlens_tensor(edge_seqlens(64), DType::kI64);
  const std::vector<double> want = {0, 0, 1, 64, 128, 193, 324};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(cu.get(static_cast<int64_t>(i)), want[i]);
}

TEST(Tensors, CopiesOwnTheirStorage) {
  Tensor a = full(DType::kF32, {3}, 1.0);
  Tensor b = a;
  b.set(0, 2.0);
  EXPECT_EQ(a.get(0), 1.0);
  EXPECT_NE(a.view().data, b.view().data);
  Tensor c;
  c = b;
  EXPECT_EQ(c.get(0), 2.0);
  EXPECT_EQ(c.view().data, c.data<float>());
}

TEST(Compare, MetricWorstElementAndNan) {
  Tensor ref(DType::kF64, {2, 3}), got(DType::kF64, {2, 3});
  for (int i = 0; i < 6; ++i) ref.set(i, i + 1.0), got.set(i, i + 1.0);
  EXPECT_TRUE(tensors_close("same", ref, got, {0.0, 0.0}));
  got.set(4, 5.5);  // element [1, 1]
  const CompareResult r = compare(ref, got, {1e-3, 1e-6});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.worst, 4);
  EXPECT_EQ(r.worst_coords, "[1, 1]");
  EXPECT_DOUBLE_EQ(r.max_abs, 0.5);
  EXPECT_NEAR(r.rel_rms, std::sqrt(0.25 / 6) / (std::sqrt(91.0 / 6) + 1e-8), 1e-15);
  EXPECT_TRUE(compare(ref, got, {0.1, 0.0}).ok);
  EXPECT_TRUE(compare(ref, got, {0.0, 0.5}).ok);  // max abs within atol passes outright
  got.set(2, NAN);
  const CompareResult n = compare(ref, got, {1.0, 1.0});
  EXPECT_FALSE(n.ok);
  EXPECT_TRUE(n.non_finite);
  EXPECT_EQ(n.worst, 2);
  EXPECT_NE(n.describe("x", {1.0, 1.0}).find("NON-FINITE"), std::string::npos);
  EXPECT_FALSE(tensors_close("shape", ref, Tensor(DType::kF64, {3, 2}), {1.0, 1.0}));
}

TEST(Tolerances, FloorsAndOrdering) {
  for (DType half : {DType::kBF16, DType::kF16}) {
    EXPECT_LE(tolerance(half, Qty::kO).rel_rms, 0.005);
    EXPECT_LE(tolerance(half, Qty::kFinalState).rel_rms, 0.005);
    for (Qty q : {Qty::kDq, Qty::kDk, Qty::kDv, Qty::kDh0, Qty::kDdt_bias})
      EXPECT_LE(tolerance(half, q).rel_rms, 0.008) << qty_name(q);
    for (Qty q : {Qty::kDg, Qty::kDbeta, Qty::kDA_log, Qty::kDdt_bias_head}) EXPECT_LE(tolerance(half, q).rel_rms, 0.02);
    EXPECT_LE(tolerance(half, Qty::kConvY).rel_rms, 1e-3);
  }
  for (int q = 0; q <= static_cast<int>(Qty::kConvDh0); ++q) {
    const Qty x = static_cast<Qty>(q);
    EXPECT_LT(tolerance(DType::kF32, x).rel_rms, tolerance(DType::kBF16, x).rel_rms) << qty_name(x);
    EXPECT_LE(tolerance(DType::kF32, x).rel_rms, 5e-4) << qty_name(x);
    EXPECT_LT(tolerance(DType::kF64, x).rel_rms, tolerance(DType::kF32, x).rel_rms) << qty_name(x);
  }
}

// The standard check accepts the reference against itself rounded to bf16, rejects a perturbed
// result, and ignores padding rows.
TEST(ChunkAttnCheck, FwdAndBwdClose) {
  ChunkAttnSpec s = small(ChunkOp::kKda);
  s.seqlens = {5, 0, 9};
  s.pad_tokens = 2;
  s.opt.use_gate_in_kernel = true;
  const ChunkAttnData d = make_chunk_attn(s);
  const ChunkAttnOutTensors ref = ref_forward(d);
  ChunkAttnOutTensors got{ref.o.to(DType::kBF16), ref.final_state.to(DType::kF32)};
  EXPECT_TRUE(fwd_close(d, ref, got, DType::kBF16));
  got.o.set(3, got.o.get(3) + 1.0);
  const ::testing::AssertionResult bad = fwd_close(d, ref, got, DType::kBF16);
  EXPECT_FALSE(bad);
  EXPECT_NE(std::string(bad.message()).find("worst at [0, 0, 0, 3]"), std::string::npos)
      << bad.message();
  Rng rng(9);
  const ChunkAttnCotangents c = random_cotangents(d, rng, DType::kF64, true);
  const ChunkAttnGradTensors g = ref_backward(d, c);
  ChunkAttnGradTensors g32 = alloc_grads(d, DType::kF32, DType::kF32);
  for (auto [src, dst] : {std::pair{&g.dq, &g32.dq},
                          {&g.dk, &g32.dk},
                          {&g.dv, &g32.dv},
                          {&g.dg, &g32.dg},
                          {&g.dbeta, &g32.dbeta},
                          {&g.dA_log, &g32.dA_log},
                          {&g.ddt_bias, &g32.ddt_bias},
                          {&g.dinitial_state, &g32.dinitial_state}})
    *dst = src->to(DType::kF32);
  EXPECT_TRUE(bwd_close(d, g, g32, DType::kF32));
  g32.dA_log.set(0, g32.dA_log.get(0) * 1.1);
  EXPECT_FALSE(bwd_close(d, g, g32, DType::kF32));
}

}  // namespace
}  // namespace linattn::test
