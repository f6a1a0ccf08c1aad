// The wgmma variant of the chunked GDN backward's head-level sweeps (gdn_bwd_sweep_wg.cu): same
// inputs, outputs, workspace and grid as launch_gdn_bwd_sweeps; selected there when
// gdn_bwd_sweep_wg_enabled() and the shape is supported (GDN, BT 64, K 128, V % 64 == 0, bf16 / fp16).
#pragma once
#include <cuda_runtime.h>

#include "cuda/gdn/gdn_bwd_kernels.h"

namespace linattn::cuda {

// LINATTN_CUDA_GDN_BWD_SWEEP: "wg" selects the wgmma sweeps ("wglate": the same with the store
// warpgroup's "empty" arrive after its stores; "wgsync": bar.sync there instead of bar.arrive, a
// racecheck experiment; "wg3": wg with the store warpgroup's dv stores vectorized, same values, the
// default until session 15), "wgr" / "wgrl" / "wg4" / "wg5" / "wg5p" / "wg7" (see below), "mma" the mma.sync kernel. Any other value is an error naming the
// variable, the value and the accepted values (the slower wg2 / wg3p / wg3pf were removed in session 12).
// Unset: the wgmma sweeps (wg7, bitwise wg3) when the sequences average >= kWgMinTokens tokens (T_total / N; capacity
// in graph mode), else mma.sync; "mma" forces mma.sync.
inline constexpr int64_t kWgMinTokens = 2048;
bool gdn_bwd_sweep_wg_enabled(const GdnFwdParams& f);
// Launches of the wgmma sweeps so far in this process (tests check which kernel ran).
int64_t gdn_bwd_sweep_wg_launches();
// Launches of wg3 (the vectorized dv stores), forced by the switch, so far in this process.
int64_t gdn_bwd_sweep_wg3_launches();
// "wg4" (opt-in, sweep12): wg3 with role 1's inputs of chunk cc + 2 prefetched to L2 under step cc's first
// products (bitwise wg3's outputs). Launches so far.
int64_t gdn_bwd_sweep_wg4_launches();
// "wg5" (the default in sessions 15-16) / "wg5p" (opt-in), sweep12: wg3 / wg4 with role 1's q / k / Ab / P refills by TMA (bitwise wg3's outputs).
int64_t gdn_bwd_sweep_wg5_launches();
// "wg7" (the default since session 17): wg5 with role 1's dO tile and per-token scalars of chunk cc + 2 issued in step cc (a
// step earlier; bitwise wg5's outputs). Launches so far.
int64_t gdn_bwd_sweep_wg7_launches();
int64_t gdn_bwd_sweep_wg7m_launches();  // wg7m: wg7 with the fragment hand-off on mbarriers
bool gdn_bwd_sweep_wg_supported(const GdnFwdParams& f);
// "wgr" / "wgrl" (gdn_bwd_sweep_wgr.cu, opt-in): wg3 with role 1's products reordered (bitwise wg3's
// outputs); wgrl also issues the next chunk's input ring after the step's first products. Launches so far.
int64_t gdn_bwd_sweep_wgr_launches();
void launch_gdn_bwd_sweeps_wgr(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream, bool late_loads);
void launch_gdn_bwd_sweeps_wg(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream);

}  // namespace linattn::cuda
