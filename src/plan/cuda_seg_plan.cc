// CUDA tier-3 planner (see cuda_seg_plan.h). Cost model in microseconds with constants measured
// on the H200 (docs/perf-notes.md "Sequence parallelism", bench/results/h200-tier3-*): the
// head-level kernels are latency-bound at one CTA per SM, so a pass costs
// waves(CTAs) x chunks per CTA x step(VS), and the combine ~8 us per segment boundary.
#include "plan/cuda_seg_plan.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/check.h"

namespace linattn::plan {

namespace {

constexpr int kMaxSegments = 4096;  // as the CPU planner
constexpr int kMaxAuto = 64;
constexpr double kCombineStepUs = 8.0;   // one combine step (K x K times K x 8 per CTA, M from L2)
constexpr double kStatePassStepUs = 4.4; // one chunk of a state-pass CTA (VS 128 or 64)
constexpr double kOverheadUs = 15.0;     // tier 3's extra launches (table, pass 1, combine, gather)

// One chunk step of a head-level fused CTA of VS columns.
double step_us(int vs) { return vs >= 128 ? 6.9 : (vs >= 64 ? 4.1 : 3.1); }

double waves(double ctas, int sms) { return std::max(1.0, std::ceil(ctas / std::max(1, sms))); }

// Best head-level pass over `heads` (sequence, value head) pairs of `chunks` chunks each.
double head_pass_us(double heads, double chunks, int64_t V, bool kda, int sms) {
  double best = -1.0;
  for (int vs : {32, 64, 128}) {
    if (V % vs != 0 || (kda && vs == 128)) continue;
    const double t = waves(heads * double(V / vs), sms) * chunks * step_us(vs);
    if (best < 0.0 || t < best) best = t;
  }
  return best < 0.0 ? waves(heads, sms) * chunks * step_us(32) : best;
}

double tier3_us(double heads, double chunks, int64_t K, int64_t V, bool kda, int sms, int s) {
  const double per = std::ceil(chunks / s);
  const int vs1 = kda ? 64 : 128;
  const double pass1 = waves(heads * (s - 1) * double((V + K) / vs1), sms) * per * kStatePassStepUs;
  return pass1 + (s - 1) * kCombineStepUs + head_pass_us(heads * s, per, V, kda, sms) + kOverheadUs;
}

}  // namespace

CudaSegPlan plan_cuda_segments(const meta::ChunkAttnDesc& d, int sm_count, int segments_request, bool supported) {
  LINATTN_CHECK(segments_request >= 0 && segments_request <= kMaxSegments, "segments: expected in [0, ",
                kMaxSegments, "] (0 = planner, 1 = off), got ", segments_request);
  CudaSegPlan p;
  std::ostringstream why;
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
  const int64_t avg = d.N > 0 ? d.B * d.T / d.N : 0;
  const double heads = double(d.N * d.HV), chunks = std::ceil(double(avg) / std::max<int64_t>(1, d.BT));
  if (heads <= 0.0 || chunks < 2.0) {
    p.reason = "tiers 1/2: nothing to split";
    return p;
  }
  const bool kda = d.kda();
  const double base = head_pass_us(heads, chunks, d.V, kda, sm_count);
  double best = base;
  int best_s = 1;
  for (int s = 2; s <= kMaxAuto && s <= chunks; s *= 2) {
    const double t = tier3_us(heads, chunks, d.K, d.V, kda, sm_count, s);
    if (t < 0.9 * base && t < best) {
      best = t;
      best_s = s;
    }
  }
  if (best_s > 1) {
    p.segments = best_s;
    p.min_segment = 4LL * d.BT;
    why << "tier 3: " << best_s << " segments per sequence, modeled " << best << " us vs head-level " << base
        << " us (" << d.N << " x " << d.HV << " heads, ~" << avg << " tokens each, " << sm_count << " SMs)";
  } else {
    why << "tiers 1/2: modeled " << base << " us, no segment count saves > 10%";
  }
  p.reason = why.str();
  return p;
}

}  // namespace linattn::plan
