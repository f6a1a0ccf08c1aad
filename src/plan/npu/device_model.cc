// Device presets of the NPU planner (see device_model.h).
#include "plan/npu/device_model.h"

#include <sstream>

#include "core/check.h"

namespace linattn::plan::npu {

std::string NpuDevice::to_string() const {
  std::ostringstream os;
  os << name << ": " << num_cores << " cores, UB " << ub_bytes / 1024 << " KiB, L1 " << l1_bytes / 1024
     << " KiB, L0A+B " << l0ab_bytes / 1024 << " KiB, L0C " << l0c_bytes / 1024 << " KiB; GM->L1 "
     << gm_l1_gbps << ", UB->L1 " << ub_l1_gbps << ", UB->GM->L1 " << ub_gm_l1_gbps << " GB/s; matrix "
     << matrix_flops / 1e12 << " TFLOP/s, vector " << vector_flops / 1e12 << " TFLOP/s per core; DRAM "
     << dram_gbps << " GB/s";
  return os.str();
}

NpuDevice ascend_310p() {
  NpuDevice d;
  d.name = "ascend-310p";
  // Paper (HA-NPU section 2.2, section 5): 256 KB on-core buffer; UB->L1 205, GM->L1 95,
  // UB->GM->L1 48 GB/s (profiled).
  d.ub_bytes = 256 * 1024;
  d.gm_l1_gbps = 95.0;
  d.ub_l1_gbps = 205.0;
  d.ub_gm_l1_gbps = 48.0;
  // Public spec of the 310P: 8 AI cores, ~70 TFLOP/s fp16 (16x16x16 cube at ~1.08 GHz per core),
  // LPDDR4X 204.8 GB/s, L1 1 MB, L0A/L0B 64 KB each, L0C 256 KB.
  d.num_cores = 8;
  d.l1_bytes = 1024 * 1024;
  d.l0ab_bytes = 128 * 1024;
  d.l0c_bytes = 256 * 1024;
  d.matrix_flops = 8.8e12;
  d.dram_gbps = 204.8;
  // Assumptions (no public number): 2048-bit vector unit = 64 fp32 FMA lanes at 1.08 GHz; GM<->UB
  // at the GM->L1 rate; L0C->UB at the UB->L1 rate; vector reformat at ~1/4 of UB bandwidth.
  d.vector_flops = 0.138e12;
  d.gm_ub_gbps = 95.0;
  d.l0c_ub_gbps = 205.0;
  d.l1_l0_gbps = 512.0;
  d.reformat_gbps = 64.0;
  d.launch_us = 5.0;
  d.task_us = 1.0;  // ~1 us GM latency before a task's first tile arrives, no overlap across tasks
  return d;
}

NpuDevice cpu_like(int threads, int64_t l2_bytes) {
  LINATTN_CHECK(threads >= 1, "cpu_like: threads: expected >= 1, got ", threads);
  NpuDevice d;
  d.name = "cpu-like";
  d.num_cores = threads;
  d.ub_bytes = l2_bytes;
  d.l1_bytes = l2_bytes;
  d.l0ab_bytes = 48 * 1024;  // L1D
  d.l0c_bytes = 48 * 1024;
  // One AVX-512 core: ~100 GFLOP/s fp32 FMA for both "units", no layout distinction.
  d.gm_l1_gbps = d.gm_ub_gbps = 12.0;
  d.ub_l1_gbps = d.ub_gm_l1_gbps = d.l0c_ub_gbps = d.l1_l0_gbps = d.reformat_gbps = 100.0;
  d.matrix_flops = d.vector_flops = 1.0e11;
  d.dram_gbps = 12.0 * threads;
  d.launch_us = 2.0;
  d.task_us = 0.2;
  d.operand_bytes = 4;
  return d;
}

NpuDevice h200_sm() {
  NpuDevice d;
  d.name = "h200-sm";
  d.num_cores = 132;
  d.ub_bytes = 227 * 1024;  // shared memory per block (opt-in maximum)
  d.l1_bytes = 227 * 1024;
  d.l0ab_bytes = 64 * 1024;  // registers feeding wgmma (approximate)
  d.l0c_bytes = 128 * 1024;  // accumulator registers
  d.gm_l1_gbps = d.gm_ub_gbps = 4800.0 / 132;
  d.ub_l1_gbps = d.ub_gm_l1_gbps = d.l0c_ub_gbps = d.reformat_gbps = 1000.0;
  d.l1_l0_gbps = 4000.0;
  d.matrix_flops = 989e12 / 132;
  d.vector_flops = 67e12 / 132;
  d.dram_gbps = 4800.0;
  d.launch_us = 3.0;
  d.task_us = 0.5;
  return d;
}

NpuDevice device_by_name(const std::string& name) {
  if (name == "310p" || name == "ascend-310p") return ascend_310p();
  if (name == "h200") return h200_sm();
  if (name.rfind("cpu:", 0) == 0) return cpu_like(std::stoi(name.substr(4)), 2 * 1024 * 1024);
  LINATTN_CHECK(false, "device: expected 310p, h200 or cpu:<threads>, got '", name, "'");
  return {};
}

}  // namespace linattn::plan::npu
