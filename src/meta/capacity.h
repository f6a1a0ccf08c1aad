// Capacity math of the fixed-capacity graph contract (GRAPH_CONTRACT.md section 1).
// The public struct lives in include/linattn/meta.h; this header adds the small internal
// helpers every level uses to derive buffer sizes, grids and loop bounds from a capacity.
// NT_max = ceil(T_max / BT) + N_max - 1: each sequence boundary adds at most one partial chunk.
#pragma once
#include <cstdint>

#include "linattn/meta.h"

namespace linattn::meta {

// Chunk sizes the metadata supports (ops may support fewer and say so).
bool is_supported_chunk_size(int BT);
// Raises Unsupported [unsupported-op] naming `arg`, the value and the allowed list.
void check_chunk_size(int BT, const char* arg);

// Chunks of one sequence of `len` tokens (len >= 0).
constexpr int64_t chunks_of(int64_t len, int BT) { return len / BT + (len % BT != 0); }

// A validated capacity (throws like Capacity::validate).
Capacity make_capacity(int64_t T_max, int64_t N_max, int BT);

}  // namespace linattn::meta
