// ChunkAttnDesc: the validated, backend-neutral description of one GDN / KDA call, built from
// the public tensors and options. Every backend (ref, cpu, cuda) starts from it; kernels get
// POD params built from it and never see TensorViews.
// Validation names the argument, the expected and the actual value (shape, dtype, device, option).
// cu_seqlens *data* is checked only by validate_cu_seqlens_host (eager path, host-readable data);
// graph mode never reads it on the host (GRAPH_CONTRACT.md section 5).
#pragma once
#include <cstdint>

#include "linattn/ops.h"

namespace linattn::meta {

struct ChunkAttnDesc {
  ChunkOp op = ChunkOp::kGdn;
  int64_t B = 0;         // batch (1 when varlen)
  int64_t T = 0;         // tokens per batch row (total tokens when varlen)
  int64_t H = 0, HV = 0, K = 0, V = 0;
  int64_t G = 1;         // HV / H
  int64_t N = 0;         // sequences: cu_seqlens.size - 1 when varlen, else B
  bool varlen = false;
  DType dtype = DType::kF32;      // q / k / v / o dtype (q's)
  DType v_dtype = DType::kF32;
  DType g_dtype = DType::kF32;
  DType beta_dtype = DType::kF32;
  DType cu_dtype = DType::kI32;
  Device device{};
  double scale = 0.0;             // resolved (never 0)
  int BT = 64;
  bool l2norm = false, gate_in_kernel = false, beta_sigmoid = false, neg_eigval = false;
  bool state_v_first = false, has_lower_bound = false, safe_gate = false;
  double lower_bound = 0.0;
  bool has_h0 = false, has_ht = false, has_A_log = false, has_dt_bias = false;
  bool use_graph = false;
  bool graph_chunk_tables = false;  // caller supplied chunk_indices / chunk_offsets

  int64_t total_tokens() const { return B * T; }
  bool kda() const { return op == ChunkOp::kKda; }
  int64_t gate_width() const { return kda() ? K : 1; }  // gate values per (token, value head)
};

// Validates the inputs and options; throws linattn::Error on any mismatch.
ChunkAttnDesc describe_chunk_attn(const ChunkAttnInputs& in, const ChunkAttnOptions& opt);

// Forward outputs: o [B,T,HV,V] (dtype of q), final_state iff output_final_state.
void check_fwd_outputs(const ChunkAttnDesc& d, const ChunkAttnOutputs& out);
// Backward: d_o like o, d_final_state like final_state (optional), every present grad shaped
// like its input (dA_log / ddt_bias / dinitial_state fp32).
void check_bwd_args(const ChunkAttnDesc& d, const TensorView& d_o, const TensorView& d_final_state,
                    const ChunkAttnGrads& grads);

// Host validation of cu_seqlens data (host memory): starts at 0, non-decreasing, ends <= T.
// `exact_end` additionally requires the last entry to equal total_tokens (eager exact-size path).
void validate_cu_seqlens_host(const TensorView& cu_seqlens, int64_t total_tokens, bool exact_end);

// Reads entry i of an int32/int64 host tensor.
int64_t read_index(const TensorView& t, int64_t i);

// The usual shape/dtype/device checks, shared by every descriptor.
void expect_rank(const TensorView& t, const char* name, int rank);
void expect_dim(const TensorView& t, const char* name, int dim, int64_t expected);
void expect_dtype_float(const TensorView& t, const char* name);
void expect_dtype(const TensorView& t, const char* name, DType expected);
void expect_device(const TensorView& t, const char* name, Device expected);
void expect_contiguous(const TensorView& t, const char* name);  // dense row-major

}  // namespace linattn::meta
