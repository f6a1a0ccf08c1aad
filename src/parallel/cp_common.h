// Pieces shared by the CPU context-parallel ops (cp_chunk_attn.cc, cp_conv.cc): the checks a CP
// call opens with (communicator, CPU tensors with a host communicator, eager only, this rank's
// rows), the fp32 record all-gather ([world, record] in rank order), the virtual cu_seqlens
// tensor of a shard, and the rank-ordered sum of a parameter-gradient partial.
#pragma once
#include <vector>

#include "parallel/cp_ops.h"
#include "parallel/cp_shard.h"

namespace linattn::parallel {

// After the caller's own checks (cp.comm set, its tensors defined): `rows` (the op's leading token tensor, `name`, rank
// `ndim`, trailing dims written `dims`, e.g. ", H, K]") must be a CPU tensor with a host
// communicator (else Unsupported: "context-parallel <op> on <device><cpu_only>"), use_graph off,
// and [1, rows of this rank, ...]. Returns this rank's shard of cu_seqlens.
CpShard open_cp_call(const CpContext& cp, const char* op, const char* cpu_only, bool use_graph,
                     const TensorView& cu_seqlens, const TensorView& rows, const char* name, int ndim,
                     const char* dims);

// Every rank's copy of `rec` (same size on every rank), rank r at [r * rec.size()].
std::vector<float> gather_records(const CpContext& cp, const std::vector<float>& rec, const ExecContext& ctx);

// The shard's virtual cu_seqlens as an int64 host tensor [num virtual + 1].
Tensor virtual_cu_tensor(const CpShard& shard);

// dst = the fp32 partial `part` summed over ranks in rank order (fp64 sum, every rank the same),
// or `part` alone when !cp.reduce_param_grads.
void reduce_param_grad(const CpContext& cp, const Tensor& part, const TensorView& dst, const ExecContext& ctx);

}  // namespace linattn::parallel
