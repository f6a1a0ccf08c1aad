// CPU chunk backward (GDN and KDA) against the fp64 reference: every gradient for every option,
// dtype and chunk size, awkward lengths (0, 1, BT-1, BT, BT+1, long), GVA, strong / no decay,
// extreme KDA gates (-1000, no NaN / Inf), padding rows zeroed, 1 vs N threads bitwise.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "bwd_test_util.h"
#include "linattn/error.h"
#include "linattn/graph.h"

namespace linattn::test {
namespace {

struct Case {
  std::string name;
  ChunkOp op = ChunkOp::kGdn;
  int BT = 64;
  DType dtype = DType::kF32;
  int64_t H = 1, HV = 2, K = 20, V = 36;
  std::vector<int64_t> seqlens;  // empty: B = 2, T = 45
  bool l2norm = false, gate = false, sigmoid = false, neg = false, vfirst = false;
  bool lower_bound = false, A_log = true, h0 = true, dht = true;
  GateDist dist = GateDist::kLogSigmoid;
  double extreme = 0.0;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

ChunkAttnData make(const Case& c, uint64_t seed, int64_t pad = 3) {
  ChunkAttnSpec s;
  set_case_spec(s, c, c.lower_bound, c.dht);
  if (c.seqlens.empty()) {
    s.B = 2;
    s.T = 45;
  } else {
    s.seqlens = c.seqlens;
    s.pad_tokens = pad;
  }
  s.has_h0 = c.h0;
  s.has_A_log = c.A_log;
  s.seed = seed;
  return make_chunk_attn(s);
}

std::vector<Case> cases() {
  std::vector<Case> v;
  auto add = [&](Case c) { v.push_back(c); };
  for (ChunkOp op : {ChunkOp::kGdn, ChunkOp::kKda}) {
    const std::string p = op == ChunkOp::kGdn ? "gdn_" : "kda_";
    for (int bt : {16, 32, 64}) {
      Case c;
      c.op = op;
      c.BT = bt;
      c.name = p + "edges_bt" + std::to_string(bt);
      c.seqlens = edge_seqlens(bt);
      add(c);
    }
    Case c;
    c.op = op;
    c.name = p + "batch_plain";
    c.h0 = false;
    c.dht = false;
    add(c);
    c = Case{};
    c.op = op;
    c.name = p + "all_options_gva";
    c.H = 2;
    c.HV = 4;
    c.BT = 32;
    c.seqlens = {40, 0, 17};
    c.l2norm = c.gate = c.sigmoid = c.vfirst = true;
    add(c);
    c.name = p + "neg_eigval_gva";
    c.neg = true;
    c.l2norm = false;
    c.vfirst = false;
    c.H = 1;
    c.HV = 3;
    add(c);
    c = Case{};
    c.op = op;
    c.name = p + "gate_no_dt_bias_vfirst";
    c.gate = true;
    c.vfirst = true;
    c.seqlens = {33, 64, 5};
    add(c);
    c = Case{};
    c.op = op;
    c.name = p + "mixed_decay";
    c.dist = GateDist::kMixedHeads;
    c.HV = 3;
    c.seqlens = {70, 129};
    add(c);
    c = Case{};
    c.op = op;
    c.name = p + "long";
    c.K = c.V = 64;
    c.HV = 1;
    c.seqlens = {700};
    c.l2norm = true;
    add(c);
    c.name = p + "k128_streamed_slots";  // > 1.5 MiB of chunk slots: non-temporal slot writes
    c.K = c.V = 128;
    c.seqlens = {1000};
    c.gate = true;
    add(c);
    c.name = p + "k100_streamed_unaligned";  // streamed slots whose rows are not 64-byte aligned
    c.K = c.V = 100;
    c.seqlens = {1500};
    add(c);
    for (DType dt : {DType::kBF16, DType::kF16}) {
      c = Case{};
      c.op = op;
      c.dtype = dt;
      c.name = p + (dt == DType::kBF16 ? "bf16" : "fp16");
      c.l2norm = c.gate = c.sigmoid = true;
      c.seqlens = {100, 1, 30};
      c.H = 1;
      c.HV = 2;
      add(c);
    }
  }
  Case c;
  c.op = ChunkOp::kKda;
  c.name = "kda_lower_bound";
  c.gate = c.lower_bound = true;
  c.seqlens = {50, 20};
  add(c);
  c.name = "kda_lower_bound_no_A_log";
  c.A_log = false;
  add(c);
  c = Case{};
  c.op = ChunkOp::kKda;
  c.name = "kda_extreme_gates";
  c.extreme = 0.1;
  c.seqlens = {90, 7, 64};
  add(c);
  c.name = "kda_sparse_extreme_gates";  // some sub-chunks factored, some paired exactly
  c.extreme = 0.002;
  c.seqlens = {150, 77};
  add(c);
  c = Case{};
  c.op = ChunkOp::kGdn;
  c.name = "gdn_strong_decay";
  c.dist = GateDist::kStrong;
  c.seqlens = {90, 7};
  add(c);
  return v;
}

class ChunkBwd : public ::testing::TestWithParam<Case> {};

TEST_P(ChunkBwd, MatchesReference) {
  const Case& c = GetParam();
  const ChunkAttnData d = make(c, 11);
  Rng rng(99);
  const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kF32, c.dht);
  const ChunkAttnGradTensors ref = ref_backward(d, cot);
  const ChunkAttnGradTensors got = cpu_backward(d, cot);
  EXPECT_TRUE(bwd_close(d, ref, got, c.dtype));
  if (c.BT == 64) {  // the planner runs BT 64 as compute chunk 32; force the 64-row kernel too
    setenv("LINATTN_CPU_CHUNK", "64", 1);
    const ChunkAttnGradTensors got64 = cpu_backward(d, cot);
    unsetenv("LINATTN_CPU_CHUNK");
    EXPECT_TRUE(bwd_close(d, ref, got64, c.dtype)) << "compute chunk 64";
  }
  if (c.dtype == DType::kBF16) {  // bf16 inputs take bf16 dot products; check the fp32 path too
    setenv("LINATTN_CPU_BF16_DOT", "0", 1);
    const ChunkAttnGradTensors f32 = cpu_backward(d, cot);
    unsetenv("LINATTN_CPU_BF16_DOT");
    EXPECT_TRUE(bwd_close(d, ref, f32, c.dtype)) << "fp32 products";
  }
  const ChunkAttnGradTensors* all[] = {&got};
  for (const auto* g : all)
    for (const Tensor* t : {&g->dq, &g->dk, &g->dv, &g->dg, &g->dbeta, &g->dA_log, &g->ddt_bias,
                            &g->dinitial_state})
      if (t->defined()) {
        const int64_t rows = d.cu_seqlens.defined() ? d.valid_tokens : d.T();
        const TensorView v = t->view().ndim >= 2 && t->view().shape[1] == d.T()
                                 ? narrow(t->view(), 1, 0, rows) : t->view();
        EXPECT_TRUE(all_finite(v));
      }
  if (d.cu_seqlens.defined()) {  // padding rows of per-token gradients are written as 0
    EXPECT_TRUE(rows_zero("dq", got.dq, d.valid_tokens));
    EXPECT_TRUE(rows_zero("dk", got.dk, d.valid_tokens));
    EXPECT_TRUE(rows_zero("dv", got.dv, d.valid_tokens));
    EXPECT_TRUE(rows_zero("dg", got.dg, d.valid_tokens));
    EXPECT_TRUE(rows_zero("dbeta", got.dbeta, d.valid_tokens));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ChunkBwd, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// 1 thread and N threads: bitwise equal (GVA group sums and per-head reductions included).
TEST(ChunkBwdThreads, BitwiseEqual) {
  for (ChunkOp op : {ChunkOp::kGdn, ChunkOp::kKda}) {
    Case c;
    c.op = op;
    c.H = 2;
    c.HV = 4;
    c.seqlens = {70, 0, 33, 5, 64};
    c.l2norm = c.gate = c.sigmoid = true;
    const ChunkAttnData d = make(c, 5);
    Rng rng(7);
    const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kF32, true);
    const ChunkAttnGradTensors one = cpu_backward(d, cot, 1);
    for (int t : {2, 3, 5}) EXPECT_TRUE(grads_bitwise_equal(one, cpu_backward(d, cot, t))) << t << " threads";
  }
  // One sequence, one q/k head group of 3: with 1 thread a task owns the group (in-task sums),
  // with 2 threads each value head is a task (global sums): still the same bits.
  for (ChunkOp op : {ChunkOp::kGdn, ChunkOp::kKda}) {
    Case c;
    c.op = op;
    c.H = 1;
    c.HV = 3;
    c.seqlens = {77};
    c.l2norm = true;
    const ChunkAttnData d = make(c, 6);
    Rng rng(8);
    const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kF32, true);
    EXPECT_TRUE(grads_bitwise_equal(cpu_backward(d, cot, 1), cpu_backward(d, cot, 2))) << "GVA group modes";
  }
}

// A caller workspace of chunk_attn_bwd_workspace_bytes gives the same bits as library scratch;
// chunk_attn_saved_bytes is 0 and a cache given is ignored; a smaller workspace is refused; the eager path is refused inside a capture.
TEST(ChunkBwdApi, WorkspaceAndCaptureRules) {
  Case c;
  c.op = ChunkOp::kKda;
  c.H = 1;
  c.HV = 2;
  c.seqlens = {70, 3};
  c.l2norm = c.gate = true;
  const ChunkAttnData d = make(c, 21);
  Rng rng(5);
  const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kF32, true);
  const ChunkAttnGradTensors lib = cpu_backward(d, cot, 2);
  ExecContext ctx;
  ctx.num_threads = 2;
  const size_t bytes = chunk_attn_bwd_workspace_bytes(d.inputs(), d.opt(), ctx);
  ASSERT_GT(bytes, 0u);
  std::vector<std::byte> mem(bytes + 256);
  ctx.workspace = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(mem.data()) + 255) & ~uintptr_t{255});
  ctx.workspace_bytes = bytes;
  ChunkAttnGradTensors g = alloc_grads(d, DType::kF32, DType::kF32);
  chunk_attn_bwd(d.inputs(), cot.d_o.view(), cot.d_final_state.view(), g.views(), d.opt(), ctx);
  EXPECT_TRUE(grads_bitwise_equal(lib, g));
  // The CPU backward recomputes its forward: no training cache, and one given is ignored.
  EXPECT_EQ(chunk_attn_saved_bytes(d.inputs(), d.opt()), 0u);
  std::vector<std::byte> junk(512, std::byte{0x7f});
  ChunkAttnInputs in_saved = d.inputs();
  in_saved.saved = junk.data();
  in_saved.saved_bytes = junk.size();
  EXPECT_EQ(chunk_attn_bwd_workspace_bytes(in_saved, d.opt(), ctx), bytes);
  ChunkAttnGradTensors gs = alloc_grads(d, DType::kF32, DType::kF32);
  chunk_attn_bwd(in_saved, cot.d_o.view(), cot.d_final_state.view(), gs.views(), d.opt(), ctx);
  EXPECT_TRUE(grads_bitwise_equal(lib, gs)) << "a cache given to the CPU backward changed its gradients";
  ctx.workspace_bytes = bytes - 1;
  EXPECT_THROW(chunk_attn_bwd(d.inputs(), cot.d_o.view(), cot.d_final_state.view(), g.views(), d.opt(), ctx),
               Error);
  Graph graph;
  try {
    graph.capture([&] {
      chunk_attn_bwd(d.inputs(), cot.d_o.view(), cot.d_final_state.view(), g.views(), d.opt());
    });
    ADD_FAILURE() << "eager chunk_attn_bwd was recorded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCaptureViolation) << e.what();
    EXPECT_EQ(e.category(), FailureCategory::kEagerBackend) << e.what();
  }
}

}  // namespace
}  // namespace linattn::test
