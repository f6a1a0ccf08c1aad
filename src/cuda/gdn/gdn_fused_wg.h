// The wgmma version of the fused GDN forward (gdn_fused_wg.cu): same GdnFwdParams / GdnChunkWs
// contract as launch_gdn_fused, for GDN with BT 64, K 128, V-slice 64 / 128, bf16 / fp16.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {

// Whether the wgmma kernel covers these parameters at V-slice vs.
bool gdn_fused_wg_eligible(const GdnFwdParams& p, int vs);
// Opt-in switch while the kernel is new: environment LINATTN_CUDA_WGMMA=1.
bool gdn_fused_wg_enabled();
// Launches so far in this process (tests check the kernel really ran).
int64_t gdn_fused_wg_launches();
void launch_gdn_fused_wg(const GdnFwdParams& p, const GdnChunkWs& ws, int vs, cudaStream_t stream);

}  // namespace linattn::cuda
