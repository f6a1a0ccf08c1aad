// Layout planner: the DP over chunks equals a brute-force search over every chain assignment on
// small random instances (random per-op cost scales and device rates, partial last chunk), its
// backtracked plan costs what it claims, its work is linear in the number of chunks, and it is
// never worse than the uniform plans; the chain pruning is compared with a search over every
// vector op's layout.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "plan/npu/layout_plan.h"

namespace linattn::plan::npu {
namespace {

bool sanitized() { return std::getenv("LINATTN_SANITIZED") != nullptr; }

Dataflow tiny(Family f, bool factored, int64_t T) {
  DataflowSpec s;
  s.family = f;
  s.T = T;
  s.C = 8;
  s.K = 16;
  s.V = 16;
  s.factored = factored;
  return build_dataflow(s);
}

LayoutCostModel random_model(std::mt19937& rng, const Dataflow& df) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  NpuDevice dev = ascend_310p();
  dev.reformat_gbps = 8.0 + 248.0 * u(rng);
  dev.vector_flops = (0.02 + 0.3 * u(rng)) * 1e12;
  dev.ub_gm_l1_gbps = 20.0 + 80.0 * u(rng);
  LayoutCostModel m = default_cost_model(dev);
  for (double& p : m.blocked_penalty) p = 0.7 + 2.0 * u(rng);
  m.op_scale.resize(df.ops.size());
  for (double& s : m.op_scale) s = 0.2 + 3.0 * u(rng);
  return m;
}

TEST(NpuLayout, DynamicProgramMatchesBruteForceOverChains) {
  std::mt19937 rng(1234);
  const int trials = sanitized() ? 2 : 6;
  for (Family f : {Family::kGdn, Family::kKda})
    for (bool fac : {false, true})
      for (int64_t chunks : {1, 2, 3}) {  // the last chunk partial (5 of 8 rows)
        const int64_t T = 8 * chunks - 3;
        const Dataflow df = tiny(f, fac, T);
        if (vector_chains(df, 0).size() * chunks > 18) continue;  // keep the brute force small
        for (int trial = 0; trial < trials; ++trial) {
          const LayoutCostModel m = random_model(rng, df);
          const LayoutPlan dp = plan_layouts_dp(df, m);
          const LayoutPlan bf = plan_layouts_brute_chains(df, m);
          EXPECT_NEAR(dp.cost_us, bf.cost_us, 1e-9 * bf.cost_us)
              << family_name(f) << (fac ? " factored" : "") << " T " << T << " trial " << trial << ": dp "
              << dp.cost_us << " vs brute force " << bf.cost_us << " (" << bf.states_evaluated << " assignments)";
          EXPECT_NEAR(dp.cost_us, layout_cost_us(df, dp.op_layout, m), 1e-12 * dp.cost_us);
          EXPECT_LE(dp.cost_us, uniform_layouts(df, Layout::kDense, m).cost_us * (1 + 1e-12));
          EXPECT_LE(dp.cost_us, uniform_layouts(df, Layout::kBlocked, m).cost_us * (1 + 1e-12));
        }
      }
}

TEST(NpuLayout, DynamicProgramWorkIsLinearInChunks) {
  const LayoutCostModel m = default_cost_model(ascend_310p());
  for (Family f : {Family::kGdn, Family::kKda}) {
    const Dataflow d4 = tiny(f, false, 4 * 8), d16 = tiny(f, false, 16 * 8);
    const int64_t masks = int64_t{1} << vector_chains(d4, 0).size();
    EXPECT_EQ(plan_layouts_dp(d4, m).states_evaluated, masks + 3 * 2 * masks);
    EXPECT_EQ(plan_layouts_dp(d16, m).states_evaluated, masks + 15 * 2 * masks);
  }
}

TEST(NpuLayout, ChainPruningAgainstPerOpSearch) {
  // One chunk: every vector op free. The pruned optimum can only be >= the unpruned one; on the
  // 310P model it is equal (printed for the report).
  for (Family f : {Family::kGdn, Family::kKda})
    for (bool fac : {false, true}) {
      const Dataflow df = tiny(f, fac, 8);
      const LayoutCostModel m = default_cost_model(ascend_310p());
      const LayoutPlan dp = plan_layouts_dp(df, m), ops = plan_layouts_brute_ops(df, m);
      EXPECT_GE(dp.cost_us, ops.cost_us * (1 - 1e-12));
      EXPECT_NEAR(dp.cost_us, ops.cost_us, 1e-9 * ops.cost_us) << family_name(f) << (fac ? " factored" : "");
      std::printf("[pruning] %s%s: chains %zu, dp %.6f us, per-op optimum %.6f us (%lld assignments)\n",
                  family_name(f), fac ? " factored" : "", vector_chains(df, 0).size(), dp.cost_us, ops.cost_us,
                  static_cast<long long>(ops.states_evaluated));
    }
}

}  // namespace
}  // namespace linattn::plan::npu
