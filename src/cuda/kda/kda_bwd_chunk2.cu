// Variants of the chunked KDA backward's chunk-gradient kernel (same math, grid, smem layout and
// outputs as kda_bwd_chunk.cu; LINATTN_CUDA_KDA_BWD=chunked2 / chunked3 / chunked4 in gdn_bwd.cc; the
// kernel template is in kda_bwd_chunk2_kernel.cuh, its helpers in kda_bwd_chunk2_parts.cuh):
//  chunked2: the per-channel gate work runs on every thread instead of 128 serial 64-step loops:
//    the decays a = e^g are staged element-parallel (BT x K / NT independent gate loads per thread, 8
//    in flight at a time), per-channel decay products of each 16-row block (blk) let eg / egl / egL
//    walk at most 16 rows instead of up to 64, the <S, dS'> row dots run on every thread, and the
//    reverse cumsum + gate chain + partials run as NT / K row groups per channel (group sums exchanged
//    through shared memory, the group's gate derivatives loaded up front).
//  chunked3: chunked2 + the off-diagonal 16 x 16 blocks of the intra-chunk per-channel sums on 3xTF32
//    mma.sync (split precision, ~fp32: see mma_3xtf32). For rows i in block I and columns
//    j < R1 = 16 I (reference row R = R1 - 1): E_ij = E_iR E_Rj with E_iR = prod_{R1<=t<=i} a_t and
//    E_Rj = prod_{j<t<R1} a_t, both products of decays <= 1 (no exponent is ever positive, exact
//    underflow to 0 at gates -1000 / lower_bound -5), so dq2_I = E_IR (.) (daqk_I,<R1 @ (k^ (.) E_R.)),
//    rp_I likewise with dL; the column side mirrors it with R = the last row of block J. Only the
//    diagonal blocks keep the fp32 per-element loops.
//  chunked4 (kdabwd3): chunked3 + the first head's tiles issued together with q / k (the row scales
//    run while they stream), the raw gate loads issued together (one type switch outside them, the gate
//    constants once per (head, channel)) in the decay staging and the gate chain, and at V = 128 the
//    off-diagonal blocks' decay factors (decay_pair, E_iR, E_Rj) read from 8-row-group prefix / suffix
//    product tables built once per (chunk, head) in the dead dS' / y / dO tiles (DecayTab).
// chunked2 / chunked3 verified on the H200 at c050891 (chunked3 the default since).
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/kda/kda_bwd_chunk2_kernel.cuh"

namespace linattn::cuda {

void launch_kda_bwd_chunk2(const GdnBwdParams& p, const GdnBwdWs& w, bool tensor_core_intra, cudaStream_t stream) {
  LINATTN_CHECK(p.f.kda && p.f.K == kK, "kda bwd chunk2 kernel: K must be ", kK, ", got ", p.f.K);
  LINATTN_CHECK(w.nt_cap < (int64_t(1) << 31), "kda bwd chunk2 kernel: too many chunks: ", w.nt_cap);
  tensor_core_intra ? launch_v<3>(p, w, stream) : launch_v<2>(p, w, stream);
}

void launch_kda_bwd_chunk4(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  LINATTN_CHECK(p.f.kda && p.f.K == kK, "kda bwd chunk4 kernel: K must be ", kK, ", got ", p.f.K);
  LINATTN_CHECK(w.nt_cap < (int64_t(1) << 31), "kda bwd chunk4 kernel: too many chunks: ", w.nt_cap);
  launch_v<4>(p, w, stream);
}

}  // namespace linattn::cuda
