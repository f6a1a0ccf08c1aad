// Replays one task (an ordered list of a dataflow's ops on one core) on the device model and
// counts what a kernel doing it would move and spend. UB residency: a tensor occupies the UB from
// its production (or load) to its last in-task use; when an allocation does not fit in
// `capacity_bytes`, the resident tensor used furthest in the future (Belady, the best any
// eviction can do; `kLru` is the alternative) is evicted: a dirty one is spilled to GM and reloaded at its next use, a clean
// one (in GM already) is only reloaded. The state update may take over its input's buffer when
// that input has no later use (in place). Matrix operands stage through L1 and L0A/L0B (LRU
// caches of the device's sizes): an operand a preceding GEMM left in L0 is free (GEMM-first
// grouping makes that happen). External inputs read by the Matrix unit come GM->L1 directly.
// Tensors consumed by ops outside the task (another kernel of a multi-kernel mapping) are stored
// to GM and loaded by the consumer. Time is the serial sum of every unit's work (no overlap
// between units: an upper bound; utilization = unit time / task time).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plan/npu/dataflow.h"
#include "plan/npu/layout_plan.h"

namespace linattn::plan::npu {

struct TaskStats {
  double time_us = 0.0;
  double matrix_us = 0.0, vector_us = 0.0, transform_us = 0.0, dma_us = 0.0, move_us = 0.0;
  double overhead_us = 0.0;       // the device's fixed per-task cost
  double gm_load_bytes = 0.0;     // first loads of inputs (incl. GM->L1 operand reads)
  double gm_store_bytes = 0.0;    // outputs and tensors other tasks consume
  double spill_store_bytes = 0.0; // evicted dirty tensors
  double spill_load_bytes = 0.0;  // reloads of evicted tensors
  double layout_gm_bytes = 0.0;   // UB->GM->L1 conversion round trips
  double l1_l0_bytes = 0.0;
  int64_t peak_bytes = 0;         // UB demand peak (with the capacity: what stayed resident)
  int64_t peak_state_bytes = 0;   // recurrent state buffers resident at once
  int64_t evictions = 0;
  std::string peak_at;            // the op at the first peak and what was resident then
  double matrix_flops = 0.0, vector_flops = 0.0;

  double gm_bytes() const {
    return gm_load_bytes + gm_store_bytes + spill_store_bytes + spill_load_bytes + layout_gm_bytes;
  }
  double spill_bytes() const { return spill_store_bytes + spill_load_bytes; }
  TaskStats& operator+=(const TaskStats& o);
  TaskStats scaled(double f) const;  // times and bytes times f (peaks unchanged)
};

// Belady: evict the tensor used furthest ahead (optimal, what a planned kernel can do);
// kLru: the least recently used one (what an unplanned cache-like runtime does).
enum class Eviction { kBelady, kLru };

// capacity_bytes <= 0: unlimited (the ideal residency).
TaskStats simulate_task(const Dataflow& df, const std::vector<int>& order, const std::vector<Layout>& op_layout,
                        const LayoutCostModel& m, int64_t capacity_bytes, Eviction ev = Eviction::kBelady);

}  // namespace linattn::plan::npu
