// Layout planning (HA-NPU section 6): the Matrix unit takes blocked (fractal) operands and
// writes blocked results; the Vector unit runs fastest on dense rows. Each vector op runs in one
// layout and writes its result in it; a tensor read in another layout pays a reformat (Vector
// unit, `reformat_gbps`), a dense tensor fed to the Matrix unit goes either through a reformat
// then UB->L1, or through the UB->GM->L1 round trip whose DMA converts on the way (the cheaper is
// the transformation site). External inputs are dense in GM (GM->L1 converts for free); o and
// the final state must reach GM dense. Cost = vector compute (slowed by `blocked_penalty` per op
// kind) + every handoff. The planner prunes as the paper does: chunk isolation (chunks interact
// only through S_c), fixed blocked matrix interfaces, one layout per vector chain (connected
// vector ops of a chunk, linked by matrix-shaped tensors: a vector such as GDN's gate has no
// layout; two candidates each); then a dynamic program over chunks whose state is
// the layout of S_{c+1} (O(num_chunks * 4 * 2^chains)) and backtracking. Brute-force searches
// (over chains, or over every vector op) check it on small instances.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plan/npu/dataflow.h"
#include "plan/npu/device_model.h"

namespace linattn::plan::npu {

enum class Layout : uint8_t { kBlocked, kDense };
const char* layout_name(Layout l);

struct LayoutCostModel {
  NpuDevice dev;
  double blocked_penalty[6] = {1.0, 1.0, 1.5, 1.5, 2.0, 2.0};  // indexed by VecKind
  std::vector<double> op_scale;  // per op multiplier of vector compute (random instances); empty = 1
};
LayoutCostModel default_cost_model(const NpuDevice& dev);

// Cost of moving one tensor to its consumers under `op_layout` (one entry per op; only vector
// ops' entries are read).
struct Handoff {
  double us = 0.0;         // reformat_us + feed_us
  double reformat_us = 0.0;  // Vector-unit reformats for vector consumers and the GM store
  double feed_us = 0.0;    // getting the tensor into L1 for the Matrix unit (once: L1 keeps it)
  double gm_bytes = 0.0;   // UB->GM->L1 round trips (and GM->L1 reads of external operands)
  int reformats = 0;
  bool via_gm = false;
  Layout layout = Layout::kDense;  // the producer's layout
};
Layout tensor_layout(const Dataflow& df, int t, const std::vector<Layout>& op_layout);
Handoff tensor_handoff(const Dataflow& df, int t, const std::vector<Layout>& op_layout, const LayoutCostModel& m);
double vector_op_us(const OpNode& o, int op_id, Layout l, const LayoutCostModel& m);
// Total layout-dependent cost (vector compute + handoffs) of one assignment.
double layout_cost_us(const Dataflow& df, const std::vector<Layout>& op_layout, const LayoutCostModel& m);

// Vector chains of chunk c (op ids); the chain holding the state update comes first.
std::vector<std::vector<int>> vector_chains(const Dataflow& df, int chunk);

struct LayoutPlan {
  std::vector<Layout> op_layout;  // per op
  double cost_us = 0.0;
  int64_t states_evaluated = 0;   // work the search did
  std::string how;                // "dp", "brute-chains", "brute-ops", "all-dense", "all-blocked"
  // Chunk 0's chains and the transformation sites of chunk 0 (for printing).
  std::vector<std::string> chain_summary;
  std::vector<std::string> sites;
};

LayoutPlan plan_layouts_dp(const Dataflow& df, const LayoutCostModel& m);
LayoutPlan plan_layouts_brute_chains(const Dataflow& df, const LayoutCostModel& m);  // 2^(chains * chunks)
LayoutPlan plan_layouts_brute_ops(const Dataflow& df, const LayoutCostModel& m);     // 2^(vector ops)
LayoutPlan uniform_layouts(const Dataflow& df, Layout l, const LayoutCostModel& m);

}  // namespace linattn::plan::npu
