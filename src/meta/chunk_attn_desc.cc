// Validation of GDN / KDA calls and the ChunkAttnDesc they produce. Every message names the
// argument, the expected and the actual value. Graph-mode specifics (chunk tables, capacity)
// are validated in graph_args; here only their presence is recorded.
#include "meta/chunk_attn_desc.h"

#include <cmath>

#include "core/check.h"
#include "meta/graph_args.h"

namespace linattn::meta {

int64_t read_index(const TensorView& t, int64_t i) {
  const int64_t off = i * t.strides[0];
  return t.dtype == DType::kI64 ? static_cast<const int64_t*>(t.data)[off]
                                : static_cast<const int32_t*>(t.data)[off];
}

void expect_rank(const TensorView& t, const char* name, int rank) {
  LINATTN_CHECK(t.defined(), name, ": expected a tensor of rank ", rank, ", got none");
  LINATTN_CHECK(t.ndim == rank, name, ": expected rank ", rank, ", got rank ", t.ndim, " (shape ",
                t.shape_str(), ")");
}

void expect_dim(const TensorView& t, const char* name, int dim, int64_t expected) {
  LINATTN_CHECK(t.shape[dim] == expected, name, ": expected size ", expected, " in dim ", dim,
                ", got ", t.shape[dim], " (shape ", t.shape_str(), ")");
}

void expect_dtype_float(const TensorView& t, const char* name) {
  LINATTN_CHECK(dtype_is_float(t.dtype), name, ": expected a float dtype (fp32/bf16/fp16/fp64), got ",
                dtype_name(t.dtype));
}

void expect_dtype(const TensorView& t, const char* name, DType expected) {
  LINATTN_CHECK(t.dtype == expected, name, ": expected dtype ", dtype_name(expected), ", got ",
                dtype_name(t.dtype));
}

void expect_device(const TensorView& t, const char* name, Device expected) {
  LINATTN_CHECK(t.device == expected, name, ": expected device ", device_name(expected), ", got ",
                device_name(t.device));
}

void expect_contiguous(const TensorView& t, const char* name) {
  LINATTN_CHECK(t.is_contiguous(), name, ": expected a contiguous (row-major) tensor of shape ",
                t.shape_str(), ", got strides that are not dense");
  LINATTN_CHECK(t.numel() == 0 || t.data != nullptr, name, ": null data pointer for a tensor of shape ",
                t.shape_str());
}

namespace {

void expect_shape(const TensorView& t, const char* name, std::initializer_list<int64_t> shape) {
  expect_rank(t, name, static_cast<int>(shape.size()));
  int i = 0;
  for (int64_t s : shape) expect_dim(t, name, i++, s);
}

void check_common(const TensorView& t, const char* name, Device dev) {
  expect_device(t, name, dev);
  expect_contiguous(t, name);
}

void check_state(const ChunkAttnDesc& d, const TensorView& t, const char* name, bool fp32_only) {
  const int64_t a = d.state_v_first ? d.V : d.K, b = d.state_v_first ? d.K : d.V;
  expect_shape(t, name, {d.N, d.HV, a, b});
  if (fp32_only) expect_dtype(t, name, DType::kF32);
  else expect_dtype_float(t, name);
  check_common(t, name, d.device);
}

}  // namespace

ChunkAttnDesc describe_chunk_attn(const ChunkAttnInputs& in, const ChunkAttnOptions& opt) {
  ChunkAttnDesc d;
  d.op = opt.op;
  const bool kda = opt.op == ChunkOp::kKda;
  expect_rank(in.q, "q", 4);
  expect_dtype_float(in.q, "q");
  d.device = in.q.device;
  d.B = in.q.shape[0];
  d.T = in.q.shape[1];
  d.H = in.q.shape[2];
  d.K = in.q.shape[3];
  d.dtype = in.q.dtype;
  check_common(in.q, "q", d.device);
  LINATTN_CHECK(d.H > 0, "q: expected at least one head (dim 2), got ", d.H);
  LINATTN_CHECK(d.K > 0 && d.K <= 256, "q: head dim K (dim 3) must be in [1, 256], got ", d.K);

  expect_shape(in.k, "k", {d.B, d.T, d.H, d.K});
  expect_dtype(in.k, "k", d.dtype);
  check_common(in.k, "k", d.device);

  expect_rank(in.v, "v", 4);
  expect_dim(in.v, "v", 0, d.B);
  expect_dim(in.v, "v", 1, d.T);
  d.HV = in.v.shape[2];
  d.V = in.v.shape[3];
  LINATTN_CHECK(d.HV > 0 && d.HV % d.H == 0, "v: value heads HV (dim 2) must be a positive multiple of q/k heads H = ",
                d.H, ", got ", d.HV);
  LINATTN_CHECK(d.V > 0 && d.V <= 256, "v: head dim V (dim 3) must be in [1, 256], got ", d.V);
  expect_dtype_float(in.v, "v");
  d.v_dtype = in.v.dtype;
  check_common(in.v, "v", d.device);
  d.G = d.HV / d.H;

  if (kda) expect_shape(in.g, "g", {d.B, d.T, d.HV, d.K});
  else expect_shape(in.g, "g", {d.B, d.T, d.HV});
  expect_dtype_float(in.g, "g");
  d.g_dtype = in.g.dtype;
  check_common(in.g, "g", d.device);

  expect_shape(in.beta, "beta", {d.B, d.T, d.HV});
  expect_dtype_float(in.beta, "beta");
  d.beta_dtype = in.beta.dtype;
  check_common(in.beta, "beta", d.device);

  // Options.
  LINATTN_CHECK(opt.chunk_size == 16 || opt.chunk_size == 32 || opt.chunk_size == 64,
                "chunk_size: expected one of {16, 32, 64}, got ", opt.chunk_size);
  d.BT = opt.chunk_size;
  LINATTN_CHECK(std::isfinite(opt.scale) && opt.scale >= 0.0,
                "scale: expected a finite value > 0 (or 0 for K^-0.5), got ", opt.scale);
  d.scale = opt.scale > 0.0 ? opt.scale : 1.0 / std::sqrt(static_cast<double>(d.K));
  d.l2norm = opt.use_qk_l2norm_in_kernel;
  d.gate_in_kernel = opt.use_gate_in_kernel;
  d.beta_sigmoid = opt.use_beta_sigmoid_in_kernel;
  d.neg_eigval = opt.allow_neg_eigval;
  LINATTN_CHECK(!d.neg_eigval || d.beta_sigmoid,
                "allow_neg_eigval: expected use_beta_sigmoid_in_kernel = true with it, got false");
  d.state_v_first = opt.state_v_first;
  d.has_lower_bound = opt.has_lower_bound;
  d.lower_bound = opt.lower_bound;
  d.safe_gate = opt.safe_gate;
  LINATTN_CHECK(kda || (!opt.has_lower_bound && !opt.safe_gate),
                "lower_bound / safe_gate: KDA-only options, got them with op = gdn");
  if (opt.has_lower_bound)
    LINATTN_CHECK(std::isfinite(opt.lower_bound) && opt.lower_bound < 0.0,
                  "lower_bound: expected a finite negative value, got ", opt.lower_bound);
  if (opt.safe_gate && opt.use_gate_in_kernel)
    LINATTN_CHECK(opt.has_lower_bound && opt.lower_bound >= -5.0,
                  "lower_bound: safe_gate with the gate in kernel needs -5 <= lower_bound < 0, got ",
                  opt.has_lower_bound ? std::to_string(opt.lower_bound) : std::string("none"));

  // Gate parameters.
  d.has_A_log = in.A_log.defined();
  d.has_dt_bias = in.dt_bias.defined();
  if (d.gate_in_kernel) {
    LINATTN_CHECK(d.has_A_log || (kda && d.has_lower_bound),
                  "A_log: required with use_gate_in_kernel", kda ? " (unless lower_bound is set)" : "",
                  ", got none");
  } else {
    LINATTN_CHECK(!d.has_A_log && !d.has_dt_bias,
                  "A_log / dt_bias: only used with use_gate_in_kernel = true, got them with it false");
  }
  if (d.has_A_log) {
    expect_shape(in.A_log, "A_log", {d.HV});
    expect_dtype(in.A_log, "A_log", DType::kF32);
    check_common(in.A_log, "A_log", d.device);
  }
  if (d.has_dt_bias) {
    if (kda) {
      const bool flat = in.dt_bias.ndim == 1;
      if (flat) expect_shape(in.dt_bias, "dt_bias", {d.HV * d.K});
      else expect_shape(in.dt_bias, "dt_bias", {d.HV, d.K});
    } else {
      expect_shape(in.dt_bias, "dt_bias", {d.HV});
    }
    expect_dtype(in.dt_bias, "dt_bias", DType::kF32);
    check_common(in.dt_bias, "dt_bias", d.device);
  }

  // Sequences.
  d.varlen = in.cu_seqlens.defined();
  if (d.varlen) {
    expect_rank(in.cu_seqlens, "cu_seqlens", 1);
    LINATTN_CHECK(in.cu_seqlens.dtype == DType::kI32 || in.cu_seqlens.dtype == DType::kI64,
                  "cu_seqlens: expected dtype int32 or int64, got ", dtype_name(in.cu_seqlens.dtype));
    check_common(in.cu_seqlens, "cu_seqlens", d.device);
    LINATTN_CHECK(in.cu_seqlens.shape[0] >= 2, "cu_seqlens: expected at least 2 entries (N + 1), got ",
                  in.cu_seqlens.shape[0]);
    LINATTN_CHECK(d.B == 1, "q: batch size must be 1 with cu_seqlens (varlen), got B = ", d.B);
    d.cu_dtype = in.cu_seqlens.dtype;
    d.N = in.cu_seqlens.shape[0] - 1;
  } else {
    d.N = d.B;
  }

  d.use_graph = opt.use_graph;
  if (opt.use_graph) {
    // Graph-contract checks with their failure categories (graph_args.h): cu_seqlens present,
    // max_num_seqs == cu_seqlens.size - 1, supplied chunk tables of the exact static shape.
    GraphMetaArgs ga;
    ga.cu_seqlens = in.cu_seqlens;
    ga.chunk_indices = in.chunk_indices;
    ga.chunk_offsets = in.chunk_offsets;
    ga.max_num_seqs = opt.max_num_seqs;
    ga.T_max = d.T;
    ga.BT = d.BT;
    ga.device = d.device;
    check_graph_meta_args(ga);  // (B == 1 follows: cu_seqlens is present, checked above)
  }
  d.graph_chunk_tables = in.chunk_indices.defined() || in.chunk_offsets.defined();
  LINATTN_CHECK(!d.graph_chunk_tables || opt.use_graph,
                "chunk_indices / chunk_offsets: only accepted with use_graph = true");

  d.has_h0 = in.initial_state.defined();
  if (d.has_h0) check_state(d, in.initial_state, "initial_state", kda);
  d.has_ht = opt.output_final_state;
  return d;
}

void check_fwd_outputs(const ChunkAttnDesc& d, const ChunkAttnOutputs& out) {
  expect_shape(out.o, "o", {d.B, d.T, d.HV, d.V});
  expect_dtype(out.o, "o", d.dtype);
  check_common(out.o, "o", d.device);
  if (d.has_ht) {
    check_state(d, out.final_state, "final_state", true);
  } else {
    LINATTN_CHECK(!out.final_state.defined(),
                  "final_state: given but output_final_state = false (expected none)");
  }
}

void check_bwd_args(const ChunkAttnDesc& d, const TensorView& d_o, const TensorView& d_final_state,
                    const ChunkAttnGrads& g) {
  expect_shape(d_o, "d_o", {d.B, d.T, d.HV, d.V});
  expect_dtype_float(d_o, "d_o");
  check_common(d_o, "d_o", d.device);
  if (d_final_state.defined()) check_state(d, d_final_state, "d_final_state", false);
  auto like = [&](const TensorView& t, const char* name, std::initializer_list<int64_t> shape) {
    if (!t.defined()) return;
    expect_shape(t, name, shape);
    expect_dtype_float(t, name);
    check_common(t, name, d.device);
  };
  like(g.dq, "dq", {d.B, d.T, d.H, d.K});
  like(g.dk, "dk", {d.B, d.T, d.H, d.K});
  like(g.dv, "dv", {d.B, d.T, d.HV, d.V});
  if (d.kda()) like(g.dg, "dg", {d.B, d.T, d.HV, d.K});
  else like(g.dg, "dg", {d.B, d.T, d.HV});
  like(g.dbeta, "dbeta", {d.B, d.T, d.HV});
  if (g.dA_log.defined()) {
    LINATTN_CHECK(d.has_A_log, "dA_log: given but there is no A_log input");
    like(g.dA_log, "dA_log", {d.HV});
  }
  if (g.ddt_bias.defined()) {
    LINATTN_CHECK(d.has_dt_bias, "ddt_bias: given but there is no dt_bias input");
    if (d.kda() && g.ddt_bias.ndim == 2) like(g.ddt_bias, "ddt_bias", {d.HV, d.K});
    else like(g.ddt_bias, "ddt_bias", {d.HV * d.gate_width()});
  }
  if (g.dinitial_state.defined()) {
    LINATTN_CHECK(d.has_h0, "dinitial_state: given but there is no initial_state input");
    check_state(d, g.dinitial_state, "dinitial_state", false);
  }
}

void validate_cu_seqlens_host(const TensorView& cu, int64_t total_tokens, bool exact_end) {
  LINATTN_CHECK(cu.device.type == DeviceType::kCPU,
                "cu_seqlens: host validation needs host memory, got ", device_name(cu.device));
  const int64_t n1 = cu.shape[0];
  const int64_t first = read_index(cu, 0);
  LINATTN_CHECK(first == 0, "cu_seqlens[0]: expected 0, got ", first);
  int64_t prev = 0;
  for (int64_t i = 1; i < n1; ++i) {
    const int64_t c = read_index(cu, i);
    LINATTN_CHECK(c >= prev, "cu_seqlens: expected non-decreasing offsets, got cu_seqlens[", i, "] = ", c,
                  " < cu_seqlens[", i - 1, "] = ", prev);
    prev = c;
  }
  LINATTN_CHECK(prev <= total_tokens, "cu_seqlens[", n1 - 1, "]: expected <= T = ", total_tokens,
                ", got ", prev);
  if (exact_end)
    LINATTN_CHECK(prev == total_tokens, "cu_seqlens[", n1 - 1, "]: expected T = ", total_tokens,
                  " (eager exact-size path), got ", prev);
}

}  // namespace linattn::meta
