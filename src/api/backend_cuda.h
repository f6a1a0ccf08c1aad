// Entry points of the CUDA backend as seen by the api level. Implemented in
// src/api/backend_cuda.cc: real bodies when built with CUDA (LINATTN_WITH_CUDA), otherwise they
// raise Unsupported naming the missing backend. Only src/api includes this.
#pragma once
#include <cstddef>
#include <string>

#include "linattn/ops.h"
#include "meta/chunk_attn_desc.h"

namespace linattn::api {

void chunk_attn_fwd_cuda(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                         const ChunkAttnOutputs& out, const ChunkAttnOptions& opt,
                         const ExecContext& ctx);
// Tests and benchmarks: force the token-by-token or the chunked kernels (the latter raises when
// the shape cannot take it) and, when vs > 0, the fused kernel's V-slice.
enum class CudaGdnPath { kAuto, kRecurrent, kChunked };
void chunk_attn_fwd_cuda_forced(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                                const ChunkAttnOutputs& out, const ChunkAttnOptions& opt,
                                const ExecContext& ctx, CudaGdnPath path, int vs);
// Bytes of caller workspace the forward needs (0 for the token-by-token path); see
// cuda/gdn/gdn_fwd.h. The eager path allocates it itself when the caller passes less.
size_t chunk_attn_fwd_workspace_bytes_cuda(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                                           const ChunkAttnOptions& opt);
void chunk_attn_bwd_cuda(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                         const TensorView& d_o, const TensorView& d_final_state,
                         const ChunkAttnGrads& grads, const ChunkAttnOptions& opt,
                         const ExecContext& ctx);
// Backward with a forced path (kRecurrent: the token-by-token backward; kChunked raises when the
// shape cannot take it) and, when vs > 0, the sweeps' V-slice. See cuda/gdn/gdn_bwd.h.
void chunk_attn_bwd_cuda_forced(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                                const TensorView& d_o, const TensorView& d_final_state,
                                const ChunkAttnGrads& grads, const ChunkAttnOptions& opt,
                                const ExecContext& ctx, CudaGdnPath path, int vs);
// Segments per sequence the CUDA tier 3 would run for this call (1: tiers 1 / 2), and the
// planner's reason (plan/cuda_seg_plan.h). Tests and benchmarks.
int chunk_attn_cuda_segments(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in, const ChunkAttnOptions& opt,
                             std::string* reason = nullptr);
// Bytes of caller workspace the backward needs (chunked or token path, as planned for aligned
// tensors). The eager path allocates it itself when the caller passes less.
size_t chunk_attn_bwd_workspace_bytes_cuda(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                                           const ChunkAttnOptions& opt);
// Bytes of the training cache (ChunkAttnOutputs::saved) of a CUDA call; 0: none used.
size_t chunk_attn_saved_bytes_cuda(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in,
                                   const ChunkAttnOptions& opt);

}  // namespace linattn::api
