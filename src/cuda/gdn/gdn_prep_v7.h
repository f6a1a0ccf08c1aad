// GDN prep v7 (the default 9be645b .. session 12, now v8 = v7 bitwise; LINATTN_CUDA_GDN_PREP=v7 / v6 / v5 / v2 pick older preps, read per call; gdn_prep_v7.cu, perf-notes "Prep v7"): v6's front
// half, then per value head one pass forming the decay once for L and P (v6 formed it twice, P of every head first)
// over the lower 16-column segments only, L / X / Q K^T as packed lower blocks, the diagonal solve in the same phase
// as the L build (2 CTA barriers per value head instead of 3). Same expressions in the same order: bitwise v6's Ab,
// Ai, gam, rq, rk and tma3 records, and P up to the sign of zeros in P's upper triangle.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>

#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {

// LINATTN_CUDA_GDN_PREP, checked: "" (v10 at BT 64 unsplit, else v8), "v8", "v7", "v6", "v5", "v2" or "v10"; any
// other value is an error naming the variable, the value and the accepted ones (no silent fallback to an older prep).
// gdn_prep_v7_env(): v7, v8 or v10 (all launch through launch_gdn_prep_v7); gdn_prep_v8_env(): v8 (the default from
// session 13 to session 15, still the default at BT 32 and with the split; perf-notes "Prep v8": v7's values,
// bitwise, with fewer shared-memory wavefronts and round trips; split as v7).
std::string gdn_prep_switch();
bool gdn_prep_v7_env();
bool gdn_prep_v8_env();
// "v10" or unset (the default since session 15; perf-notes "Prep v10"): v8 on an instruction diet, bitwise v8; BT 64
// unsplit (BT 32 and the split run v8's kernels).
bool gdn_prep_v10_env();
// Whether a BT 64 unsplit prep with G value heads per q / k head runs v10: forced by "v10"; unset where v10 fits as many
// CTAs per SM as v8 (bitwise v8 either way).
bool gdn_prep_v10_runs(int G);
int64_t gdn_prep_v10_launches();  // unsplit v10 launches (a forced split runs v8's split kernel)
int gdn_prep_v10_ctas_per_sm(int G);
// Launches of a v7 / v8 instance so far in this process (tests check it ran).
int64_t gdn_prep_v7_launches();
int64_t gdn_prep_v8_launches();
// Resident CTAs per SM of the bf16 BT-64 v7 / v8 kernel (P written) for G value heads per q/k head.
int gdn_prep_v7_ctas_per_sm(int G);
int gdn_prep_v8_ctas_per_sm(int G);
// Prep split (opt-in, LINATTN_CUDA_GDN_PREP_SPLIT, read per call; v7 only, perf-notes "Prep split"): grid (chunk
// rows, H, S), each CTA the front half (q / k, Gram products) as unsplit and G / S of the q/k head's G value heads:
// bitwise the unsplit outputs. "1" or unset: unsplit (the default); "2" / "4" / "8": S forced (the largest divisor of
// G not above it); "auto": the largest S in {8, 4, 2} dividing G whose grid nt_cap H S (the capacity: graph-safe)
// fits in one wave of resident CTAs (CTAs per SM of the split instance x SMs), else 1. Anything else is an error.
struct GdnPrepSplit {
  int value = 1;  // 0: auto
};
GdnPrepSplit gdn_prep_split_env();
// S for G value heads per q/k head and an unsplit grid of `ctas` CTAs; ctas_per_sm_at(s): resident split CTAs per SM
// at G / s value heads each; sm_count <= 0: the current device's.
int gdn_prep_split_pick(GdnPrepSplit sw, int G, int64_t ctas, const std::function<int(int)>& ctas_per_sm_at,
                        int sm_count = 0);
// Split launches (S > 1) so far in this process (tests check it ran); resident split CTAs per SM (bf16, BT 64, P
// written) at Gs value heads per CTA.
int64_t gdn_prep_split_launches();
int gdn_prep_v7_split_ctas_per_sm(int Gs);
// The v7 prep for io type T (__nv_bfloat16 / __half) and chunk size BT (64 / 32; instantiated in gdn_prep_v7.cu);
// launch_gdn_prep checks K and dispatches.
template <class T, int BT>
void launch_gdn_prep_v7(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices, int64_t nt_cap,
                        cudaStream_t stream);

}  // namespace linattn::cuda
