// ensure_dynamic_smem: remembers, per (kernel, device), the largest dynamic shared-memory size
// already granted, and calls cudaFuncSetAttribute only to raise it (checked against the device's
// opt-in limit with a clear error); prefer_max_shared_carveout sets the carveout hint once per
// (kernel, device) the same way.
#include "cuda/common/launch.h"
#include "cuda/common/pdl_policy.h"

#include <atomic>
#include <map>
#include <mutex>
#include <utility>

#include "core/env.h"
#include "core/util.h"

namespace linattn::cuda {

void ensure_dynamic_smem(const void* kernel, size_t smem_bytes) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, size_t> granted;
  const DeviceInfo& dev = current_device_info();
  LINATTN_CHECK(smem_bytes <= dev.smem_per_block_optin, "launch: kernel needs ", smem_bytes,
                " bytes of shared memory, device ", dev.ordinal, " allows ",
                dev.smem_per_block_optin);
  std::lock_guard<std::mutex> lock(mu);
  size_t& have = granted[{kernel, dev.ordinal}];
  if (have >= smem_bytes) return;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem_bytes)));
  have = smem_bytes;
}

void prefer_max_shared_carveout(const void* kernel) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, bool> done;
  const int dev = current_device_info().ordinal;
  std::lock_guard<std::mutex> lock(mu);
  bool& set = done[{kernel, dev}];
  if (set) return;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          cudaSharedmemCarveoutMaxShared));
  set = true;
}

namespace {
thread_local bool t_long_chain = false;  // PdlLongChain (pdl_policy.h)
// LINATTN_CUDA_PDL: 0 off, 1 on, 2 auto (the default since session 14).
int pdl_mode() { return env_choice("LINATTN_CUDA_PDL", {"0", "1", "auto"}, 2); }
}  // namespace

// On since session 13 (H200 at 678f770: every GPU test binary passes with it; A/B at e4f1cb2: tier 3 2/8 1x32768
// 0.310 -> 0.308 ms, short 16/32 512 tokens 50.8 -> 49.5 us graph replay); "auto" the default since session 14 (A/B
// at c2ab35c: 16/64 1x32768 eager 1.182 -> 1.175 ms, the other shapes equal): PDL except inside a PdlLongChain scope
// (pdl_policy.h). "0" = the plain launches, "1" = PDL everywhere.
bool pdl_enabled() {
  const int m = pdl_mode();
  return m == 1 || (m == 2 && !t_long_chain);
}
bool pdl_auto() { return pdl_mode() == 2; }
bool pdl_long_chain(int64_t ctas, int ctas_per_sm, int sm_count) {
  return ctas > 2 * int64_t(ctas_per_sm) * sm_count;
}
PdlLongChain::PdlLongChain(bool long_chain) : prev_(t_long_chain) {
  if (long_chain) t_long_chain = true;
}
PdlLongChain::~PdlLongChain() { t_long_chain = prev_; }

namespace {
std::atomic<int64_t> g_pdl_launches{0};
}  // namespace

int64_t pdl_launches() { return g_pdl_launches.load(); }
void count_pdl_launch() { g_pdl_launches.fetch_add(1); }

}  // namespace linattn::cuda
