// GRAPH_CONTRACT.md section 8 on the CPU for forward + backward: static buffers of T_max rows and
// N_max sequences; one linattn::Graph captures chunk_attn_fwd and chunk_attn_bwd (use_graph =
// true); then six layouts (dense, varlen, zero-length tail sequences, actual T < T_max, one
// sequence filling the bucket, a different split) are copied in place, with NaN garbage in
// every padding row of every token input and of d_o, and replayed twice. Checks: replay equals
// the eager fixed-capacity calls bitwise (o on valid rows, final state, every gradient including
// the zeroed padding rows); eager exact-size (use_graph = false, T = cu_seqlens[N]) within
// tolerance; the fp64 reference within tolerance; zero-length sequences pass d_ht to dh0 exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "bwd_test_util.h"
#include "linattn/graph.h"

namespace linattn::test {
namespace {

constexpr int64_t kTmax = 150, kNmax = 4;

struct Layout {
  const char* name;
  std::vector<int64_t> lens;  // kNmax entries
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> l = {
      {"dense", {37, 37, 37, 37}}, {"varlen", {64, 1, 33, 17}}, {"zero_tail", {90, 25, 0, 0}},
      {"short", {5, 0, 12, 3}},    {"one_fills", {kTmax, 0, 0, 0}}, {"split", {0, 63, 65, 2}},
  };
  return l;
}

struct Config {
  ChunkOp op;
  int BT;
  DType dtype;
  bool h0;
};

std::string config_name(const Config& c) {
  return std::string(c.op == ChunkOp::kGdn ? "gdn" : "kda") + "_bt" + std::to_string(c.BT) + "_" +
         dtype_name(c.dtype) + (c.h0 ? "_h0" : "_noh0");
}

ChunkAttnSpec spec_for(const Config& c, const Layout& l, uint64_t seed) {
  ChunkAttnSpec s;
  s.opt.op = c.op;
  s.opt.chunk_size = c.BT;
  s.opt.use_qk_l2norm_in_kernel = s.opt.use_gate_in_kernel = s.opt.use_beta_sigmoid_in_kernel = true;
  s.opt.output_final_state = true;
  s.opt.use_graph = true;
  s.opt.max_num_seqs = kNmax;
  s.H = 1;
  s.HV = 2;
  s.K = 24;
  s.V = 20;
  s.seqlens = l.lens;
  int64_t used = 0;
  for (int64_t x : l.lens) used += x;
  s.pad_tokens = kTmax - used;
  s.dtype = s.gate_dtype = c.dtype;
  s.has_h0 = c.h0;
  s.seed = seed;
  return s;
}

class GraphFwdBwd : public ::testing::TestWithParam<Config> {};

TEST_P(GraphFwdBwd, ContractSequence) {
  const Config cfg = GetParam();
  // 1. Static buffers (shaped by the first layout; every layout has the same shapes).
  ChunkAttnData stat = make_chunk_attn(spec_for(cfg, layouts()[0], 1));
  Rng crng(3);
  ChunkAttnCotangents scot = random_cotangents(stat, crng, DType::kF32, true);
  OpRun sres = alloc_run(stat);
  // 2. Eager warm-up on the static buffers, 3. capture once.
  fwd_bwd(stat, scot, stat.opt(), sres);
  Graph graph;
  graph.capture([&] { fwd_bwd(stat, scot, stat.opt(), sres); });
  ASSERT_EQ(graph.num_nodes(), 2u);

  uint64_t seed = 10;
  for (const Layout& l : layouts()) {
    SCOPED_TRACE(l.name);
    // 4. New content with garbage in the padding, copied into the static buffers in place.
    ChunkAttnData d = make_chunk_attn(spec_for(cfg, l, ++seed));
    Rng rng(seed * 7);
    ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kF32, true);
    const ChunkAttnGradTensors ref = ref_backward(d, cot);
    const ChunkAttnOutTensors ref_o = ref_forward(d);
    for (Tensor* t : {&d.q, &d.k, &d.v, &d.g, &d.beta, &cot.d_o}) poison_rows(*t, d.valid_tokens);
    for (auto [dst, src] : {std::pair{&stat.q, &d.q}, {&stat.k, &d.k}, {&stat.v, &d.v}, {&stat.g, &d.g},
                            {&stat.beta, &d.beta}, {&stat.A_log, &d.A_log}, {&stat.dt_bias, &d.dt_bias},
                            {&stat.initial_state, &d.initial_state}, {&stat.cu_seqlens, &d.cu_seqlens},
                            {&scot.d_o, &cot.d_o}, {&scot.d_final_state, &cot.d_final_state}})
      copy_into(*dst, *src);
    // 5. Eager fixed-capacity and eager exact-size on the same content.
    OpRun fixed = alloc_run(d);
    fwd_bwd(d, cot, d.opt(), fixed);
    ChunkAttnData live = d;
    live.spec.opt.use_graph = false;
    live.spec.opt.max_num_seqs = 0;
    live.spec.pad_tokens = 0;
    live.spec.T = d.valid_tokens;
    for (Tensor* t : {&live.q, &live.k, &live.v, &live.g, &live.beta}) {
      Tensor n(t->dtype(), {1, d.valid_tokens, t->shape()[2]});
      if (t->shape().size() == 4) n = Tensor(t->dtype(), {1, d.valid_tokens, t->shape()[2], t->shape()[3]});
      std::memcpy(n.view().data, t->view().data, n.view().nbytes());
      *t = n;
    }
    ChunkAttnCotangents live_cot;
    live_cot.d_o = Tensor(DType::kF32, {1, d.valid_tokens, 2, 20});
    std::memcpy(live_cot.d_o.view().data, cot.d_o.view().data, live_cot.d_o.view().nbytes());
    live_cot.d_final_state = cot.d_final_state;
    OpRun eager = alloc_run(live);
    fwd_bwd(live, live_cot, live.opt(), eager);
    // 6. Replay twice (stale metadata would show on the second layout onwards).
    for (int rep = 0; rep < 2; ++rep) {
      graph.replay();
      SCOPED_TRACE("replay " + std::to_string(rep));
      EXPECT_TRUE(grads_bitwise_equal(fixed.grads, sres.grads));
      EXPECT_TRUE(same_bits(fixed.out.final_state, sres.out.final_state));
      const TensorView a = narrow(fixed.out.o.view(), 1, 0, d.valid_tokens);
      const TensorView b = narrow(sres.out.o.view(), 1, 0, d.valid_tokens);
      EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes()), 0) << "o differs bitwise";
    }
    const DType tol = cfg.dtype;
    EXPECT_TRUE(bwd_close(d, ref, fixed.grads, tol));
    EXPECT_TRUE(fwd_close(d, ref_o, fixed.out, tol));
    for (const auto& [name, t] : {std::pair{"dq", &fixed.grads.dq}, {"dk", &fixed.grads.dk},
                                  {"dv", &fixed.grads.dv}, {"dg", &fixed.grads.dg},
                                  {"dbeta", &fixed.grads.dbeta}})
      EXPECT_TRUE(rows_zero(name, *t, d.valid_tokens));
    // Eager exact-size vs eager fixed-capacity: same math, compared on the valid rows.
    auto rows = [&](const Tensor& t) { return narrow(t.view(), 1, 0, d.valid_tokens); };
    EXPECT_TRUE(tensors_close("dq live", rows(eager.grads.dq), rows(fixed.grads.dq), tolerance(tol, Qty::kDq)));
    EXPECT_TRUE(tensors_close("dg live", rows(eager.grads.dg), rows(fixed.grads.dg), tolerance(tol, Qty::kDg)));
    EXPECT_TRUE(tensors_close("dA_log live", eager.grads.dA_log, fixed.grads.dA_log, tolerance(tol, Qty::kDA_log)));
    if (cfg.h0)
      EXPECT_TRUE(tensors_close("dh0 live", eager.grads.dinitial_state, fixed.grads.dinitial_state,
                                tolerance(tol, Qty::kDh0)));
    // Zero-length sequences: dh0 = d_ht exactly.
    if (cfg.h0) {
      const int64_t sz = fixed.grads.dinitial_state.numel() / kNmax;
      for (int64_t n = 0; n < kNmax; ++n)
        for (int64_t i = n * sz; l.lens[n] == 0 && i < (n + 1) * sz; ++i)
          ASSERT_EQ(fixed.grads.dinitial_state.get(i), cot.d_final_state.get(i)) << "seq " << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, GraphFwdBwd,
                         ::testing::Values(Config{ChunkOp::kGdn, 64, DType::kF32, true},
                                           Config{ChunkOp::kGdn, 32, DType::kBF16, false},
                                           Config{ChunkOp::kKda, 64, DType::kF16, true},
                                           Config{ChunkOp::kKda, 32, DType::kF32, false}),
                         [](const ::testing::TestParamInfo<Config>& i) { return config_name(i.param); });

}  // namespace
}  // namespace linattn::test
