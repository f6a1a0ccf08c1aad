// Where the GDN forward's P = scale M o D o Q K^T is formed (host side): by the prep kernel, stored to
// the workspace and streamed back by the fused kernel (the default), or by the pipelined fused kernel's
// output warpgroup itself (gdn_fused_wgp_pf.cuh), in which case the workspace has no P and the prep
// skips it (gdn_prep.cu, WP = false). The forward carves P only where the prep must write it, and both
// kernels key on ws.P, so the prep and the fused kernel of a call always agree.
#pragma once
#include <cstdint>

#include "cuda/gdn/gdn_params.h"

namespace linattn::cuda {

// Environment LINATTN_CUDA_GDN_P (read per call): "fused" = P formed in the fused kernel wherever
// gdn_p_in_fused allows it; "prep" = the prep writes P; unset / empty = kGdnPFusedDefault (gdn_fwd.cc; false:
// the prep); any other value is an error.
bool gdn_p_fused_env();
// The forward's choice for these parameters and the planned V-slice (gdn_fwd.cc): the switch is on,
// GDN (not KDA), BT 64, and the pipelined kernel is this call's fused kernel (for the tier-3 state
// pass: the pipelined state pass too, which never reads P). The tier-3 fields are ignored, so a
// state pass and the prep of the same virtual problem carve the same workspace.
bool gdn_p_in_fused(const GdnFwdParams& p, int vs);
// Prep v5 (the default since the H200 A/B at 73035b5; LINATTN_CUDA_GDN_PREP=v2, read per call, keeps the
// previous instance): where the prep writes P, it writes every value head's P rows right after the Gram
// products and keeps Q K^T in the shared union (gdn_prep.cu, PE): bitwise the same workspace, ~65 KB
// instead of ~82 KB of shared memory (3 CTAs per SM instead of 2). true unless the variable says v2.
bool gdn_prep_v5_env();
// Launches of the P-forming kernel so far in this process (gdn_fused_wgp.cu; tests check it ran).
int64_t gdn_fused_wgp_pf_launches();

}  // namespace linattn::cuda
