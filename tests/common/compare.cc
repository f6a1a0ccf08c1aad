// FLA-style tensor comparison for tests (see compare.h).
#include "common/compare.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "core/half.h"

namespace linattn::test {
namespace {

int64_t offset_of(const TensorView& t, int64_t flat) {
  int64_t off = 0;
  for (int i = t.ndim - 1; i >= 0; --i) {
    off += (flat % t.shape[i]) * t.strides[i];
    flat /= t.shape[i];
  }
  return off;
}

}  // namespace

double element(const TensorView& t, int64_t flat) {
  const int64_t o = offset_of(t, flat);
  switch (t.dtype) {
    case DType::kF64:
      return t.ptr<const double>()[o];
    case DType::kF32:
      return t.ptr<const float>()[o];
    case DType::kF16:
      return fp16_bits_to_float(t.ptr<const uint16_t>()[o]);
    case DType::kBF16:
      return bf16_bits_to_float(t.ptr<const uint16_t>()[o]);
    case DType::kI32:
      return t.ptr<const int32_t>()[o];
    case DType::kI64:
      return static_cast<double>(t.ptr<const int64_t>()[o]);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

std::string coords_of(const TensorView& t, int64_t flat) {
  std::string s;
  for (int i = t.ndim - 1; i >= 0; --i) {
    s = std::to_string(flat % t.shape[i]) + (s.empty() ? "" : ", ") + s;
    flat /= t.shape[i];
  }
  return "[" + s + "]";
}

CompareResult compare(const TensorView& ref, const TensorView& got, const Tolerance& tol) {
  CompareResult r;
  if (ref.ndim != got.ndim) r.shape_mismatch = true;
  for (int i = 0; i < ref.ndim && !r.shape_mismatch; ++i)
    r.shape_mismatch = ref.shape[i] != got.shape[i];
  if (r.shape_mismatch) return r;
  r.numel = ref.numel();
  double se = 0, sr = 0;
  for (int64_t i = 0; i < r.numel; ++i) {
    const double a = element(ref, i), b = element(got, i);
    if (!std::isfinite(a) || !std::isfinite(b)) {
      if (!r.non_finite) {
        r.non_finite = true;
        r.worst = i;
        r.ref_at_worst = a;
        r.got_at_worst = b;
      }
      continue;
    }
    const double d = std::fabs(a - b);
    if (!r.non_finite && (r.worst < 0 || d > r.max_abs)) {
      r.worst = i;
      r.ref_at_worst = a;
      r.got_at_worst = b;
    }
    r.max_abs = std::max(r.max_abs, d);
    se += d * d;
    sr += a * a;
  }
  if (r.worst >= 0) r.worst_coords = coords_of(ref, r.worst);
  const double n = r.numel > 0 ? static_cast<double>(r.numel) : 1.0;
  r.rel_rms = std::sqrt(se / n) / (std::sqrt(sr / n) + 1e-8);
  r.ok = !r.non_finite && (r.max_abs <= tol.atol || r.rel_rms < tol.rel_rms);
  return r;
}

std::string CompareResult::describe(const std::string& name, const Tolerance& tol) const {
  std::ostringstream os;
  os.precision(6);
  if (shape_mismatch) {
    os << name << ": shape mismatch";
    return os.str();
  }
  os << name << ": rel_rms " << rel_rms << " (bar " << tol.rel_rms << "), max_abs " << max_abs
     << " (atol " << tol.atol << ")";
  if (non_finite) os << ", NON-FINITE value";
  if (worst >= 0) {
    os.precision(17);
    os << ", worst at " << worst_coords << " (flat " << worst << "): ref " << ref_at_worst
       << " got " << got_at_worst;
  }
  return os.str();
}

::testing::AssertionResult tensors_close(const std::string& name, const TensorView& ref,
                                         const TensorView& got, const Tolerance& tol) {
  const CompareResult r = compare(ref, got, tol);
  if (r.shape_mismatch)
    return ::testing::AssertionFailure()
           << name << ": shape " << ref.shape_str() << " vs " << got.shape_str();
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.describe(name, tol);
}

TensorView narrow(const TensorView& t, int dim, int64_t start, int64_t length) {
  TensorView v = t;
  v.shape[dim] = length;
  if (length > 0) {
    const size_t esz = dtype_size(t.dtype);
    v.data = static_cast<char*>(t.data) + static_cast<size_t>(start * t.strides[dim]) * esz;
  }
  return v;
}

double max_abs_value(const TensorView& t) {
  double m = 0;
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double x = element(t, i);
    if (!std::isfinite(x)) return std::numeric_limits<double>::infinity();
    m = std::max(m, std::fabs(x));
  }
  return m;
}

bool all_finite(const TensorView& t) { return std::isfinite(max_abs_value(t)); }

}  // namespace linattn::test
