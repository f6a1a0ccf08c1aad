// Tier 3 of the CPU chunked backward (seg_pass.h): segments as in chunk_fwd_seg.h; (1) every
// segment's local state and transition M, and the local state gradient dS_loc of every non-first
// segment (zero gradient at its end); (2) the forward combine (true initial states) and the
// reverse combine of the state gradient per (sequence, head): dS_end(last) = d_ht,
// dS_end(i - 1) = M_i^T dS_end(i) + dS_loc_i; (3) the head-level backward (chunk_bwd.h) over the
// segments as virtual sequences with those initial states and final-state gradients; dh0 of a
// sequence is its first segment's, dA_log / ddt_bias sum over segments in order.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu/chunk_bwd.h"

namespace linattn::cpu {

size_t chunk_bwd_segmented_workspace_bytes(const ChunkBwdParams& p, int num_threads, int64_t max_seq_len);
void chunk_bwd_segmented(const ChunkBwdParams& p, void* ws, size_t ws_bytes, int num_threads);

}  // namespace linattn::cpu
