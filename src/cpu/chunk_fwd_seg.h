// Tier 3 of the CPU chunked forward: exact in-sequence splitting (seg_pass.h). Every sequence is
// cut into up to s.segments chunk-aligned segments when the kernel runs; (1) each non-last
// segment's local final state and K x K transition, one task per (segment, value head);
// (2) the true initial state of every segment, combined in order per (sequence, head):
// S_0 = h0, S_{i+1} = M_i S_i + S_loc_i; (3) the head-level forward (chunk_fwd.h) over the
// segments as virtual sequences with those initial states; the last segment's final state is
// the sequence's. Exact (no warm-up approximation): results differ from tier 1 by rounding only.
// Extra work: the transition columns (K per value head) in pass 1 and K^2 V per combine step.
#pragma once
#include <cstddef>

#include "cpu/chunk_params.h"

namespace linattn::cpu {

size_t chunk_fwd_segmented_workspace_bytes(const ChunkParams& p, const ChunkSchedule& s);
void chunk_fwd_segmented(const ChunkParams& p, const ChunkSchedule& s, void* ws, size_t ws_bytes);

}  // namespace linattn::cpu
