// Device properties read at run time (never hard-coded): SM count, shared-memory limits, L2
// size, compute capability. Cached per device ordinal after the first query; the query itself
// is a host call that is safe outside and inside stream capture (it touches no stream).
#pragma once
#include <cstddef>

namespace linattn::cuda {

struct DeviceInfo {
  int ordinal = 0;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t smem_per_block_optin = 0;   // max dynamic shared memory per block after opt-in
  size_t smem_per_sm = 0;
  size_t l2_bytes = 0;
  int max_threads_per_sm = 0;
};

// Properties of the current device (cudaGetDevice), cached.
const DeviceInfo& current_device_info();
// Properties of device `ordinal`, cached.
const DeviceInfo& device_info(int ordinal);

}  // namespace linattn::cuda
