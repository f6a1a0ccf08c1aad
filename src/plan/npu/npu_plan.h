// The NPU layer planner: from (family, sequence lengths, heads, head dims, chunk, device) to a
// full plan: operator order (lifetime-aware), layouts (DP), head mapping (three tiers), and the
// simulated cost of the whole layer on the device model (GM traffic, spills, unit utilization,
// time). `auto` choices are made by simulation: the order with the lowest simulated task time,
// the layouts of the DP, the mapping tier with the lowest makespan. Fixed choices reproduce the
// baselines of the HA-NPU ablation (FLA's chunk-head-chunk mapping, FLA order, dense vector
// layouts). `hybrid` runs the V-independent prep (gates, K K^T, the solve, Q K^T, the decayed K)
// as one chunk-parallel kernel first, so column slices do not redo it; auto takes it when it
// beats the three tiers by 2%. Prints itself (text and JSON).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plan/npu/dataflow.h"
#include "plan/npu/device_model.h"
#include "plan/npu/head_mapping.h"
#include "plan/npu/layout_plan.h"
#include "plan/npu/op_order.h"
#include "plan/npu/simulator.h"

namespace linattn::plan::npu {

struct LayerPlanOptions {
  Family family = Family::kGdn;
  std::vector<int64_t> lengths = {2048};
  int heads = 10;   // value heads
  int K = 128, V = 128, C = 64;
  int in_bytes = 2;
  bool narrow_operands = false;
  NpuDevice dev = ascend_310p();
  std::string order = "auto";    // auto | fla-phase | fla | chunk-first | lifetime
  std::string layouts = "dp";    // dp | dense | blocked
  // auto | head (tiers 1-2 only) | chc (the FLA mapping) | hybrid (chunk-parallel prep kernel,
  // then fused tiers 1-2: the CUDA backend's structure)
  std::string mapping = "auto";
  bool prefetch = true;
  Eviction eviction = Eviction::kBelady;
};

struct LayerTotals {
  double time_us = 0.0;      // max(busiest core, DRAM bound) + launches
  double gm_bytes = 0.0;
  double spill_bytes = 0.0;
  double layout_gm_bytes = 0.0;
  double l1_l0_bytes = 0.0;
  double matrix_util = 0.0;  // matrix busy / (time * cores)
  double vector_util = 0.0;
  double transform_share = 0.0;  // layout transforms / (matrix + vector + transforms) busy time
  double gm_time_share = 0.0;    // GM DMA time / all unit time (serial model)
  int launches = 0;
};

struct LayerPlan {
  LayerPlanOptions opt;
  OrderKind order = OrderKind::kLifetime;
  std::vector<std::string> order_ops;  // chunk 0's op order (for printing)
  LayoutPlan layout;                   // of the full-width task of the longest sequence
  TaskStats task;                      // that task with the UB capacity
  TaskStats task_ideal;                // ... and with unlimited UB (ideal residency)
  MappingPlan mapping;
  bool hybrid = false;   // V-independent prep as a chunk-parallel kernel before the fused tasks
  double prep_us = 0.0;  // that kernel's time
  LayerTotals totals;

  std::string to_string() const;
  std::string to_json() const;
};

LayerPlan plan_layer(const LayerPlanOptions& opt);

// Simulated cost of one fused task / of a chunk-head-chunk stage group (exposed for tests).
TaskStats simulate_fused_task(const LayerPlanOptions& opt, OrderKind order, int64_t len, int cols);
TaskStats simulate_chc(const LayerPlanOptions& opt, int64_t len, int heads, int cores, double* time_us);

}  // namespace linattn::plan::npu
