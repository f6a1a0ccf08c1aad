// Prep v8 of the chunked KDA forward (kda_fwd_prep_v8.cu): prep v6 with fewer shared-memory passes per
// element (see the .cu). Same outputs and workspace layout as launch_kda_prep (kda_fwd_prep.cu), which
// dispatches here at BT = 64 with LINATTN_KDA_PREP=v8 (opt-in; v6 stays the default).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {

// BT = 64 and K = 128 only (checked by the caller). prefetch (LINATTN_KDA_PREP=v8p): also an L2
// prefetch of the inputs of the chunk-table row one SM count ahead (same value head).
void launch_kda_prep_v8(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                        int64_t nt_cap, bool prefetch, cudaStream_t stream);

// Launches of the v8 / v8p kernels in this process (tests check that a forced v8 really ran).
int64_t kda_prep_v8_launches();

// Resident CTAs per SM of the v8 kernel (io dtype bf16 when bf16, else fp16) on the current device,
// with its shared-memory carveout hint set (the design point is 2; tests check it).
int kda_prep_v8_ctas_per_sm(bool bf16);

// Prep v9 (LINATTN_KDA_PREP=v9, opt-in): v8's body with a shorter gate phase (kda_fwd_prep_v9_parts.cuh;
// perf-notes "Prep v9"). Same contract as launch_kda_prep_v8; its own launch counter and occupancy query.
void launch_kda_prep_v9(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                        int64_t nt_cap, cudaStream_t stream);
int64_t kda_prep_v9_launches();
int kda_prep_v9_ctas_per_sm(bool bf16);

}  // namespace linattn::cuda
