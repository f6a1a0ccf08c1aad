// LinearAttentionLayer forward: x -> (zero padding rows) -> q/k/v projections -> SiLU short convs
// -> gate and beta projections -> chunked GDN / KDA (l2norm, gate, beta sigmoid in kernel)
// -> gated RMSNorm (SiLU for GDN, sigmoid for KDA) -> output projection.
// Every call goes through the public ops on ctx.stream, so a CPU graph capture or a CUDA stream
// capture records the whole layer. Activations are in the layer dtype (adt()).
#include "layers/layer_impl.h"
#include "linattn/error.h"

#include <algorithm>

namespace linattn {

namespace {
TensorView heads(const Buffer& b, int64_t T, int64_t h, int64_t d, Device dev, DType dt) {
  return TensorView::contiguous(b.data(), dt, {1, T, h, d}, dev);
}
TensorView seq(const Buffer& b, int64_t T, int64_t w, Device dev, DType dt) {
  return TensorView::contiguous(b.data(), dt, {1, T, w}, dev);
}
}  // namespace

ChunkAttnOptions LinearAttentionLayer::Impl::attn_options(const LayerRunOptions& opt, int64_t N,
                                                          bool final_state) const {
  ChunkAttnOptions o;
  o.op = cfg.kind == LayerKind::kKda ? ChunkOp::kKda : ChunkOp::kGdn;
  o.chunk_size = cfg.chunk_size;
  o.use_qk_l2norm_in_kernel = true;
  o.use_gate_in_kernel = true;
  o.use_beta_sigmoid_in_kernel = true;
  o.allow_neg_eigval = cfg.allow_neg_eigval;
  o.has_lower_bound = cfg.has_lower_bound;
  o.lower_bound = cfg.lower_bound;
  o.safe_gate = cfg.safe_gate;
  o.output_final_state = final_state;
  o.use_graph = opt.use_graph;
  o.max_num_seqs = opt.use_graph ? N : 0;
  return o;
}

ChunkAttnInputs LinearAttentionLayer::Impl::attn_inputs(int64_t T, const TensorView& cu,
                                                        const TensorView& h0) const {
  const int64_t H = cfg.num_heads, HV = cfg.num_v_heads, K = cfg.head_k_dim, V = cfg.head_v_dim;
  const bool kda = cfg.kind == LayerKind::kKda;
  const DType dt = adt();
  ChunkAttnInputs in;
  in.q = heads(acts.q, T, H, K, device, dt);
  in.k = heads(acts.k, T, H, K, device, dt);
  in.v = heads(acts.v, T, HV, V, device, dt);
  in.g = kda ? heads(acts.graw, T, HV, K, device, dt) : seq(acts.graw, T, HV, device, dt);
  in.beta = seq(acts.beta, T, HV, device, dt);
  in.A_log = P(idx.A_log);
  in.dt_bias = P(idx.dt_bias);
  in.initial_state = h0;
  in.cu_seqlens = cu;
  return in;
}

ConvInputs LinearAttentionLayer::Impl::conv_inputs(const Buffer& pre, int w, int64_t d, int64_t T,
                                                   const TensorView& cu) const {
  ConvInputs ci;
  ci.x = seq(pre, T, d, device, adt());
  ci.weight = P(w);
  ci.cu_seqlens = cu;
  return ci;
}

bool LinearAttentionLayer::Impl::attn_cache_fits(const ChunkAttnInputs& in, const ChunkAttnOptions& ao) const {
  const size_t need = chunk_attn_saved_bytes(in, ao);
  return need > 0 && need <= acts.attn_saved.bytes();
}

size_t LinearAttentionLayer::Impl::graph_workspace_bytes(int64_t T, const TensorView& cu,
                                                         const ExecContext& ctx) const {
  LayerRunOptions g;
  g.use_graph = true;
  const int64_t N = cu.shape[0] - 1;
  const ChunkAttnOptions ao = attn_options(g, N, false);
  ChunkAttnInputs bin = attn_inputs(T, cu, {});
  if (attn_cache_fits(bin, ao)) {  // a training backward reads the forward's prep: less workspace
    bin.saved = acts.attn_saved.data();
    bin.saved_bytes = acts.attn_saved.bytes();
  }
  size_t need = std::max(chunk_attn_fwd_workspace_bytes(attn_inputs(T, cu, {}), ao, ctx),
                         chunk_attn_bwd_workspace_bytes(bin, ao, ctx));
  ConvOptions co;
  co.use_graph = true;
  co.max_num_seqs = N;
  need = std::max(need, conv_bwd_workspace_bytes(conv_inputs(acts.q_pre, idx.conv_q, cfg.key_dim(), T, cu), co));
  need = std::max(need, conv_bwd_workspace_bytes(conv_inputs(acts.v_pre, idx.conv_v, cfg.value_dim(), T, cu), co));
  return need;
}

ExecContext LinearAttentionLayer::Impl::op_ctx(const ExecContext& ctx, bool use_graph, int64_t T,
                                               const TensorView& cu) const {
  if (!use_graph) return ctx;
  const size_t need = graph_workspace_bytes(T, cu, ctx);
  if (need > workspace.bytes())
    throw Error(ErrorCode::kInvalidArgument, FailureCategory::kAddressOrLifetime, __FILE__, __LINE__,
                "layer workspace: graph mode needs " + std::to_string(need) + " bytes for T = " + std::to_string(T) +
                    ", N = " + std::to_string(cu.shape[0] - 1) + ", reserved " + std::to_string(workspace.bytes()) +
                    " (call reserve(T_max, N_max) with the graph's capacity before capturing)");
  ExecContext c = ctx;
  c.workspace = workspace.data();
  c.workspace_bytes = workspace.bytes();
  return c;
}

void LinearAttentionLayer::Impl::forward(const TensorView& x, const TensorView& cu, const TensorView& y,
                                         const LayerRunOptions& opt, const ExecContext& ctx,
                                         const TensorView& h0, const TensorView& ht) {
  const int64_t hid = cfg.hidden_size, HV = cfg.num_v_heads, K = cfg.head_k_dim, V = cfg.head_v_dim,
                kd = cfg.key_dim(), vd = cfg.value_dim();
  if (!(x.defined() && x.ndim == 3 && x.shape[0] == 1 && x.shape[2] == hid))
    throw Error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__,
                "x: expected shape [1, T, " + std::to_string(hid) + "], got " + x.shape_str());
  const int64_t T = x.shape[1];
  if (T > acts.T_max) {
    if (opt.use_graph)
      throw Error(ErrorCode::kInvalidArgument, FailureCategory::kAddressOrLifetime, __FILE__, __LINE__,
                  "x: T = " + std::to_string(T) + " exceeds the reserved capacity T_max = " +
                      std::to_string(acts.T_max) + " (graph mode never reallocates)");
    reserve(T, cu.defined() ? cu.shape[0] - 1 : 1, ctx);
  }
  if (!cu.defined())
    throw Error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__,
                "cu_seqlens: required by the layer (use [0, T] for one sequence)");
  const int64_t N = cu.shape[0] - 1;
  const Device dev = device;
  const DType dt = adt();
  if (x.dtype != dt || y.dtype != dt || x.device != dev || y.device != dev)
    throw Error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__,
                std::string("x / y: expected dtype ") + dtype_name(dt) + " on " + device_name(dev) + ", got " +
                    dtype_name(x.dtype) + " / " + dtype_name(y.dtype) + " on " + device_name(x.device) + " / " +
                    device_name(y.device));
  const TensorView x2 = TensorView::contiguous(x.data, dt, {T, hid}, dev);
  const TensorView xz = rows(acts.xz, T, hid, dt);
  copy_tensor(xz, x2, ctx);
  zero_padding_rows(seq(acts.xz, T, hid, dev, dt), cu, ctx);  // garbage padding never reaches a GEMM

  gemm(xz, false, P(idx.q), true, rows(acts.q_pre, T, kd, dt), 1, 0, ctx);
  gemm(xz, false, P(idx.k), true, rows(acts.k_pre, T, kd, dt), 1, 0, ctx);
  gemm(xz, false, P(idx.v), true, rows(acts.v_pre, T, vd, dt), 1, 0, ctx);
  ConvOptions co;
  co.activation = Activation::kSilu;
  co.use_graph = opt.use_graph;
  co.max_num_seqs = opt.use_graph ? N : 0;
  const struct { const Buffer* in; const Buffer* out; int w; int64_t d; } convs[] = {
      {&acts.q_pre, &acts.q, idx.conv_q, kd}, {&acts.k_pre, &acts.k, idx.conv_k, kd}, {&acts.v_pre, &acts.v, idx.conv_v, vd}};
  const ExecContext wctx = op_ctx(ctx, opt.use_graph, T, cu);
  for (const auto& c : convs) {
    ConvOutputs cout;
    cout.y = seq(*c.out, T, c.d, dev, dt);
    conv_fwd(conv_inputs(*c.in, c.w, c.d, T, cu), cout, co, wctx);
  }
  const bool kda = cfg.kind == LayerKind::kKda;
  if (kda) {
    gemm(xz, false, P(idx.f0), true, rows(acts.fmid, T, V, dt), 1, 0, ctx);
    gemm(rows(acts.fmid, T, V, dt), false, P(idx.f1), true, rows(acts.graw, T, HV * K, dt), 1, 0, ctx);
  } else {
    gemm(xz, false, P(idx.a), true, rows(acts.graw, T, HV, dt), 1, 0, ctx);
  }
  gemm(xz, false, P(idx.b), true, rows(acts.beta, T, HV, dt), 1, 0, ctx);

  const ChunkAttnInputs in = attn_inputs(T, cu, h0);
  ChunkAttnOutputs out;
  out.o = heads(acts.o, T, HV, V, dev, dt);
  out.final_state = ht;
  const ChunkAttnOptions ao = attn_options(opt, N, ht.defined());
  const bool cached = opt.training && attn_cache_fits(in, ao);  // keep the prep for backward()
  if (cached) {
    out.saved = acts.attn_saved.data();
    out.saved_bytes = acts.attn_saved.bytes();
  }
  chunk_attn_fwd(in, out, ao, wctx);

  if (kda) {
    gemm(xz, false, P(idx.g0), true, rows(acts.gmid, T, V, dt), 1, 0, ctx);
    const TensorView gout = rows(acts.gout, T, vd, dt);
    gemm(rows(acts.ones, T, 1, dt), false,
         TensorView::contiguous(params[idx.g1_bias].value.data(), dt, {1, vd}, dev), false, gout, 1, 0, ctx);
    gemm(rows(acts.gmid, T, V, dt), false, P(idx.g1), true, gout, 1, 1, ctx);
  } else {
    gemm(xz, false, P(idx.g), true, rows(acts.gout, T, vd, dt), 1, 0, ctx);
  }
  const TensorView normed = rows(acts.normed, T * HV, V, dt);
  rms_norm_gated_fwd(rows(acts.o, T * HV, V, dt), rows(acts.gout, T * HV, V, dt), P(idx.norm),
                     normed, TensorView::contiguous(acts.rstd.data(), DType::kF32, {T * HV}, dev),
                     kda ? NormGate::kSigmoid : NormGate::kSilu, cfg.norm_eps, ctx);
  gemm(rows(acts.normed, T, vd, dt), false, P(idx.o), true,
       TensorView::contiguous(y.data, dt, {T, hid}, dev), 1, 0, ctx);
  saved = {x, cu, h0, opt, T, opt.training, cached};
}

void LinearAttentionLayer::forward(const TensorView& x, const TensorView& cu_seqlens, const TensorView& y,
                                   const LayerRunOptions& opt, const ExecContext& ctx,
                                   const TensorView& initial_state, const TensorView& final_state) {
  if (!(y.defined() && y.ndim == 3 && x.ndim == 3 && y.shape[1] == x.shape[1] && y.shape[2] == x.shape[2]))
    throw Error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__,
                "y: expected the shape of x " + x.shape_str() + ", got " + y.shape_str());
  impl_->forward(x, cu_seqlens, y, opt, ctx, initial_state, final_state);
}

void LinearAttentionLayer::backward(const TensorView& dy, const TensorView& dx, const ExecContext& ctx) {
  impl_->backward(dy, dx, ctx);
}

}  // namespace linattn
