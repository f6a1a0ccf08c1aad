// The extension module linattn._C: thin bindings of the public C++ API (ops.h, dense.h; the
// layers in layer_bind.cc). Tensors arrive through DLPack (NumPy, PyTorch, CuPy, JAX) without
// copies; outputs (and graph-mode workspaces, any byte array) are allocated by the Python layer
// and passed in; `stream` is the caller's cudaStream_t as an integer (PyTorch's current stream).
// The GIL is released while an op runs. `saved` (chunk_attn_fwd writes it, chunk_attn_bwd reads it)
// is the optional training cache of chunk_attn_saved_bytes: raw bytes on the op's device.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <ios>

#include "linattn/error.h"
#include "linattn/ops.h"
#include "tensor_cast.h"

namespace nb = nanobind;
using namespace nb::literals;
using linattn::py::Array;
using linattn::py::OptArray;
using linattn::py::to_bytes;
using linattn::py::to_view;

namespace {

linattn::ChunkAttnOptions attn_options(const std::string& op, double scale, int chunk_size, bool l2norm,
                                       bool gate_in_kernel, bool beta_sigmoid, bool neg_eigval,
                                       bool state_v_first, std::optional<double> lower_bound, bool safe_gate,
                                       bool output_final_state, bool use_graph, int64_t max_num_seqs) {
  linattn::ChunkAttnOptions o;
  if (op != "gdn" && op != "kda")
    throw linattn::Error(linattn::ErrorCode::kInvalidArgument, linattn::FailureCategory::kNone, __FILE__,
                         __LINE__, "op: expected 'gdn' or 'kda', got '" + op + "'");
  o.op = op == "kda" ? linattn::ChunkOp::kKda : linattn::ChunkOp::kGdn;
  o.scale = scale;
  o.chunk_size = chunk_size;
  o.use_qk_l2norm_in_kernel = l2norm;
  o.use_gate_in_kernel = gate_in_kernel;
  o.use_beta_sigmoid_in_kernel = beta_sigmoid;
  o.allow_neg_eigval = neg_eigval;
  o.state_v_first = state_v_first;
  o.has_lower_bound = lower_bound.has_value();
  o.lower_bound = lower_bound.value_or(0.0);
  o.safe_gate = safe_gate;
  o.output_final_state = output_final_state;
  o.use_graph = use_graph;
  o.max_num_seqs = max_num_seqs;
  return o;
}

linattn::ChunkAttnInputs attn_inputs(const Array& q, const Array& k, const Array& v, const Array& g,
                                     const Array& beta, const OptArray& A_log, const OptArray& dt_bias,
                                     const OptArray& h0, const OptArray& cu, const OptArray& ci,
                                     const OptArray& co) {
  linattn::ChunkAttnInputs in;
  in.q = to_view(q, "q");
  in.k = to_view(k, "k");
  in.v = to_view(v, "v");
  in.g = to_view(g, "g");
  in.beta = to_view(beta, "beta");
  in.A_log = to_view(A_log, "A_log");
  in.dt_bias = to_view(dt_bias, "dt_bias");
  in.initial_state = to_view(h0, "initial_state");
  in.cu_seqlens = to_view(cu, "cu_seqlens");
  in.chunk_indices = to_view(ci, "chunk_indices");
  in.chunk_offsets = to_view(co, "chunk_offsets");
  return in;
}

linattn::ExecContext exec(uintptr_t stream, int num_threads, const OptArray& workspace = std::nullopt) {
  linattn::ExecContext c;
  c.stream = reinterpret_cast<void*>(stream);
  c.num_threads = num_threads;
  if (workspace) {  // raw bytes: any dtype, contiguous
    c.workspace = const_cast<void*>(workspace->data());
    c.workspace_bytes = workspace->nbytes();
  }
  return c;
}

}  // namespace

namespace linattn::py {
void bind_layers(nb::module_& m);
}

