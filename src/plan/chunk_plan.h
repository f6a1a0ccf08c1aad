// Planner of the CPU chunked GDN / KDA forward (pure: descriptor + lengths + thread count in,
// plan out; ARCHITECTURE.md section 2). It picks the mapping tier and the V split:
//  - tier 1: one task per (sequence, value head), the whole state slice resident per task;
//  - tier 2: each task owns V / s state columns when sequences x heads leave threads idle; the
//    V-independent work (K K^T, Q K^T, gates) is redone per split, which the model charges.
// The choice minimizes a modeled makespan: task costs from meta/cost.h, longest-first greedy
// assignment onto the threads (what the kernel's task queue does); ties go to fewer splits.
// With unknown lengths (fixed-capacity mode plans from capacity only) every sequence is assumed
// to hold rows / N tokens. Compute chunk: the chunked form is exact for every chunk size (the
// caller's BT changes only rounding), and on the CPU 32 measured 8-17% faster than 64 at
// K = V = 128 (fewer intra-chunk FLOPs: 2n(K + V) per token), so BT 64 runs as 32; 16 and 32
// are kept; LINATTN_CPU_CHUNK=16|32|64 forces one.
// bf16 inputs take the bf16 dot-product products (twice the fp32 FMA rate where the CPU has
// AVX512-BF16), unless LINATTN_CPU_BF16_DOT=0.
// Tier 3 (exact in-sequence splitting, cpu/chunk_fwd_seg.h) is modeled too: s segments per
// sequence cost pass 1 (the s - 1 non-last segments with K extra state columns, the transition),
// the in-order combine (2 K^2 V per segment boundary and head, serial per sequence) and pass 2
// (the segments as sequences); it is chosen when that makespan beats tiers 1/2 by > 10%, or
// forced per call (ChunkAttnOptions::segments).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "meta/chunk_attn_desc.h"

namespace linattn::plan {

struct ChunkPlan {
  int tier = 1;           // 1 head per task, 2 V-column splits, 3 sequence segments
  int segments = 1;       // tier 3: up to this many segments per sequence
  int64_t min_segment = 0;  // tier 3: shortest segment (tokens, a multiple of BT)
  int v_splits = 1;
  int v_tile = 0;         // state columns per split (multiple of 16 but the last), 0 = V
  int num_threads = 1;    // workers the kernel uses
  int BT = 64;            // compute chunk the kernel runs (see plan_chunk_fwd)
  int caller_BT = 64;     // the caller's chunk_size
  bool bf16_dot = false;  // bf16 inputs: bf16 dot products for the state and K K^T products
  int64_t num_tasks = 0;
  double makespan_flops = 0.0;  // modeled busiest worker
  double ideal_flops = 0.0;     // tier-1 work / threads
  bool lengths_known = false;
  std::string reason;     // one line: why this tier and split

  std::string to_string() const;
};

// `lengths`: one entry per sequence (eager-live), or empty when unknown (fixed capacity).
// `segments_request`: ChunkAttnOptions::segments (0 = decide, 1 = never tier 3, s > 1 = tier 3
// with s segments).
ChunkPlan plan_chunk_fwd(const meta::ChunkAttnDesc& d, const std::vector<int64_t>& lengths,
                         int num_threads, int segments_request = 0);

}  // namespace linattn::plan
