// GRAPH_CONTRACT.md section 8 for the CPU chunked forward: static buffers at capacity
// (T_max, N_max), eager warm-up, one capture into a linattn::Graph, then six layouts (dense batch,
// varlen, zero-length tail sequences, actual T < T_max, one sequence filling the bucket, other
// splits) with new inputs, gate parameters and states copied in, NaN / Inf garbage in every padding row, replayed twice each and in a
// revisiting order (stale metadata). Replay == eager fixed-capacity call bitwise; == eager
// exact-size call and the fp64 reference within tolerance; padding rows of o never written.
// Swept over GDN / KDA, BT 64 / 32, fp32 / bf16 / fp16, with and without h0, gate in kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "common/compare.h"
#include "linattn/error.h"
#include "linattn/graph.h"
#include "test_chunk_fwd_util.h"

namespace linattn::test {
namespace {

constexpr int64_t kTmax = 200, kNmax = 4;

const std::vector<std::vector<int64_t>> kLayouts = {
    {50, 50, 50, 50},  // dense batch
    {10, 120, 0, 33},  // varlen with an empty sequence
    {70, 5, 0, 0},     // zero-length tail sequences
    {20, 30, 0, 0},    // actual T < T_max
    {200, 0, 0, 0},    // one sequence filling the bucket
    {1, 64, 65, 70},   // other splits
};

using Param = std::tuple<ChunkOp, int, DType, bool>;  // op, BT, dtype, in-kernel options + no h0

ChunkAttnSpec layout_spec(const Param& prm, const std::vector<int64_t>& lens, uint64_t seed) {
  const auto [op, bt, dt, variant] = prm;
  ChunkAttnSpec s;
  s.opt.op = op;
  s.opt.chunk_size = bt;
  s.opt.output_final_state = true;
  s.H = 1;
  s.HV = 2;
  s.K = 32;
  s.V = 48;
  s.dtype = dt;
  s.seqlens = lens;
  int64_t used = 0;
  for (int64_t l : lens) used += l;
  s.pad_tokens = kTmax - used;
  s.seed = seed;
  if (variant) {
    s.opt.use_gate_in_kernel = s.opt.use_beta_sigmoid_in_kernel = s.opt.use_qk_l2norm_in_kernel = true;
    s.opt.state_v_first = true;
    s.has_h0 = false;
  }
  return s;
}

// NaN, +Inf, -Inf and huge values in every row at or past `valid` (dim 1 = tokens).
void poison_rows(Tensor& t, int64_t valid) {
  const int64_t per_row = t.numel() / kTmax;
  for (int64_t i = valid * per_row; i < t.numel(); ++i) {
    const int r = static_cast<int>(i % 4);
    t.set(i, r == 0 ? NAN : r == 1 ? INFINITY : r == 2 ? -INFINITY : 3e38);
  }
}

void copy_into(const Tensor& src, const Tensor& dst) {
  ASSERT_EQ(src.view().nbytes(), dst.view().nbytes());
  std::memcpy(dst.view().data, src.view().data, src.view().nbytes());
}

class CpuFwdGraph : public ::testing::TestWithParam<Param> {};

TEST_P(CpuFwdGraph, ReplayEqualsEagerOnEveryLayout) {
  const Param prm = GetParam();
  // Static buffers: shaped like layout 0's data (every layout has T = T_max rows, N = N_max).
  ChunkAttnData stat = make_chunk_attn(layout_spec(prm, kLayouts[0], 1));
  ChunkAttnOutTensors sout = alloc_outputs(stat, stat.spec.dtype, DType::kF32);
  ChunkAttnOptions opt = stat.opt();
  opt.use_graph = true;
  opt.max_num_seqs = kNmax;
  ExecContext ctx;
  ctx.num_threads = 2;
  const size_t ws_bytes = chunk_attn_fwd_workspace_bytes(stat.inputs(), opt, ctx);
  auto ws_store = std::make_unique<std::byte[]>(ws_bytes + 256);
  ctx.workspace = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws_store.get()) + 255) & ~uintptr_t{255});
  ctx.workspace_bytes = ws_bytes;

  chunk_attn_fwd(stat.inputs(), sout.views(), opt, ctx);  // eager warm-up
  Graph graph;
  graph.capture([&] { chunk_attn_fwd(stat.inputs(), sout.views(), opt, ctx); });
  ASSERT_EQ(graph.num_nodes(), 1u);

  const int order[] = {0, 1, 2, 3, 4, 5, 1, 4, 0};  // revisits catch stale metadata
  for (int step = 0; step < 9; ++step) {
    const int li = order[step];
    ChunkAttnData d = make_chunk_attn(layout_spec(prm, kLayouts[li], 10 + step));
    for (Tensor* t : {&d.q, &d.k, &d.v, &d.g, &d.beta}) poison_rows(*t, d.valid_tokens);
    for (auto [src, dst] : {std::pair{&d.q, &stat.q}, {&d.k, &stat.k}, {&d.v, &stat.v}, {&d.g, &stat.g},
                            {&d.beta, &stat.beta}, {&d.cu_seqlens, &stat.cu_seqlens}})
      copy_into(*src, *dst);
    for (auto [src, dst] : {std::pair{&d.initial_state, &stat.initial_state}, {&d.A_log, &stat.A_log},
                            {&d.dt_bias, &stat.dt_bias}})
      if (src->defined()) copy_into(*src, *dst);
    // Padding rows of o hold a sentinel that must survive.
    for (int64_t i = 0; i < sout.o.numel(); ++i) sout.o.set(i, -7.0);
    for (int rep = 0; rep < 2; ++rep) graph.replay();

    SCOPED_TRACE("layout " + std::to_string(li) + " step " + std::to_string(step));
    // Eager fixed-capacity call on the same static content: bitwise.
    ChunkAttnOutTensors fixed = alloc_outputs(stat, stat.spec.dtype, DType::kF32);
    for (int64_t i = 0; i < fixed.o.numel(); ++i) fixed.o.set(i, -7.0);
    chunk_attn_fwd(stat.inputs(), fixed.views(), opt, ctx);
    EXPECT_TRUE(bitwise_equal("o", fixed.o, sout.o));
    EXPECT_TRUE(bitwise_equal("final_state", fixed.final_state, sout.final_state));
    // Padding rows untouched.
    const TensorView pad = narrow(sout.o.view(), 1, d.valid_tokens, kTmax - d.valid_tokens);
    for (int64_t i = 0; i < pad.numel(); ++i) ASSERT_EQ(element(pad, i), -7.0) << "padding row of o written";
    // Eager exact-size call (T = valid tokens) and the fp64 reference: within tolerance.
    ChunkAttnInputs exact = d.inputs();
    for (TensorView* t : {&exact.q, &exact.k, &exact.v, &exact.g, &exact.beta}) *t = narrow(*t, 1, 0, d.valid_tokens);
    ChunkAttnOutTensors live = alloc_outputs(d, d.spec.dtype, DType::kF32);
    ChunkAttnOutputs live_views = live.views();
    live_views.o = narrow(live_views.o, 1, 0, d.valid_tokens);
    chunk_attn_fwd(exact, live_views, d.opt(), ExecContext{});
    const ChunkAttnOutTensors ref = ref_forward(d);
    EXPECT_TRUE(fwd_close(d, live, sout, d.spec.dtype)) << "replay vs eager exact-size";
    EXPECT_TRUE(fwd_close(d, ref, sout, d.spec.dtype)) << "replay vs fp64 reference";
  }
}

