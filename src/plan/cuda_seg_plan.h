// Planner of tier 3 (exact in-sequence splitting) on the CUDA backend (cuda/seg/tier3.h): how
// many segments per sequence the CUDA GDN / KDA forward and backward use. Pure function of the
// descriptor, the SM count and the caller's request (ChunkAttnOptions::segments); never reads
// cu_seqlens (it plans from capacity: every sequence assumed to hold B * T / N tokens).
// Rule (docs/perf-notes.md "Sequence parallelism"): a latency model of the head-level kernels
// (one CTA per SM; a pass costs waves x chunks per CTA x a measured per-chunk step for its
// V-slice) for tiers 1/2 (best V-slice) and for tier 3 with s = 2, 4, ..., 64 segments (state
// pass + ~3.7 us per combine step + pass 2 + launch overhead); tier 3 when it saves > 10%.
// The CPU planner (chunk_plan.h) is separate and unchanged.
#pragma once
#include <cstdint>
#include <string>

#include "meta/chunk_attn_desc.h"

namespace linattn::plan {

struct CudaSegPlan {
  int segments = 1;          // 1: tiers 1 / 2
  int64_t min_segment = 0;   // tokens (a multiple of BT)
  std::string reason;
};

// `supported`: the shape can take tier 3 (the chunked forward's shapes); when false a request
// s > 1 runs tiers 1 / 2 (same results up to rounding) and the reason says so.
CudaSegPlan plan_cuda_segments(const meta::ChunkAttnDesc& d, int sm_count, int segments_request, bool supported);

}  // namespace linattn::plan
