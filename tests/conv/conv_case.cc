// Implementation of the conv test fixtures (see conv_case.h).
#include "conv_case.h"

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "core/half.h"

namespace linattn::testing {

int64_t ConvCase::real_rows() const {
  if (!varlen()) return B * T;
  int64_t s = 0;
  for (int64_t l : lens) s += l;
  return s;
}

std::string ConvCase::str() const {
  std::ostringstream os;
  os << "B=" << B << " T=" << T << " D=" << D << " W=" << W << " " << dtype_name(dtype);
  if (varlen()) {
    os << " lens=[";
    for (size_t i = 0; i < lens.size(); ++i) os << (i ? "," : "") << lens[i];
    os << "]";
  }
  os << " act=" << (act == Activation::kSilu ? "silu" : "none") << " bias=" << bias
     << " res=" << residual << " h0=" << h0 << " ht=" << ht << " dht=" << dht
     << " strided=" << strided << " graph=" << graph << " small=" << dtype_name(small_dtype)
     << " seed=" << seed;
  return os.str();
}

Rows make_rows(int64_t B, int64_t T, int64_t D, DType dt, bool strided, bool align64) {
  const int64_t pad = strided ? 16 : 0;
  Rows r{Tensor(dt, {B, T, D + pad}), {}, 0};
  r.view = r.store.view();
  r.view.shape[2] = D;
  if (align64) {  // Tensor storage has 64 bytes of slack past its elements
    const auto addr = reinterpret_cast<uintptr_t>(r.view.data);
    r.shift_bytes = static_cast<int64_t>((64 - addr % 64) % 64);
    r.view.data = static_cast<char*>(r.view.data) + r.shift_bytes;
  }
  return r;
}

namespace {

double uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}

void fill(Tensor& t, std::mt19937_64& rng, double scale) {
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, uniform(rng, -scale, scale));
}

bool is_real_row(const ConvData& d, int64_t b, int64_t t) {
  (void)b;
  return !d.c.varlen() || t < d.c.real_rows();
}

// Fills a [B, T, D] view: real rows random in [-scale, scale], padding rows large garbage.
void fill_rows(const ConvData& d, Rows& r, std::mt19937_64& rng, double scale) {
  const TensorView& v = r.view;
  for (int64_t b = 0; b < v.shape[0]; ++b)
    for (int64_t t = 0; t < v.shape[1]; ++t)
      for (int64_t c = 0; c < r.store.shape()[2]; ++c) {
        const bool real = is_real_row(d, b, t) && c < v.shape[2];
        r.store.set((b * v.shape[1] + t) * r.store.shape()[2] + c,
                    real ? uniform(rng, -scale, scale) : uniform(rng, 100.0, 1000.0));
      }
}

}  // namespace

ConvData make_data(const ConvCase& c) {
  ConvData d;
  d.c = c;
  if (c.varlen()) {
    d.c.B = 1;
    d.c.T = std::max(c.T, c.real_rows());
  }
  const ConvCase& k = d.c;
  d.x = make_rows(k.B, k.T, k.D, k.dtype, k.strided);
  d.dy = make_rows(k.B, k.T, k.D, k.dtype, k.strided);
  if (k.residual) d.residual = make_rows(k.B, k.T, k.D, k.dtype, k.strided);
  d.weight = Tensor(k.small_dtype, {k.D, k.W});
  if (k.bias) d.bias = Tensor(k.small_dtype, {k.D});
  if (k.h0) d.h0 = Tensor(k.small_dtype, {k.N(), k.D, k.W});
  if (k.dht) d.dht = Tensor(DType::kF32, {k.N(), k.D, k.W});
  if (k.varlen()) {
    d.cu = Tensor(k.cu_dtype, {k.N() + 1});
    int64_t s = 0;
    d.cu.set(0, 0);
    for (size_t i = 0; i < k.lens.size(); ++i) d.cu.set(static_cast<int64_t>(i) + 1, s += k.lens[i]);
  }
  refill(d, k.seed);
  return d;
}

void refill(ConvData& d, uint64_t seed) {
  std::mt19937_64 rng(seed * 7919 + 17);
  fill_rows(d, d.x, rng, 2.0);
  fill_rows(d, d.dy, rng, 1.0);
  if (d.c.residual) fill_rows(d, d.residual, rng, 1.0);
  fill(d.weight, rng, 1.0);
  if (d.c.bias) fill(d.bias, rng, 0.5);
  if (d.c.h0) fill(d.h0, rng, 2.0);
  if (d.c.dht) fill(d.dht, rng, 1.0);
}

ConvInputs ConvData::inputs() const {
  ConvInputs in;
  in.x = x.view;
  in.weight = weight;
  if (c.bias) in.bias = bias;
  if (c.residual) in.residual = residual.view;
  if (c.h0) in.initial_state = h0;
  if (c.varlen()) in.cu_seqlens = cu;
  return in;
}

