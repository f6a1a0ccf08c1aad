// Head mapping tiers on synthetic costs (the paper's 16 heads on 10 cores, full rounds, extreme
// tails) and the whole-layer planner on the 310P model: the ablation ladder of the report.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "plan/npu/npu_plan.h"

namespace linattn::plan::npu {
namespace {

// Fused task: fixed K-side cost `a` plus a cost per state column; chunk-head-chunk: `chc` per head-round.
FusedCostFn fused_cost(double a, double per_col) {
  return [=](int64_t len, int cols) { return static_cast<double>(len) * (a + per_col * cols) / 1000.0; };
}
ChcCostFn chc_cost(double per_head) {
  return [=](int64_t len, int heads, int cores) {
    return static_cast<double>(len) * per_head * heads / std::min(cores, heads * 8) / 1000.0;
  };
}

TEST(NpuMapping, ResidualHeadsSplitColumnWiseOntoIdleCores) {
  const MappingPlan p = plan_head_mapping({2048}, 16, 128, 10, fused_cost(1.0, 1.0), chc_cost(1e6));
  EXPECT_EQ(p.units, 16);
  EXPECT_EQ(p.residual, 6);
  EXPECT_EQ(p.tail_tier, 2) << p.reason;
  std::set<int> cores;
  std::vector<std::vector<std::pair<int, int>>> cols(16);
  for (const auto& t : p.tasks) {
    cores.insert(t.core);
    cols[t.head].push_back({t.v0, t.v1});
  }
  EXPECT_EQ(cores.size(), 10u) << "every core busy";
  for (auto& c : cols) {  // each head's slices cover [0, V) once
    std::sort(c.begin(), c.end());
    int at = 0;
    for (auto [v0, v1] : c) {
      EXPECT_EQ(v0, at);
      at = v1;
    }
    EXPECT_EQ(at, 128);
  }
  EXPECT_LT(p.makespan_us, p.tail_options_us[0]);
}

TEST(NpuMapping, FullRoundsNeedNoTail) {
  const MappingPlan p = plan_head_mapping({1000, 1000}, 10, 128, 10, fused_cost(1.0, 1.0), chc_cost(1.0));
  EXPECT_EQ(p.residual, 0);
  std::vector<int> per_core(10, 0);
  for (const auto& t : p.tasks) {
    EXPECT_EQ(t.tier, 1);
    ++per_core[t.core];
  }
  for (int n : per_core) EXPECT_EQ(n, 2);
}

TEST(NpuMapping, ExtremeTailGoesChunkHeadChunkOnlyWhenSplittingCannotHelp) {
  // One head of a long sequence on 8 cores: the K-side work dominates, so column slices each redo
  // it and chunk-head-chunk (parallel over chunks) wins; with cheap K-side work the split wins.
  const MappingPlan heavy = plan_head_mapping({65536}, 1, 128, 8, fused_cost(400.0, 1.0), chc_cost(200.0));
  EXPECT_EQ(heavy.tail_tier, 3) << heavy.reason;
  const MappingPlan light = plan_head_mapping({65536}, 1, 128, 8, fused_cost(1.0, 1.0), chc_cost(200.0));
  EXPECT_EQ(light.tail_tier, 2) << light.reason;
}

TEST(NpuLayerPlan, AblationLadderOn310P) {
  for (Family f : {Family::kGdn, Family::kKda}) {
    LayerPlanOptions o;
    o.family = f;
    o.lengths = {2048};
    o.heads = 10;
    const char* steps[4][3] = {{"chc", "fla", "dense"}, {"auto", "fla", "dense"}, {"auto", "auto", "dense"},
                               {"auto", "auto", "dp"}};
    double t[4];
    for (int i = 0; i < 4; ++i) {
      o.mapping = steps[i][0];
      o.order = steps[i][1];
      o.layouts = steps[i][2];
      const LayerPlan p = plan_layer(o);
      t[i] = p.totals.time_us;
      EXPECT_GT(t[i], 0.0);
      if (i == 3) {
        EXPECT_NE(p.order, OrderKind::kFla) << "auto order";
        EXPECT_NE(p.to_json().find("\"tail_tier\""), std::string::npos);
        EXPECT_NE(p.to_string().find("mapping"), std::string::npos);
      }
    }
    EXPECT_GT(t[0], t[1]);
    EXPECT_GT(t[1], t[2]);
    EXPECT_GT(t[2], t[3]);
    if (f == Family::kGdn) {  // the gain order the paper reports for GDN: mapping largest
      EXPECT_GT(t[0] / t[1], t[1] / t[2]);
      EXPECT_GT(t[0] / t[1], t[2] / t[3]);
    }
  }
}

}  // namespace
}  // namespace linattn::plan::npu

namespace linattn::plan::npu {
namespace {

TEST(NpuMapping, UnequalLengthsSplitEveryUnitWhenTheLongestDominates) {
  std::vector<int64_t> lens(15, 256);
  lens.push_back(4096);
  const MappingPlan p = plan_head_mapping(lens, 1, 128, 16, fused_cost(1.0, 1.0), chc_cost(1e6));
  EXPECT_EQ(p.residual, 0);
  EXPECT_EQ(p.tail_tier, 2) << p.reason;
  EXPECT_GT(p.v_splits, 1);
  EXPECT_LT(p.makespan_us, 4096 * (1.0 + 128.0) / 1000.0) << "shorter than the longest whole unit";
}

}  // namespace
}  // namespace linattn::plan::npu

namespace linattn::plan::npu {
namespace {

TEST(NpuLayerPlan, HybridPrepKernelWinsWhereSlicesWouldRedoTheKSide) {
  // GDN on the H200 model with bf16 intermediates (what the CUDA backend stores): 16 heads on 132
  // SMs need 8 column slices each; doing K K^T, Q K^T and the solve once per chunk in a prep
  // kernel beats redoing them in every slice, so auto picks the hybrid (the CUDA structure).
  LayerPlanOptions o;
  o.dev = h200_sm();
  o.lengths = {4096};
  o.heads = 16;
  o.narrow_operands = true;
  o.layouts = "blocked";
  const LayerPlan autop = plan_layer(o);
  EXPECT_TRUE(autop.hybrid) << autop.to_string();
  EXPECT_GT(autop.prep_us, 0.0);
  EXPECT_EQ(autop.totals.launches, 2);
  o.mapping = "head";
  const LayerPlan head = plan_layer(o);
  EXPECT_FALSE(head.hybrid);
  EXPECT_LT(autop.totals.time_us, head.totals.time_us);
  // On the 310P model at 10 heads the prep kernel does not pay: auto keeps the tiers.
  LayerPlanOptions n;
  n.layouts = "blocked";
  EXPECT_FALSE(plan_layer(n).hybrid);
}

}  // namespace
}  // namespace linattn::plan::npu
