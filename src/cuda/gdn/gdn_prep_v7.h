// GDN prep v7 (the default since 9be645b; LINATTN_CUDA_GDN_PREP=v6 / v5 / v2 pick the older preps, read per call; gdn_prep_v7.cu, perf-notes "Prep v7"): v6's front
// half, then per value head one pass forming the decay once for L and P (v6 formed it twice, P of every head first)
// over the lower 16-column segments only, L / X / Q K^T as packed lower blocks, the diagonal solve in the same phase
// as the L build (2 CTA barriers per value head instead of 3). Same expressions in the same order: bitwise v6's Ab,
// Ai, gam, rq, rk and tma3 records, and P up to the sign of zeros in P's upper triangle.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {

// LINATTN_CUDA_GDN_PREP, checked: "" (v7), "v7", "v6", "v5" or "v2"; any other value is an error naming the
// variable, the value and the accepted ones (no silent fallback to an older prep).
std::string gdn_prep_switch();
bool gdn_prep_v7_env();
// Launches of a v7 instance so far in this process (tests check it ran).
int64_t gdn_prep_v7_launches();
// Resident CTAs per SM of the bf16 BT-64 v7 kernel (P written) for G value heads per q/k head.
int gdn_prep_v7_ctas_per_sm(int G);
// The v7 prep for io type T (__nv_bfloat16 / __half) and chunk size BT (64 / 32; instantiated in gdn_prep_v7.cu);
// launch_gdn_prep checks K and dispatches.
template <class T, int BT>
void launch_gdn_prep_v7(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices, int64_t nt_cap,
                        cudaStream_t stream);

}  // namespace linattn::cuda
