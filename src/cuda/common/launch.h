// Launch helper: raises a kernel's dynamic shared-memory limit when it needs more than the 48 KB
// default (once per kernel and device), launches on the caller's stream and checks the launch.
// Never synchronizes, so every launch through it is capture-safe.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
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

// LINATTN_CUDA_PDL (default "auto" since session 14: on except for long chains (pdl_policy.h); "0" = off, "1" = on
// everywhere, anything else an error): the GDN forward chains launch their dependent kernels with Programmatic
// Dependent Launch (launch_pdl, the kPdl kernel instances); off = the plain launches. Read per call.
// pdl_launches: how many launches went through launch_pdl with pdl set (tests check it ran).
bool pdl_enabled();
int64_t pdl_launches();
void count_pdl_launch();

// What every launch checks first: false for an empty grid (nothing to do, e.g. zero capacity); a grid over the
// y / z limit is an error; more than 48 KB of dynamic shared memory is opted into.
inline bool launch_prologue(const void* kernel, dim3 grid, size_t smem_bytes) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return false;
  LINATTN_CHECK(grid.y <= 65535 && grid.z <= 65535, "launch: grid ", grid.x, "x", grid.y, "x",
                grid.z, " exceeds the y/z limit 65535");
  if (smem_bytes > 48 * 1024) ensure_dynamic_smem(kernel, smem_bytes);
  return true;
}

#if defined(__CUDACC__)  // the <<<>>> launch compiles only in .cu files
template <class... KArgs, class... Args>
void launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
            Args&&... args) {
  if (!launch_prologue(reinterpret_cast<const void*>(kernel), grid, smem_bytes)) return;
  kernel<<<grid, block, smem_bytes, stream>>>(std::forward<Args>(args)...);
  LINATTN_CUDA_CHECK_LAUNCH();
}

// As launch, but with `pdl` through cudaLaunchKernelEx with programmatic stream serialization: the grid may
// start before the previous kernel on the stream has finished (after that kernel's griddepcontrol.launch_dependents
// or its end), so `kernel` must execute griddepcontrol.wait (pdl_wait, pdl.cuh) in every CTA before it reads the
// previous kernels' outputs or writes anything they may read. Captured as a programmatic graph edge (CUDA 12.3+).
template <class... KArgs, class... Args>
void launch_pdl(bool pdl, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                Args&&... args) {
  if (!pdl) {
    launch(kernel, grid, block, smem_bytes, stream, std::forward<Args>(args)...);
    return;
  }
  if (!launch_prologue(reinterpret_cast<const void*>(kernel), grid, smem_bytes)) return;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  LINATTN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
  count_pdl_launch();
}
#endif

}  // namespace linattn::cuda
