// Device model of a many-core accelerator with explicitly managed on-core buffers, the machine
// the NPU planner (src/plan/npu/*) plans for and the simulator replays on. Per core: a Matrix
// unit fed from L1 -> L0A/L0B (blocked operands), a Vector unit working in the Unified Buffer
// (UB), DMA links between global memory (GM), UB and L1. Rates are per core; `dram_gbps` bounds
// the whole device. The Ascend 310P preset takes the buffer size (256 KB UB) and the three
// profiled bandwidths (UB->L1 205, GM->L1 95, UB->GM->L1 48 GB/s) from the HA-NPU paper; the
// other figures are public spec values or stated assumptions (see ascend_310p() in the .cc and
// docs/npu-planning.md). Units: bytes, GB/s (1e9 B/s), FLOP/s; times come out in microseconds.
#pragma once
#include <cstdint>
#include <string>

namespace linattn::plan::npu {

struct NpuDevice {
  std::string name;
  int num_cores = 8;
  int64_t ub_bytes = 256 * 1024;     // vector-side working buffer: the residency limit
  int64_t l1_bytes = 1024 * 1024;    // matrix operand staging
  int64_t l0ab_bytes = 128 * 1024;   // L0A + L0B: matrix operands in use
  int64_t l0c_bytes = 256 * 1024;    // matrix accumulators
  double gm_l1_gbps = 95.0;          // GM -> L1 (ND -> blocked conversion on the fly)
  double gm_ub_gbps = 95.0;          // GM <-> UB loads, stores, spills
  double ub_l1_gbps = 205.0;         // UB -> L1, operand already blocked
  double ub_gm_l1_gbps = 48.0;       // UB -> GM -> L1: the round trip that converts dense -> blocked
  double l0c_ub_gbps = 205.0;        // matrix results to UB
  double l1_l0_gbps = 512.0;         // L1 -> L0A/L0B
  double reformat_gbps = 64.0;       // dense <-> blocked reformat done by the Vector unit in UB
  double matrix_flops = 8.8e12;      // per core, fp16 operands, fp32 accumulate
  double vector_flops = 0.138e12;    // per core, fp32
  double dram_gbps = 204.8;          // whole device
  double launch_us = 5.0;            // per kernel (stage) launch
  double task_us = 1.0;              // per task on a core: scalar setup, first-DMA latency, pipeline fill
  int operand_bytes = 2;             // Matrix operands (fp16 / bf16)

  std::string to_string() const;
};

// Ascend 310P (the HA-NPU paper's device): see the .cc for the source of each number.
NpuDevice ascend_310p();
// A multicore CPU seen through the same model (one core per thread, L2 as the buffer); used to
// explain the CPU plan (docs/npu-planning.md), not to time it.
NpuDevice cpu_like(int threads, int64_t l2_bytes);
// One H200 SM seen through the same model (shared memory as the buffer, 132 cores).
NpuDevice h200_sm();

// Preset by name: "310p", "cpu:<threads>", "h200"; throws on anything else.
NpuDevice device_by_name(const std::string& name);

}  // namespace linattn::plan::npu
