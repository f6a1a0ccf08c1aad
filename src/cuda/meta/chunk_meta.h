// Device-built static chunk metadata (GRAPH_CONTRACT.md section 2): from a device cu_seqlens
// buffer [N_max + 1] (int32 or int64) one launch writes chunk_offsets [N_max + 1] (exclusive
// prefix sum of per-sequence chunk counts) and chunk_indices [NT_max, 2] ((n, c) rows in sequence
// order, then (-1, 0) sentinels). No host reads, no allocation: capture-safe.
// Sequence bounds are clamped to [0, T_max] (bos_n = clamp(c_n), eos_n = max(bos_n, clamp(c_n+1)))
// exactly as the GDN kernels clamp them, so a malformed layout never produces an out-of-range row;
// chunks past NT_max (only possible for non-monotone cu_seqlens) are dropped.
// seq_order (optional): the N_max sequence indices ordered by chunk count, longest first (ties in
// any order), for head-level kernels that start the longest sequences first (LPT order).
#pragma once
#include <cstdint>

namespace linattn::cuda {

void build_chunk_meta(const void* cu_seqlens,  // [n_max + 1] int32 or int64, device
                      bool cu_i64, int64_t n_max, int64_t t_max, int bt, int64_t nt_max,
                      int32_t* chunk_indices,  // [nt_max, 2] out
                      int32_t* chunk_offsets,  // [n_max + 1] out
                      void* stream,
                      int32_t* seq_order = nullptr);  // [n_max] out, or null

}  // namespace linattn::cuda
