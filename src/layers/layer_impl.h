// Internals of LinearAttentionLayer: the parameter table, the static activation buffers and
// the phases of forward / backward (layer_forward.cc, layer_backward.cc, layer_params.cc).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "linattn/layers.h"

namespace linattn::layers {

// Indices into Impl::params (fixed order per kind).
struct ParamIndex {
  int q, k, v, conv_q, conv_k, conv_v, b, A_log, dt_bias, norm, o;
  int a = -1;                          // GDN: a_proj
  int g = -1;                          // GDN: g_proj
  int f0 = -1, f1 = -1;                // KDA: f_proj.0 / f_proj.1
  int g0 = -1, g1 = -1, g1_bias = -1;  // KDA: g_proj.0 / g_proj.1 (+ bias)
};

// Activation buffers, all [T_max, width] row-major in the layer dtype (rstd and dxf fp32).
struct Acts {
  int64_t T_max = 0, N_max = 0;
  Buffer xz, q_pre, k_pre, v_pre, q, k, v, graw, fmid, beta, o, gmid, gout, rstd, normed, ones;
  // backward; dxf: dx accumulated in fp32 when the layer dtype is not fp32 (then converted)
  Buffer dyz, dnormed, d_o, dgout, dgmid, dq, dk, dv, dgraw, dfmid, dbeta, dq_pre, dk_pre, dv_pre, dxf;
  Buffer cu_probe;  // [N_max + 1] int32 on the layer device: shape-only cu for workspace sizing
  // The chunk op's training cache (ChunkAttnOutputs::saved) for the capacity: a training forward keeps its
  // prep there for the backward (whose workspace need shrinks by as much); 1 byte where none applies.
  Buffer attn_saved;
};

struct Saved {  // what the last training forward was called with
  TensorView x, cu_seqlens, initial_state;
  LayerRunOptions opt;
  int64_t T = 0;
  bool valid = false;
  bool attn_cached = false;  // the forward filled Acts::attn_saved: the backward reads it
};

}  // namespace linattn::layers

namespace linattn {

struct LinearAttentionLayer::Impl {
  LayerConfig cfg;
  Device device;
  std::vector<Param> params;
  layers::ParamIndex idx{};
  layers::Acts acts;
  layers::Saved saved;
  Buffer workspace;  // graph-mode scratch of the chunk and conv ops, sized by reserve()
  // Buffers replaced by a larger reserve() (an eager call over capacity): kept alive, because a
  // captured graph may still point into them (address-or-lifetime).
  std::vector<layers::Acts> retired_acts;
  std::vector<Buffer> retired_workspaces;

  Impl(const LayerConfig& c, Device d);
  DType adt() const { return cfg.dtype; }  // activation / projection-weight dtype
  int add_param(const std::string& name, std::vector<int64_t> shape, bool layer_dtype);
  TensorView P(int i) const { return params[i].view(); }
  TensorView dP(int i) const { return params[i].grad_view(); }
  // [T, width] view of an activation buffer (T rows of the T_max reserved).
  TensorView rows(const Buffer& b, int64_t T, int64_t width, DType dt) const;
  void forward(const TensorView& x, const TensorView& cu, const TensorView& y, const LayerRunOptions& opt,
               const ExecContext& ctx, const TensorView& h0, const TensorView& ht);
  void backward(const TensorView& dy, const TensorView& dx, const ExecContext& ctx);
  void reserve(int64_t T_max, int64_t N_max, const ExecContext& ctx);
  // The op inputs of a call over T tokens (views of the activation buffers).
  ChunkAttnInputs attn_inputs(int64_t T, const TensorView& cu, const TensorView& h0) const;
  ConvInputs conv_inputs(const Buffer& pre, int w, int64_t d, int64_t T, const TensorView& cu) const;
  // Graph-mode workspace bytes for T tokens and cu (every chunk / conv call of forward + backward).
  size_t graph_workspace_bytes(int64_t T, const TensorView& cu, const ExecContext& ctx) const;
  // ctx with the layer's workspace attached (graph mode; checked against the need), else ctx.
  ExecContext op_ctx(const ExecContext& ctx, bool use_graph, int64_t T, const TensorView& cu) const;
  ChunkAttnOptions attn_options(const LayerRunOptions& opt, int64_t N, bool final_state) const;
  // Whether a call over (in, ao) keeps the chunk op's prep in Acts::attn_saved (it fits there).
  bool attn_cache_fits(const ChunkAttnInputs& in, const ChunkAttnOptions& ao) const;
};

}  // namespace linattn