std::string name(const ::testing::TestParamInfo<Param>& info) {
  const auto [op, bt, dt, variant] = info.param;
  return std::string(op == ChunkOp::kGdn ? "gdn" : "kda") + "_bt" + std::to_string(bt) + "_" + dtype_name(dt) +
         (variant ? "_inkernel_noh0" : "_h0");
}

INSTANTIATE_TEST_SUITE_P(Contract, CpuFwdGraph,
                         ::testing::Combine(::testing::Values(ChunkOp::kGdn, ChunkOp::kKda), ::testing::Values(64, 32),
                                            ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                                            ::testing::Bool()),
                         name);

// A captured call needs use_graph = true; without a workspace it still captures (scratch owned
// by the graph), and the eager path is refused with the eager-backend category.
TEST(CpuFwdGraphRules, EagerPathRefusedDuringCapture) {
  const ChunkAttnData d = make_chunk_attn(layout_spec({ChunkOp::kGdn, 64, DType::kF32, false}, kLayouts[1], 3));
  ChunkAttnOutTensors out = alloc_outputs(d, DType::kF32, DType::kF32);
  Graph graph;
  try {
    graph.capture([&] { chunk_attn_fwd(d.inputs(), out.views(), d.opt()); });
    FAIL() << "eager call recorded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCaptureViolation);
    EXPECT_EQ(e.category(), FailureCategory::kEagerBackend);
  }
  ChunkAttnOptions opt = d.opt();
  opt.use_graph = true;
  opt.max_num_seqs = kNmax;
  graph.capture([&] { chunk_attn_fwd(d.inputs(), out.views(), opt); });
  graph.replay();
  ChunkAttnOutTensors eager = alloc_outputs(d, DType::kF32, DType::kF32);
  chunk_attn_fwd(d.inputs(), eager.views(), opt);
  EXPECT_TRUE(bitwise_equal("o", eager.o, out.o));
  EXPECT_TRUE(bitwise_equal("final_state", eager.final_state, out.final_state));
}

}  // namespace
}  // namespace linattn::test
