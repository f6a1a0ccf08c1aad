// Launch helper: raises a kernel's dynamic shared-memory limit when it needs more than the 48 KB
// default (once per kernel and device), launches on the caller's stream and checks the launch.
// Never synchronizes, so every launch through it is capture-safe.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "cuda/common/check.h"
#include "cuda/common/device_info.h"

namespace linattn::cuda {

// Opts `kernel` into `smem_bytes` of dynamic shared memory. Cheap to call repeatedly: the
// attribute is set only when the requested size exceeds what was set before for this kernel.
void ensure_dynamic_smem(const void* kernel, size_t smem_bytes);

// Asks for the largest shared-memory carveout for `kernel` (a hint that lets several CTAs with large
// shared-memory footprints share an SM); set once per kernel and device, thread-safe.
void prefer_max_shared_carveout(const void* kernel);

#if defined(__CUDACC__)  // the <<<>>> launch compiles only in .cu files
template <class... KArgs, class... Args>
void launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
            Args&&... args) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;  // nothing to do (e.g. zero capacity)
  LINATTN_CHECK(grid.y <= 65535 && grid.z <= 65535, "launch: grid ", grid.x, "x", grid.y, "x",
                grid.z, " exceeds the y/z limit 65535");
  if (smem_bytes > 48 * 1024) ensure_dynamic_smem(reinterpret_cast<const void*>(kernel), smem_bytes);
  kernel<<<grid, block, smem_bytes, stream>>>(std::forward<Args>(args)...);
  LINATTN_CUDA_CHECK_LAUNCH();
}
#endif

}  // namespace linattn::cuda
