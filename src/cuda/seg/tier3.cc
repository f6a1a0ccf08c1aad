// Tier-3 drivers (see tier3.h): workspace carving and launch order. All launches on the caller's
// stream; no host reads of device data, no allocation: capture-safe.
#include "cuda/seg/tier3.h"

#include <algorithm>
#include <atomic>

#include "core/carver.h"
#include "core/check.h"
#include "core/env.h"
#include "core/util.h"
#include "cuda/gdn/gdn_bwd.h"
#include "cuda/gdn/gdn_fwd.h"
#include "cuda/seg/seg_pass.h"
#include "cuda/seg/side_stream.h"

namespace linattn::cuda::seg {
namespace {

using Carver = WorkspaceCarver<256>;  // count with base == nullptr, then carve

// A table-shaped view (pointers unset) for sizing the virtual problem.
SegTable shape_table(const GdnFwdParams& p, int segments) {
  SegTable t;
  t.N = p.N;
  t.segments = segments;
  t.num = int64_t(p.N) * segments;
  return t;
}

GdnFwdPlan inner_fwd_plan(const GdnFwdParams& v, const Tier3Config& c) {
  GdnFwdPlan plan = plan_gdn_fwd(v, c.sm_count, true);
  LINATTN_CHECK(plan.chunked, "tier 3: needs the chunked forward: ", plan.reason);
  if (c.vs > 0) plan.vs = c.vs;
  return plan;
}

struct FwdBufs {
  SegTable t;
  float *S_loc, *M, *h0, *ht;
  void* inner;
  size_t inner_bytes;
  // First-segment schedule (carved after the rest, so the default's layout is unchanged): the
  // segments' final states also when p.ht is null (slot 0's feeds the combine), the two tables.
  float* ht_all;
  int32_t *cu_first, *cu_rest;
};

FwdBufs carve_fwd(const GdnFwdParams& p, const Tier3Config& c, Carver& cv) {
  FwdBufs b{};
  const SegTable shape = shape_table(p, c.segments);
  const size_t num = size_t(shape.num), HV = size_t(p.HV), K = size_t(p.K), V = size_t(p.V);
  char* table = cv.take<char>(seg_table_bytes(p.N, c.segments));
  b.t = table ? carve_seg_table(table, p.N, c.segments) : shape;
  b.S_loc = cv.take<float>(num * HV * K * V);
  b.M = cv.take<float>(num * HV * K * K);
  b.h0 = cv.take<float>(num * HV * K * V);
  b.ht = p.ht ? cv.take<float>(num * HV * K * V) : nullptr;
  GdnFwdParams v = virtual_params(p, shape, nullptr, nullptr);
  v.cu_seqlens = reinterpret_cast<const void*>(uintptr_t(1));  // sizing: varlen tables
  b.inner_bytes = gdn_fwd_workspace_bytes(v, inner_fwd_plan(v, c), false);
  b.inner = cv.take<char>(b.inner_bytes);
  b.ht_all = p.ht ? b.ht : cv.take<float>(num * HV * K * V);
  b.cu_first = cv.take<int32_t>(num + 1);
  b.cu_rest = cv.take<int32_t>(num + 1);
  return b;
}

// Off by default: the H200 A/B at d75c503 measured it slower (2/8 1x32768: 0.388 vs 0.377 ms graph;
// perf-notes "Where the 0.379 ms goes").
constexpr bool kFirstDefault = false;
std::atomic<int64_t> g_first_runs{0};

// The first-segment schedule (tier3.h); the table is built. Slot 0 runs the ordinary forward from
// the sequence's h0 on the side stream (cu_first: the other slots empty) while the state pass takes
// the middle slots (skip first, last, empty); after the join the combine starts from slot 0's final
// state (ht_all[0]) and writes every slot's initial state, h0_seg[0] included (= that final state, so
// the forward over cu_rest, where slot 0 is empty, rewrites ht_all[0] with the same bits).
// The seed / tables kernel runs on the side stream beside the prep (only the side's forward and,
// after the join, the main stream read what it writes).
void tier3_fwd_first(const GdnFwdParams& p, const Tier3Config& c, const FwdBufs& b, void* stream) {
  const GdnFwdParams v = virtual_params(p, b.t, b.h0, b.ht_all);
  const GdnFwdPlan plan = inner_fwd_plan(v, c);
  void* side = side_fork(stream);  // after the table
  build_first_split(p, b.t, b.h0, b.cu_first, b.cu_rest, side);
  state_pass_prep(v, c.sm_count, b.inner, b.inner_bytes, stream);
  GdnFwdParams first = v;
  first.cu_seqlens = b.cu_first;
  side_fork(stream);  // after the prep too
  gdn_fwd(first, plan, nullptr, nullptr, b.inner, b.inner_bytes, side, GdnFwdStage::kFused);
  state_pass_fused(v, b.t.flags, kSegEmpty | kSegLast | kSegFirst, b.S_loc, b.M, c.sm_count, b.inner,
                   b.inner_bytes, stream);
  side_join(stream);
  combine_forward_from_first(p, b.t, b.M, b.S_loc, b.ht_all, b.h0, stream);
  GdnFwdParams rest = v;
  rest.cu_seqlens = b.cu_rest;
  rest.ht = p.ht ? b.ht_all : nullptr;
  gdn_fwd(rest, plan, nullptr, nullptr, b.inner, b.inner_bytes, stream, GdnFwdStage::kFused);
  if (p.ht) gather_states(p, b.t, b.ht_all, true, p.ht, ElemType::kF32, stream);
  g_first_runs.fetch_add(1);
}

}  // namespace

bool tier3_supported(const GdnFwdParams& p, bool aligned16, const char** why) {
  const GdnFwdPlan plan = plan_gdn_fwd(p, 132, aligned16);
  const char* r = nullptr;
  if (!plan.chunked) r = "the chunked forward cannot take this shape";
  else if (p.T_total >= (int64_t(1) << 31)) r = "T_total >= 2^31";
  if (why) *why = r;
  return r == nullptr;
}

bool tier3_first_enabled() { return env_flag("LINATTN_CUDA_TIER3_FIRST", kFirstDefault); }

int64_t tier3_first_runs() { return g_first_runs.load(); }

size_t tier3_fwd_workspace_bytes(const GdnFwdParams& p, const Tier3Config& c) {
  Carver cv{nullptr};
  carve_fwd(p, c, cv);
  return cv.off;
}

void tier3_fwd(const GdnFwdParams& p, const Tier3Config& c, void* workspace, size_t workspace_bytes, void* stream) {
  const size_t need = tier3_fwd_workspace_bytes(p, c);
  LINATTN_CHECK_CODE(workspace && workspace_bytes >= need, ErrorCode::kInvalidArgument,
                     FailureCategory::kAddressOrLifetime, "workspace: tier 3 expected at least ", need,
                     " bytes, got ", workspace_bytes);
  Carver cv{static_cast<char*>(workspace)};
  const FwdBufs b = carve_fwd(p, c, cv);
  build_seg_table(p, c.min_segment, b.t, stream);
  if (p.N == 1 && c.segments >= 2 && tier3_first_enabled()) {
    tier3_fwd_first(p, c, b, stream);
    return;
  }
  const GdnFwdParams v = virtual_params(p, b.t, b.h0, b.ht);
  const GdnFwdPlan plan = inner_fwd_plan(v, c);
  // (1) local states and transitions of every segment but each sequence's last (prep included).
  state_pass(v, b.t.flags, kSegEmpty | kSegLast, b.S_loc, b.M, c.sm_count, b.inner, b.inner_bytes, stream);
  // (2) true initial states in order; (3) the fused kernel over the segments, same prep.
  combine_forward(p, b.t, b.M, b.S_loc, b.h0, stream);
  gdn_fwd(v, plan, nullptr, nullptr, b.inner, b.inner_bytes, stream, GdnFwdStage::kFused);
  if (p.ht) gather_states(p, b.t, b.ht, true, p.ht, ElemType::kF32, stream);
}

namespace {

struct BwdBufs {
  SegTable t;
  float *S_loc, *M, *dS_loc, *h0, *dht, *dh0;
  void* inner;
  size_t inner_bytes;
};

GdnBwdPlan inner_bwd_plan(const GdnFwdParams& v, const Tier3Config& c) {
  GdnBwdPlan plan = plan_gdn_bwd(v, c.sm_count, true);
  if (plan.chunked && c.vs > 0) plan.vs = c.vs;
  return plan;
}

BwdBufs carve_bwd(const GdnBwdParams& p, const Tier3Config& c, Carver& cv) {
  BwdBufs b{};
  const GdnFwdParams& f = p.f;
  const SegTable shape = shape_table(f, c.segments);
  const size_t num = size_t(shape.num), HV = size_t(f.HV), K = size_t(f.K), V = size_t(f.V);
  char* table = cv.take<char>(seg_table_bytes(f.N, c.segments));
  b.t = table ? carve_seg_table(table, f.N, c.segments) : shape;
  b.S_loc = cv.take<float>(num * HV * K * V);
  b.M = cv.take<float>(num * HV * K * K);
  b.dS_loc = cv.take<float>(num * HV * K * V);
  b.h0 = cv.take<float>(num * HV * K * V);
  b.dht = cv.take<float>(num * HV * K * V);
  b.dh0 = p.dh0.p ? cv.take<float>(num * HV * K * V) : nullptr;
  GdnFwdParams v = virtual_params(f, shape, nullptr, nullptr);
  v.cu_seqlens = reinterpret_cast<const void*>(uintptr_t(1));  // sizing: varlen tables
  b.inner_bytes = std::max(state_pass_workspace_bytes(v, c.sm_count),
                           gdn_bwd_workspace_bytes(v, inner_bwd_plan(v, c), false));
  b.inner = cv.take<char>(b.inner_bytes);
  return b;
}

}  // namespace

size_t tier3_bwd_workspace_bytes(const GdnBwdParams& p, const Tier3Config& c) {
  Carver cv{nullptr};
  carve_bwd(p, c, cv);
  return cv.off;
}

void tier3_bwd(const GdnBwdParams& p, const Tier3Config& c, void* workspace, size_t workspace_bytes, void* stream) {
  const size_t need = tier3_bwd_workspace_bytes(p, c);
  LINATTN_CHECK_CODE(workspace && workspace_bytes >= need, ErrorCode::kInvalidArgument,
                     FailureCategory::kAddressOrLifetime, "workspace: tier 3 expected at least ", need,
                     " bytes, got ", workspace_bytes);
  Carver cv{static_cast<char*>(workspace)};
  const BwdBufs b = carve_bwd(p, c, cv);
  const GdnFwdParams& f = p.f;
  build_seg_table(f, c.min_segment, b.t, stream);
  const GdnFwdParams v = virtual_params(f, b.t, b.h0, nullptr);
  const GdnBwdPlan plan = inner_bwd_plan(v, c);
  // (1) S_loc / M of every non-empty segment.
  state_pass(v, b.t.flags, kSegEmpty, b.S_loc, b.M, c.sm_count, b.inner, b.inner_bytes, stream);
  // (2) dS_loc: the backward's state gradient at each segment's start from a zero terminal one.
  GdnBwdParams d{};
  d.f = virtual_params(f, b.t, nullptr, nullptr);
  d.d_o = p.d_o;
  d.do_type = p.do_type;
  d.dh0 = {b.dS_loc, ElemType::kF32};
  gdn_bwd(d, plan, nullptr, nullptr, b.inner, b.inner_bytes, stream, GdnBwdStage::kDState);
  // (3) true initial states forward, true terminal gradients backward.
  combine_forward(f, b.t, b.M, b.S_loc, b.h0, stream);
  combine_reverse(f, p.dht, p.dht_type, b.t, b.M, b.dS_loc, b.dht, stream);
  // (4) the backward over the segments; parameter gradients reduce over the same chunks in order.
  GdnBwdParams q = p;
  q.f = v;
  q.dht = b.dht;
  q.dht_type = ElemType::kF32;
  q.dh0 = p.dh0.p ? GradOut{b.dh0, ElemType::kF32} : GradOut{};
  gdn_bwd(q, plan, nullptr, nullptr, b.inner, b.inner_bytes, stream, GdnBwdStage::kAll);
  if (p.dh0.p) gather_states(f, b.t, b.dh0, false, p.dh0.p, p.dh0.t, stream);
}

}  // namespace linattn::cuda::seg
