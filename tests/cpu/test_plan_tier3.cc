// The planner's tier-3 decision (plan/chunk_plan.h): a few long sequences x few heads on many
// threads split into segments (the GPU-like case: 2 / 8 heads, 1 x 32768, 132 workers); on 2
// threads the V split (tier 2) wins and tier 3 is not picked; a caller's request forces it or
// forbids it; fixed-capacity plans (lengths unknown) follow the same model.
#include <gtest/gtest.h>

#include "linattn/error.h"
#include "plan/chunk_plan.h"
#include "plan_test_util.h"

namespace linattn::test {
namespace {

TEST(ChunkPlanTier3, ManyThreadsFewHeadsSplitSequence) {
  const plan::ChunkPlan p = plan::plan_chunk_fwd(plan_desc(1, 8, 128, 32768), {32768}, 132);
  EXPECT_EQ(p.tier, 3) << p.to_string();
  EXPECT_GT(p.segments, 1);
  EXPECT_GE(p.num_tasks, 8 * p.segments);
  EXPECT_LT(p.makespan_flops, p.ideal_flops * 132 / 8.0) << "tier 3 must beat one task per head";
  EXPECT_NE(p.to_string().find("tier 3"), std::string::npos);
  // Unknown lengths (fixed capacity): the same shape from capacity.
  EXPECT_EQ(plan::plan_chunk_fwd(plan_desc(1, 8, 128, 32768), {}, 132).tier, 3);
}

TEST(ChunkPlanTier3, TwoThreadsPreferVSplitOrHeads) {
  EXPECT_NE(plan::plan_chunk_fwd(plan_desc(1, 1, 128, 32768), {32768}, 2).tier, 3);
  EXPECT_NE(plan::plan_chunk_fwd(plan_desc(1, 8, 128, 32768), {32768}, 2).tier, 3);
  EXPECT_EQ(plan::plan_chunk_fwd(plan_desc(64, 8, 128, 32768), std::vector<int64_t>(64, 512), 132).tier == 3, false);
}

TEST(ChunkPlanTier3, RequestForcesOrForbids) {
  const plan::ChunkPlan forced = plan::plan_chunk_fwd(plan_desc(1, 1, 128, 32768), {32768}, 2, 4);
  EXPECT_EQ(forced.tier, 3);
  EXPECT_EQ(forced.segments, 4);
  EXPECT_NE(forced.reason.find("requested"), std::string::npos);
  const plan::ChunkPlan never = plan::plan_chunk_fwd(plan_desc(1, 8, 128, 32768), {32768}, 132, 1);
  EXPECT_NE(never.tier, 3);
  EXPECT_EQ(never.segments, 1);
  EXPECT_THROW(plan::plan_chunk_fwd(plan_desc(1, 8, 128, 32768), {32768}, 2, -1), Error);
  EXPECT_THROW(plan::plan_chunk_fwd(plan_desc(1, 8, 128, 32768), {32768}, 2, 1 << 20), Error);
}

}  // namespace
}  // namespace linattn::test
