// linattn._C.Layer: the GatedDeltaNet / KDA layer (layers.h) for Python. Parameters and their
// gradients are exposed without copies as DLPack arrays over the layer's own buffers
// (param_view), so torch.nn.Parameter objects can alias them; forward / backward take DLPack
// x / y / dy / dx / cu_seqlens and the caller's stream. reserve(T_max, N_max, stream) must be
// called on the capture stream before a torch.cuda.graph capture (it creates the cuBLAS state).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <tuple>
#include <vector>

#include "linattn/error.h"
#include "linattn/layers.h"
#include "tensor_cast.h"

namespace linattn::py {

using namespace nanobind::literals;

namespace {

DType parse_dtype(const std::string& s) {
  if (s == "float32" || s == "fp32") return DType::kF32;
  if (s == "bfloat16" || s == "bf16") return DType::kBF16;
  if (s == "float16" || s == "fp16") return DType::kF16;
  throw Error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__,
              "dtype: expected float32, bfloat16 or float16, got '" + s + "'");
}

const char* dtype_str(DType t) {
  switch (t) {
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
    default: return "float32";
  }
}

nb::dlpack::dtype dl_dtype(DType t) {
  switch (t) {
    case DType::kBF16: return {static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
    case DType::kF16: return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    default: return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 32, 1};
  }
}

ExecContext ctx_of(uintptr_t stream) {
  ExecContext c;
  c.stream = reinterpret_cast<void*>(stream);
  return c;
}

}  // namespace

void bind_layers(nb::module_& m) {
  nb::class_<LinearAttentionLayer>(m, "Layer")
      .def(
          "__init__",
          [](LinearAttentionLayer* self, const std::string& kind, int64_t hidden_size, int64_t num_heads,
             int64_t num_v_heads, int64_t head_k_dim, int64_t head_v_dim, int conv_size, float norm_eps,
             int chunk_size, bool allow_neg_eigval, const std::string& dtype, const std::string& device,
             int device_index) {
            LayerConfig c;
            if (kind != "gdn" && kind != "kda")
              throw Error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__,
                          "kind: expected 'gdn' or 'kda', got '" + kind + "'");
            c.kind = kind == "kda" ? LayerKind::kKda : LayerKind::kGatedDeltaNet;
            c.hidden_size = hidden_size;
            c.num_heads = num_heads;
            c.num_v_heads = num_v_heads;
            c.head_k_dim = head_k_dim;
            c.head_v_dim = head_v_dim;
            c.conv_size = conv_size;
            c.norm_eps = norm_eps;
            c.chunk_size = chunk_size;
            c.allow_neg_eigval = allow_neg_eigval;
            c.dtype = parse_dtype(dtype);
            Device d;
            if (device == "cuda") d = Device{DeviceType::kCUDA, device_index};
            else if (device != "cpu")
              throw Error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__,
                          "device: expected 'cpu' or 'cuda', got '" + device + "'");
            new (self) LinearAttentionLayer(c, d);
          },
          "kind"_a, "hidden_size"_a, "num_heads"_a, "num_v_heads"_a, "head_k_dim"_a, "head_v_dim"_a,
          "conv_size"_a = 4, "norm_eps"_a = 1e-5f, "chunk_size"_a = 64, "allow_neg_eigval"_a = false,
          "dtype"_a = "float32", "device"_a = "cpu", "device_index"_a = 0)
      .def("describe", [](const LinearAttentionLayer& l) { return l.config().describe(); })
      .def("params",
           [](LinearAttentionLayer& l) {
             std::vector<std::tuple<std::string, std::vector<int64_t>, std::string>> out;
             for (const auto& p : l.params()) out.emplace_back(p.name, p.shape, dtype_str(p.dtype));
             return out;
           },
           "(name, shape, dtype) of every parameter, in FLA state-dict names")
      .def(
          "param_view",
          [](nb::handle self_h, const std::string& name, bool grad, const std::string& framework) -> nb::object {
            auto& l = nb::cast<LinearAttentionLayer&>(self_h);
            const Param& p = l.param(name);
            const TensorView v = grad ? p.grad_view() : p.view();
            std::vector<size_t> shape(v.shape.begin(), v.shape.begin() + v.ndim);
            const int dev = v.device.type == DeviceType::kCUDA ? nb::device::cuda::value : nb::device::cpu::value;
            const size_t nd = static_cast<size_t>(v.ndim);
            // The owner (the layer object) stays alive as long as the array does.
            if (framework == "torch")
              return nb::cast(nb::ndarray<nb::pytorch>(v.data, nd, shape.data(), self_h, nullptr, dl_dtype(v.dtype),
                                                       dev, v.device.index));
            if (framework == "numpy")
              return nb::cast(nb::ndarray<nb::numpy>(v.data, nd, shape.data(), self_h, nullptr, dl_dtype(v.dtype), dev,
                                                     v.device.index));
            return nb::cast(nb::ndarray<>(v.data, nd, shape.data(), self_h, nullptr, dl_dtype(v.dtype), dev,
                                          v.device.index));
          },
          "name"_a, "grad"_a = false, "framework"_a = "",
          "An array (framework 'torch', 'numpy' or '' for a plain DLPack object) aliasing the parameter's buffer "
          "(or its fp32 gradient's)")
      .def("init_random", &LinearAttentionLayer::init_random, "seed"_a)
      .def("load_safetensors", &LinearAttentionLayer::load_safetensors, "path"_a, "prefix"_a = "")
      .def("save_safetensors", &LinearAttentionLayer::save_safetensors, "path"_a, "prefix"_a = "")
      .def("capacity_tokens", &LinearAttentionLayer::capacity_tokens)
      .def(
          "reserve",
          [](LinearAttentionLayer& l, int64_t T_max, int64_t N_max, uintptr_t stream) {
            l.reserve(T_max, N_max, ctx_of(stream));
          },
          "T_max"_a, "N_max"_a, "stream"_a = 0)
      .def(
          "forward",
          [](LinearAttentionLayer& l, Array x, Array cu_seqlens, Array y, bool use_graph, bool training,
             uintptr_t stream, OptArray initial_state, OptArray final_state) {
            const TensorView xv = to_view(x, "x"), cv = to_view(cu_seqlens, "cu_seqlens"), yv = to_view(y, "y");
            const TensorView h0 = to_view(initial_state, "initial_state"), ht = to_view(final_state, "final_state");
            LayerRunOptions o;
            o.use_graph = use_graph;
            o.training = training;
            nb::gil_scoped_release nogil;
            l.forward(xv, cv, yv, o, ctx_of(stream), h0, ht);
          },
          "x"_a, "cu_seqlens"_a, "y"_a, "use_graph"_a = false, "training"_a = false, "stream"_a = 0,
          "initial_state"_a.none() = nb::none(), "final_state"_a.none() = nb::none())
      .def(
          "backward",
          [](LinearAttentionLayer& l, Array dy, Array dx, uintptr_t stream) {
            const TensorView dyv = to_view(dy, "dy"), dxv = to_view(dx, "dx");
            nb::gil_scoped_release nogil;
            l.backward(dyv, dxv, ctx_of(stream));
          },
          "dy"_a, "dx"_a, "stream"_a = 0);
}

}  // namespace linattn::py
