// The CPU chunk planner: tier 1 when sequences x heads fill the threads, tier 2 V splits when
// they leave threads idle (one long sequence and one head, uneven lengths), valid tiles, the
// capacity-only plan of fixed-capacity mode, and a reason that says why.
#include <gtest/gtest.h>

#include <cstdlib>

#include "plan/chunk_plan.h"
#include "plan_test_util.h"

namespace linattn::test {
namespace {

void expect_valid(const plan::ChunkPlan& p, int64_t V) {
  EXPECT_GE(p.v_splits, 1);
  if (p.v_splits > 1) {
    EXPECT_EQ(p.v_tile % 16, 0);
    EXPECT_GE(static_cast<int64_t>(p.v_tile) * p.v_splits, V);
    EXPECT_LT(static_cast<int64_t>(p.v_tile) * (p.v_splits - 1), V);
  }
  EXPECT_FALSE(p.reason.empty());
  EXPECT_NE(p.to_string().find("tier"), std::string::npos);
}

TEST(ChunkPlan, TierOneWhenHeadsFillThreads) {
  const plan::ChunkPlan p = plan::plan_chunk_fwd(plan_desc(1, 16, 128, 4096), {4096}, 2);
  EXPECT_EQ(p.tier, 1);
  EXPECT_EQ(p.v_splits, 1);
  EXPECT_EQ(p.num_tasks, 16);
  EXPECT_EQ(p.num_threads, 2);
  expect_valid(p, 128);
}

TEST(ChunkPlan, TierTwoForOneHead) {
  const plan::ChunkPlan p = plan::plan_chunk_fwd(plan_desc(1, 1, 128, 4096), {4096}, 2);
  EXPECT_EQ(p.tier, 2);
  EXPECT_EQ(p.v_splits, 2);
  EXPECT_EQ(p.v_tile, 64);
  EXPECT_NE(p.reason.find("tier 2"), std::string::npos);
  expect_valid(p, 128);
  const plan::ChunkPlan p8 = plan::plan_chunk_fwd(plan_desc(1, 1, 128, 4096), {4096}, 8);
  EXPECT_EQ(p8.v_splits, 8);
  expect_valid(p8, 128);
}

TEST(ChunkPlan, OddHeadCountAndUnevenLengths) {
  // 3 equal tasks on 2 threads: splitting in two balances 6 halves (3 / 3).
  const plan::ChunkPlan p = plan::plan_chunk_fwd(plan_desc(1, 3, 128, 4096), {4096}, 2);
  EXPECT_EQ(p.tier, 2);
  expect_valid(p, 128);
  // One long and several short sequences, one head: the long one gets split.
  const plan::ChunkPlan q = plan::plan_chunk_fwd(plan_desc(4, 1, 96, 5000), {4000, 300, 300, 400}, 2);
  EXPECT_EQ(q.tier, 2);
  expect_valid(q, 96);
  // Many heads: no split whatever the lengths.
  const plan::ChunkPlan r = plan::plan_chunk_fwd(plan_desc(4, 32, 128, 5000), {4000, 300, 300, 400}, 2);
  EXPECT_EQ(r.tier, 1);
}

TEST(ChunkPlan, CapacityOnlyWhenLengthsUnknown) {
  const plan::ChunkPlan p = plan::plan_chunk_fwd(plan_desc(1, 1, 128, 2048), {}, 2);
  EXPECT_FALSE(p.lengths_known);
  EXPECT_EQ(p.tier, 2);
  EXPECT_NE(p.reason.find("unknown"), std::string::npos);
  const plan::ChunkPlan e = plan::plan_chunk_fwd(plan_desc(0, 4, 64, 0), {}, 2);  // no sequences at all
  EXPECT_EQ(e.num_tasks, 0);
}

TEST(ChunkPlan, ComputeChunk) {
  meta::ChunkAttnDesc d = plan_desc(1, 16, 128, 4096);
  for (auto [bt, want] : {std::pair{64, 32}, {32, 32}, {16, 16}}) {
    d.BT = bt;
    const plan::ChunkPlan p = plan::plan_chunk_fwd(d, {4096}, 2);
    EXPECT_EQ(p.BT, want) << bt;
    EXPECT_EQ(p.caller_BT, bt);
    EXPECT_NE(p.to_string().find("compute chunk"), std::string::npos);
  }
  setenv("LINATTN_CPU_CHUNK", "64", 1);
  d.BT = 16;
  EXPECT_EQ(plan::plan_chunk_fwd(d, {4096}, 2).BT, 64);
  unsetenv("LINATTN_CPU_CHUNK");
}

TEST(ChunkPlan, SmallVNeverSplitsBelowOneVector) {
  const plan::ChunkPlan p = plan::plan_chunk_fwd(plan_desc(1, 1, 16, 4096), {4096}, 4);
  EXPECT_EQ(p.v_splits, 1);
  const plan::ChunkPlan q = plan::plan_chunk_fwd(plan_desc(1, 1, 40, 4096), {4096}, 4);
  expect_valid(q, 40);
  EXPECT_LE(q.v_splits, 3);
}

}  // namespace
}  // namespace linattn::test
