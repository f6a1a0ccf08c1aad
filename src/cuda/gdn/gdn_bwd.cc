// Planning, workspace carving and launch order of the CUDA GDN backward (see gdn_bwd.h):
// chunked: [chunk metadata] -> prep -> sweeps -> chunk gradients -> gate reduce -> zero padding;
// token: [chunk metadata] -> token backward -> dq/dk, dg/dbeta, gate finish -> zero padding
// KDA chunked: [chunk metadata] -> KDA prep (+ Ai) -> sweeps (KDA policy) -> KDA chunk gradients ->
// per-channel gate reduce -> zero padding (the default for KDA since its H200 verification at 11dc4fd;
// LINATTN_CUDA_KDA_BWD=token forces the token path; the chunk-gradient kernel is kda/kda_bwd_chunk15.cu,
// chunked15, since session 14; =chunked14 / =chunked13 / =chunked12 / =chunked11 / =chunked7 keep the earlier ones:
// kda_bwd_chunk14.cu, kda_bwd_chunk13.cu, kda_bwd_chunk12.cu, kda_bwd_chunk11.cu, kda_bwd_chunk5.cu).
// Workspace of the chunked path (bf16 intermediates; T = token rows, NT = chunk capacity):
//   prep: gam, rq, rk (fp32, per token) and Ab, P, Ai (BT per token and value head)
//   hS, hdS: NT x HV x K x V each (states entering / state gradients leaving each chunk)
//   vh, dvh: T x HV x V each; per-chunk gate partials NT x HV x 2 (fp32).
// KDA: no gam / rq / rk; qg, kg, kgl (T x HV x K, io type), gl (NT x HV x K fp32); partials x K.
#include "cuda/gdn/gdn_bwd.h"

#include <cuda_runtime.h>

#include <sstream>
#include <string>

#include "core/carver.h"
#include "core/env.h"
#include "core/util.h"
#include "cuda/gdn/gdn_prep_cache.h"
#include "cuda/common/check.h"
#include "cuda/gdn/gdn_bwd_kernels.h"
#include "cuda/gdn/gdn_fwd.h"
#include "cuda/meta/chunk_meta.h"

