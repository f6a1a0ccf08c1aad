// CUDA tier-3 planner (see cuda_seg_plan.h). Cost model in microseconds with constants measured
// on the H200 (docs/perf-notes.md "Sequence parallelism", bench/results/h200-tier3-*): the
// head-level kernels are latency-bound at one CTA per SM, so a pass costs
// waves(CTAs) x chunks per CTA x step, plus the combine's steps. Two kernel families: where the
// pipelined wgmma kernel runs (BT 64, V % 64 == 0: gdn_fused_wgp.cu, V-slice 64; its state-pass
// mode covers 128 columns of [S | M] per CTA) and elsewhere the mma.sync kernel (gdn_fused.cu,
// step per V-slice; its state pass VS 128 / 64).
#include "plan/cuda_seg_plan.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/check.h"

namespace linattn::plan {

namespace {

constexpr int kMaxSegments = 4096;  // as the CPU planner
constexpr int kMaxAuto = 64;
constexpr double kCombineStepUs = 3.7;   // one combine step (K x K times K x 8 per CTA, M prefetched a step ahead)
constexpr double kStatePassStepUs = 4.4; // one chunk of a mma.sync state-pass CTA (VS 128 or 64)
constexpr double kOverheadUs = 15.0;     // tier 3's extra launches (table, pass 1, combine, gather)
// The pipelined wgmma kernel (H200 ncu, tier3wg, 2/8 1x32768 s = 8: 127.6 / 123.3 us for 64 chunks):
// one chunk step of a CTA (V-slice 64), and of a state-pass CTA (two state warpgroups, 128 columns
// of [S | M]); a pass also pays one step to fill its input ring (loads run ahead of the chain).
// Whether the state pass runs on it by default (gdn_fused_wgp.cu kSegWgmmaDefault).
constexpr double kWgStepUs = 2.0;
constexpr double kWgStateStepUs = 1.93;
constexpr bool kWgStatePass = true;

// One chunk step of a head-level fused CTA of VS columns.
double step_us(int vs) { return vs >= 128 ? 6.9 : (vs >= 64 ? 4.1 : 3.1); }

double waves(double ctas, int sms) { return std::max(1.0, std::ceil(ctas / std::max(1, sms))); }

// The pipelined wgmma kernel takes BT 64 and V % 64 == 0 (bf16 / fp16: every tier-3 shape).
bool wgmma_kernel(int64_t BT, int64_t V) { return BT == 64 && V % 64 == 0; }

// Best head-level pass over `heads` (sequence, value head) pairs of `chunks` chunks each.
double head_pass_us(double heads, double chunks, int64_t BT, int64_t V, bool kda, int sms) {
  if (wgmma_kernel(BT, V)) return waves(heads * double(V / 64), sms) * (chunks + 1.0) * kWgStepUs;
  double best = -1.0;
  for (int vs : {32, 64, 128}) {
    if (V % vs != 0 || (kda && vs == 128)) continue;
    const double t = waves(heads * double(V / vs), sms) * chunks * step_us(vs);
    if (best < 0.0 || t < best) best = t;
  }
  return best < 0.0 ? waves(heads, sms) * chunks * step_us(32) : best;
}

double tier3_us(double heads, double chunks, int64_t BT, int64_t K, int64_t V, bool kda, int sms, int s) {
  const double per = std::ceil(chunks / s);
  double pass1;
  if (kWgStatePass && wgmma_kernel(BT, V)) {
    pass1 = waves(heads * (s - 1) * std::ceil(double(V + K) / 128.0), sms) * (per + 1.0) * kWgStateStepUs;
  } else {
    const int vs1 = kda ? 64 : 128;
    pass1 = waves(heads * (s - 1) * double((V + K) / vs1), sms) * per * kStatePassStepUs;
  }
  return pass1 + (s - 1) * kCombineStepUs + head_pass_us(heads * s, per, BT, V, kda, sms) + kOverheadUs;
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
  const double base = head_pass_us(heads, chunks, d.BT, d.V, kda, sm_count);
  double best = base;
  int best_s = 1;
  for (int s = 2; s <= kMaxAuto && s <= chunks; s *= 2) {
    const double t = tier3_us(heads, chunks, d.BT, d.K, d.V, kda, sm_count, s);
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
