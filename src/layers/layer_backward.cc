// LinearAttentionLayer backward, the forward's phases in reverse. Padding rows of dy are zeroed
// first and the padding rows of every gradient that feeds a weight-gradient GEMM are zeroed
// again after the op that produced it, so padding tokens reach no weight gradient.
// Weight gradients are written (beta = 0 in their first GEMM, fp32 outputs), dx is accumulated in
// place: in dx itself for an fp32 layer, else in the fp32 buffer acts.dxf, converted at the end.
#include "layers/layer_impl.h"
#include "linattn/error.h"

namespace linattn {

void LinearAttentionLayer::Impl::backward(const TensorView& dy, const TensorView& dx, const ExecContext& ctx) {
  if (!saved.valid)
    throw Error(ErrorCode::kInvalidArgument, FailureCategory::kAddressOrLifetime, __FILE__, __LINE__,
                "backward: needs a preceding forward with LayerRunOptions.training = true");
  const int64_t T = saved.T, hid = cfg.hidden_size, H = cfg.num_heads, HV = cfg.num_v_heads,
                K = cfg.head_k_dim, V = cfg.head_v_dim, kd = cfg.key_dim(), vd = cfg.value_dim();
  for (const auto* t : {&dy, &dx})
    if (!(t->defined() && t->ndim == 3 && t->shape[0] == 1 && t->shape[1] == T && t->shape[2] == hid))
      throw Error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__,
                  std::string(t == &dy ? "dy" : "dx") + ": expected shape [1, " + std::to_string(T) + ", " +
                      std::to_string(hid) + "], got " + t->shape_str());
  const Device dev = device;
  const DType dt = adt();
  for (const auto* t : {&dy, &dx})
    if (t->dtype != dt || t->device != dev)
      throw Error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__,
                  std::string(t == &dy ? "dy" : "dx") + ": expected dtype " + dtype_name(dt) + " on " +
                      device_name(dev) + ", got " + dtype_name(t->dtype) + " on " + device_name(t->device));
  const TensorView& cu = saved.cu_seqlens;
  const bool kda = cfg.kind == LayerKind::kKda;
  auto R = [&](const Buffer& b, int64_t w) { return rows(b, T, w, dt); };
  auto S = [&](const Buffer& b, int64_t w) { return TensorView::contiguous(b.data(), dt, {1, T, w}, dev); };
  auto Hd = [&](const Buffer& b, int64_t h, int64_t d) {
    return TensorView::contiguous(b.data(), dt, {1, T, h, d}, dev);
  };
  const TensorView xz = R(acts.xz, hid);
  const bool f32 = dt == DType::kF32;
  const TensorView dx2 = TensorView::contiguous(f32 ? dx.data : acts.dxf.data(), DType::kF32, {T, hid}, dev);

  copy_tensor(R(acts.dyz, hid), TensorView::contiguous(dy.data, dt, {T, hid}, dev), ctx);
  zero_padding_rows(S(acts.dyz, hid), cu, ctx);
  gemm(R(acts.dyz, hid), true, R(acts.normed, vd), false, dP(idx.o), 1, 0, ctx);
  gemm(R(acts.dyz, hid), false, P(idx.o), false, R(acts.dnormed, vd), 1, 0, ctx);
  auto rowsHV = [&](const Buffer& b) { return rows(b, T * HV, V, dt); };
  rms_norm_gated_bwd(rowsHV(acts.o), rowsHV(acts.gout), P(idx.norm), rowsHV(acts.dnormed), rowsHV(acts.d_o),
                     rowsHV(acts.dgout), dP(idx.norm), kda ? NormGate::kSigmoid : NormGate::kSilu, cfg.norm_eps, -1, ctx);
  if (kda) {
    gemm(R(acts.dgout, vd), true, R(acts.gmid, V), false, dP(idx.g1), 1, 0, ctx);
    gemm(R(acts.ones, 1), true, R(acts.dgout, vd), false,
         TensorView::contiguous(params[idx.g1_bias].grad.data(), DType::kF32, {1, vd}, dev), 1, 0, ctx);  // fp32 grad
    gemm(R(acts.dgout, vd), false, P(idx.g1), false, R(acts.dgmid, V), 1, 0, ctx);
    gemm(R(acts.dgmid, V), true, xz, false, dP(idx.g0), 1, 0, ctx);
    gemm(R(acts.dgmid, V), false, P(idx.g0), false, dx2, 1, 0, ctx);
  } else {
    gemm(R(acts.dgout, vd), true, xz, false, dP(idx.g), 1, 0, ctx);
    gemm(R(acts.dgout, vd), false, P(idx.g), false, dx2, 1, 0, ctx);
  }

  const int64_t N = cu.shape[0] - 1;
  const ExecContext wctx = op_ctx(ctx, saved.opt.use_graph, T, cu);
  ChunkAttnInputs in = attn_inputs(T, cu, saved.initial_state);
  if (saved.attn_cached) {  // the forward's prep (Acts::attn_saved), not recomputed
    in.saved = acts.attn_saved.data();
    in.saved_bytes = acts.attn_saved.bytes();
  }
  ChunkAttnGrads g;
  g.dq = Hd(acts.dq, H, K);
  g.dk = Hd(acts.dk, H, K);
  g.dv = Hd(acts.dv, HV, V);
  g.dg = kda ? Hd(acts.dgraw, HV, K) : S(acts.dgraw, HV);
  g.dbeta = S(acts.dbeta, HV);
  g.dA_log = dP(idx.A_log);
  g.ddt_bias = dP(idx.dt_bias);
  chunk_attn_bwd(in, Hd(acts.d_o, HV, V), TensorView{}, g, attn_options(saved.opt, N, false), wctx);
  for (const Buffer* b : {&acts.dgraw, &acts.dbeta}) zero_padding_rows(S(*b, b == &acts.dbeta ? HV : cfg.gate_dim()), cu, ctx);

  if (kda) {
    gemm(R(acts.dgraw, HV * K), true, R(acts.fmid, V), false, dP(idx.f1), 1, 0, ctx);
    gemm(R(acts.dgraw, HV * K), false, P(idx.f1), false, R(acts.dfmid, V), 1, 0, ctx);
    gemm(R(acts.dfmid, V), true, xz, false, dP(idx.f0), 1, 0, ctx);
    gemm(R(acts.dfmid, V), false, P(idx.f0), false, dx2, 1, 1, ctx);
  } else {
    gemm(R(acts.dgraw, HV), true, xz, false, dP(idx.a), 1, 0, ctx);
    gemm(R(acts.dgraw, HV), false, P(idx.a), false, dx2, 1, 1, ctx);
  }
  gemm(R(acts.dbeta, HV), true, xz, false, dP(idx.b), 1, 0, ctx);
  gemm(R(acts.dbeta, HV), false, P(idx.b), false, dx2, 1, 1, ctx);

  ConvOptions co;
  co.activation = Activation::kSilu;
  co.use_graph = saved.opt.use_graph;
  co.max_num_seqs = saved.opt.use_graph ? N : 0;
  const struct { const Buffer *pre, *grad, *dpre; int w, proj; int64_t d; } convs[] = {
      {&acts.q_pre, &acts.dq, &acts.dq_pre, idx.conv_q, idx.q, kd},
      {&acts.k_pre, &acts.dk, &acts.dk_pre, idx.conv_k, idx.k, kd},
      {&acts.v_pre, &acts.dv, &acts.dv_pre, idx.conv_v, idx.v, vd}};
  for (const auto& c : convs) {
    zero_padding_rows(S(*c.grad, c.d), cu, ctx);
    const ConvInputs ci = conv_inputs(*c.pre, c.w, c.d, T, cu);
    ConvGrads cg;
    cg.dx = S(*c.dpre, c.d);
    cg.dweight = dP(c.w);
    conv_bwd(ci, S(*c.grad, c.d), TensorView{}, cg, co, wctx);
    zero_padding_rows(S(*c.dpre, c.d), cu, ctx);
    gemm(R(*c.dpre, c.d), true, xz, false, dP(c.proj), 1, 0, ctx);
    gemm(R(*c.dpre, c.d), false, P(c.proj), false, dx2, 1, 1, ctx);
  }
  if (f32) {
    zero_padding_rows(dx, cu, ctx);
  } else {
    zero_padding_rows(TensorView::contiguous(acts.dxf.data(), DType::kF32, {1, T, hid}, dev), cu, ctx);
    convert_tensor(TensorView::contiguous(dx.data, dt, {T, hid}, dev), dx2, ctx);
  }
}

}  // namespace linattn
