// CUDA GDN / KDA forward as src/api sees it (no CUDA headers): plan -> workspace size -> run.
// One plan and one pair of chunked kernels serve both ops; GdnFwdParams::kda selects the gate
// policy (scalar vs per-key-channel gate).
// plan_gdn_fwd is a pure function of the call's shape/options and the SM count (and of the A/B switch
// LINATTN_CUDA_GDN_VS, read per plan: the workspace query and the run must see the same value): it picks the
// chunked path (prep kernel + fused head-level kernel) when the shape allows it, else the
// token-by-token kernel, and the V-slice of the fused kernel (tier 2) from N x HV vs SMs.
// gdn_fwd never synchronizes and never allocates: the caller passes a workspace of
// gdn_fwd_workspace_bytes (one count-then-carve function sizes and slices it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/gdn/gdn_params.h"

namespace linattn::cuda {

struct GdnFwdPlan {
  bool chunked = false;   // prep + fused kernels; false: token-by-token kernel
  int BT = 64;
  int vs = 0;             // V columns per fused CTA (V / vs CTAs per head)
  int64_t nt_cap = 0;     // chunk capacity (rows of chunk_indices / prep grid)
  bool tables = false;    // varlen: build chunk_indices / chunk_offsets on the device
  bool seq_order = false;  // varlen, N > 1, grid possibly over one wave: longest-first order (seq_order_env)
  std::string reason;
  std::string str() const;
};

// `aligned16`: q, k, v, o are 16-byte aligned (needed by the chunked path's vector copies).
GdnFwdPlan plan_gdn_fwd(const GdnFwdParams& p, int sm_count, bool aligned16);

// Chunk capacity for a layout of T_total rows in N sequences: ceil(T/BT) + N - 1 (varlen) or
// N * ceil(T_seq / BT) (fixed length).
int64_t gdn_chunk_capacity(const GdnFwdParams& p, int bt);

// Workspace for `plan`; `tables_supplied`: the caller passes chunk_indices / chunk_offsets.
size_t gdn_fwd_workspace_bytes(const GdnFwdParams& p, const GdnFwdPlan& plan, bool tables_supplied);

// Runs the plan on `stream`. chunk_indices [nt_cap, 2] / chunk_offsets [N + 1] (int32, device):
// the caller's tables (rebuilt here from cu_seqlens on every call), or null to use the workspace.
// `stage` (tier 3, cuda/seg): kPrep runs the chunk tables and the prep only, kFused only the
// fused kernel over a workspace a kPrep call of the same params / plan / tables filled (the
// tier-3 state pass sets p.seg_M and calls it once more with the real outputs); kAll both.
enum class GdnFwdStage { kAll, kPrep, kFused };
// prep_cache (optional, gdn_prep_cache_bytes): the prep writes its outputs there, with the backward's
// Ai, instead of into the workspace (which then needs less than gdn_fwd_workspace_bytes); needs
// gdn_fwd_fills_prep_cache and stage kAll.
void gdn_fwd(const GdnFwdParams& p, const GdnFwdPlan& plan, int32_t* chunk_indices,
             int32_t* chunk_offsets, void* workspace, size_t workspace_bytes, void* stream,
             GdnFwdStage stage = GdnFwdStage::kAll, void* prep_cache = nullptr);
// Whether this plan's forward can fill a training cache (chunked, P formed by the prep).
bool gdn_fwd_fills_prep_cache(const GdnFwdParams& p, const GdnFwdPlan& plan);

}  // namespace linattn::cuda
