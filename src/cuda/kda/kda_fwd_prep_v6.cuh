// Prep v6 of the chunked KDA forward (kda_fwd_prep_v6.cu): same outputs and workspace layout as
// launch_kda_prep (kda_fwd_prep.cu), which dispatches here at BT = 64 unless LINATTN_KDA_PREP=v3
// (the default since the H200 A/B at 73035b5; =v7 selects prep v7, kda_fwd_prep_v7.cuh). v5 with coalesced
// fused-operand stores and half2 staging.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {

// BT = 64 and K = 128 only (checked by the caller).
void launch_kda_prep_v6(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                        int64_t nt_cap, cudaStream_t stream);

// Launches of the v6 kernel in this process (tests check that a forced v6 really ran).
int64_t kda_prep_v6_launches();

}  // namespace linattn::cuda
