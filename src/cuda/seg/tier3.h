// Tier-3 forward and backward drivers of the CUDA GDN / KDA ops (src/api calls these when the
// planner, plan/chunk_plan.h plan_cuda_segments, or the caller picks segments > 1). Built from
// the pieces in seg_pass.h; no CUDA headers here. Workspace: count-then-carve from shapes and
// capacity only (N x segments slots), never from cu_seqlens data, so one size serves every layout
// of a captured graph. Forward: table -> prep -> state pass (all but each sequence's last
// segment) -> combine -> fused over the segments with their true initial states -> final states.
// Backward: table -> state pass -> local state gradients (the backward's reverse sweeps from a
// zero terminal gradient) -> both combines -> the backward over the segments with their true
// initial states and terminal gradients -> dh0 of each sequence from its first segment.
// First-segment schedule (forward, one sequence, opt-in LINATTN_CUDA_TIER3_FIRST=1, read per call):
// table -> prep -> { the first segment's forward from h0 on a side stream | the state pass of the
// middle segments } -> combine from the first segment's final state -> the forward of the other
// segments -> final state. The first segment needs neither a transition nor a second forward, so
// with s segments both passes hold s - 1 segments x heads x 2 CTAs (2/8 heads: s = 9 fills 128 of
// 132 SMs in each pass where the default fills 112 / 128 at s = 8).
#pragma once
#include <cstddef>
#include <cstdint>

#include "cuda/gdn/gdn_bwd_params.h"

namespace linattn::cuda::seg {

struct Tier3Config {
  int segments = 2;         // slots per sequence
  int64_t min_segment = 0;  // shortest segment (tokens; rounded up to BT)
  int sm_count = 132;
  int vs = 0;               // forward pass 2 / backward sweeps V-slice (0: their planners')
};

// False with a reason when the shape cannot take tier 3 (it needs the chunked forward's shapes).
bool tier3_supported(const GdnFwdParams& p, bool aligned16, const char** why);

size_t tier3_fwd_workspace_bytes(const GdnFwdParams& p, const Tier3Config& c);
void tier3_fwd(const GdnFwdParams& p, const Tier3Config& c, void* workspace, size_t workspace_bytes, void* stream);

// LINATTN_CUDA_TIER3_FIRST: "1" on, "0" off, else the default (off); the schedule runs when it is on,
// p.N == 1 and segments >= 2 (else the default schedule). tier3_first_runs: calls that took it (tests).
bool tier3_first_enabled();
int64_t tier3_first_runs();

size_t tier3_bwd_workspace_bytes(const GdnBwdParams& p, const Tier3Config& c);
void tier3_bwd(const GdnBwdParams& p, const Tier3Config& c, void* workspace, size_t workspace_bytes, void* stream);

}  // namespace linattn::cuda::seg