ConvOptions ConvData::options() const {
  ConvOptions o;
  o.activation = c.act;
  o.output_final_state = c.ht || c.dht;
  o.use_graph = c.graph;
  o.max_num_seqs = c.graph ? c.N() : 0;
  return o;
}

ConvResults make_results(const ConvData& d, uint64_t seed) {
  const ConvCase& k = d.c;
  ConvResults r;
  r.y = make_rows(k.B, k.T, k.D, k.dtype, k.strided, true);
  r.dx = make_rows(k.B, k.T, k.D, k.dtype, k.strided, true);
  if (k.residual) r.dres = make_rows(k.B, k.T, k.D, k.dtype, k.strided, true);
  if (k.ht || k.dht) r.ht = Tensor(k.dtype, {k.N(), k.D, k.W});
  r.dw = Tensor(k.small_dtype, {k.D, k.W});
  if (k.bias) r.db = Tensor(k.small_dtype, {k.D});
  if (k.h0) r.dh0 = Tensor(k.small_dtype, {k.N(), k.D, k.W});
  refill_results(r, seed);
  return r;
}

void refill_results(ConvResults& r, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (Tensor* t : {&r.y.store, &r.dx.store, &r.dres.store, &r.ht, &r.dw, &r.db, &r.dh0})
    if (t->defined()) fill(*t, rng, 500.0);
}

ConvResults clone(const ConvResults& r) {
  // Tensor copies are shallow: new storage of the same size, then the raw bytes including the
  // 64-byte slack (shifted views end inside it).
  ConvResults c;
  for (auto [dst, src] : {std::pair{&c.y, &r.y}, {&c.dx, &r.dx}, {&c.dres, &r.dres}}) {
    if (!src->store.defined()) continue;
    dst->store = Tensor(src->store.dtype(), src->store.shape());
    std::memcpy(dst->store.view().data, src->store.view().data,
                static_cast<size_t>(src->store.numel()) * dtype_size(src->store.dtype()) + 64);
    dst->view = src->view;
    dst->shift_bytes = src->shift_bytes;
    dst->view.data = static_cast<char*>(dst->store.view().data) + src->shift_bytes;
  }
  for (auto [dst, src] : {std::pair{&c.ht, &r.ht}, {&c.dw, &r.dw}, {&c.db, &r.db}, {&c.dh0, &r.dh0}})
    if (src->defined()) *dst = src->to(src->dtype());
  return c;
}

ConvOutputs ConvResults::outputs() const {
  ConvOutputs o;
  o.y = y.view;
  if (ht.defined()) o.final_state = ht;
  return o;
}

ConvGrads ConvResults::grads() const {
  ConvGrads g;
  g.dx = dx.view;
  g.dweight = dw;
  if (db.defined()) g.dbias = db;
  if (dres.store.defined()) g.dresidual = dres.view;
  if (dh0.defined()) g.dinitial_state = dh0;
  return g;
}

double rtol_of(DType t) {
  switch (t) {
    case DType::kBF16: return 1.0 / 256;
    case DType::kF16: return 1.0 / 1024;
    default: return 2e-6;
  }
}

namespace {

double view_get(const TensorView& v, int64_t b, int64_t t, int64_t c) {
  const int64_t off = b * v.strides[0] + t * v.strides[1] + c * v.strides[2];
  switch (v.dtype) {
    case DType::kF32: return static_cast<const float*>(v.data)[off];
    case DType::kF64: return static_cast<const double*>(v.data)[off];
    case DType::kBF16: return bf16_bits_to_float(static_cast<const uint16_t*>(v.data)[off]);
    case DType::kF16: return fp16_bits_to_float(static_cast<const uint16_t*>(v.data)[off]);
    default: return NAN;
  }
}

// |g - r| in units of the tolerance (0 when equal, NaN when either is NaN).
double excess_of(double g, double r, double rtol, double atol) {
  const double diff = std::fabs(g - r);
  return diff == 0 ? 0.0 : diff / (atol + rtol * std::fabs(r));
}

}  // namespace

