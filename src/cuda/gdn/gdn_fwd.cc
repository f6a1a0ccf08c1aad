// Planning, workspace carving and launch order of the CUDA GDN / KDA forward (see gdn_fwd.h):
// [chunk metadata] -> prep (chunk-parallel; GDN or KDA gate policy) -> fused (head-level), or the
// token-by-token kernel.
#include "cuda/gdn/gdn_fwd.h"

#include <cuda_runtime.h>

#include <sstream>

#include "core/carver.h"
#include "cuda/gdn/gdn_prep_cache.h"
#include "core/env.h"
#include "core/util.h"
#include "cuda/common/check.h"
#include "cuda/common/device_info.h"
#include "cuda/common/pdl_policy.h"
#include "cuda/gdn/gdn_fused_wg.h"
#include "cuda/gdn/gdn_kernels.h"
#include "cuda/gdn/gdn_p_fused.h"
#include "cuda/gdn/gdn_prep_v7.h"
#include "cuda/meta/chunk_meta.h"

namespace linattn::cuda {
namespace {

using Carver = WorkspaceCarver<256>;  // count with base == nullptr, then carve

struct Carved {
  int32_t* chunk_indices = nullptr;
  int32_t* chunk_offsets = nullptr;
  int32_t* seq_order = nullptr;
  GdnChunkWs ws;
};


// cached: the prep outputs live in the caller's training cache (gdn_prep_cache.h), not here.
Carved carve(const GdnFwdParams& p, const GdnFwdPlan& plan, bool tables_supplied, Carver& c, bool cached = false) {
  Carved r;
  if (!plan.chunked) return r;
  if (plan.tables && !tables_supplied) {
    r.chunk_indices = c.take<int32_t>(2 * size_t(plan.nt_cap));
    r.chunk_offsets = c.take<int32_t>(size_t(p.N) + 1);
  }
  if (plan.seq_order && seq_order_env()) r.ws.seq_order = r.seq_order = c.take<int32_t>(size_t(p.N));
  r.ws.T_cap = p.T_total;
  // tma3 scale records (gdn_fused_wg.h), only with the switch; before the prep outputs, so a training
  // cache or whether P is carved never moves them.
  if (const size_t sc = gdn_chain_scales_floats(p, plan.nt_cap)) r.ws.sc = c.take<float>(sc);
  // P last, so whether P is carved never moves another buffer (gdn_p_fused.h).
  if (!cached) carve_prep_outputs(c, p, plan.BT, plan.nt_cap, !gdn_p_in_fused(p, plan.vs), false, r.ws);
  return r;
}

}  // namespace

// Where P is formed when LINATTN_CUDA_GDN_P ("prep" / "fused") is unset (gdn_p_fused.h).
constexpr bool kGdnPFusedDefault = false;

bool gdn_p_fused_env() { return env_choice("LINATTN_CUDA_GDN_P", {"prep", "fused"}, kGdnPFusedDefault ? 1 : 0) == 1; }

bool gdn_p_in_fused(const GdnFwdParams& p, int vs) {
  if (p.kda || p.BT != 64 || !gdn_p_fused_env() || !gdn_fused_wg_pipelined() || !gdn_fused_wgp_seg_enabled())
    return false;
  GdnFwdParams q = p;
  q.seg_S = q.seg_M = nullptr;
  q.seg_flags = nullptr;
  return gdn_fused_wg_chosen(q, vs);
}

bool seq_order_env() { return env_flag("LINATTN_CUDA_SEQ_ORDER", true); }

bool seq_order_useful(bool tables, int64_t n, int64_t max_ctas, int sm_count) {
  return tables && n > 1 && max_ctas > sm_count;
}

std::string GdnFwdPlan::str() const {
  std::ostringstream os;
  os << (chunked ? "chunked" : "recurrent") << " BT=" << BT;
  if (chunked) os << " vs=" << vs << " nt_cap=" << nt_cap << (tables ? " tables" : "");
  os << " (" << reason << ")";
  return os.str();
}

int64_t gdn_chunk_capacity(const GdnFwdParams& p, int bt) {
  if (p.N <= 0) return 0;
  if (p.cu_seqlens) return (p.T_total + bt - 1) / bt + p.N - 1;
  return int64_t(p.N) * ((p.T_seq + bt - 1) / bt);
}

GdnFwdPlan plan_gdn_fwd(const GdnFwdParams& p, int sm_count, bool aligned16) {
  GdnFwdPlan plan;
  plan.BT = p.BT;
  const char* why = nullptr;
  if (p.K != 128) why = "K != 128";
  else if (p.V % 32 != 0) why = "V not a multiple of 32";
  else if (p.io != ElemType::kBF16 && p.io != ElemType::kF16) why = "fp32 inputs";
  else if (p.BT != 64 && p.BT != 32) why = "chunk_size 16";
  else if (!aligned16) why = "q/k/v/o not 16-byte aligned";
  if (why) {
    plan.reason = std::string("token-by-token kernel: ") + why;
    return plan;
  }
  plan.chunked = true;
  plan.tables = p.cu_seqlens != nullptr;
  plan.seq_order = seq_order_useful(plan.tables, p.N, int64_t(p.N) * p.HV * ((p.V + 31) / 32), sm_count);
  plan.nt_cap = gdn_chunk_capacity(p, p.BT);
  // Tier 2: the widest V-slice that still gives >= 0.7 CTAs per SM (FlashQLA's rule, PEERS.md).
  const double want = 0.7 * sm_count;
  const int64_t heads = int64_t(p.N) * p.HV;
  plan.vs = 32;
  for (int vs : {128, 64}) {
    if (p.kda && vs == 128) continue;  // KDA's fused kernel takes VS <= 64 (shared memory)
    if (p.V % vs == 0 && double(heads) * (p.V / vs) >= want) {
      plan.vs = vs;
      break;
    }
  }
  // LINATTN_CUDA_GDN_VS (read per plan; an A/B probe of the rule above): "auto" (default) or a forced V-slice.
  const int forced = env_choice("LINATTN_CUDA_GDN_VS", {"auto", "32", "64", "128"}, 0);
  if (forced > 0) {
    const int vs = 16 << forced;
    LINATTN_CHECK(p.V % vs == 0 && !(p.kda && vs == 128), "LINATTN_CUDA_GDN_VS: V-slice ", vs,
                  " needs V % V-slice == 0 (V = ", p.V, ") and, for KDA, V-slice <= 64");
    plan.vs = vs;
  }
  std::ostringstream os;
  os << "N*HV=" << heads << " on " << sm_count << " SMs -> " << (p.V / plan.vs) << " V-slices";
  plan.reason = os.str();
  return plan;
}

size_t gdn_fwd_workspace_bytes(const GdnFwdParams& p, const GdnFwdPlan& plan, bool tables_supplied) {
  Carver c{nullptr};
  carve(p, plan, tables_supplied, c);
  return c.off;
}

bool gdn_fwd_fills_prep_cache(const GdnFwdParams& p, const GdnFwdPlan& plan) {
  return plan.chunked && !gdn_p_in_fused(p, plan.vs);
}

void gdn_fwd(const GdnFwdParams& p, const GdnFwdPlan& plan, int32_t* chunk_indices,
             int32_t* chunk_offsets, void* workspace, size_t workspace_bytes, void* stream,
             GdnFwdStage stage, void* prep_cache) {
  LINATTN_CHECK(!prep_cache || (stage == GdnFwdStage::kAll && gdn_fwd_fills_prep_cache(p, plan)),
                "gdn fwd: a training cache needs the whole chunked forward with P from the prep (", plan.reason, ")");
  auto st = static_cast<cudaStream_t>(stream);
  const bool supplied = chunk_indices != nullptr;
  const bool prep = stage != GdnFwdStage::kFused, fused = stage != GdnFwdStage::kPrep;
  if (!plan.chunked) {
    if (prep && supplied && p.cu_seqlens)  // the caller's tables always describe the current layout
      build_chunk_meta(p.cu_seqlens, p.cu_i64, p.N, p.T_total, p.BT, gdn_chunk_capacity(p, p.BT),
                       chunk_indices, chunk_offsets, stream);
    LINATTN_CHECK(stage == GdnFwdStage::kAll, "gdn fwd: prep / fused stages need the chunked plan");
    launch_gdn_recurrent(p, st);
    return;
  }
  // One carve: the pointers are used only after the size check (c.off is the bytes needed).
  Carver c{static_cast<char*>(workspace)};
  Carved w = carve(p, plan, supplied, c, prep_cache != nullptr);
  if (prep_cache) use_prep_cache(prep_cache, p, plan.BT, plan.nt_cap, w.ws);  // + Ai: the backward's
  const size_t need = c.off;
  LINATTN_CHECK_CODE(workspace_bytes >= need && (need == 0 || workspace != nullptr),
                     ErrorCode::kInvalidArgument, FailureCategory::kAddressOrLifetime,
                     "workspace: expected at least ", need, " bytes, got ", workspace_bytes,
                     workspace ? "" : " (null)");
  // LINATTN_CUDA_PDL=auto: the whole GDN forward whose prep (nt_cap x H CTAs at the prep's occupancy) runs more
  // than two waves launches plainly (tier 3 runs its stages apart and keeps PDL).
  const PdlLongChain long_chain(stage == GdnFwdStage::kAll && !p.kda && pdl_auto() &&
                                pdl_long_chain(plan.nt_cap * p.H,
                                               plan.BT == 64 && gdn_prep_v10_runs(p.HV / p.H)
                                                   ? gdn_prep_v10_ctas_per_sm(p.HV / p.H)  // the default at BT 64
                                                   : gdn_prep_v8_ctas_per_sm(p.HV / p.H),
                                               current_device_info().sm_count));
  if (prep && supplied && p.cu_seqlens)  // the caller's tables always describe the current layout
    build_chunk_meta(p.cu_seqlens, p.cu_i64, p.N, p.T_total, p.BT, gdn_chunk_capacity(p, p.BT),
                     chunk_indices, chunk_offsets, stream, w.seq_order);
  const int32_t* ci = supplied ? chunk_indices : w.chunk_indices;
  if (p.kda || w.ws.sc) w.ws.chunk_offsets = plan.tables ? (supplied ? chunk_offsets : w.chunk_offsets) : nullptr;
  if (prep) {
    if (plan.tables && !supplied)
      build_chunk_meta(p.cu_seqlens, p.cu_i64, p.N, p.T_total, p.BT, plan.nt_cap, w.chunk_indices,
                       w.chunk_offsets, stream, w.seq_order);
    if (p.kda) launch_kda_prep(p, w.ws, plan.tables ? ci : nullptr, plan.nt_cap, st);
    else launch_gdn_prep(p, w.ws, plan.tables ? ci : nullptr, plan.nt_cap, st);
  }
  if (fused) {
    if (gdn_fused_wg_chosen(p, plan.vs)) launch_gdn_fused_wg(p, w.ws, plan.vs, st);
    else launch_gdn_fused(p, w.ws, plan.vs, st);
  }
}

}  // namespace linattn::cuda
