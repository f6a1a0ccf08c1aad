// fp64 reference composition of a GatedDeltaNet / KDA layer for tests: naive GEMMs, a direct
// causal depthwise conv + SiLU, ref::chunk_attn_fwd, and the gated RMSNorm formula. Reads the
// layer's parameters (copied to fp64) so finite differences can perturb them.
#pragma once
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "linattn/layers.h"
#include "ref/chunk_attn_ref.h"

namespace linattn::test {

using ParamMap = std::map<std::string, Tensor>;  // fp64 copies, keyed by FLA name

inline ParamMap params_f64(LinearAttentionLayer& layer) {
  ParamMap m;
  for (auto& p : layer.params()) {
    Tensor h(p.dtype, p.shape);  // layer dtype or fp32, any device
    copy_tensor(h.view(), p.view());
    m.emplace(p.name, h.to(DType::kF64));
  }
  return m;
}

// y[T, out] = x[T, in] @ w[out, in]^T
inline Tensor linear(const Tensor& x, const Tensor& w) {
  const int64_t T = x.shape()[0], in = x.shape()[1], out = w.shape()[0];
  Tensor y(DType::kF64, {T, out});
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i) s += x.get(t * in + i) * w.get(o * in + i);
      y.set(t * out + o, s);
    }
  return y;
}

inline Tensor conv_silu(const Tensor& x, const Tensor& w, const std::vector<int64_t>& cu) {
  const int64_t T = x.shape()[0], D = x.shape()[1], W = w.shape()[1];
  Tensor y(DType::kF64, {T, D});
  for (int64_t t = 0; t < T; ++t) y.set(t * D, 0);  // rows past cu.back() stay 0
  for (size_t n = 0; n + 1 < cu.size(); ++n)
    for (int64_t t = cu[n]; t < cu[n + 1]; ++t)
      for (int64_t d = 0; d < D; ++d) {
        double z = 0;
        for (int64_t i = 0; i < W; ++i) {
          const int64_t src = t - (W - 1) + i;
          if (src >= cu[n]) z += w.get(d * W + i) * x.get(src * D + d);
        }
        y.set(t * D + d, z / (1.0 + std::exp(-z)));
      }
  return y;
}

// y [T, hidden] in fp64 for x [T, hidden] or [1, T, hidden] (rows past cu.back() are padding and give y = 0).
inline Tensor layer_ref_forward(const LayerConfig& c, const ParamMap& P, const Tensor& x,
                                const std::vector<int64_t>& cu) {
  const int64_t T = x.numel() / c.hidden_size, H = c.num_heads, HV = c.num_v_heads, K = c.head_k_dim,
                V = c.head_v_dim;
  const bool kda = c.kind == LayerKind::kKda;
  Tensor xz(DType::kF64, {T, c.hidden_size});  // x as [T, hidden], padding rows zeroed
  for (int64_t i = 0; i < T * c.hidden_size; ++i) xz.set(i, i < cu.back() * c.hidden_size ? x.get(i) : 0.0);
  Tensor q = conv_silu(linear(xz, P.at("q_proj.weight")), P.at("q_conv1d.weight"), cu);
  Tensor k = conv_silu(linear(xz, P.at("k_proj.weight")), P.at("k_conv1d.weight"), cu);
  Tensor v = conv_silu(linear(xz, P.at("v_proj.weight")), P.at("v_conv1d.weight"), cu);
  Tensor g = kda ? linear(linear(xz, P.at("f_proj.0.weight")), P.at("f_proj.1.weight")) : linear(xz, P.at("a_proj.weight"));
  Tensor b = linear(xz, P.at("b_proj.weight"));
  Tensor cut(DType::kI64, {static_cast<int64_t>(cu.size())});
  for (size_t i = 0; i < cu.size(); ++i) cut.set(static_cast<int64_t>(i), static_cast<double>(cu[i]));
  ChunkAttnInputs in;
  auto view4 = [](const Tensor& t, int64_t T_, int64_t h, int64_t d) {
    return TensorView::contiguous(t.view().data, DType::kF64, {1, T_, h, d});
  };
  in.q = view4(q, T, H, K);
  in.k = view4(k, T, H, K);
  in.v = view4(v, T, HV, V);
  in.g = kda ? view4(g, T, HV, K) : TensorView::contiguous(g.view().data, DType::kF64, {1, T, HV});
  in.beta = TensorView::contiguous(b.view().data, DType::kF64, {1, T, HV});
  in.A_log = P.at("A_log").view();
  in.dt_bias = P.at("dt_bias").view();
  in.cu_seqlens = cut.view();
  Tensor o(DType::kF64, {1, T, HV, V});
  for (int64_t i = 0; i < o.numel(); ++i) o.set(i, 0);
  ChunkAttnOptions opt;
  opt.op = kda ? ChunkOp::kKda : ChunkOp::kGdn;
  opt.chunk_size = c.chunk_size;
  opt.use_qk_l2norm_in_kernel = opt.use_gate_in_kernel = opt.use_beta_sigmoid_in_kernel = true;
  opt.allow_neg_eigval = c.allow_neg_eigval;
  opt.has_lower_bound = c.has_lower_bound;
  opt.lower_bound = c.lower_bound;
  opt.safe_gate = c.safe_gate;
  ref::chunk_attn_fwd(in, {o.view(), TensorView{}}, opt);
  Tensor gout = kda ? linear(linear(xz, P.at("g_proj.0.weight")), P.at("g_proj.1.weight")) : linear(xz, P.at("g_proj.weight"));
  const int64_t vd = HV * V;
  if (kda)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < vd; ++i) gout.set(t * vd + i, gout.get(t * vd + i) + P.at("g_proj.1.bias").get(i));
  Tensor normed(DType::kF64, {T, vd});
  const Tensor& w = P.at("o_norm.weight");
  for (int64_t r = 0; r < T * HV; ++r) {
    double ss = 0;
    for (int64_t d = 0; d < V; ++d) ss += o.get(r * V + d) * o.get(r * V + d);
    const double rstd = 1.0 / std::sqrt(ss / V + c.norm_eps);
    for (int64_t d = 0; d < V; ++d) {
      const double gv = gout.get(r * V + d), s = 1.0 / (1.0 + std::exp(-gv));
      normed.set(r * V + d, o.get(r * V + d) * rstd * w.get(d) * (kda ? s : gv * s));
    }
  }
  Tensor y = linear(normed, P.at("o_proj.weight"));
  for (int64_t t = cu.back(); t < T; ++t)
    for (int64_t i = 0; i < c.hidden_size; ++i) y.set(t * c.hidden_size + i, 0);
  return y;
}

}  // namespace linattn::test
