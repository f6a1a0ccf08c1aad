// Builds the CPU kernels' POD ChunkParams from a validated descriptor and the public tensors.
// Shared by the forward (chunk_attn_fwd.cc) and backward (chunk_attn_bwd.cc) entry points.
#pragma once
#include "cpu/chunk_params.h"
#include "linattn/ops.h"
#include "meta/chunk_attn_desc.h"

namespace linattn::api {

// `out` may be null (backward): o / ht stay null.
cpu::ChunkParams build_chunk_params(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                                    const ChunkAttnOutputs* out);

}  // namespace linattn::api
