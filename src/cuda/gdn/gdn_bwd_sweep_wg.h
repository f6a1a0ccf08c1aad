// The wgmma variant of the chunked GDN backward's head-level sweeps (gdn_bwd_sweep_wg.cu): same
// inputs, outputs, workspace and grid as launch_gdn_bwd_sweeps; selected there when
// gdn_bwd_sweep_wg_enabled() and the shape is supported (GDN, BT 64, K 128, V % 64 == 0, bf16 / fp16).
#pragma once
#include <cuda_runtime.h>

#include "cuda/gdn/gdn_bwd_kernels.h"

namespace linattn::cuda {

// LINATTN_CUDA_GDN_BWD_SWEEP: "wg" selects the wgmma sweeps ("wglate": the same with the store
// warpgroup's "empty" arrive after its stores; "wgsync": bar.sync there instead of bar.arrive, a
// racecheck experiment; "wg2": WG1 streams role 1's inputs, mbarrier hand-offs, gdn_bwd_sweep_wg2.cu;
// "wg3" / "wg3p": wg / wg2 with the store warpgroup's dv stores vectorized, same values; "wg3pf":
// wg3p with role 0's input ring streamed by WG1 too), "mma" the mma.sync kernel.
// Unset: the wgmma sweeps when the sequences average >= kWgMinTokens tokens (T_total / N; capacity in
// graph mode), else mma.sync; "mma" forces mma.sync.
inline constexpr int64_t kWgMinTokens = 2048;
bool gdn_bwd_sweep_wg_enabled(const GdnFwdParams& f);
// Launches of the wgmma sweeps so far in this process (tests check which kernel ran).
int64_t gdn_bwd_sweep_wg_launches();
// Launches of wg3 / wg3p / wg3pf (the vectorized dv stores) so far in this process.
int64_t gdn_bwd_sweep_wg3_launches();
bool gdn_bwd_sweep_wg_supported(const GdnFwdParams& f);
void launch_gdn_bwd_sweeps_wg(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream);
// The "wg2" kernel (called by launch_gdn_bwd_sweeps_wg when the switch says so); variant 1: "wg3p"
// (vectorized dv stores), 2: "wg3pf" (wg3p with role 0's input ring also streamed by WG1).
void launch_gdn_bwd_sweeps_wg2(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream, int variant = 0);
int64_t gdn_bwd_sweep_wg2_launches();

}  // namespace linattn::cuda
