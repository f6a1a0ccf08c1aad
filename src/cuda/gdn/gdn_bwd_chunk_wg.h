// The wgmma variant of the GDN backward chunk kernel (gdn_bwd_chunk_wg.cu): same inputs, outputs,
// launch geometry and math as gdn_bwd_chunk.cu, for BT = 64, K = 128, V in {64, 128}, bf16 / fp16
// on sm_90. Environment LINATTN_CUDA_GDN_BWD_CHUNK (read on every call): unset = this kernel where
// eligible (the default), "mma" = the mma.sync kernel of gdn_bwd_chunk.cu (A/B runs), "wg2" = this
// kernel's instruction-diet variant (same math and reduction order; opt-in until an H200 A/B).
#pragma once
#include <cuda_runtime.h>

#include "cuda/gdn/gdn_bwd_kernels.h"

namespace linattn::cuda {

bool gdn_bwd_chunk_wg_eligible(const GdnFwdParams& f);
void launch_gdn_bwd_chunk_wg(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream);

}  // namespace linattn::cuda
