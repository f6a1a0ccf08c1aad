// CUDA GDN backward as src/api sees it (no CUDA headers): plan -> workspace size -> run.
// The backward recomputes the forward from its inputs (the API's chunk_attn_bwd takes only the
// forward inputs): prep (the forward's chunk-parallel prep, also writing (I + L)^-1), the two
// head-level sweeps in one launch (forward states S_c and V^; reverse dS, dV^, dv, dh0), then the
// chunk-parallel gradient kernel (dq, dk, dg, dbeta, gate partials) and a deterministic gate
// reduction; padding rows of per-token gradients are zeroed. Other shapes take the token-by-token
// backward. KDA (per-channel gates) shares the plan, sweeps and finishing kernels through the gate
// policy (KDA prep, KDA chunk kernel); LINATTN_CUDA_KDA_BWD=token keeps KDA on the token path. gdn_bwd never synchronizes and never allocates: the caller passes a workspace of
// gdn_bwd_workspace_bytes (one count-then-carve function sizes and slices it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/gdn/gdn_bwd_params.h"

namespace linattn::cuda {

struct GdnBwdPlan {
  bool chunked = false;  // prep + sweeps + chunk kernel; false: token-by-token backward
  int BT = 64;
  int vs = 0;            // V columns per sweep CTA
  int gate_width = 1;    // bwd_gate_width: 1 (GDN) or K (KDA)
  int64_t nt_cap = 0;    // chunk capacity (rows of chunk_indices, checkpoints, per-chunk states)
  bool tables = false;   // varlen: chunk_indices / chunk_offsets built on the device
  bool seq_order = false;  // varlen, N > 1, sweep grid possibly over one wave: longest-first order
  std::string reason;
  std::string str() const;
};

// `aligned16`: q, k, v are 16-byte aligned (the chunked path's vector copies). KDA (f.kda) plans
// the token path when LINATTN_CUDA_KDA_BWD=token (read on every call).
GdnBwdPlan plan_gdn_bwd(const GdnFwdParams& f, int sm_count, bool aligned16);

// Workspace for `plan`; `tables_supplied`: the caller passes chunk_indices / chunk_offsets.
// Depends on shapes, options and the plan only (never on d_o, gradients or cu_seqlens data).
// cached: the call passes the forward's training cache (gdn_prep_cache.h): no prep outputs carved here.
size_t gdn_bwd_workspace_bytes(const GdnFwdParams& f, const GdnBwdPlan& plan, bool tables_supplied,
                               bool cached = false);

// Runs the plan on `stream`. chunk_indices / chunk_offsets: the caller's tables (rebuilt here from
// cu_seqlens on every call), or null to use the workspace.
// stage kDState (tier 3, cuda/seg): only what dh0 needs (chunked: prep + the reverse dS sweeps;
// token path: the token kernel), for a call whose only wanted gradient is p.dh0.
enum class GdnBwdStage { kAll, kDState };
// prep_cache (optional; chunked plans): the forward's training cache (gdn_fwd's prep_cache of the same
// inputs); the backward reads its prep outputs there instead of recomputing them.
void gdn_bwd(const GdnBwdParams& p, const GdnBwdPlan& plan, int32_t* chunk_indices, int32_t* chunk_offsets,
             void* workspace, size_t workspace_bytes, void* stream, GdnBwdStage stage = GdnBwdStage::kAll,
             const void* prep_cache = nullptr);

}  // namespace linattn::cuda
