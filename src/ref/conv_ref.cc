// fp64 reference of the short conv: one (sequence, channel) at a time over the concat array
// described in conv_ref.h. Loss-free by construction: the backward accumulates into
// dconcat and then splits it into dinitial_state (first W entries) and dx.
#include "ref/conv_ref.h"

#include <cmath>
#include <vector>

#include "core/half.h"
#include "meta/chunk_attn_desc.h"
#include "meta/conv_desc.h"

namespace linattn::ref {

namespace {

double read(const TensorView& t, int64_t off) {
  switch (t.dtype) {
    case DType::kF32: return static_cast<const float*>(t.data)[off];
    case DType::kF64: return static_cast<const double*>(t.data)[off];
    case DType::kBF16: return bf16_bits_to_float(static_cast<const uint16_t*>(t.data)[off]);
    case DType::kF16: return fp16_bits_to_float(static_cast<const uint16_t*>(t.data)[off]);
    default: return 0.0;
  }
}

double at3(const TensorView& t, int64_t i, int64_t j, int64_t k) {
  return read(t, i * t.strides[0] + j * t.strides[1] + k * t.strides[2]);
}

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// One sequence: batch row b, tokens [t0, t0 + len) of that row.
struct Seq {
  int64_t b, t0, len;
};

std::vector<Seq> sequences(const meta::ConvDesc& d, const ConvInputs& in) {
  std::vector<Seq> s;
  if (!d.varlen) {
    for (int64_t b = 0; b < d.B; ++b) s.push_back({b, 0, d.T});
    return s;
  }
  meta::validate_cu_seqlens_host(in.cu_seqlens, d.T, false);
  for (int64_t n = 0; n < d.N; ++n) {
    const int64_t a = meta::read_index(in.cu_seqlens, n), e = meta::read_index(in.cu_seqlens, n + 1);
    s.push_back({0, a, e - a});
  }
  return s;
}

// concat[0..W+len) of one (sequence n, channel c).
std::vector<double> concat_of(const meta::ConvDesc& d, const ConvInputs& in, int64_t n, const Seq& s,
                              int64_t c) {
  std::vector<double> cat(d.W + s.len, 0.0);
  if (d.has_h0)
    for (int64_t k = 0; k < d.W; ++k) cat[k] = read(in.initial_state, (n * d.D + c) * d.W + k);
  for (int64_t t = 0; t < s.len; ++t) cat[d.W + t] = at3(in.x, s.b, s.t0 + t, c);
  return cat;
}

double pre_activation(const meta::ConvDesc& d, const ConvInputs& in, const std::vector<double>& cat,
                      int64_t c, int64_t t) {
  double z = d.has_bias ? read(in.bias, c) : 0.0;
  for (int64_t i = 0; i < d.W; ++i) z += read(in.weight, c * d.W + i) * cat[t + 1 + i];
  return z;
}

}  // namespace

ConvRefFwd conv_ref_fwd(const ConvInputs& in, const ConvOptions& opt) {
  const meta::ConvDesc d = meta::describe_conv(in, opt);
  ConvRefFwd r{Tensor(DType::kF64, {d.B, d.T, d.D}), Tensor(DType::kF64, {d.N, d.D, d.W})};
  double* y = r.y.data<double>();
  double* ht = r.final_state.data<double>();
  for (int64_t i = 0; i < r.y.numel(); ++i) y[i] = 0.0;
  const std::vector<Seq> seqs = sequences(d, in);
  for (int64_t n = 0; n < d.N; ++n) {
    const Seq& s = seqs[n];
    for (int64_t c = 0; c < d.D; ++c) {
      const std::vector<double> cat = concat_of(d, in, n, s, c);
      for (int64_t t = 0; t < s.len; ++t) {
        const double z = pre_activation(d, in, cat, c, t);
        double v = d.act == Activation::kSilu ? z * sigmoid(z) : z;
        if (d.has_residual) v += at3(in.residual, s.b, s.t0 + t, c);
        y[(s.b * d.T + s.t0 + t) * d.D + c] = v;
      }
      for (int64_t k = 0; k < d.W; ++k) ht[(n * d.D + c) * d.W + k] = cat[s.len + k];
    }
  }
  return r;
}

ConvRefGrads conv_ref_bwd(const ConvInputs& in, const TensorView& dy, const TensorView& d_final_state,
                          const ConvOptions& opt) {
  const meta::ConvDesc d = meta::describe_conv(in, opt);
  ConvRefGrads g{Tensor(DType::kF64, {d.B, d.T, d.D}), Tensor(DType::kF64, {d.D, d.W}),
                 Tensor(DType::kF64, {d.D}), Tensor(DType::kF64, {d.B, d.T, d.D}),
                 Tensor(DType::kF64, {d.N, d.D, d.W})};
  for (Tensor* t : {&g.dx, &g.dweight, &g.dbias, &g.dresidual, &g.dinitial_state})
    for (int64_t i = 0; i < t->numel(); ++i) t->set(i, 0.0);
  double* dx = g.dx.data<double>();
  double* dw = g.dweight.data<double>();
  double* db = g.dbias.data<double>();
  double* dres = g.dresidual.data<double>();
  double* dh0 = g.dinitial_state.data<double>();
  const std::vector<Seq> seqs = sequences(d, in);
  for (int64_t n = 0; n < d.N; ++n) {
    const Seq& s = seqs[n];
    for (int64_t c = 0; c < d.D; ++c) {
      const std::vector<double> cat = concat_of(d, in, n, s, c);
      std::vector<double> dcat(cat.size(), 0.0);
      for (int64_t t = 0; t < s.len; ++t) {
        const double g_y = at3(dy, s.b, s.t0 + t, c);
        dres[(s.b * d.T + s.t0 + t) * d.D + c] = g_y;
        double dz = g_y;
        if (d.act == Activation::kSilu) {
          const double z = pre_activation(d, in, cat, c, t), sg = sigmoid(z);
          dz = g_y * sg * (1.0 + z * (1.0 - sg));
        }
        db[c] += dz;
        for (int64_t i = 0; i < d.W; ++i) {
          dw[c * d.W + i] += dz * cat[t + 1 + i];
          dcat[t + 1 + i] += dz * read(in.weight, c * d.W + i);
        }
      }
      if (d_final_state.defined())
        for (int64_t k = 0; k < d.W; ++k) dcat[s.len + k] += read(d_final_state, (n * d.D + c) * d.W + k);
      for (int64_t k = 0; k < d.W; ++k) dh0[(n * d.D + c) * d.W + k] = dcat[k];
      for (int64_t t = 0; t < s.len; ++t) dx[(s.b * d.T + s.t0 + t) * d.D + c] = dcat[d.W + t];
    }
  }
  return g;
}

}  // namespace linattn::ref
