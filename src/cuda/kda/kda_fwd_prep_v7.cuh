// Prep v7 of the chunked KDA forward (kda_fwd_prep_v7.cu): prep v6 with q / k read from global
// memory instead of shared memory, so three CTAs fit per SM. Same outputs and workspace layout as
// launch_kda_prep (kda_fwd_prep.cu), which dispatches here at BT = 64 with LINATTN_KDA_PREP=v7 (opt-in).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {

// BT = 64 and K = 128 only (checked by the caller).
void launch_kda_prep_v7(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                        int64_t nt_cap, cudaStream_t stream);

// Launches of the v7 kernel in this process (tests check that a forced v7 really ran).
int64_t kda_prep_v7_launches();

// Resident CTAs per SM of the v7 kernel (io dtype bf16 when bf16, else fp16) on the current device,
// with its shared-memory carveout hint set (the design point is 3; tests check it).
int kda_prep_v7_ctas_per_sm(bool bf16);

}  // namespace linattn::cuda
