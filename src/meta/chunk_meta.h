// Varlen chunk metadata (ALGORITHMS.md section 5, GRAPH_CONTRACT.md section 2).
// Eager (host, exact size): chunk_indices [NT, 2] = (n, c) in sequence order, chunk_offsets
// [N + 1] = exclusive prefix sum of ceil(len_n / BT); from a validated host cu_seqlens.
// Static (fixed capacity): StaticChunkMetaParams is the interface every backend kernel
// implements (src/cpu/chunk_meta_cpu.h, the CUDA kernel later); the exact semantics, including
// what a malformed layout produces, are defined below once for all backends.
#pragma once
#include <cstdint>
#include <vector>

#include "linattn/meta.h"
#include "meta/workspace.h"

namespace linattn::meta {

// ------------------------------------------------------------------ eager (host data)
// Entry i of an int32 / int64 host tensor (no checks beyond an internal assert on the dtype).
int64_t read_cu(const TensorView& cu_seqlens, int64_t i);

// Host validation of cu_seqlens (InvalidArgument naming `arg`, expected and actual): present,
// rank 1, >= 2 entries, int32/int64, contiguous, on the CPU, starts at 0, non-decreasing, last
// entry <= INT32_MAX; and when total_tokens >= 0, last entry <= total_tokens (== when exact_end).
void check_cu_seqlens_host(const TensorView& cu_seqlens, int64_t total_tokens, bool exact_end,
                           const char* arg = "cu_seqlens");

struct EagerChunkMeta {
  std::vector<int32_t> indices;  // [NT, 2] (n, c)
  std::vector<int32_t> offsets;  // [N + 1]
  int64_t num_chunks() const { return static_cast<int64_t>(indices.size() / 2); }
};
// Validates (check_cu_seqlens_host with total_tokens, exact_end), then builds the exact tables.
// Host-built metadata: raises kCaptureViolation [stale-or-dynamic-metadata] during a capture.
EagerChunkMeta build_eager_chunk_meta(const TensorView& cu_seqlens, int BT,
                                      int64_t total_tokens = -1, bool exact_end = false);

// ------------------------------------------------------------------ static (fixed capacity)
// Semantics every backend implements, for ANY contents of cu_seqlens (never validated):
//   c'_n  = clamp(c_n, 0, T_max)                       for n in [0, N_max]
//   len_n = max(0, c'_{n+1} - c'_n)                     negative lengths count as empty
//   off_0 = 0, off_{n+1} = min(off_n + ceil(len_n / BT), NT_max)     (saturates at NT_max)
//   rows r in [off_n, off_{n+1}): (n, r - off_n);  rows r in [off_N_max, NT_max): (-1, 0)
//   chunk_offsets[n] = off_n
// For a valid layout (0 = c_0 <= ... <= c_N_max <= T_max) this is the eager table padded with
// sentinels, and off_N_max = NT <= NT_max. For a malformed one: every write stays inside
// [NT_max, 2] and [N_max + 1]; offsets are non-decreasing in [0, NT_max]; every non-sentinel
// row (n, c) has 0 <= n < N_max and c < ceil(T_max / BT); chunks beyond NT_max are dropped.
// Consumers of the tables still clamp token ranges [c_n, c_{n+1}) to [0, T_max) themselves.
struct StaticChunkMetaParams {
  const void* cu_seqlens = nullptr;  // [N_max + 1] int32 or int64 (cu_int64)
  bool cu_int64 = false;
  int64_t T_max = 0;
  int64_t N_max = 0;
  int64_t NT_max = 0;
  int BT = 64;
  int32_t* chunk_indices = nullptr;  // [NT_max, 2]
  int32_t* chunk_offsets = nullptr;  // [N_max + 1]
};

// Params over validated tensors (check_graph_meta_args with require_tables = true).
StaticChunkMetaParams make_static_chunk_meta_params(const Capacity& cap,
                                                    const TensorView& cu_seqlens,
                                                    const TensorView& chunk_indices,
                                                    const TensorView& chunk_offsets);

// The two tables carved from an op's workspace (count-then-carve; nullptr while counting), for
// ops called in graph mode without caller-supplied chunk_indices / chunk_offsets.
struct ChunkTables {
  int32_t* indices = nullptr;  // [NT_max, 2]
  int32_t* offsets = nullptr;  // [N_max + 1]
};
ChunkTables carve_chunk_tables(Workspace& ws, const Capacity& cap);

}  // namespace linattn::meta
