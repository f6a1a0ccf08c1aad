// Head-level mapping of a layer onto an N-core device (HA-NPU section 4): the three tiers.
//  - tier 1: one (sequence, head) per core, its whole Map-Reduce-Map pipeline fused on that core
//    (LPT: longest units first onto the least loaded core);
//  - tier 2: the residual units that underfill the last round are split along the state columns
//    (V, the non-reduction dimension: no cross-core reduction; the K-side work is redone per
//    slice), s slices per unit, s a power of two with V / s >= min_cols;
//  - tier 3: chunk-head-chunk for extreme tails: the residual units run as three multi-core
//    kernels (prep over (chunk, head), state pass over heads, output over (chunk, head)) with
//    their intermediates through GM.
// The residual option with the smallest modeled makespan wins (ties: lower tier). Task costs come
// from callbacks (the simulator), so the same code plans for any device model.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace linattn::plan::npu {

struct MappedTask {
  int seq = 0, head = 0;
  int v0 = 0, v1 = 0;   // state columns
  int tier = 1;
  int core = -1;        // -1: the chunk-head-chunk stage (all cores)
  double time_us = 0.0;
};

struct MappingPlan {
  std::vector<MappedTask> tasks;
  int num_cores = 1;
  int64_t units = 0;      // non-empty (sequence, head) pairs
  int64_t residual = 0;   // units left for the tail after full rounds
  int tail_tier = 1;      // how the tail runs
  int v_splits = 1;       // tier 2 slices per residual unit
  double fused_makespan_us = 0.0;  // busiest core over the fused tasks
  double chc_us = 0.0;             // chunk-head-chunk stage after them (tier 3)
  double makespan_us = 0.0;
  std::vector<double> tail_options_us;  // tier 1, best tier 2, tier 3
  std::string reason;
};

// us of one fused task: a sequence of `len` tokens, `cols` state columns.
using FusedCostFn = std::function<double(int64_t len, int cols)>;
// us of `heads` units of `len` tokens run chunk-head-chunk on `cores` cores.
using ChcCostFn = std::function<double(int64_t len, int heads, int cores)>;

struct MappingOptions {
  int min_cols = 16;
  bool allow_split = true;
  bool allow_chc = true;
  bool force_chc = false;  // the whole layer chunk-head-chunk (the FLA mapping)
};

MappingPlan plan_head_mapping(const std::vector<int64_t>& lengths, int heads, int V, int cores,
                              const FusedCostFn& fused, const ChcCostFn& chc, const MappingOptions& opt = {});

}  // namespace linattn::plan::npu
