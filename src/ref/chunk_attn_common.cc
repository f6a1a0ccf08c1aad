// Shared pieces of the fp64 GDN / KDA reference: strided element access, the sequence list,
// per-(sequence, value head) input loading with the in-kernel transforms of ALGORITHMS.md
// section 1 (and their local derivatives), state layout conversion and one recurrence step.
#include <cmath>

#include "core/check.h"
#include "core/half.h"
#include "ref/chunk_attn_detail.h"

namespace linattn::ref::detail {
namespace {

constexpr double kL2Eps = 1e-6;  // inside the sqrt, as FLA's l2norm

double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

// FLA's softplus: identity above 20. Its derivative here is that of the piecewise function
// (1 above 20); FLA's backward uses sigmoid(x) there, which differs by < 2.1e-9.
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }
double softplus_grad(double x) { return x > 20.0 ? 1.0 : sigmoid(x); }

// Loads one row of K values and applies the optional L2 norm; returns 1/sqrt(sum x^2 + eps).
double load_qk_row(const TensorView& t, int64_t flat0, int64_t K, bool l2norm, double* out) {
  double ss = 0;
  for (int64_t i = 0; i < K; ++i) {
    out[i] = read(t, flat0 + i);
    ss += out[i] * out[i];
  }
  if (!l2norm) return 1.0;
  const double r = 1.0 / std::sqrt(ss + kL2Eps);
  for (int64_t i = 0; i < K; ++i) out[i] *= r;
  return r;
}

}  // namespace

int64_t flat_offset(const TensorView& t, int64_t flat) {
  int64_t off = 0;
  for (int i = t.ndim - 1; i >= 0; --i) {
    const int64_t n = t.shape[i];
    off += (flat % n) * t.strides[i];
    flat /= n;
  }
  return off;
}

double read(const TensorView& t, int64_t flat) {
  const int64_t o = flat_offset(t, flat);
  switch (t.dtype) {
    case DType::kF64:
      return t.ptr<const double>()[o];
    case DType::kF32:
      return t.ptr<const float>()[o];
    case DType::kF16:
      return fp16_bits_to_float(t.ptr<const uint16_t>()[o]);
    case DType::kBF16:
      return bf16_bits_to_float(t.ptr<const uint16_t>()[o]);
    default:
      break;
  }
  LINATTN_ASSERT(false, "ref: float tensor expected, got ", dtype_name(t.dtype));
  return 0;
}

void write(const TensorView& t, int64_t flat, double value) {
  const int64_t o = flat_offset(t, flat);
  switch (t.dtype) {
    case DType::kF64:
      t.ptr<double>()[o] = value;
      return;
    case DType::kF32:
      t.ptr<float>()[o] = static_cast<float>(value);
      return;
    case DType::kF16:
      t.ptr<uint16_t>()[o] = float_to_fp16_bits(static_cast<float>(value));
      return;
    case DType::kBF16:
      t.ptr<uint16_t>()[o] = float_to_bf16_bits(static_cast<float>(value));
      return;
    default:
      break;
  }
  LINATTN_ASSERT(false, "ref: float tensor expected, got ", dtype_name(t.dtype));
}

TensorView fp64_as_fp32(TensorView t) {
  if (t.defined() && t.dtype == DType::kF64) t.dtype = DType::kF32;
  return t;
}

meta::ChunkAttnDesc describe_and_validate(const ChunkAttnInputs& in, const ChunkAttnOptions& opt) {
  ChunkAttnInputs shown = in;  // the public API's fp32-only tensors may be fp64 here
  shown.initial_state = fp64_as_fp32(in.initial_state);
  shown.A_log = fp64_as_fp32(in.A_log);
  shown.dt_bias = fp64_as_fp32(in.dt_bias);
  meta::ChunkAttnDesc d = meta::describe_chunk_attn(shown, opt);
  LINATTN_CHECK(d.device.type == DeviceType::kCPU,
                "q: the reference runs on host tensors, expected device cpu, got ",
                device_name(d.device));
  if (d.varlen) meta::validate_cu_seqlens_host(in.cu_seqlens, d.total_tokens(), false);
  return d;
}

std::vector<SeqRange> sequences(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in) {
  std::vector<SeqRange> seqs(static_cast<size_t>(d.N));
  for (int64_t n = 0; n < d.N; ++n) {
    if (d.varlen) {
      const int64_t a = meta::read_index(in.cu_seqlens, n);
      seqs[n] = {0, a, meta::read_index(in.cu_seqlens, n + 1) - a};
    } else {
      seqs[n] = {n, 0, d.T};
    }
  }
  return seqs;
}

