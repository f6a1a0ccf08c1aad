// Prep v4 of the chunked KDA forward (kda_fwd_prep_v4.cu): same outputs and workspace layout as
// launch_kda_prep (kda_fwd_prep.cu), which dispatches here at BT = 64 with LINATTN_KDA_PREP=v4 (v5: default).
// Every intra-chunk Gram term on TF32 tensor cores through a binary hierarchy of reference rows.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {

// BT = 64 and K = 128 only (checked by the caller).
void launch_kda_prep_v4(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                        int64_t nt_cap, cudaStream_t stream);

}  // namespace linattn::cuda
