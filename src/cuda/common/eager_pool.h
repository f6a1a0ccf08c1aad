// Stream-ordered scratch for eager calls that bring no workspace (the chunk ops, the conv
// backward's partial sums). It comes from a memory pool of linattn's own per device whose
// release threshold is unlimited: freed blocks stay mapped for the next call instead of going
// back to the driver at every synchronization (the device's default pool does that with its
// default threshold 0, and a threshold equal to the largest request still released the
// pool's larger backing blocks: ~130 us per eager layer call on the H200). The caller's default
// pool is left untouched. The pool keeps the largest scratch the process used on that device;
// trim_eager_pool() hands the unused part back. Under stream capture the allocation is an
// ordinary cudaMallocAsync (a graph allocation node owned by the graph).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace linattn::cuda {

// `bytes` of device memory on the current device, ordered on `stream`; free with eager_free.
void* eager_alloc(size_t bytes, cudaStream_t stream);
void eager_free(void* p, cudaStream_t stream);
// Releases the pool's unused memory on the current device (keeps `keep_bytes` mapped).
void trim_eager_pool(size_t keep_bytes = 0);

}  // namespace linattn::cuda
