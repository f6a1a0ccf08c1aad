// CPU implementation of the static (fixed-capacity) chunk metadata kernel. Reads cu_seqlens
// [N_max + 1] (int32 / int64) and writes chunk_indices [NT_max, 2] and chunk_offsets [N_max + 1]
// in place, with the exact semantics of meta::StaticChunkMetaParams (src/meta/chunk_meta.h):
// it never trusts the data. A malformed layout (negative, decreasing, or > T_max entries)
// still writes only inside the two tables: entries are clamped to [0, T_max], negative lengths
// count as empty, and chunks past NT_max are dropped (offsets saturate at NT_max).
// One thread: O(N_max + NT_max) integer work, negligible next to any op that consumes it.
#pragma once
#include "meta/chunk_meta.h"

namespace linattn::cpu {

void static_chunk_meta(const meta::StaticChunkMetaParams& p);

}  // namespace linattn::cpu
