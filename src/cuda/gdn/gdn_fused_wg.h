// The wgmma versions of the fused GDN forward: same GdnFwdParams / GdnChunkWs contract as
// launch_gdn_fused, for GDN with BT 64, K 128, bf16 / fp16. Two kernels behind one switch
// (LINATTN_CUDA_WGMMA, below): the pipelined kernel (gdn_fused_wgp.cu: transposed register-resident
// state, state / output warpgroups, V-slice 64, or 32 with LINATTN_CUDA_WGP_VS below; V % 64 == 0); "v1" = the first version
// (gdn_fused_wg.cu: V-slice 64 / 128 as planned, kept for A/B measurements).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {

// Whether the wgmma kernel covers these parameters at V-slice vs.
bool gdn_fused_wg_eligible(const GdnFwdParams& p, int vs);
// Environment LINATTN_CUDA_WGMMA: unset = the pipelined kernel wherever it is eligible and the
// sequences average two chunks or more (shorter ones keep mma.sync: the pipeline start costs more
// than it saves; H200 A/B in docs/perf-notes.md, "Step 3"); "0" = never (mma.sync);
// "1" = the pipelined kernel wherever eligible; "v1" = the first wgmma version wherever eligible;
// any other value is an error (core/env.h).
bool gdn_fused_wg_enabled();   // not "0"
bool gdn_fused_wg_pipelined(); // not "v1"
bool gdn_fused_wg_forced();    // "1" or "v1": regardless of the planned V-slice
// KDA takes the pipelined kernel's KDA gate policy wherever eligible (BT 64, K 128, V % 64 == 0,
// bf16 / fp16, not the tier-3 state pass; the default since its H200 A/B); environment
// LINATTN_CUDA_KDA_WGMMA=0 keeps gdn_fused.cu for KDA. LINATTN_CUDA_WGMMA does not apply to KDA.
bool gdn_fused_wg_kda_enabled();
// The forward's choice for these parameters and the planned V-slice.
bool gdn_fused_wg_chosen(const GdnFwdParams& p, int vs);
// Launches so far in this process (tests check the kernel really ran).
int64_t gdn_fused_wg_launches();
// Launches the selected kernel (the pipelined one uses 64, or 32 where gdn_fused_wgp_vs says so).
void launch_gdn_fused_wg(const GdnFwdParams& p, const GdnChunkWs& ws, int vs, cudaStream_t stream);
// Environment LINATTN_CUDA_SEG_WGMMA (read per call): "1" = the tier-3 state pass (GdnFwdParams::seg_M)
// takes the pipelined kernel's state-pass mode (gdn_fused_wgp.cu) wherever the pipelined kernel is
// chosen, "0" = gdn_fused.cu; unset: gdn_fused_wgp.cu's kSegWgmmaDefault.
bool gdn_fused_wgp_seg_enabled();
// Environment LINATTN_CUDA_SEG_CHAIN (read per call; "tma3" the default since d3f84ad): that GDN state pass with tma3's rings
// (gdn_fused_wgp_seg_tma_kernel: TMA boxes and the prep's scale records, no per-thread cp.async; bitwise the
// same values) wherever the forward's chain mode has them (LINATTN_CUDA_GDN_CHAIN tma3, the default); "v3":
// the cp.async rings. Launches of the tma3 state pass so far (tests check it ran).
bool gdn_fused_wgp_seg_tma_enabled();
int64_t gdn_fused_wgp_seg_tma_launches();
// Environment LINATTN_CUDA_GDN_CHAIN (read per launch of the pipelined GDN forward, not the tier-3
// state pass, not KDA): "v3" = the step-3 state chain; else '+'-joined tokens: "tma" = WG0's k / v / Ab
// ring filled by TMA boxes (one thread, mbarriers) instead of per-thread cp.async, "tma2" = WG1's q / P
// ring as well, "il" = the register passes interleaved with the wgmma steps (gdn_fused_wgp.cu,
// gdn_fused_wgp_tma.cuh; every mode gives bitwise the same values); unset or not a valid value =
// kGdnChainDefault (gdn_fused_wgp.cu; "tma2" since 755404e). Returns the mode bits (1 il, 2 tma, 4 WG1's TMA ring,
// 8 scale records, 16 split update, 32 TMA-store output). "tma3" = tma2 with the per-token scales formed by the prep and
// loaded with the rings (gdn_chain_scales.cuh; the workspace grows by gdn_chain_scales_floats). With tma3 only (opt-in,
// same workspace): "split" = the state update issued as two key halves at the top of the next chunk, overlapping the
// next K S^T; "ost" = WG1's full output chunks stored by one TMA box store; "tma4" = tma3+split+ost.
int gdn_chain_mode_env();
// Floats of the tma3 scale records for this forward (0 unless the switch asks for tma3 and the pipelined
// GDN kernel can take it; independent of the V-slice and the tier-3 fields). gdn_fwd.cc carves them.
size_t gdn_chain_scales_floats(const GdnFwdParams& p, int64_t nt_cap);
// Launches of the TMA-ring instances so far in this process (tests check the kernel really ran); of them,
// the tma3 instance's.
int64_t gdn_fused_wgp_tma_launches();
int64_t gdn_fused_wgp_sc_launches();
int64_t gdn_fused_wgp_split_launches();  // of them, those with the split update (tma4, tma3+split)
int64_t gdn_fused_wgp_ost_launches();    // of them, those with the TMA-store output (tma4, tma3+ost)
// The pipelined kernel itself (gdn_fused_wgp.cu; p.kda selects its KDA gate policy) at V-slice vs (64, or
// 32: gdn_fused_wgp_vs32.cuh); launch_gdn_fused_wg checks eligibility.
void launch_gdn_fused_wgp(const GdnFwdParams& p, const GdnChunkWs& ws, cudaStream_t stream, int vs = 64);
// Environment LINATTN_CUDA_WGP_VS (read per call): unset / "32" (the default) = the pipelined kernel's V-slice 32
// instance (twice the CTAs: S held [key][v], m64n32 products, cp.async rings whatever the chain mode)
// wherever the planner chose V-slices of 32 (N * HV * V / 64 under ~0.7 SMs), V % 32 == 0, not the tier-3
// state pass, and for GDN with P in the workspace, else V-slice 64; "64" = V-slice 64; any other value is an
// error. Returns the V-slice.
// The workspace does not depend on it.
int gdn_fused_wgp_vs(const GdnFwdParams& p, const GdnChunkWs& ws, int planned_vs);
// Launches of the V-slice 32 instance so far in this process (tests check it really ran).
int64_t gdn_fused_wgp_vs32_launches();
// The V-slice 32 instance itself (gdn_fused_wgp_vs32.cu; launch_gdn_fused_wgp checks its scope).
void launch_gdn_fused_wgp_vs32(const GdnFwdParams& p, const GdnChunkWs& ws, cudaStream_t stream);

}  // namespace linattn::cuda
