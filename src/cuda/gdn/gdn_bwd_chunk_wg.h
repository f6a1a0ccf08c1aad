// The wgmma variant of the GDN backward chunk kernel (gdn_bwd_chunk_wg.cu): same inputs, outputs,
// launch geometry and math as gdn_bwd_chunk.cu, for BT = 64, K = 128, V in {64, 128}, bf16 / fp16
// on sm_90. Environment LINATTN_CUDA_GDN_BWD_CHUNK (read on every call): unset = wg12 since session 16 (V = 128,
// else V2; gdn_bwd_chunk_wg.cu lists every version), "wg3" = V3 (V2 with fewer spills, L2 prefetches and coalesced
// dq / dk stores, same values), "wg2" = the instruction-diet version V2, "wg" = the first version (same math and
// reduction order), "mma" = the mma.sync kernel of gdn_bwd_chunk.cu (A/B runs). Later versions and
// the current default: gdn_bwd_chunk_wg.cu's header ("wg6" = persistent CTAs, "wg6:N" at most N;
// "wg7" = split head loads, "wg8d" = wg7 with the M decays once per head, "wg9" / "wg9d" = wg7 / wg8d with the
// row scalars one global round trip deep and head 1's loaded at head 0's start; "wg11" = wg9d with the
// finishing passes' shared loads ahead of the wgmma waits, the default in session 15; "wg12" = wg11 with a full chunk's
// tiles by TMA and the last finish under the staged stores, the default since session 16, wg11 where its maps fail). A value that names no kernel
// (the removed "wg8", a typo) is an error naming the variable, the value and the accepted values.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/gdn/gdn_bwd_kernels.h"

namespace linattn::cuda {

bool gdn_bwd_chunk_wg_eligible(const GdnFwdParams& f);
void launch_gdn_bwd_chunk_wg(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream);
// Launches of the wg6 (persistent) kernel so far in this process (tests: the variant ran).
int64_t gdn_bwd_chunk_wg6_launches();
// Launches of the wg7 (split-load) kernel so far in this process (tests: the variant ran).
int64_t gdn_bwd_chunk_wg7_launches();
// Launches of the wg8d kernel (wg7 with the M decays once per head) so far in this process.
int64_t gdn_bwd_chunk_wg8d_launches();
// Launches of the wg9 / wg9d kernels (the row scalars one round trip deep) so far in this process.
int64_t gdn_bwd_chunk_wg9_launches();
int64_t gdn_bwd_chunk_wg9d_launches();  // wg9d alone (the default in session 14), explicit only since session 15
// Launches of the wg11 kernel (wg9d with the finishing passes' shared loads ahead of the waits; the default in
// session 15): "wg11", or unset / "wg12" where wg12's tensor maps cannot be built.
int64_t gdn_bwd_chunk_wg11_launches();
// Launches of the wg12 kernel (wg11 with TMA tile loads and the last finish under the stores; the default since
// session 16), explicit or unset.
int64_t gdn_bwd_chunk_wg12_launches();

}  // namespace linattn::cuda
