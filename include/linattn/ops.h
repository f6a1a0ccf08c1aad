// Public ops: chunked GDN / KDA attention (forward, backward) and the short causal conv.
// Semantics follow FLA's chunk_gated_delta_rule / chunk_kda / causal_conv1d (ALGORITHMS.md).
// Lifecycle (ARCHITECTURE.md section 3.6): *_workspace_bytes(desc) sizes the caller's workspace;
// the op validates, plans and runs on the backend of its tensors (all on one device), on the
// caller's stream. With use_graph = true the op takes the fixed-capacity path
// (GRAPH_CONTRACT.md): it never allocates, never reads device data on the host, and every
// mismatch is an Error naming the argument, the expected and the actual value.
#pragma once
#include <cstddef>
#include <cstdint>

#include "linattn/tensor.h"

namespace linattn {

// Where and how an op runs. Outputs and workspace are passed in.
struct ExecContext {
  void* stream = nullptr;        // cudaStream_t on CUDA (nullptr = legacy default); unused on CPU
  void* workspace = nullptr;     // caller-owned scratch (may be null on the eager path)
  size_t workspace_bytes = 0;
  int num_threads = 0;           // CPU: 0 = the library's pool size
};

// ---------------------------------------------------------------- chunked GDN / KDA
enum class ChunkOp : uint8_t { kGdn, kKda };

struct ChunkAttnOptions {
  ChunkOp op = ChunkOp::kGdn;
  double scale = 0.0;                     // 0 = K^-0.5; multiplies the query side of o only
  int chunk_size = 64;                    // BT: 16, 32 or 64 (KDA: 32 or 64 on CUDA)
  bool use_qk_l2norm_in_kernel = false;   // q,k <- x / sqrt(sum x^2 + 1e-6)
  bool use_gate_in_kernel = false;        // g is raw; gate from A_log / dt_bias
  bool use_beta_sigmoid_in_kernel = false;// beta is a logit
  bool allow_neg_eigval = false;          // beta = 2 sigmoid(logit); needs the sigmoid in kernel
  bool state_v_first = false;             // states are [.., V, K] instead of [.., K, V]
  bool has_lower_bound = false;           // KDA: gate = lower_bound * sigmoid(...)
  double lower_bound = 0.0;
  bool safe_gate = false;                 // KDA: caller promises g in [lower_bound, 0)
  bool output_final_state = false;
  // Tier 3, exact in-sequence splitting (ALGORITHMS.md; docs/perf-notes.md "Sequence
  // parallelism"): 0 = the planner decides (splits only when sequences x heads x V-splits leave
  // the threads idle and its cost model says it pays), 1 = never split, s in [2, 4096] = split
  // every sequence into up to s chunk-aligned segments (local states and K x K transitions
  // combined in order, then each segment finished). Results change only by rounding.
  int segments = 0;
  // Graph contract (fixed capacity).
  bool use_graph = false;
  int64_t max_num_seqs = 0;               // must equal cu_seqlens.size(0) - 1 when use_graph
};

// Inputs of one call. Absent optional tensors are default TensorViews.
struct ChunkAttnInputs {
  TensorView q;              // [B, T, H, K]
  TensorView k;              // [B, T, H, K]
  TensorView v;              // [B, T, HV, V]
  TensorView g;              // GDN [B, T, HV]; KDA [B, T, HV, K] (log-decay, or raw if in kernel)
  TensorView beta;           // [B, T, HV] (post-sigmoid, or logit if in kernel)
  TensorView A_log;          // [HV] fp32, optional
  TensorView dt_bias;        // GDN [HV]; KDA [HV * K] or [HV, K]; fp32, optional
  TensorView initial_state;  // [N, HV, K, V] (or [N, HV, V, K] if state_v_first), optional
  TensorView cu_seqlens;     // [N + 1] int32 / int64, optional (then N = B)
  TensorView chunk_indices;  // graph mode, optional: [NT_max, 2] int32
  TensorView chunk_offsets;  // graph mode, optional: [N_max + 1] int32
  // chunk_attn_bwd only, optional: the training cache a chunk_attn_fwd of these same inputs, options
  // and LINATTN_* switches filled (ChunkAttnOutputs::saved); the backward then reads the chunk-local
  // prep from it instead of recomputing it (bitwise the same gradients). Ignored when
  // chunk_attn_saved_bytes is 0.
  const void* saved = nullptr;
  size_t saved_bytes = 0;
};

struct ChunkAttnOutputs {
  TensorView o;              // [B, T, HV, V], dtype of q
  TensorView final_state;    // like initial_state, fp32; required iff output_final_state
  // Optional training cache, on the op's device, 256-B aligned, at least chunk_attn_saved_bytes: the
  // forward writes there what the backward would recompute (FLA keeps its solved A the same way);
  // pass it to chunk_attn_bwd as ChunkAttnInputs::saved. Ignored when chunk_attn_saved_bytes is 0.
  void* saved = nullptr;
  size_t saved_bytes = 0;
};

struct ChunkAttnGrads {      // every present tensor is written; absent ones are skipped
  TensorView dq, dk;         // like q, k
  TensorView dv;             // like v
  TensorView dg;             // like g (w.r.t. the raw gate when the gate is in kernel)
  TensorView dbeta;          // like beta (w.r.t. the logit when the sigmoid is in kernel)
  TensorView dA_log;         // [HV] fp32
  TensorView ddt_bias;       // like dt_bias, fp32
  TensorView dinitial_state; // like initial_state, fp32
};

void chunk_attn_fwd(const ChunkAttnInputs& in, const ChunkAttnOutputs& out,
                    const ChunkAttnOptions& opt, const ExecContext& ctx = {});
// Scratch bytes chunk_attn_fwd needs with this ctx (thread count; the workspace fields are
// ignored), to pass in ctx.workspace (256-B aligned). Without one, eager calls use library-owned
// scratch and captured calls get scratch allocated once at capture, owned by the graph. With
// use_graph it depends only on shapes, options and threads, never on the cu_seqlens data.
size_t chunk_attn_fwd_workspace_bytes(const ChunkAttnInputs& in, const ChunkAttnOptions& opt,
                                      const ExecContext& ctx = {});
// Bytes of the training cache (ChunkAttnOutputs::saved) for these inputs and options: the CUDA chunked
// forward and backward (bf16 / fp16, K 128; not tier 3): the prep's per-token outputs, about
// HV x T x (3 BT) x 2 bytes for GDN (+ 3 HV x T x K x 2 for KDA); 0 where no cache is used (the CPU
// backend, token-by-token and tier-3 paths), and then `saved` is ignored. Depends only on shapes,
// options and LINATTN_* switches (never on the cu_seqlens data).
size_t chunk_attn_saved_bytes(const ChunkAttnInputs& in, const ChunkAttnOptions& opt);
// d_o: [B, T, HV, V]; d_final_state: like final_state, optional.
void chunk_attn_bwd(const ChunkAttnInputs& in, const TensorView& d_o, const TensorView& d_final_state,
                    const ChunkAttnGrads& grads, const ChunkAttnOptions& opt,
                    const ExecContext& ctx = {});
// Scratch bytes chunk_attn_bwd needs with this ctx (same rules as the forward's). The CPU
// backward recomputes the forward and keeps per-chunk states: O(threads x longest sequence x
// K x V) (fixed capacity: the longest possible sequence, B*T tokens). CUDA: per-chunk bf16 states
// and state gradients plus per-token intermediates, O(chunks x HV x K x V) (see docs/perf-notes.md).
size_t chunk_attn_bwd_workspace_bytes(const ChunkAttnInputs& in, const ChunkAttnOptions& opt,
                                      const ExecContext& ctx = {});

// ---------------------------------------------------------------- short causal conv
enum class Activation : uint8_t { kNone, kSilu };

struct ConvOptions {
  Activation activation = Activation::kSilu;
  bool output_final_state = false;
  bool use_graph = false;
  int64_t max_num_seqs = 0;
  int chunk_size = 64;   // token tile for metadata in graph mode
};

struct ConvInputs {
  TensorView x;              // [B, T, D]
  TensorView weight;         // [D, W]
  TensorView bias;           // [D], optional
  TensorView residual;       // [B, T, D], optional
  TensorView initial_state;  // [N, D, W], optional (slot W-1 = newest token)
  TensorView cu_seqlens;     // [N + 1], optional
};

struct ConvOutputs {
  TensorView y;              // [B, T, D], dtype of x
  TensorView final_state;    // [N, D, W], dtype of x; required iff output_final_state
};

struct ConvGrads {
  TensorView dx, dweight, dbias, dresidual, dinitial_state;
};

void conv_fwd(const ConvInputs& in, const ConvOutputs& out, const ConvOptions& opt,
              const ExecContext& ctx = {});
void conv_bwd(const ConvInputs& in, const TensorView& dy, const TensorView& d_final_state,
              const ConvGrads& grads, const ConvOptions& opt, const ExecContext& ctx = {});
// Bytes of ExecContext::workspace that conv_bwd needs for dweight / dbias (fixed-order partial
// sums) with these inputs on their device. use_graph calls must pass at least this much; eager
// calls that pass less allocate it themselves.
size_t conv_bwd_workspace_bytes(const ConvInputs& in, const ConvOptions& opt);

// Library version string, e.g. "0.1.0".
const char* version();

}  // namespace linattn