::testing::AssertionResult close_rows(const char* name, const ConvData& d, const TensorView& got,
                                      const Tensor& ref, double rtol, double atol) {
  double worst = 0;
  int64_t wb = -1, wt = -1, wc = -1;
  double wg = 0, wr = 0;
  for (int64_t b = 0; b < d.c.B; ++b)
    for (int64_t t = 0; t < d.c.T; ++t) {
      if (!is_real_row(d, b, t)) continue;
      for (int64_t c = 0; c < d.c.D; ++c) {
        const double g = view_get(got, b, t, c), r = ref.get((b * d.c.T + t) * d.c.D + c);
        const double excess = excess_of(g, r, rtol, atol);
        if (!(excess <= worst)) {
          worst = std::isnan(excess) ? INFINITY : excess;
          wb = b, wt = t, wc = c, wg = g, wr = r;
        }
      }
    }
  if (worst <= 1.0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << name << ": worst at (b=" << wb << ", t=" << wt << ", c=" << wc
                                       << "): got " << wg << ", ref " << wr << " (error "
                                       << std::fabs(wg - wr) << ", " << worst << "x the tolerance)";
}

::testing::AssertionResult close_flat(const char* name, const Tensor& got, const Tensor& ref, double rtol,
                                      double atol) {
  double worst = 0, wg = 0, wr = 0;
  int64_t wi = -1;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double g = got.get(i), r = ref.get(i);
    const double excess = excess_of(g, r, rtol, atol);
    if (!(excess <= worst)) {
      worst = std::isnan(excess) ? INFINITY : excess;
      wi = i, wg = g, wr = r;
    }
  }
  if (worst <= 1.0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << name << ": worst at flat index " << wi << ": got " << wg
                                       << ", ref " << wr << " (" << worst << "x the tolerance)";
}

::testing::AssertionResult padding_untouched(const char* name, const ConvData& d, const TensorView& got,
                                             const TensorView& before) {
  for (int64_t b = 0; b < d.c.B; ++b)
    for (int64_t t = 0; t < d.c.T; ++t) {
      if (is_real_row(d, b, t)) continue;
      for (int64_t c = 0; c < d.c.D; ++c) {
        const double g = view_get(got, b, t, c), w = view_get(before, b, t, c);
        if (std::memcmp(&g, &w, sizeof g) != 0)
          return ::testing::AssertionFailure() << name << ": padding row t=" << t << " c=" << c
                                               << " changed from " << w << " to " << g;
      }
    }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_rows(const char* name, const ConvData& d, const TensorView& a,
                                     const TensorView& b2) {
  for (int64_t b = 0; b < d.c.B; ++b)
    for (int64_t t = 0; t < d.c.T; ++t) {
      if (!is_real_row(d, b, t)) continue;
      for (int64_t c = 0; c < d.c.D; ++c) {
        const double x = view_get(a, b, t, c), y = view_get(b2, b, t, c);
        if (std::memcmp(&x, &y, sizeof x) != 0)
          return ::testing::AssertionFailure() << name << ": differs at (b=" << b << ", t=" << t
                                               << ", c=" << c << "): " << x << " vs " << y;
      }
    }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_flat(const char* name, const Tensor& a, const Tensor& b) {
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.get(i), y = b.get(i);
    if (std::memcmp(&x, &y, sizeof x) != 0)
      return ::testing::AssertionFailure() << name << ": differs at flat index " << i << ": " << x
                                           << " vs " << y;
  }
  return ::testing::AssertionSuccess();
}

void expect_matches_ref(const ConvData& d, const ConvResults& got, const ConvResults& before) {
  const ConvInputs in = d.inputs();
  const ConvOptions opt = d.options();
  const ref::ConvRefFwd rf = ref::conv_ref_fwd(in, opt);
  const ref::ConvRefGrads rg =
      ref::conv_ref_bwd(in, d.dy.view, d.c.dht ? TensorView(d.dht) : TensorView(), opt);
  const double rt = rtol_of(d.c.dtype), st = rtol_of(d.c.small_dtype);
  // atol covers fp32 accumulation with cancellation: terms are O(1) (x, w <= 2).
  const double at = 2e-5 * d.c.W, at_sum = 2e-5 * d.c.W * std::sqrt(1.0 + d.c.real_rows());
  EXPECT_TRUE(close_rows("y", d, got.y.view, rf.y, rt, at)) << d.c.str();
  EXPECT_TRUE(close_rows("dx", d, got.dx.view, rg.dx, rt, at)) << d.c.str();
  EXPECT_TRUE(padding_untouched("y", d, got.y.view, before.y.view)) << d.c.str();
  EXPECT_TRUE(padding_untouched("dx", d, got.dx.view, before.dx.view)) << d.c.str();
  if (got.ht.defined()) {
    // final_state is x / initial_state rounded to x's dtype: fp16 rounds values under 2^-14 to
    // subnormals (absolute step 2^-24), so half a step of absolute error is exact rounding.
    const double at_state = d.c.dtype == DType::kF16 ? std::ldexp(1.0, -25) : 0.0;
    EXPECT_TRUE(close_flat("final_state", got.ht, rf.final_state, rt, at_state)) << d.c.str();
  }
  EXPECT_TRUE(close_flat("dweight", got.dw, rg.dweight, st, at_sum)) << d.c.str();
  if (got.db.defined()) {
    EXPECT_TRUE(close_flat("dbias", got.db, rg.dbias, st, at_sum)) << d.c.str();
  }
  if (got.dh0.defined()) {
    EXPECT_TRUE(close_flat("dinitial_state", got.dh0, rg.dinitial_state, st, at)) << d.c.str();
  }
  if (got.dres.store.defined()) {
    EXPECT_TRUE(close_rows("dresidual", d, got.dres.view, rg.dresidual, 0, 0)) << d.c.str();
    EXPECT_TRUE(padding_untouched("dresidual", d, got.dres.view, before.dres.view)) << d.c.str();
  }
}

}  // namespace linattn::testing