namespace {
void bind_workspace_sizes(nb::module_& m) {
  m.def(
      "chunk_attn_workspace_bytes",
      [](const std::string& op, bool backward, Array q, Array k, Array v, Array g, Array beta, OptArray A_log,
         OptArray dt_bias, OptArray initial_state, OptArray cu_seqlens, OptArray chunk_indices, OptArray chunk_offsets,
         double scale, int chunk_size, bool l2norm, bool gate_in_kernel, bool beta_sigmoid, bool neg_eigval,
         bool state_v_first, std::optional<double> lower_bound, bool safe_gate, bool output_final_state,
         bool use_graph, int64_t max_num_seqs, int num_threads, OptArray saved) {
        auto in = attn_inputs(q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens, chunk_indices,
                              chunk_offsets);
        const auto cache = to_bytes(saved, in.q.device, "saved");  // the backward's, with a cache, is smaller
        in.saved = cache.data;
        in.saved_bytes = cache.size;
        const auto opt = attn_options(op, scale, chunk_size, l2norm, gate_in_kernel, beta_sigmoid, neg_eigval,
                                      state_v_first, lower_bound, safe_gate, output_final_state, use_graph,
                                      max_num_seqs);
        return backward ? linattn::chunk_attn_bwd_workspace_bytes(in, opt, exec(0, num_threads))
                        : linattn::chunk_attn_fwd_workspace_bytes(in, opt, exec(0, num_threads));
      },
      "op"_a, "backward"_a, "q"_a, "k"_a, "v"_a, "g"_a, "beta"_a, "A_log"_a.none(), "dt_bias"_a.none(),
      "initial_state"_a.none(), "cu_seqlens"_a.none(), "chunk_indices"_a.none(), "chunk_offsets"_a.none(),
      "scale"_a, "chunk_size"_a, "l2norm"_a, "gate_in_kernel"_a, "beta_sigmoid"_a, "neg_eigval"_a,
      "state_v_first"_a, "lower_bound"_a.none(), "safe_gate"_a, "output_final_state"_a, "use_graph"_a,
      "max_num_seqs"_a, "num_threads"_a, "saved"_a.none() = nb::none(),
      "Bytes of caller workspace the chunked forward (backward=False) or backward (given the training cache "
      "`saved` it will read, if any) needs.");
  m.def(
      "chunk_attn_saved_bytes",
      [](const std::string& op, Array q, Array k, Array v, Array g, Array beta, OptArray A_log, OptArray dt_bias,
         OptArray initial_state, OptArray cu_seqlens, OptArray chunk_indices, OptArray chunk_offsets, double scale,
         int chunk_size, bool l2norm, bool gate_in_kernel, bool beta_sigmoid, bool neg_eigval, bool state_v_first,
         std::optional<double> lower_bound, bool safe_gate, bool output_final_state, bool use_graph,
         int64_t max_num_seqs) {
        const auto in = attn_inputs(q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens, chunk_indices,
                                    chunk_offsets);
        const auto opt = attn_options(op, scale, chunk_size, l2norm, gate_in_kernel, beta_sigmoid, neg_eigval,
                                      state_v_first, lower_bound, safe_gate, output_final_state, use_graph,
                                      max_num_seqs);
        return linattn::chunk_attn_saved_bytes(in, opt);
      },
      "op"_a, "q"_a, "k"_a, "v"_a, "g"_a, "beta"_a, "A_log"_a.none(), "dt_bias"_a.none(), "initial_state"_a.none(),
      "cu_seqlens"_a.none(), "chunk_indices"_a.none(), "chunk_offsets"_a.none(), "scale"_a, "chunk_size"_a,
      "l2norm"_a, "gate_in_kernel"_a, "beta_sigmoid"_a, "neg_eigval"_a, "state_v_first"_a, "lower_bound"_a.none(),
      "safe_gate"_a, "output_final_state"_a = false, "use_graph"_a = false, "max_num_seqs"_a = 0,
      "Bytes of the training cache (`saved`) chunk_attn_fwd can fill for chunk_attn_bwd with these inputs and "
      "options; 0 where none applies (CPU, token-by-token and tier-3 paths), and then `saved` is ignored.");
  m.def(
      "conv_bwd_workspace_bytes",
      [](Array x, Array weight, OptArray bias, OptArray residual, OptArray initial_state, OptArray cu_seqlens,
         bool output_final_state, bool use_graph, int64_t max_num_seqs) {
        linattn::ConvInputs in{to_view(x, "x"), to_view(weight, "weight"), to_view(bias, "bias"),
                               to_view(residual, "residual"), to_view(initial_state, "initial_state"),
                               to_view(cu_seqlens, "cu_seqlens")};
        linattn::ConvOptions o;
        o.activation = linattn::Activation::kSilu;
        o.output_final_state = output_final_state;
        o.use_graph = use_graph;
        o.max_num_seqs = max_num_seqs;
        return linattn::conv_bwd_workspace_bytes(in, o);
      },
      "x"_a, "weight"_a, "bias"_a.none(), "residual"_a.none(), "initial_state"_a.none(), "cu_seqlens"_a.none(),
      "output_final_state"_a, "use_graph"_a, "max_num_seqs"_a);
}

}  // namespace

// Initializes the C++ streams of whichever libstdc++ this module runs on before any binding
// formats a message (GCC 13 no longer emits this object per translation unit).
static const std::ios_base::Init linattn_ios_init;

