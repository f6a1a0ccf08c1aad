// Prep v5 of the chunked KDA forward (kda_fwd_prep_v5.cu): same outputs and workspace layout as
// launch_kda_prep (kda_fwd_prep.cu), which dispatches here at BT = 64 (the default; LINATTN_KDA_PREP=v4
// or v3 selects the older preps).
// v4's hierarchy of reference rows with fp16 Gram operands of normalised rows and fewer passes.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {

// BT = 64 and K = 128 only (checked by the caller).
void launch_kda_prep_v5(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                        int64_t nt_cap, cudaStream_t stream);

// Launches of the v5 kernel in this process (tests check that a forced v5 really ran).
int64_t kda_prep_v5_launches();

}  // namespace linattn::cuda
