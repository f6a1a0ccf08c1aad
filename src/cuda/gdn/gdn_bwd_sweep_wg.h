// The wgmma variant of the chunked GDN backward's head-level sweeps (gdn_bwd_sweep_wg.cu): same
// inputs, outputs, workspace and grid as launch_gdn_bwd_sweeps; selected there when
// gdn_bwd_sweep_wg_enabled() and the shape is supported (GDN, BT 64, K 128, V % 64 == 0, bf16 / fp16).
#pragma once
#include <cuda_runtime.h>

#include "cuda/gdn/gdn_bwd_kernels.h"

namespace linattn::cuda {

// LINATTN_CUDA_GDN_BWD_SWEEP: "wg" selects the wgmma sweeps ("wglate": the same with the store
// warpgroup's "empty" arrive after its stores; "wgsync": bar.sync there instead of bar.arrive, a
// racecheck experiment), anything else the mma.sync kernel.
bool gdn_bwd_sweep_wg_enabled();
bool gdn_bwd_sweep_wg_supported(const GdnFwdParams& f);
void launch_gdn_bwd_sweeps_wg(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream);

}  // namespace linattn::cuda
