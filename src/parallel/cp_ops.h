// Context-parallel GDN / KDA and short conv: each rank holds a contiguous part of the packed
// token rows (cp_shard.h) and runs the op on its rows; ranks exchange, in one all-gather per
// direction, what crosses a rank boundary (docs/perf-notes.md "Sequence parallelism"):
//  - GDN / KDA forward: each rank's tail segment (the sequence continuing on the next rank) as
//    (transition M, local final state S_loc); a rank's head then starts from
//    S = M_{r-1} (... (M_{r'} h0 + S_loc_{r'}) ...) + S_loc_{r-1} over the ranks of its sequence.
//  - GDN / KDA backward: the forward exchange again (initial states), then each rank's head
//    segment as (M, dS_loc); a rank's tail ends with dS = M^T (... (M^T d_ht + dS_loc)) + dS_loc.
//  - conv: the last W rows of x of every rank (the next rank's initial conv state); backward
//    sends each head's initial-state gradient back to the rows (and h0 slots) it came from.
// Inputs per rank: token tensors of its rows ([1, T_r, ...]); cu_seqlens global [N + 1]
// (undefined: one sequence of all rows); initial_state global. Outputs: token outputs and
// gradients of its rows; final_state rows of the sequences that END on this rank (others left
// untouched); dinitial_state rows of sequences that START on this rank (others written 0, so a
// sum over ranks is the full gradient); parameter gradients (dA_log, ddt_bias, conv dweight /
// dbias) summed over ranks in rank order on every rank when reduce_param_grads, else this rank's
// partial. Results equal the single-device op up to rounding.
// Backends: CPU tensors with a host communicator (thread_comm.h), eager only, rank_offsets and
// cu_seqlens on the host. CUDA tensors with a device communicator (nccl_comm.h; cp_cuda.h):
// rank_offsets and cu_seqlens are device tensors on the op's device, read only by kernels (rank
// metadata on the device: no host synchronization), every exchange an all-gather on ctx.stream;
// with opt.use_graph the call is capturable into a CUDA graph (every rank captures the same
// calls in the same order and the graphs replay together) and needs ctx.workspace of
// cp_*_workspace_bytes (eager calls without one allocate stream-ordered). Every rank must make
// the same calls with the same global shapes, options and present gradients (lockstep).
#pragma once
#include "linattn/ops.h"
#include "parallel/communicator.h"

namespace linattn::parallel {

struct CpContext {
  Communicator* comm = nullptr;
  TensorView rank_offsets;         // [world + 1] int32 / int64 (host for CPU ops, device for CUDA ops):
                                   // rank r has rows [off[r], off[r+1])
  bool reduce_param_grads = true;  // see above
};

void cp_chunk_attn_fwd(const CpContext& cp, const ChunkAttnInputs& in, const ChunkAttnOutputs& out,
                       const ChunkAttnOptions& opt, const ExecContext& ctx = {});
void cp_chunk_attn_bwd(const CpContext& cp, const ChunkAttnInputs& in, const TensorView& d_o,
                       const TensorView& d_final_state, const ChunkAttnGrads& grads, const ChunkAttnOptions& opt,
                       const ExecContext& ctx = {});

// Workspace bytes of the CUDA CP calls (0 for CPU tensors); conv: forward and backward;
// chunk_attn: the forward's, or with backward = true the backward's.
size_t cp_conv_workspace_bytes(const CpContext& cp, const ConvInputs& in, const ConvOptions& opt);
size_t cp_chunk_attn_workspace_bytes(const CpContext& cp, const ChunkAttnInputs& in, const ChunkAttnOptions& opt,
                                     bool backward);

void cp_conv_fwd(const CpContext& cp, const ConvInputs& in, const ConvOutputs& out, const ConvOptions& opt,
                 const ExecContext& ctx = {});
void cp_conv_bwd(const CpContext& cp, const ConvInputs& in, const TensorView& dy, const TensorView& d_final_state,
                 const ConvGrads& grads, const ConvOptions& opt, const ExecContext& ctx = {});

}  // namespace linattn::parallel