HeadInputs load_head(const meta::ChunkAttnDesc& d, const ChunkAttnInputs& in, const SeqRange& s,
                     int64_t j) {
  HeadInputs h;
  const int64_t L = s.len, K = d.K, V = d.V, hq = j / d.G;
  h.L = L;
  h.K = K;
  h.V = V;
  h.gw = d.gate_width();
  h.q.resize(L * K);
  h.k.resize(L * K);
  h.q_rstd.resize(L);
  h.k_rstd.resize(L);
  h.v.resize(L * V);
  h.g.resize(L * h.gw);
  h.dg_draw.assign(L * h.gw, 1.0);
  h.dg_dA.assign(L * h.gw, 0.0);
  h.beta.resize(L);
  h.dbeta_draw.assign(L, 1.0);
  const double A = d.has_A_log ? read(in.A_log, j) : 0.0;
  const bool lb_form = d.kda() && d.has_lower_bound;
  LINATTN_ASSERT(!d.gate_in_kernel || d.has_A_log || lb_form, "gate in kernel needs A_log");
  for (int64_t t = 0; t < L; ++t) {
    const int64_t row = s.b * d.T + s.t0 + t;  // token row in [B*T]
    h.q_rstd[t] = load_qk_row(in.q, (row * d.H + hq) * K, K, d.l2norm, &h.q[t * K]);
    h.k_rstd[t] = load_qk_row(in.k, (row * d.H + hq) * K, K, d.l2norm, &h.k[t * K]);
    for (int64_t i = 0; i < V; ++i) h.v[t * V + i] = read(in.v, (row * d.HV + j) * V + i);
    for (int64_t c = 0; c < h.gw; ++c) {
      const int64_t gi = t * h.gw + c;
      const double raw = read(in.g, (row * d.HV + j) * h.gw + c);
      if (!d.gate_in_kernel) {
        h.g[gi] = raw;
        continue;
      }
      const double x = raw + (d.has_dt_bias ? read(in.dt_bias, j * h.gw + c) : 0.0);
      if (!lb_form) {  // -exp(A_log) * softplus(x)
        h.g[gi] = -std::exp(A) * softplus(x);
        h.dg_draw[gi] = -std::exp(A) * softplus_grad(x);
        h.dg_dA[gi] = h.g[gi];
      } else {  // lower_bound * sigmoid(exp(A_log) * x), or lower_bound * sigmoid(x) without A_log
        const double a = d.has_A_log ? std::exp(A) : 1.0;
        const double sg = sigmoid(a * x), ds = d.lower_bound * sg * (1.0 - sg);
        h.g[gi] = d.lower_bound * sg;
        h.dg_draw[gi] = ds * a;
        h.dg_dA[gi] = d.has_A_log ? ds * a * x : 0.0;
      }
    }
    const double b = read(in.beta, row * d.HV + j);
    if (d.beta_sigmoid) {
      const double c = d.neg_eigval ? 2.0 : 1.0, sg = sigmoid(b);
      h.beta[t] = c * sg;
      h.dbeta_draw[t] = c * sg * (1.0 - sg);
    } else {
      h.beta[t] = b;
    }
  }
  return h;
}

int64_t state_index(const meta::ChunkAttnDesc& d, int64_t n, int64_t j, int64_t kk, int64_t vv) {
  const int64_t base = (n * d.HV + j) * d.K * d.V;
  return base + (d.state_v_first ? vv * d.K + kk : kk * d.V + vv);
}

void load_state(const meta::ChunkAttnDesc& d, const TensorView& t, int64_t n, int64_t j,
                double* S) {
  for (int64_t kk = 0; kk < d.K; ++kk)
    for (int64_t vv = 0; vv < d.V; ++vv) S[kk * d.V + vv] = read(t, state_index(d, n, j, kk, vv));
}

void store_state(const meta::ChunkAttnDesc& d, const TensorView& t, int64_t n, int64_t j,
                 const double* S) {
  for (int64_t kk = 0; kk < d.K; ++kk)
    for (int64_t vv = 0; vv < d.V; ++vv) write(t, state_index(d, n, j, kk, vv), S[kk * d.V + vv]);
}

void step(const HeadInputs& h, int64_t t, double* S) {
  const int64_t K = h.K, V = h.V;
  const double* k = &h.k[t * K];
  std::vector<double> e(h.v.begin() + t * V, h.v.begin() + (t + 1) * V);
  for (int64_t kk = 0; kk < K; ++kk) {  // decay first, then predict with the decayed state
    const double f = std::exp(h.log_decay(t, kk));
    for (int64_t vv = 0; vv < V; ++vv) {
      S[kk * V + vv] *= f;
      e[vv] -= S[kk * V + vv] * k[kk];
    }
  }
  for (int64_t kk = 0; kk < K; ++kk)
    for (int64_t vv = 0; vv < V; ++vv) S[kk * V + vv] += h.beta[t] * k[kk] * e[vv];
}

void read_out(const HeadInputs& h, int64_t t, double scale, const double* S, double* o) {
  const int64_t K = h.K, V = h.V;
  for (int64_t vv = 0; vv < V; ++vv) {
    double acc = 0;
    for (int64_t kk = 0; kk < K; ++kk) acc += S[kk * V + vv] * h.q[t * K + kk];
    o[vv] = scale * acc;
  }
}

}  // namespace linattn::ref::detail
