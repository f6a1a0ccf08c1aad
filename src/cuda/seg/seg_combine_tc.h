// Tensor-core combine of tier 3 (seg_combine_tc.cu; opt-in, LINATTN_CUDA_SEG_COMBINE=tc / tc8, seg_pass.h):
// the same walk as seg_combine_kernel (seg_kernels.cu) with each step's M h on mma.sync in 3xTF32.
#pragma once
#include "cuda/seg/seg_pass.h"

namespace linattn::cuda::seg {

// One launch of the forward (rev false; first: from slot 0's final state init_seg) or reverse (rev true: M^T)
// combine with cb = 8 or 16 state columns per CTA; arguments as seg_kernels.cu's launch_combine.
void launch_combine_tc(bool rev, bool first, int cb, const GdnFwdParams& p, const SegTable& t, const void* init,
                       ElemType init_type, const float* init_seg, const float* M, const float* add, float* out,
                       void* stream);

}  // namespace linattn::cuda::seg