namespace linattn::cuda {
namespace {

using Carver = WorkspaceCarver<256>;  // count with base == nullptr, then carve

struct Carved {
  int32_t* chunk_indices = nullptr;
  int32_t* chunk_offsets = nullptr;
  int32_t* seq_order = nullptr;  // [N] or null (GdnChunkWs::seq_order)
  GdnBwdWs w;
  GdnBwdTokenWs tw;
};

// cached: the prep outputs come from the forward's training cache (gdn_prep_cache.h), not from here.
Carved carve(const GdnFwdParams& f, const GdnBwdPlan& plan, bool tables_supplied, Carver& c, bool cached) {
  Carved r;
  if (plan.tables && !tables_supplied) {
    r.chunk_indices = c.take<int32_t>(2 * size_t(plan.nt_cap));
    r.chunk_offsets = c.take<int32_t>(size_t(f.N) + 1);
  }
  const size_t T = size_t(f.T_total), HV = size_t(f.HV), K = size_t(f.K), V = size_t(f.V);
  const size_t NT = size_t(plan.nt_cap);
  if (!plan.chunked) {
    const size_t ns = size_t(gdn_bwd_token_slices(f.V)), W = size_t(plan.gate_width);
    r.tw.nt_cap = plan.nt_cap;
    r.tw.ns = static_cast<int>(ns);
    r.tw.ck = c.take<float>(NT * HV * K * V);
    r.tw.cache = c.take<float>(size_t(f.N) * HV * ns * size_t(f.BT) * K * 32);
    r.tw.dqh = c.take<float>(T * HV * ns * K);
    r.tw.dkh = c.take<float>(T * HV * ns * K);
    r.tw.dgh = c.take<float>(T * HV * ns * K);
    r.tw.dbh = c.take<float>(T * HV * ns);
    r.tw.part = c.take<float>((T + 63) / 64 * HV * W * 2);
    return r;
  }
  GdnBwdWs& w = r.w;
  w.nt_cap = plan.nt_cap;
  w.c.T_cap = f.T_total;
  if (plan.seq_order && seq_order_env())  // the sweeps' longest-first order
    w.c.seq_order = r.seq_order = c.take<int32_t>(size_t(f.N));
  if (!cached) carve_prep_outputs(c, f, plan.BT, plan.nt_cap, true, true, w.c);  // else: the caller's cache
  w.hS = c.take<uint16_t>(NT * HV * K * V);
  w.hdS = c.take<uint16_t>(NT * HV * K * V);
  w.vh = c.take<uint16_t>(HV * T * V);
  w.dvh = c.take<uint16_t>(HV * T * V);
  w.part = c.take<float>(NT * HV * 2 * (f.kda ? K : 1));
  return r;
}

bool is_aligned16(const void* x) { return (reinterpret_cast<uintptr_t>(x) & 15) == 0; }

// Why the chunked kernels cannot take this shape (null: they can).
const char* shape_refusal(const GdnFwdParams& f, bool aligned16) {
  if (f.K != 128) return "K != 128";
  if (f.V != 64 && f.V != 128) return "V not in {64, 128}";
  if (f.io != ElemType::kBF16 && f.io != ElemType::kF16) return "fp32 inputs";
  if (f.BT != 64 && f.BT != 32) return "chunk_size 16";
  if (!aligned16) return "q/k/v not 16-byte aligned";
  return nullptr;
}

// KDA takes the chunked path by default (verified on the H200 at commit 11dc4fd: every chunked,
// token, graph and tier-3 backward test with it, memcheck / racecheck clean).
constexpr bool kKdaChunkedDefault = true;

// LINATTN_CUDA_KDA_BWD = unset / "" (default) | chunked (the chunked path with its default chunk kernel, chunked17
// since session 15) | chunked17 | chunked15 (the session-14 default: chunked14 with the head's scalar / v loads ahead
// of its tiles, bitwise chunked14) | chunked14
// (chunked13 with cheaper eg / egl and split-TF32 lo parts; default earlier in session 14) | chunked13 (chunked12
// with the gates as a cp.async tile, bitwise chunked12; the session-13 default) | chunked12 (chunked11 with its gate
// work per form) | chunked11 (split diagonal blocks, the session-12 default) | chunked7 (the kernel before) | token,
// read on every call (plan and workspace query agree). Any other value, the removed chunk kernels chunked2 ..
// chunked6, chunked8, chunked9 included (session 10), throws at plan time, before any launch. chunked17 (the
// default since session 15, also "chunked"): chunked15 with batched row scales, cheaper bf16 unpacks, eg / egl steps
// as selects (bitwise chunked15).
enum KdaBwd {
  kKdaBwdDefault = -1,
  kKdaChunked,
  kKdaChunked11,
  kKdaChunked7,
  kKdaChunked12,
  kKdaChunked13,
  kKdaToken,
  kKdaChunked14,
  kKdaChunked15,
  kKdaChunked17
};
int kda_bwd_mode() {  // the list in KdaBwd's order
  return env_choice("LINATTN_CUDA_KDA_BWD",
                    {"chunked", "chunked11", "chunked7", "chunked12", "chunked13", "token", "chunked14", "chunked15",
                     "chunked17"},
                    kKdaBwdDefault,
                    "the chunk kernels chunked2 .. chunked6, chunked8 and chunked9 were removed (docs/perf-notes.md)");
}

// Why a KDA call keeps the token path by choice (null: the chunked path may be taken).
const char* kda_chunked_refusal() {
  const int mode = kda_bwd_mode();
  if (mode == kKdaToken) return "forced by LINATTN_CUDA_KDA_BWD=token";
  if (mode != kKdaBwdDefault || kKdaChunkedDefault) return nullptr;
  return "KDA chunked backward switched off (LINATTN_CUDA_KDA_BWD)";
}

}  // namespace

std::string GdnBwdPlan::str() const {
  std::ostringstream os;
  os << (chunked ? "chunked" : "token") << " BT=" << BT << " nt_cap=" << nt_cap;
  if (gate_width != 1) os << " gate_width=" << gate_width;
  if (chunked) os << " vs=" << vs;
  if (tables) os << " tables";
  os << " (" << reason << ")";
  return os.str();
}

GdnBwdPlan plan_gdn_bwd(const GdnFwdParams& f, int sm_count, bool aligned16) {
  const int gate_width = bwd_gate_width(f);
  GdnBwdPlan plan;
  plan.BT = f.BT;
  plan.gate_width = gate_width;
  plan.tables = f.cu_seqlens != nullptr;
  plan.seq_order = seq_order_useful(plan.tables, f.N, 2 * int64_t(f.N) * f.HV * ((f.V + 31) / 32), sm_count);
  plan.nt_cap = gdn_chunk_capacity(f, f.BT);
  const char* why = gate_width != 1 ? kda_chunked_refusal() : nullptr;
  if (!why) why = shape_refusal(f, aligned16);
  if (why) {
    plan.reason = std::string("token-by-token backward: ") + why;
    return plan;
  }
  plan.chunked = true;
  // Two sweep roles per (V-slice, head): the widest slice that still gives >= 0.7 CTAs per SM.
  const double want = 0.7 * sm_count;
  const int64_t heads = int64_t(f.N) * f.HV;
  plan.vs = 32;
  for (int vs : {128, 64}) {
    if (f.kda && vs == 128) continue;  // KDA stages hold a third K-wide tile: V-slices 32 / 64
    if (f.V % vs == 0 && 2.0 * double(heads) * (f.V / vs) >= want) {
      plan.vs = vs;
      break;
    }
  }
  std::ostringstream os;
  os << "N*HV=" << heads << " on " << sm_count << " SMs -> 2 x " << (f.V / plan.vs) << " sweep CTAs per head";
  plan.reason = os.str();
  return plan;
}

size_t gdn_bwd_workspace_bytes(const GdnFwdParams& f, const GdnBwdPlan& plan, bool tables_supplied, bool cached) {
  Carver c{nullptr};
  carve(f, plan, tables_supplied, c, cached && plan.chunked);
  return c.off;
}

void gdn_bwd(const GdnBwdParams& p, const GdnBwdPlan& plan, int32_t* chunk_indices, int32_t* chunk_offsets,
             void* workspace, size_t workspace_bytes, void* stream, GdnBwdStage stage, const void* prep_cache) {
  const bool dstate = stage == GdnBwdStage::kDState;
  LINATTN_CHECK(!dstate || (!p.dq.p && !p.dk.p && !p.dv.p && !p.dg.p && !p.dbeta.p && !p.dA_log.p && !p.ddt_bias.p),
                "gdn bwd: the dS stage computes dh0 only");
  auto st = static_cast<cudaStream_t>(stream);
  const GdnFwdParams& f = p.f;
  LINATTN_CHECK(bwd_gate_width(f) == plan.gate_width, "gdn bwd: gate width ", bwd_gate_width(f),
                " does not match the plan's ", plan.gate_width);
  const bool supplied = chunk_indices != nullptr;
  // One carve: offsets are relative to the base, so c.off is gdn_bwd_workspace_bytes (nothing is
  // touched before the size check).
  Carver c{static_cast<char*>(workspace)};
  LINATTN_CHECK(!prep_cache || plan.chunked, "gdn bwd: a training cache needs the chunked backward (", plan.reason, ")");
  Carved cv = carve(f, plan, supplied, c, prep_cache != nullptr);
  const size_t need = c.off;
  LINATTN_CHECK_CODE(workspace_bytes >= need && (need == 0 || workspace != nullptr), ErrorCode::kInvalidArgument,
                     FailureCategory::kAddressOrLifetime, "workspace: expected at least ", need, " bytes, got ",
                     workspace_bytes, workspace ? "" : " (null)");
  int32_t* ci = supplied ? chunk_indices : cv.chunk_indices;
  int32_t* co = supplied ? chunk_offsets : cv.chunk_offsets;
  if (plan.tables)
    build_chunk_meta(f.cu_seqlens, f.cu_i64, f.N, f.T_total, f.BT, plan.nt_cap, ci, co, stream, cv.seq_order);
  const int nts = f.cu_seqlens ? 0 : static_cast<int>((f.T_seq + f.BT - 1) / f.BT);
  if (!plan.chunked) {
    GdnBwdTokenWs& tw = cv.tw;
    tw.nts = nts;
    tw.chunk_offsets = plan.tables ? co : nullptr;
    launch_gdn_bwd_token(p, tw, st);
    if (dstate) return;
    launch_gdn_bwd_token_finish(p, tw, st);
    launch_gdn_bwd_zero_padding(p, st);
    return;
  }
  GdnBwdWs& w = cv.w;
  w.nts = nts;
  w.chunk_indices = plan.tables ? ci : nullptr;
  w.chunk_offsets = plan.tables ? co : nullptr;
  w.do_direct = p.do_type == f.io && is_aligned16(p.d_o);
  w.dstate_only = dstate;
  if (prep_cache) {  // the forward's prep outputs: the same kernel on the same inputs wrote them
    use_prep_cache(const_cast<void*>(prep_cache), f, plan.BT, plan.nt_cap, w.c);
  } else if (f.kda) {
    launch_kda_prep(f, w.c, w.chunk_indices, plan.nt_cap, st);
  } else {
    launch_gdn_prep(f, w.c, w.chunk_indices, plan.nt_cap, st);
  }
  launch_gdn_bwd_sweeps(p, w, plan.vs, st);
  if (dstate) return;
  if (f.kda) {
    // chunked15 the default since session 14 (H200 A/B at 4e4abfa, bitwise chunked14 on every test case: backward
    // 7.79 / 7.77 -> 7.11 / 7.11 ms, fwd+bwd graph 9.66 / 9.66 -> 8.98 / 8.98); chunked14 (A/B at 5bd3b72,
    // chunked13's values within its rel RMS on every test case: backward 7.77 / 7.75 -> 7.70 / 7.71 ms, fwd+bwd graph
    // 9.66 / 9.63 -> 9.56 / 9.55);
    // chunked13 the default in session 13 (H200 A/B at ebf1299, bitwise chunked12: backward 8.06 / 8.08 ->
    // 7.79 / 7.81 ms, fwd+bwd graph 9.93 / 9.94 -> 9.66 / 9.66 at 32/32 1x32768 with the training cache); chunked12
    // (A/B at 678f770, bitwise chunked11: backward 8.27 / 8.26 -> 8.02 / 8.02 ms);
    // "chunked11" keeps the session-12 kernel (A/B at ee5c88b: 8.41 / 8.38 -> 8.28 / 8.26 over chunked7), "chunked7"
    // the one before (A/B at 95f8975: 11.86 -> 11.12 ms against chunked5); the other chunk kernels were removed in
    // session 10 (last in 154ad2a).
    const int kernel = kda_bwd_mode();  // checked by kda_chunked_refusal at plan time too
    if (kernel == kKdaChunked7) launch_kda_bwd_chunk5(p, w, st);
    else if (kernel == kKdaChunked11) launch_kda_bwd_chunk11(p, w, st);
    else if (kernel == kKdaChunked12) launch_kda_bwd_chunk12(p, w, st);
    else if (kernel == kKdaChunked13) launch_kda_bwd_chunk13(p, w, st);
    else if (kernel == kKdaChunked14) launch_kda_bwd_chunk14(p, w, st);
    else if (kernel == kKdaChunked15) launch_kda_bwd_chunk15(p, w, st);
    else launch_kda_bwd_chunk17(p, w, st);  // chunked17, the default since session 15 (A/B at a438559: 7.11 -> 6.97)
    launch_kda_bwd_gate_reduce(p, w.part, plan.nt_cap, plan.tables ? co + f.N : nullptr, st);
  } else {
    launch_gdn_bwd_chunk(p, w, st);
    launch_gdn_bwd_gate_reduce(p, w.part, plan.nt_cap, plan.tables ? co + f.N : nullptr, st);
  }
  launch_gdn_bwd_zero_padding(p, st);
}

}  // namespace linattn::cuda
