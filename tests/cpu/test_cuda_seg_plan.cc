// The CUDA tier-3 planner (plan/cuda_seg_plan.h), a pure function compiled without CUDA: few
// heads on a long sequence split (2 / 8 heads x 32768 on 132 SMs -> 8 segments, the fastest
// measured count), enough heads (16 / 64) or short sequences stay on tiers 1 / 2, a caller's
// request forces or forbids tier 3, an unsupported shape never takes it, bad requests raise.
#include <gtest/gtest.h>

#include "linattn/error.h"
#include "plan/cuda_seg_plan.h"
#include "plan_test_util.h"

namespace linattn::test {
namespace {

TEST(CudaSegPlan, FewHeadsLongSequenceSplits) {
  const plan::CudaSegPlan p = plan::plan_cuda_segments(plan_desc(1, 8, 128, 32768), 132, 0, true);
  EXPECT_EQ(p.segments, 8) << p.reason;
  EXPECT_EQ(p.min_segment, 4 * 64);
  EXPECT_NE(p.reason.find("tier 3"), std::string::npos);
  EXPECT_GT(plan::plan_cuda_segments(plan_desc(1, 1, 128, 32768), 132, 0, true).segments, 8);
}

TEST(CudaSegPlan, EnoughHeadsOrShortSequencesStay) {
  EXPECT_EQ(plan::plan_cuda_segments(plan_desc(1, 64, 128, 32768), 132, 0, true).segments, 1);
  EXPECT_EQ(plan::plan_cuda_segments(plan_desc(1, 8, 128, 2048), 132, 0, true).segments, 1);
  EXPECT_EQ(plan::plan_cuda_segments(plan_desc(6, 4, 128, 520), 132, 0, true).segments, 1);
  EXPECT_EQ(plan::plan_cuda_segments(plan_desc(0, 8, 128, 0), 132, 0, true).segments, 1);
}

TEST(CudaSegPlan, RequestForcesOrForbids) {
  const plan::CudaSegPlan forced = plan::plan_cuda_segments(plan_desc(4, 64, 128, 4096), 132, 3, true);
  EXPECT_EQ(forced.segments, 3);
  EXPECT_EQ(forced.min_segment, 64);
  EXPECT_NE(forced.reason.find("requested"), std::string::npos);
  EXPECT_EQ(plan::plan_cuda_segments(plan_desc(1, 8, 128, 32768), 132, 1, true).segments, 1);
  EXPECT_EQ(plan::plan_cuda_segments(plan_desc(1, 8, 128, 32768), 132, 4, false).segments, 1);
  EXPECT_EQ(plan::plan_cuda_segments(plan_desc(1, 8, 128, 32768), 132, 0, false).segments, 1);
  EXPECT_THROW(plan::plan_cuda_segments(plan_desc(1, 8, 128, 32768), 132, -1, true), Error);
  EXPECT_THROW(plan::plan_cuda_segments(plan_desc(1, 8, 128, 32768), 132, 1 << 20, true), Error);
}

}  // namespace
}  // namespace linattn::test
