// The wgmma variant of the chunked KDA backward's head-level sweeps (kda_bwd_sweep_wg.cu): same
// inputs (the KDA prep's qg / kg / kgl / gl, Ab, P), outputs (hS, hdS, vh, dvh, dv, dh0), workspace
// and grid as the mma.sync KDA sweeps of launch_gdn_bwd_sweeps; opt-in, selected there when
// kda_bwd_sweep_wg_enabled() and the shape is supported (KDA, BT 64, K 128, V % 64 == 0, bf16 / fp16).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/gdn/gdn_bwd_kernels.h"

namespace linattn::cuda {

// LINATTN_CUDA_KDA_SWEEP (read per call): "wg" (the default from 3d4b025 to session 15) selects the wgmma sweeps
// where supported (BT 64), "wgm" the same sweeps with the hand-off on mbarriers (bitwise equal; racecheck-clean
// protocol); unset or "wg2" (the default since session 15): wg with role 1's store warpgroup on two barriers per
// chunk and 16-byte dv stores where dv is absent or io-typed and 16-byte aligned (else wg's; bitwise wg);
// "mma" keeps the mma.sync sweeps (gdn_bwd_sweep.cu, KDA policy); any other value is an error.
bool kda_bwd_sweep_wg_enabled();
bool kda_bwd_sweep_wg_supported(const GdnFwdParams& f);
// Launches of the wgmma KDA sweeps so far in this process (tests check which kernel ran).
int64_t kda_bwd_sweep_wg_launches();
// Of those, launches of the mbarrier hand-off ("wgm") and of wg2.
int64_t kda_bwd_sweep_wgm_launches();
int64_t kda_bwd_sweep_wg2_launches();
void launch_kda_bwd_sweeps_wg(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream);

}  // namespace linattn::cuda
