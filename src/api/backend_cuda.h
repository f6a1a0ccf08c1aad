// Entry points of the CUDA backend as seen by the api level. Implemented in
// src/api/backend_cuda.cc: real bodies when built with CUDA (LINATTN_WITH_CUDA), otherwise they
// raise Unsupported naming the missing backend. Only src/api includes this.
#pragma once
#include "linattn/ops.h"
#include "meta/chunk_attn_desc.h"

namespace linattn::api {

void chunk_attn_fwd_cuda(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                         const ChunkAttnOutputs& out, const ChunkAttnOptions& opt,
                         const ExecContext& ctx);
void chunk_attn_bwd_cuda(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                         const TensorView& d_o, const TensorView& d_final_state,
                         const ChunkAttnGrads& grads, const ChunkAttnOptions& opt,
                         const ExecContext& ctx);

}  // namespace linattn::api
