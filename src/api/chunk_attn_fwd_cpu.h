// Internal (non-public) api entry points around the CPU chunked forward, for tools and tests:
// the plan the public op would use (printable), and the token-by-token fp32 path that
// `linattn bench` uses as its in-run baseline. Both validate exactly like chunk_attn_fwd.
#pragma once
#include <string>

#include "linattn/ops.h"

namespace linattn::api {

// The planner's decision for this call on the CPU ("tier 1, v_splits 1 x 128 cols, ...: why").
std::string chunk_attn_fwd_plan(const ChunkAttnInputs& in, const ChunkAttnOptions& opt,
                                const ExecContext& ctx = {});

// Same outputs as chunk_attn_fwd (within tolerance), computed token by token in fp32 on the CPU.
void chunk_attn_fwd_token_recurrent(const ChunkAttnInputs& in, const ChunkAttnOutputs& out,
                                    const ChunkAttnOptions& opt, const ExecContext& ctx = {});

}  // namespace linattn::api