NB_MODULE(_C, m) {
  linattn::py::register_error_translator();
  m.def("version", &linattn::version);
  bind_workspace_sizes(m);
  linattn::py::bind_layers(m);

  m.def(
      "chunk_attn_fwd",
      [](const std::string& op, Array q, Array k, Array v, Array g, Array beta, Array o, OptArray final_state,
         OptArray A_log, OptArray dt_bias, OptArray initial_state, OptArray cu_seqlens, OptArray chunk_indices,
         OptArray chunk_offsets, double scale, int chunk_size, bool l2norm, bool gate_in_kernel, bool beta_sigmoid,
         bool neg_eigval, bool state_v_first, std::optional<double> lower_bound, bool safe_gate, bool use_graph,
         int64_t max_num_seqs, uintptr_t stream, int num_threads, OptArray workspace, OptArray saved) {
        const auto in = attn_inputs(q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens, chunk_indices,
                                    chunk_offsets);
        const auto opt = attn_options(op, scale, chunk_size, l2norm, gate_in_kernel, beta_sigmoid, neg_eigval,
                                      state_v_first, lower_bound, safe_gate, final_state.has_value(), use_graph,
                                      max_num_seqs);
        linattn::ChunkAttnOutputs out{to_view(o, "o"), to_view(final_state, "final_state")};
        const auto cache = to_bytes(saved, in.q.device, "saved");
        out.saved = cache.data;
        out.saved_bytes = cache.size;
        const auto ctx = exec(stream, num_threads, workspace);
        nb::gil_scoped_release nogil;
        linattn::chunk_attn_fwd(in, out, opt, ctx);
      },
      "op"_a, "q"_a, "k"_a, "v"_a, "g"_a, "beta"_a, "o"_a, "final_state"_a.none(), "A_log"_a.none(),
      "dt_bias"_a.none(), "initial_state"_a.none(), "cu_seqlens"_a.none(), "chunk_indices"_a.none(),
      "chunk_offsets"_a.none(), "scale"_a, "chunk_size"_a, "l2norm"_a, "gate_in_kernel"_a, "beta_sigmoid"_a,
      "neg_eigval"_a, "state_v_first"_a, "lower_bound"_a.none(), "safe_gate"_a, "use_graph"_a, "max_num_seqs"_a,
      "stream"_a, "num_threads"_a, "workspace"_a.none() = nb::none(), "saved"_a.none() = nb::none(),
      "Chunked GDN / KDA forward into preallocated outputs (and the training cache `saved`, when given and "
      "chunk_attn_saved_bytes > 0).");

  m.def(
      "chunk_attn_bwd",
      [](const std::string& op, Array q, Array k, Array v, Array g, Array beta, OptArray A_log, OptArray dt_bias,
         OptArray initial_state, OptArray cu_seqlens, OptArray chunk_indices, OptArray chunk_offsets, Array d_o,
         OptArray d_final_state, OptArray dq, OptArray dk, OptArray dv, OptArray dg, OptArray dbeta,
         OptArray dA_log, OptArray ddt_bias, OptArray dh0, double scale, int chunk_size, bool l2norm,
         bool gate_in_kernel, bool beta_sigmoid, bool neg_eigval, bool state_v_first,
         std::optional<double> lower_bound, bool safe_gate, bool use_graph, int64_t max_num_seqs, uintptr_t stream,
         int num_threads, OptArray workspace, OptArray saved) {
        auto in = attn_inputs(q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens, chunk_indices,
                              chunk_offsets);
        const auto cache = to_bytes(saved, in.q.device, "saved");
        in.saved = cache.data;
        in.saved_bytes = cache.size;
        const auto opt = attn_options(op, scale, chunk_size, l2norm, gate_in_kernel, beta_sigmoid, neg_eigval,
                                      state_v_first, lower_bound, safe_gate, false, use_graph, max_num_seqs);
        linattn::ChunkAttnGrads gr;
        gr.dq = to_view(dq, "dq");
        gr.dk = to_view(dk, "dk");
        gr.dv = to_view(dv, "dv");
        gr.dg = to_view(dg, "dg");
        gr.dbeta = to_view(dbeta, "dbeta");
        gr.dA_log = to_view(dA_log, "dA_log");
        gr.ddt_bias = to_view(ddt_bias, "ddt_bias");
        gr.dinitial_state = to_view(dh0, "dinitial_state");
        const auto dov = to_view(d_o, "d_o");
        const auto dht = to_view(d_final_state, "d_final_state");
        const auto ctx = exec(stream, num_threads, workspace);
        nb::gil_scoped_release nogil;
        linattn::chunk_attn_bwd(in, dov, dht, gr, opt, ctx);
      },
      "op"_a, "q"_a, "k"_a, "v"_a, "g"_a, "beta"_a, "A_log"_a.none(), "dt_bias"_a.none(), "initial_state"_a.none(),
      "cu_seqlens"_a.none(), "chunk_indices"_a.none(), "chunk_offsets"_a.none(), "d_o"_a, "d_final_state"_a.none(),
      "dq"_a.none(), "dk"_a.none(), "dv"_a.none(), "dg"_a.none(), "dbeta"_a.none(), "dA_log"_a.none(),
      "ddt_bias"_a.none(), "dinitial_state"_a.none(), "scale"_a, "chunk_size"_a, "l2norm"_a, "gate_in_kernel"_a,
      "beta_sigmoid"_a, "neg_eigval"_a, "state_v_first"_a, "lower_bound"_a.none(), "safe_gate"_a, "use_graph"_a,
      "max_num_seqs"_a, "stream"_a, "num_threads"_a, "workspace"_a.none() = nb::none(), "saved"_a.none() = nb::none(),
      "Chunked GDN / KDA backward into preallocated gradients (reading the forward's training cache `saved`, "
      "when given and chunk_attn_saved_bytes > 0).");

  m.def(
      "conv_fwd",
      [](Array x, Array weight, OptArray bias, OptArray residual, OptArray initial_state, OptArray cu_seqlens,
         Array y, OptArray final_state, const std::string& activation, bool use_graph, int64_t max_num_seqs,
         uintptr_t stream, int num_threads) {
        linattn::ConvInputs in{to_view(x, "x"), to_view(weight, "weight"), to_view(bias, "bias"),
                               to_view(residual, "residual"), to_view(initial_state, "initial_state"),
                               to_view(cu_seqlens, "cu_seqlens")};
        linattn::ConvOptions o;
        if (activation != "silu" && activation != "swish" && activation != "none")
          throw linattn::Error(linattn::ErrorCode::kInvalidArgument, linattn::FailureCategory::kNone, __FILE__,
                               __LINE__, "activation: expected 'silu', 'swish' or None, got '" + activation + "'");
        o.activation = activation == "none" ? linattn::Activation::kNone : linattn::Activation::kSilu;
        o.output_final_state = final_state.has_value();
        o.use_graph = use_graph;
        o.max_num_seqs = max_num_seqs;
        linattn::ConvOutputs out{to_view(y, "y"), to_view(final_state, "final_state")};
        nb::gil_scoped_release nogil;
        linattn::conv_fwd(in, out, o, exec(stream, num_threads));
      },
      "x"_a, "weight"_a, "bias"_a.none(), "residual"_a.none(), "initial_state"_a.none(), "cu_seqlens"_a.none(),
      "y"_a, "final_state"_a.none(), "activation"_a, "use_graph"_a, "max_num_seqs"_a, "stream"_a, "num_threads"_a);

  m.def(
      "conv_bwd",
      [](Array x, Array weight, OptArray bias, OptArray residual, OptArray initial_state, OptArray cu_seqlens,
         Array dy, OptArray d_final_state, OptArray dx, OptArray dweight, OptArray dbias, OptArray dresidual,
         OptArray dh0, const std::string& activation, bool use_graph, int64_t max_num_seqs, uintptr_t stream,
         int num_threads, OptArray workspace) {
        linattn::ConvInputs in{to_view(x, "x"), to_view(weight, "weight"), to_view(bias, "bias"),
                               to_view(residual, "residual"), to_view(initial_state, "initial_state"),
                               to_view(cu_seqlens, "cu_seqlens")};
        linattn::ConvOptions o;
        o.activation = activation == "none" ? linattn::Activation::kNone : linattn::Activation::kSilu;
        o.use_graph = use_graph;
        o.max_num_seqs = max_num_seqs;
        o.output_final_state = d_final_state.has_value();  // the forward returned a final state
        linattn::ConvGrads g{to_view(dx, "dx"), to_view(dweight, "dweight"), to_view(dbias, "dbias"),
                             to_view(dresidual, "dresidual"), to_view(dh0, "dinitial_state")};
        const auto dyv = to_view(dy, "dy");
        const auto dht = to_view(d_final_state, "d_final_state");
        const auto ctx = exec(stream, num_threads, workspace);
        nb::gil_scoped_release nogil;
        linattn::conv_bwd(in, dyv, dht, g, o, ctx);
      },
      "x"_a, "weight"_a, "bias"_a.none(), "residual"_a.none(), "initial_state"_a.none(), "cu_seqlens"_a.none(),
      "dy"_a, "d_final_state"_a.none(), "dx"_a.none(), "dweight"_a.none(), "dbias"_a.none(), "dresidual"_a.none(),
      "dinitial_state"_a.none(), "activation"_a, "use_graph"_a, "max_num_seqs"_a, "stream"_a, "num_threads"_a,
      "workspace"_a.none() = nb::none());
}
