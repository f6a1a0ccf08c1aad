// Cost model of the chunked GDN / KDA ops (FLOPs and bytes per call), used by the planner and by
// `linattn bench` for GFLOP/s and GB/s, so the two never disagree. FLOPs count the products of
// the chunk form as the CPU backend runs them (a multiply-add is 2): per chunk of n rows,
// K S and Q S (4nKV), the state update K^T V^ (2nKV), K K^T strictly lower and Q K^T lower
// (2n^2 K), the unit-lower solve and P V^ (2n^2 V); elementwise work (gates, exps) is not counted.
// Bytes are the minimum traffic: q, k, v, g, beta read once per value head, o written once, the
// initial / final state read / written once.
#pragma once
#include <cstdint>
#include <vector>

#include "meta/chunk_attn_desc.h"

namespace linattn::meta {

struct OpCost {
  double flops = 0.0;
  double bytes = 0.0;
};

// FLOPs of the forward of one (sequence, value head) of `len` tokens, state columns `vt` (<= V).
// The V-independent part (K K^T, Q K^T) is counted once per call of this function, so a V split
// into s parts costs s * chunk_fwd_task_flops(.., V / s).
double chunk_fwd_task_flops(int64_t len, int64_t K, int64_t vt, int BT);
// The V-independent share of chunk_fwd_task_flops (recomputed by every V split).
double chunk_fwd_task_kside_flops(int64_t len, int64_t K, int BT);

// Whole forward call for the given sequence lengths (one per sequence).
OpCost chunk_fwd_cost(const ChunkAttnDesc& d, const std::vector<int64_t>& lengths);
// Backward (recompute of the forward included), an approximate count from ALGORITHMS.md section
// 4.1 per chunk: the recomputed forward, the state-gradient walk (K dS, Q^T dO, W^T dV^: 6nKV),
// dO S^T, V^ dS^T, dV^ S^T (6nKV), and the chunk-local n x n products of dv_local, dqkwg and the
// WY backward (about 6 n^2 (K + V)).
OpCost chunk_bwd_cost(const ChunkAttnDesc& d, const std::vector<int64_t>& lengths);
// The token-by-token recurrence (the bench baseline): 8 K V FLOPs per token per value head.
double token_recurrent_flops(const ChunkAttnDesc& d, const std::vector<int64_t>& lengths);

}  // namespace linattn::meta
