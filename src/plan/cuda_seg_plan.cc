// CUDA tier-3 planner (see cuda_seg_plan.h).
#include "plan/cuda_seg_plan.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"

namespace linattn::plan {

namespace {
constexpr int kMaxSegments = 4096;  // as the CPU planner
constexpr int kMaxAuto = 64;
}  // namespace

CudaSegPlan plan_cuda_segments(const meta::ChunkAttnDesc& d, int sm_count, int segments_request, bool supported) {
  LINATTN_CHECK(segments_request >= 0 && segments_request <= kMaxSegments, "segments: expected in [0, ",
                kMaxSegments, "] (0 = planner, 1 = off), got ", segments_request);
  CudaSegPlan p;
  std::ostringstream why;
  const int64_t heads = d.N * d.HV;
  const double want = 0.7 * std::max(1, sm_count);
  if (segments_request == 1) {
    p.reason = "tier 3 off (segments = 1)";
    return p;
  }
  if (!supported) {
    p.reason = "tier 3 unavailable for this shape";
    return p;
  }
  if (segments_request > 1) {
    p.segments = segments_request;
    p.min_segment = d.BT;
    why << "tier 3: " << p.segments << " segments per sequence (requested by the caller)";
    p.reason = why.str();
    return p;
  }
  if (heads <= 0 || 2.0 * double(heads) >= want) {
    why << "tiers 1/2: " << heads << " sequence x head CTA pairs fill " << sm_count << " SMs";
    p.reason = why.str();
    return p;
  }
  const int64_t avg = d.N > 0 ? d.B * d.T / d.N : 0;
  const int64_t min_seg = 4LL * d.BT;
  int s = 1;
  while (s < kMaxAuto && 2.0 * double(heads) * s < want && avg >= 2LL * s * min_seg) s *= 2;
  if (s > 1) {
    p.segments = s;
    p.min_segment = min_seg;
    why << "tier 3: " << heads << " sequence x head(s) leave " << sm_count << " SMs idle; " << s
        << " segments per sequence (avg " << avg << " tokens, min " << min_seg << ")";
  } else {
    why << "tiers 1/2: sequences too short to split (avg " << avg << " tokens)";
  }
  p.reason = why.str();
  return p;
}

}  // namespace linattn::plan
