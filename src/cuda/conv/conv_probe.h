// Copy-bandwidth probe for the conv forward's open question (perf-notes "Version 10"; `linattn conv-probe`,
// tools/cmd_conv_probe.cc): what does cudaMemcpy D2D (4.23 TB/s read + write) do that SM copy kernels
// (~3.85-3.95 TB/s) do not? Methods: cudaMemcpy / cudaMemset, read-only and write-only kernels, grid-stride
// copies (bytes per thread in flight, 16 vs 32 contiguous bytes per thread, st.global.cs), block-level
// phases through shared memory (a block reads a P KiB chunk, then writes it: the read / write batching of
// the v10 forward), grid-wide phases (every block reads, grid barrier, every block writes, grid barrier), and
// an engine test: does a D2D cudaMemcpyAsync finish while spinning kernels hold every SM (a copy engine) or
// not (an SM kernel)? Not used by the library; host API in plain types so the tool needs no CUDA headers.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace linattn::cuda::conv {

// Probe method names, in their run order.
std::vector<std::string> probe_methods();

// One asynchronous call of `method` on `stream` (a cudaStream_t) moving `bytes` (a multiple of 64 KiB) from
// src to dst (device buffers); returns the bytes it moved through DRAM (read + written; read-only and
// write-only methods: bytes). Throws linattn::Error on an unknown method or a CUDA error.
double probe_run(const std::string& method, const void* src, void* dst, size_t bytes, void* stream);

// Launch configuration of `method` at this size as text (grid x block, dynamic shared memory), for the log.
std::string probe_config(const std::string& method, size_t bytes);

struct ProbeEngine {
  int spin_blocks = 0;       // blocks of the spinning kernel (2 x 1024 threads per SM: every thread slot)
  int spin_started = 0;      // of them, seen running before the memcpy was issued
  bool memcpy_done_while_full = false;  // the memcpy's completion event fired while they still spun
  float memcpy_ms = 0;       // its event time (from its issue; includes any wait for the spinners)
  float solo_ms = 0;         // the same memcpy with the GPU otherwise idle
};
// The engine test (synchronizes; spinners stop by a host flag, or by themselves after 300 ms).
ProbeEngine probe_memcpy_engine(const void* src, void* dst, size_t bytes);

}  // namespace linattn::cuda::conv
