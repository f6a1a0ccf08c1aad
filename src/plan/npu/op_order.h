// Lifetime-aware operator orders of one task's dataflow (HA-NPU section 5). Every order is a
// topological order of the dataflow's ops; `ld[c]` (the DMA of chunk c's GM inputs) is issued one
// chunk early when `prefetch` (double buffering, what NPU kernels do to hide GM latency).
//  - kFlaPhase: FLA's kernels run back to back on one core: the prep of every chunk, then the
//    state pass, then every output (intermediates live across the whole sequence).
//  - kFla: FLA's launch order applied chunk by chunk (the fused kernel's default): the state update
//    comes before Q S, so S_c and S_{c+1} are both live (two state buffers).
//  - kChunkFirst: state reads (W S, Q S), then the chunk output, then the update in place.
//  - kLifetime: kChunkFirst on the factored dataflow plus GEMM-first grouping: K S, Q S, K K^T,
//    Q K^T back to back while k, q and S are on chip, then the solve (needs DataflowSpec.factored).
#pragma once
#include <string>
#include <vector>

#include "plan/npu/dataflow.h"

namespace linattn::plan::npu {

enum class OrderKind { kFlaPhase, kFla, kChunkFirst, kLifetime };

const char* order_name(OrderKind k);
OrderKind order_by_name(const std::string& name);
// Whether the order runs on the factored (GEMM-first) form of the dataflow.
bool order_factored(OrderKind k);
std::vector<int> make_order(const Dataflow& df, OrderKind k, bool prefetch = true);
// Throws unless `order` lists every op of df exactly once, each after the producers of its inputs.
void check_order(const Dataflow& df, const std::vector<int>& order);

}  // namespace linattn::plan::npu
