// CUDA short causal conv (forward and backward) over ConvParams (meta/conv_desc.h), launched on
// the caller's stream; no host synchronization, no host reads of device data. Grids depend only
// on the tensors' shapes (capacity in graph mode), so the launches are graph-capturable. The
// backward's dweight / dbias partials live in p.partials (conv_bwd_partials_floats floats);
// when it is null (eager call without workspace) they are allocated stream-ordered.
#pragma once
#include "meta/conv_desc.h"

namespace linattn::cuda {

void conv_fwd(const meta::ConvParams& p, void* stream);
void conv_bwd(const meta::ConvParams& p, void* stream);
// Whether `stream` (cudaStream_t) is being captured into a CUDA graph.
bool stream_is_capturing(void* stream);

}  // namespace linattn::cuda
