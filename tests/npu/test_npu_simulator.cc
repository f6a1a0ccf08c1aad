// Simulator: exact byte accounting on one chunk, no spills with an unlimited buffer, the state
// footprint halving of the chunk-first orders, and the paper's 244 KiB + 64 KiB vs 256 KiB
// buffer argument on the Ascend 310P model (GDN, T 2048, C 64, K = V = 128).
#include <gtest/gtest.h>

#include "plan/npu/layout_plan.h"
#include "plan/npu/op_order.h"
#include "plan/npu/simulator.h"

namespace linattn::plan::npu {
namespace {

TaskStats run(Family f, OrderKind k, int64_t T, int64_t cap, Layout l = Layout::kBlocked, int C = 64, int KV = 128) {
  DataflowSpec s;
  s.family = f;
  s.T = T;
  s.C = C;
  s.K = s.V = KV;
  s.factored = order_factored(k);
  const Dataflow df = build_dataflow(s);
  const LayoutCostModel m = default_cost_model(ascend_310p());
  return simulate_task(df, make_order(df, k), uniform_layouts(df, l, m).op_layout, m, cap);
}

TEST(NpuSimulator, ExactTrafficOfOneChunk) {
  // GDN, one chunk, unlimited UB, blocked layouts (no GM round trips): the UB loads k, v, g, beta
  // and S_0; the Matrix unit reads q, k and S_0 from GM once each (L1 keeps them); o and S_1 are
  // stored.
  const int64_t n = 64, K = 128, V = 128;
  const TaskStats s = run(Family::kGdn, OrderKind::kFla, n, 0);
  const double ub = n * K * 2 + n * V * 2 + n * 4 + n * 2 + K * V * 4;
  const double l1 = n * K * 2 + n * K * 2 + K * V * 4;
  EXPECT_DOUBLE_EQ(s.gm_load_bytes, ub + l1);
  EXPECT_DOUBLE_EQ(s.gm_store_bytes, n * V * 2 + K * V * 4);
  EXPECT_DOUBLE_EQ(s.layout_gm_bytes, 0.0);
  EXPECT_DOUBLE_EQ(s.spill_bytes(), 0.0);
  EXPECT_GT(s.matrix_us, 0.0);
  EXPECT_GT(s.vector_us, s.matrix_us);  // 310P: the vector unit is ~64x slower than the matrix unit
}

TEST(NpuSimulator, UnlimitedBufferNeverSpillsAndSmallBufferDoes) {
  for (Family f : {Family::kGdn, Family::kKda})
    for (OrderKind k : {OrderKind::kFlaPhase, OrderKind::kFla, OrderKind::kChunkFirst, OrderKind::kLifetime}) {
      const TaskStats ideal = run(f, k, 300, 0, Layout::kDense, 32, 64);
      EXPECT_EQ(ideal.evictions, 0);
      EXPECT_DOUBLE_EQ(ideal.spill_bytes(), 0.0);
      const TaskStats at_peak = run(f, k, 300, ideal.peak_bytes, Layout::kDense, 32, 64);
      EXPECT_DOUBLE_EQ(at_peak.gm_bytes(), ideal.gm_bytes()) << order_name(k);
      for (int64_t cap : {ideal.peak_bytes / 2, ideal.peak_bytes * 3 / 4}) {
        const TaskStats s = run(f, k, 300, cap, Layout::kDense, 32, 64);
        EXPECT_GT(s.spill_bytes(), 0.0) << family_name(f) << " " << order_name(k) << " cap " << cap;
        EXPECT_GE(s.spill_load_bytes, s.spill_store_bytes);  // whatever is spilled comes back
        EXPECT_GT(s.time_us, ideal.time_us);
      }
    }
}

TEST(NpuSimulator, ChunkFirstHalvesTheStateFootprint) {
  const int64_t state = 128 * 128 * 4;
  for (Family f : {Family::kGdn, Family::kKda}) {
    EXPECT_EQ(run(f, OrderKind::kFla, 512, 0).peak_state_bytes, 2 * state) << family_name(f);
    EXPECT_EQ(run(f, OrderKind::kChunkFirst, 512, 0).peak_state_bytes, state) << family_name(f);
    EXPECT_EQ(run(f, OrderKind::kLifetime, 512, 0).peak_state_bytes, state) << family_name(f);
  }
}

TEST(NpuSimulator, BufferArgumentOnAscend310P) {
  // Chunk-first / lifetime orders fit the 256 KiB UB with one state buffer, and would not with a
  // second 64 KiB one; FLA's order needs both state buffers, overflows and spills.
  const int64_t ub = ascend_310p().ub_bytes, state = 64 * 1024;
  for (OrderKind k : {OrderKind::kChunkFirst, OrderKind::kLifetime}) {
    const TaskStats s = run(Family::kGdn, k, 2048, 0, Layout::kDense);
    EXPECT_LE(s.peak_bytes, ub) << order_name(k);
    EXPECT_GT(s.peak_bytes + state, ub) << order_name(k);
    EXPECT_DOUBLE_EQ(run(Family::kGdn, k, 2048, ub, Layout::kDense).spill_bytes(), 0.0) << order_name(k);
  }
  const TaskStats fla = run(Family::kGdn, OrderKind::kFla, 2048, 0, Layout::kDense);
  EXPECT_GT(fla.peak_bytes, ub);
  EXPECT_GT(run(Family::kGdn, OrderKind::kFla, 2048, ub, Layout::kDense).spill_bytes(), 0.0);
}

TEST(NpuSimulator, LruNeverBeatsBeladyOnTheseSchedules) {
  DataflowSpec s;
  s.T = 256;
  s.C = 32;
  s.K = s.V = 64;
  const Dataflow df = build_dataflow(s);
  const LayoutCostModel m = default_cost_model(ascend_310p());
  const auto L = uniform_layouts(df, Layout::kDense, m).op_layout;
  const auto ord = make_order(df, OrderKind::kFlaPhase);
  for (int64_t cap : {32 * 1024, 64 * 1024, 128 * 1024}) {
    const TaskStats b = simulate_task(df, ord, L, m, cap, Eviction::kBelady);
    const TaskStats l = simulate_task(df, ord, L, m, cap, Eviction::kLru);
    EXPECT_LE(b.spill_bytes(), l.spill_bytes()) << "capacity " << cap;
  }
}

}  // namespace
}  // namespace linattn::plan::npu
