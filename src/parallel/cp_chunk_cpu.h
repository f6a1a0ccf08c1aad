// Internal pieces of the CPU context-parallel GDN / KDA (cp_chunk_attn.cc: the dispatch, the
// shard setup and the first-version exchange; cp_chunk_chain.cc: the chained exchange, default).
// States here are fp32 K-major [HV, K, V] per sequence unless a tensor says otherwise (Dims::at
// maps (n, j, d, c) into the op's layout). Records are fp32 of Dims::record() floats:
//   [0] rank has rows, [1] sequence of the crossing segment or -1, [2] flag (forward: that
//   segment starts on its rank; backward: ends), then M [HV, K, K], then a state [HV, K, V].
#pragma once
#include <cstdint>
#include <vector>

#include "cpu/chunk_params.h"
#include "cpu/seg_pass.h"
#include "parallel/cp_common.h"

namespace linattn::parallel::cpucp {

struct Dims {
  int64_t HV = 0, K = 0, V = 0;
  bool vfirst = false;
  int64_t kv() const { return K * V; }
  int64_t mk() const { return HV * K * K; }  // record offset of the state, less the 4-float header
  int64_t record() const { return 4 + HV * K * (K + V); }
  std::vector<int64_t> state_shape(int64_t n) const {
    return vfirst ? std::vector<int64_t>{n, HV, V, K} : std::vector<int64_t>{n, HV, K, V};
  }
  int64_t at(int64_t n, int64_t j, int64_t d, int64_t c) const {  // element (d, c) of state (n, j)
    return (n * HV + j) * K * V + (vfirst ? c * K + d : d * V + c);
  }
};

// State n of a [N, HV, ...] tensor (any float dtype) into K-major fp32 [HV, K, V]; zeros if absent.
void read_state(const Dims& m, const TensorView& t, int64_t n, float* dst);
void write_state(const Dims& m, const float* src, const TensorView& t, int64_t n);

struct Local {
  CpShard shard;
  Dims m;
  Tensor cu, h0, ht;  // virtual cu_seqlens, initial states (the head's zero until chained), final states
  ChunkAttnInputs vin;
  ChunkAttnOptions vopt;
  cpu::ChunkParams p;  // for the segment passes (compute chunk of the plan)
  int threads = 1;
  std::vector<std::byte> ws;
  bool active() const { return !shard.seqs.empty(); }
  int64_t seg_b = 0, seg_e = 0;
  cpu::SegList one(const CpSeq& s) {  // a one-segment list (valid until the next call)
    seg_b = s.bos;
    seg_e = s.eos;
    return cpu::SegList{1, &seg_b, &seg_e, nullptr};
  }
};

Local prepare(const CpContext& cp, const ChunkAttnInputs& in, const ChunkAttnOptions& opt, const ExecContext& ctx);

// rec (R floats) = the forward record of the first version: the tail's (M, S_loc) from a zero
// start, flag = the tail starts on this rank; header only without a tail.
void tail_record(Local& l, float* rec);

// S (fp32 K-major) = the head's initial state: over the earlier ranks r of its sequence (records
// at all + r * stride), from the rank it starts on: S = M_r h0 + S_r (relative records), or
// S = S_r (absolute: that rank's true final state); then S <- M_r S + S_r for the ranks it crosses.
void chain_head(const Local& l, const ChunkAttnInputs& in, const float* all, int64_t stride, bool absolute_start,
                float* S);

// The first version's sequences (cp_chunk_attn.cc) and the chained ones (cp_chunk_chain.cc).
void chain_fwd(const CpContext& cp, const ChunkAttnInputs& in, const ChunkAttnOutputs& out,
               const ChunkAttnOptions& opt, const ExecContext& ctx);
void chain_bwd(const CpContext& cp, const ChunkAttnInputs& in, const TensorView& d_o,
               const TensorView& d_final_state, const ChunkAttnGrads& grads, const ChunkAttnOptions& opt,
               const ExecContext& ctx);
// The backward's parameter and initial-state gradients after the inner backward (shared).
void finish_bwd(const CpContext& cp, Local& l, const ChunkAttnGrads& grads, const ExecContext& ctx,
                const TensorView& d_o, const Tensor& dht);

}  // namespace linattn::parallel::cpucp
