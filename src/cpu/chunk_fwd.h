// CPU chunked GDN / KDA forward, head-level mapped (ARCHITECTURE.md section 2).
// A task is one (sequence, value head, V-column split); it walks its sequence's chunks in order
// with its slice of the fp32 state resident in a per-worker buffer, updated in place after the
// chunk's output has read it (chunk-first). Per chunk, the products that share inputs are issued
// together (K S and Q S; K K^T and Q K^T), then the unit-lower solve gives the delta-rule values
// V^ = (I + L)^-1 beta (V - e^g K S), the output O = scale e^g Q S + P V^ and the state update
// S <- e^{g_last} S + (e^{g_last - g} K)^T V^ (ALGORITHMS.md section 3.1). Workers take tasks
// longest-first from a shared counter; every output element is owned by one task and computed in
// a fixed order, so results are bitwise identical for any thread count and any V split.
// Scratch is O(workers x state): no per-chunk state is ever stored. The chunk size is the
// schedule's compute chunk (s.bt) when set, else p.BT.
#pragma once
#include <cstddef>

#include "cpu/chunk_params.h"

namespace linattn::cpu {

// Bytes of scratch chunk_fwd needs for this problem and schedule.
size_t chunk_fwd_workspace_bytes(const ChunkParams& p, const ChunkSchedule& s);
// Runs the forward. `ws` (>= chunk_fwd_workspace_bytes bytes) is caller-owned; nothing is
// allocated. Sequence bounds are read from p.cu_seqlens here, at run time.
void chunk_fwd(const ChunkParams& p, const ChunkSchedule& s, void* ws, size_t ws_bytes);

}  // namespace linattn::cpu
