// The project's own token-by-token fp32 forward (GDN and KDA): the ALGORITHMS.md section 2
// recurrence, the same work as ggml's GATED_DELTA_NET op (the CPU bench baseline). Threads split
// the (sequence, value head) pairs into static ranges; the fp32 state [K, V] of a pair stays in a
// per-thread buffer; per token two fused passes over it (decay + S^T k, then update + S^T q).
#pragma once
#include <cstddef>

#include "cpu/chunk_params.h"

namespace linattn::cpu {

// Scratch bytes for `num_threads` workers.
size_t token_recurrent_workspace_bytes(const ChunkParams& p, int num_threads);
// Runs the forward; `ws` holds token_recurrent_workspace_bytes(p, num_threads) bytes.
void token_recurrent_fwd(const ChunkParams& p, int num_threads, void* ws);

}  // namespace linattn::cpu
