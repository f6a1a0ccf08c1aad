// CTA barriers beyond __syncthreads.
#pragma once

namespace linattn::cuda {

// Barrier 0 over every thread of the CTA, reachable by different warps at different program locations: PTX
// `barrier.sync 0` without `.aligned` (__syncthreads is `barrier.sync.aligned 0`, which requires every thread to
// execute the same instruction; warp-uniform roles that each loop over their own barrier calls break that contract
// even where the arrival counts match, and compute-sanitizer synccheck reports it). Each calling warp must be
// converged at the call. Memory ordering as __syncthreads: prior accesses of the participants are performed
// relative to all of them when the barrier completes.
__device__ __forceinline__ void cta_barrier_nonaligned() { asm volatile("barrier.sync 0;" ::: "memory"); }

}  // namespace linattn::cuda
