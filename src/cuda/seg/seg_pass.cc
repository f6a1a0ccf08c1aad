// Host side of the tier-3 building blocks (seg_pass.h): table carving, the segments-as-sequences
// parameters and the state pass (the forward's prep, then its fused kernel in state-pass mode).
#include "cuda/seg/seg_pass.h"

#include "core/check.h"
#include "cuda/gdn/gdn_fwd.h"

namespace linattn::cuda::seg {
namespace {

size_t align256(size_t x) { return (x + 255) / 256 * 256; }

}  // namespace

size_t seg_table_bytes(int64_t N, int segments) {
  const size_t num = size_t(N) * size_t(segments);
  return align256((num + 1) * 4) + align256(num * 4) + align256(size_t(N) * 4);
}

SegTable carve_seg_table(void* mem, int64_t N, int segments) {
  LINATTN_CHECK(N >= 0 && segments >= 1, "tier 3: table of ", N, " x ", segments);
  SegTable t;
  t.N = N;
  t.segments = segments;
  t.num = N * segments;
  char* b = static_cast<char*>(mem);
  const size_t num = size_t(t.num);
  t.cu = reinterpret_cast<int32_t*>(b);
  b += align256((num + 1) * 4);
  t.flags = reinterpret_cast<int32_t*>(b);
  b += align256(num * 4);
  t.last = reinterpret_cast<int32_t*>(b);
  return t;
}

GdnFwdParams virtual_params(const GdnFwdParams& p, const SegTable& t, const float* h0_seg, float* ht_seg) {
  GdnFwdParams v = p;
  LINATTN_CHECK(t.num < 65536, "tier 3: ", t.num, " segments exceed the launch limit 65535");
  v.N = static_cast<int>(t.num);
  v.T_seq = 0;
  v.cu_seqlens = t.cu;
  v.cu_i64 = false;
  v.h0 = h0_seg;
  v.h0_type = ElemType::kF32;
  v.ht = ht_seg;
  v.state_v_first = false;
  return v;
}

namespace {

GdnFwdPlan state_plan(const GdnFwdParams& v, int sm_count) {
  GdnFwdPlan plan = plan_gdn_fwd(v, sm_count, true);
  LINATTN_CHECK(plan.chunked, "tier 3 state pass: needs the chunked forward: ", plan.reason);
  return plan;
}

}  // namespace

size_t state_pass_workspace_bytes(const GdnFwdParams& v, int sm_count) {
  return gdn_fwd_workspace_bytes(v, state_plan(v, sm_count), false);
}

namespace {

// The state pass's plan: (V + K) / VS CTAs per head, the widest slice that still gives >= 0.7 CTAs
// per SM. Its prep and its fused launch use this plan (one carve of the workspace).
GdnFwdPlan state_pass_plan(const GdnFwdParams& v, int sm_count) {
  GdnFwdPlan plan = state_plan(v, sm_count);
  const int64_t heads = int64_t(v.N) * v.HV;
  plan.vs = 32;
  for (int vs : {128, 64}) {
    if (v.kda && vs == 128) continue;
    if (v.V % vs == 0 && double(heads) * ((v.V + v.K) / vs) >= 0.7 * sm_count) {
      plan.vs = vs;
      break;
    }
  }
  return plan;
}

// The two halves on a plan computed once by the caller (the callers check S_loc / M).
void prep_with(const GdnFwdParams& v, const GdnFwdPlan& plan, void* workspace, size_t workspace_bytes, void* stream) {
  gdn_fwd(v, plan, nullptr, nullptr, workspace, workspace_bytes, stream, GdnFwdStage::kPrep);
}

void fused_with(const GdnFwdParams& v, const GdnFwdPlan& plan, const int32_t* flags, int32_t skip, float* S_loc,
                float* M, void* workspace, size_t workspace_bytes, void* stream) {
  GdnFwdParams sp = v;
  sp.h0 = nullptr;
  sp.ht = nullptr;
  sp.o = nullptr;
  sp.seg_S = S_loc;
  sp.seg_M = M;
  sp.seg_flags = flags;
  sp.seg_skip = skip;
  gdn_fwd(sp, plan, nullptr, nullptr, workspace, workspace_bytes, stream, GdnFwdStage::kFused);
}

}  // namespace

void state_pass_prep(const GdnFwdParams& v, int sm_count, void* workspace, size_t workspace_bytes, void* stream) {
  prep_with(v, state_pass_plan(v, sm_count), workspace, workspace_bytes, stream);
}

void state_pass_fused(const GdnFwdParams& v, const int32_t* flags, int32_t skip, float* S_loc, float* M,
                      int sm_count, void* workspace, size_t workspace_bytes, void* stream) {
  LINATTN_CHECK(S_loc && M, "tier 3 state pass: S_loc and M are required");
  fused_with(v, state_pass_plan(v, sm_count), flags, skip, S_loc, M, workspace, workspace_bytes, stream);
}

void state_pass(const GdnFwdParams& v, const int32_t* flags, int32_t skip, float* S_loc, float* M, int sm_count,
                void* workspace, size_t workspace_bytes, void* stream) {
  LINATTN_CHECK(S_loc && M, "tier 3 state pass: S_loc and M are required");  // before anything is queued
  const GdnFwdPlan plan = state_pass_plan(v, sm_count);
  prep_with(v, plan, workspace, workspace_bytes, stream);
  fused_with(v, plan, flags, skip, S_loc, M, workspace, workspace_bytes, stream);
}

}  // namespace linattn::cuda::seg
