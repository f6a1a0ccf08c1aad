// fp64 reference (the executable spec) of chunked GDN / KDA, forward and backward.
// Token-by-token recurrence of ALGORITHMS.md section 2 with every option of section 1: GVA, scale,
// initial/final state in either layout, varlen cu_seqlens (int32/int64, zero-length sequences),
// in-kernel q/k L2 norm, gate (GDN, KDA default and lower_bound forms) and beta sigmoid.
// Host tensors of any float dtype (contiguous, as meta validates); read as double, accumulated in
// double, written in each output's dtype (fp64 is accepted too where the public API demands fp32:
// A_log, dt_bias, KDA initial_state, final_state). No chunking, no threads: opt.chunk_size is
// validated but not used. Padding rows (tokens at or past cu_seqlens[N]) of o are left untouched;
// the gradients of the inputs at those rows are written as 0 (the exact gradient: the op never
// reads them).
#pragma once
#include "linattn/ops.h"

namespace linattn::ref {

// Validates like every backend (meta::describe_chunk_attn, check_fwd_outputs, cu_seqlens data)
// and writes o (rows of every sequence) and final_state (when opt.output_final_state).
void chunk_attn_fwd(const ChunkAttnInputs& in, const ChunkAttnOutputs& out,
                    const ChunkAttnOptions& opt);

// Reverse mode through the recurrence for the loss sum(o * d_o) + sum(final_state * d_final_state)
// (d_final_state optional). Writes every present tensor of `grads`: dq, dk (summed over the G value
// heads of a group), dv, dg (w.r.t. the raw gate when it is in kernel), dbeta (w.r.t. the logit
// when the sigmoid is in kernel), dinitial_state, dA_log, ddt_bias.
void chunk_attn_bwd(const ChunkAttnInputs& in, const TensorView& d_o,
                    const TensorView& d_final_state, const ChunkAttnGrads& grads,
                    const ChunkAttnOptions& opt);

}  // namespace linattn::ref
