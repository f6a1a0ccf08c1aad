// Tier 3 (exact in-sequence splitting, cpu/chunk_fwd_seg.h / chunk_bwd_seg.h) on the CPU:
// forward and backward at several segment counts against the fp64 reference and against tier 1
// (segments = 1) on the same inputs, for GDN and KDA with every option (GVA, varlen with lengths
// 0 / 1 / BT-1 / BT / BT+1 / long, in-kernel l2norm / gate / sigmoid / neg eigval, state_v_first,
// KDA lower bound, strong decay and -1000 gates, bf16), 1 vs 2 threads bitwise, and the planner
// decision printed by the api. The graph-replay test lives in test_tier3_graph.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../cpu_bwd/bwd_test_util.h"
#include "api/chunk_attn_fwd_cpu.h"
#include "common/chunk_attn_check.h"
#include "common/chunk_attn_gen.h"

namespace linattn::test {
namespace {

struct Case {
  std::string name;
  ChunkOp op = ChunkOp::kGdn;
  int BT = 16;
  DType dtype = DType::kF32;
  int64_t H = 1, HV = 2, K = 20, V = 36;
  std::vector<int64_t> seqlens = {0, 1, 15, 16, 17, 150, 97};
  bool l2norm = false, gate = false, sigmoid = false, neg = false, vfirst = false, lb = false;
  bool h0 = true, ht = true;
  GateDist dist = GateDist::kLogSigmoid;
  double extreme = 0.0;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

ChunkAttnData make(const Case& c, uint64_t seed) {
  ChunkAttnSpec s;
  set_case_spec(s, c, c.lb, c.ht);
  s.has_h0 = c.h0;
  s.seqlens = c.seqlens;
  s.pad_tokens = 3;
  s.seed = seed;
  ChunkAttnData d = make_chunk_attn(s);
  // Weak in-kernel decay (-exp(A_log) softplus(.) ~ -0.003 per token), so that a segment's
  // incoming state still shapes every output of the next segment and a wrong combine shows.
  if (c.gate && !c.lb)
    for (int64_t j = 0; j < c.HV; ++j) d.A_log.set(j, -6.0);
  return d;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (ChunkOp op : {ChunkOp::kGdn, ChunkOp::kKda}) {
    const std::string p = op == ChunkOp::kGdn ? "gdn_" : "kda_";
    Case c;
    c.op = op;
    c.name = p + "no_decay";  // the incoming state matters at every position
    c.dist = GateDist::kNoDecay;
    v.push_back(c);
    c.dist = GateDist::kLogSigmoid;
    c.name = p + "all_options";
    c.l2norm = c.gate = c.sigmoid = c.neg = c.vfirst = true;
    c.H = 2;
    c.HV = 4;
    c.BT = 32;
    v.push_back(c);
    c = Case{};
    c.op = op;
    c.name = p + "bf16_bt64";
    c.dtype = DType::kBF16;
    c.BT = 64;
    c.seqlens = {200, 3, 130};
    c.gate = c.sigmoid = true;
    v.push_back(c);
    c = Case{};
    c.op = op;
    c.name = p + "mixed_decay";
    c.dist = GateDist::kMixedHeads;
    c.HV = 3;
    c.H = 1;
    v.push_back(c);
  }
  for (ChunkOp op : {ChunkOp::kGdn, ChunkOp::kKda}) {
    Case c;
    c.op = op;
    c.name = op == ChunkOp::kGdn ? "gdn_no_states" : "kda_no_states";  // no h0, no final state
    c.dist = GateDist::kNoDecay;
    c.h0 = c.ht = false;
    v.push_back(c);
  }
  Case c;
  c.op = ChunkOp::kKda;
  c.name = "kda_lower_bound_extreme";
  c.gate = c.lb = true;
  v.push_back(c);
  c = Case{};
  c.op = ChunkOp::kKda;
  c.name = "kda_minus_1000_gates";
  c.dist = GateDist::kNoDecay;  // zero gates except the -1000 ones
  c.extreme = 0.05;
  v.push_back(c);
  return v;
}

ChunkAttnOutTensors run_fwd(const ChunkAttnData& d, int segments, int threads = 0) {
  ChunkAttnOutTensors o = alloc_outputs(d, d.spec.dtype, DType::kF32);
  ChunkAttnOptions opt = d.opt();
  opt.segments = segments;
  ExecContext ctx;
  ctx.num_threads = threads;
  chunk_attn_fwd(d.inputs(), o.views(), opt, ctx);
  return o;
}

ChunkAttnGradTensors run_bwd(const ChunkAttnData& d, const ChunkAttnCotangents& c, int segments, int threads = 0) {
  ChunkAttnGradTensors g = alloc_grads(d, d.spec.dtype, DType::kF32);
  ChunkAttnOptions opt = d.opt();
  opt.segments = segments;
  ExecContext ctx;
  ctx.num_threads = threads;
  chunk_attn_bwd(d.inputs(), c.d_o.view(), c.d_final_state.view(), g.views(), opt, ctx);
  return g;
}

class Tier3 : public ::testing::TestWithParam<Case> {};

TEST_P(Tier3, ForwardMatchesReferenceAndTier1) {
  const Case c = GetParam();
  const ChunkAttnData d = make(c, 7);
  const ChunkAttnOutTensors ref = ref_forward(d);
  const ChunkAttnOutTensors t1 = run_fwd(d, 1);
  EXPECT_TRUE(fwd_close(d, ref, t1, c.dtype));
  for (int s : {2, 3, 5}) {
    SCOPED_TRACE("segments " + std::to_string(s));
    ChunkAttnOptions opt = d.opt();
    opt.segments = s;
    EXPECT_NE(api::chunk_attn_fwd_plan(d.inputs(), opt).find("tier 3"), std::string::npos);
    const ChunkAttnOutTensors t3 = run_fwd(d, s);
    EXPECT_TRUE(fwd_close(d, ref, t3, c.dtype));
    EXPECT_TRUE(fwd_close(d, t1, t3, c.dtype));
  }
}

TEST_P(Tier3, BackwardMatchesReferenceAndTier1) {
  const Case c = GetParam();
  const ChunkAttnData d = make(c, 11);
  Rng rng(5);
  const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kF32, c.ht);
  const ChunkAttnGradTensors ref = ref_backward(d, cot);
  const ChunkAttnGradTensors t1 = run_bwd(d, cot, 1);
  EXPECT_TRUE(bwd_close(d, ref, t1, c.dtype));
  for (int s : {2, 4}) {
    SCOPED_TRACE("segments " + std::to_string(s));
    const ChunkAttnGradTensors t3 = run_bwd(d, cot, s);
    EXPECT_TRUE(bwd_close(d, ref, t3, c.dtype));
    EXPECT_TRUE(bwd_close(d, t1, t3, c.dtype));
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, Tier3, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(Tier3Det, ThreadsAndReplayBitwise) {
  Case c;
  c.op = ChunkOp::kKda;
  c.gate = c.sigmoid = true;
  const ChunkAttnData d = make(c, 3);
  Rng rng(9);
  const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kF32, true);
  const ChunkAttnOutTensors a = run_fwd(d, 3, 1), b = run_fwd(d, 3, 2), a2 = run_fwd(d, 3, 1);
  EXPECT_TRUE(same_bits(a.o, b.o));
  EXPECT_TRUE(same_bits(a.final_state, b.final_state));
  EXPECT_TRUE(same_bits(a.o, a2.o));
  EXPECT_TRUE(grads_bitwise_equal(run_bwd(d, cot, 3, 1), run_bwd(d, cot, 3, 2)));
}

TEST(Tier3Plan, SegmentsOneNeverSplits) {
  Case c;
  c.seqlens = {4000};
  c.HV = 1;
  const ChunkAttnData d = make(c, 1);
  ChunkAttnOptions opt = d.opt();
  opt.segments = 1;
  ExecContext ctx;
  ctx.num_threads = 2;
  EXPECT_EQ(api::chunk_attn_fwd_plan(d.inputs(), opt, ctx).find("tier 3"), std::string::npos);
  opt.segments = 4;
  const std::string p = api::chunk_attn_fwd_plan(d.inputs(), opt, ctx);
  EXPECT_NE(p.find("tier 3"), std::string::npos) << p;
  EXPECT_NE(p.find("requested by the caller"), std::string::npos) << p;
}

}  // namespace
}  // namespace linattn::test
