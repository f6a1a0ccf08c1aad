// Shared probe pieces (see capabilities_util.h): backends, slots, seeded data, the Checker.
#include "capabilities_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/check.h"

#if LINATTN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace linattn::caps {

std::string backend_unavailable(const std::string& backend) {
  if (backend == "cpu") return "";
#if LINATTN_WITH_CUDA
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    (void)cudaGetLastError();  // clear the sticky "no device" error for later calls
    return "no CUDA device";
  }
  return "";
#else
  return "this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)";
#endif
}

Backend::Backend(const std::string& name) {
  if (name == "cpu") return;
  LINATTN_CHECK(name == "cuda", "backend: expected cpu or cuda, got '", name, "'");
  const std::string why = backend_unavailable(name);
  if (!why.empty()) LINATTN_UNSUPPORTED("backend cuda: ", why);
  dev_ = Device{DeviceType::kCUDA, 0};
#if LINATTN_WITH_CUDA
  cudaStream_t s = nullptr;
  LINATTN_CHECK_CODE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, ErrorCode::kBackend,
                     FailureCategory::kNone, "cudaStreamCreate failed");
  stream_ = s;
#endif
}

Backend::~Backend() {
#if LINATTN_WITH_CUDA
  if (stream_) {
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
#endif
}

ExecContext Backend::ctx() const {
  ExecContext c;
  c.stream = stream_;
  return c;
}

void Backend::sync() const {
#if LINATTN_WITH_CUDA
  if (stream_) {
    const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    LINATTN_CHECK_CODE(e == cudaSuccess, ErrorCode::kBackend, FailureCategory::kNone,
                       "cudaStreamSynchronize: ", cudaGetErrorString(e));
  }
#endif
}

Slot::Slot(const Tensor& init, const Backend& be) : be_(&be), host_(init) {
  if (!be.cuda()) {
    view_ = host_.view();
    return;
  }
  buf_ = Buffer(be.device(), std::max<size_t>(1, host_.view().nbytes()));
  view_ = TensorView::contiguous(buf_.data(), host_.dtype(), host_.shape(), be.device());
  copy_tensor(view_, host_.view(), be.ctx());
  be.sync();
}

void Slot::upload(const Tensor& t) {
  LINATTN_CHECK(t.shape() == host_.shape() && t.dtype() == host_.dtype(), "Slot::upload: shape ",
                t.view().shape_str(), " vs ", host_.view().shape_str());
  if (!be_->cuda()) {
    if (t.view().nbytes()) std::memcpy(host_.view().data, t.view().data, t.view().nbytes());
    return;
  }
  host_ = t;
  copy_tensor(view_, host_.view(), be_->ctx());
  be_->sync();
}

Tensor Slot::download() const {
  Tensor r(host_.dtype(), host_.shape());
  be_->sync();
  copy_tensor(r.view(), view_, be_->ctx());
  be_->sync();
  return r;
}

double uniform(Rng& rng, double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

Tensor rand_tensor(Rng& rng, DType dtype, std::vector<int64_t> shape, double lo, double hi) {
  Tensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, uniform(rng, lo, hi));
  return t;
}

void l2norm_rows(Tensor& t, int64_t width) {
  for (int64_t r = 0; r * width < t.numel(); ++r) {
    double ss = 0;
    for (int64_t c = 0; c < width; ++c) ss += t.get(r * width + c) * t.get(r * width + c);
    const double inv = 1.0 / std::sqrt(ss + 1e-12);
    for (int64_t c = 0; c < width; ++c) t.set(r * width + c, t.get(r * width + c) * inv);
  }
}

void garbage_tail(Rng& rng, Tensor& t, int64_t from, double lo, double hi) {
  for (int64_t i = std::max<int64_t>(0, from); i < t.numel(); ++i) t.set(i, uniform(rng, lo, hi));
}

Tensor cu_tensor(const std::vector<int64_t>& lens, int64_t n_rows, DType dtype) {
  LINATTN_CHECK(static_cast<int64_t>(lens.size()) <= n_rows, "cu_tensor: ", lens.size(), " sequences > ", n_rows);
  Tensor cu(dtype, {n_rows + 1});
  int64_t c = 0;
  cu.set(0, 0);
  for (int64_t n = 0; n < n_rows; ++n) {
    if (n < static_cast<int64_t>(lens.size())) c += lens[n];
    cu.set(n + 1, static_cast<double>(c));
  }
  return cu;
}

int64_t total(const std::vector<int64_t>& lens) {
  int64_t t = 0;
  for (int64_t l : lens) t += l;
  return t;
}

std::vector<int64_t> layout(int variant, int i) {
  // Zero-length sequences, lengths 1, BT-1, BT, BT+1 (BT = 16 / 32 / 64), a single sequence that
  // fills the capacity, T not a multiple of BT.
  static const std::vector<std::vector<int64_t>> kLayouts = {
      {7, 0, 38, 32}, {96}, {1, 31, 33, 0, 5}, {0, 0, 17, 64, 15}, {33, 1, 40}, {64, 2, 0, 9, 20}, {50, 16}};
  return kLayouts[static_cast<size_t>(variant * 3 + i) % kLayouts.size()];
}

void Checker::note(const std::string& name, double rel, double abs, double bar, bool pass) {
  ++n_;
  if (!pass) ok_ = false;
  const double score = !pass ? std::numeric_limits<double>::infinity() : bar > 0 ? rel / bar : 0.0;
  // Among failures the first one is kept; among passes the one closest to its bar.
  if (worst_score_ < 0 || (score > worst_score_ && !(std::isinf(worst_score_)))) {
    worst_score_ = score;
    worst_ = name;
    worst_rel_ = rel;
    worst_abs_ = abs;
    worst_bar_ = bar;
  }
}

void Checker::add(const std::string& name, const Tensor& ref, const Tensor& got, test::Tolerance tol, int64_t count) {
  const int64_t n = count < 0 ? ref.numel() : count;
  LINATTN_CHECK(n <= ref.numel() && n <= got.numel(), "Checker::add(", name, "): ", n, " elements, ref has ",
                ref.numel(), ", got ", got.numel());
  // A result stored in a half dtype cannot beat the correctly rounded reference: compare with that.
  const bool half = got.dtype() == DType::kBF16 || got.dtype() == DType::kF16;
  const Tensor rounded = half ? ref.to(got.dtype()) : Tensor();
  const Tensor& r_src = half ? rounded : ref;
  double num = 0, den = 0, mx = 0;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    const double r = r_src.get(i), g = got.get(i), d = r - g;
    if (!std::isfinite(g)) finite = false;
    num += d * d;
    den += r * r;
    mx = std::max(mx, std::fabs(d));
  }
  const double dn = static_cast<double>(std::max<int64_t>(1, n));
  const double rel = std::sqrt(num / dn) / (std::sqrt(den / dn) + 1e-8);
  note(name, rel, mx, tol.rel_rms, finite && (rel < tol.rel_rms || mx <= tol.atol));
}

void Checker::add_scalar(const std::string& name, double ref, double got, double rel_bar) {
  const double abs = std::fabs(ref - got), rel = abs / (std::fabs(ref) + 1e-12);
  note(name, rel, abs, rel_bar, std::isfinite(got) && rel < rel_bar);
}

void Checker::add_bitwise(const std::string& name, const Tensor& a, const Tensor& b) {
  const size_t n = a.view().nbytes();
  if (n != b.view().nbytes() || (n && std::memcmp(a.view().data, b.view().data, n) != 0)) {
    if (bitwise_ok_) bitwise_what_ = name;
    bitwise_ok_ = false;
  }
}

void Checker::fill(Cell& c) const {
  c.worst = worst_;
  c.rel_rms_err = worst_rel_;
  c.max_abs_err = worst_abs_;
  c.bar = worst_bar_;
  c.num_checked = n_;
  if (ok()) {
    c.status = Status::kSupported;
    return;
  }
  c.status = Status::kFailed;
  if (!ok_) {
    c.category = "mismatch";
    c.reason = worst_ + ": rel RMS error " + std::to_string(worst_rel_) + " (max abs " + std::to_string(worst_abs_) +
               ") against the fp64 reference, bar " + std::to_string(worst_bar_);
  } else {
    c.category = "graph-vs-fixed";
    c.reason = bitwise_what_ + ": graph replay is not bitwise equal to the eager fixed-capacity call";
  }
}

DType dtype_from_name(const std::string& name) {
  if (name == "fp32") return DType::kF32;
  if (name == "bf16") return DType::kBF16;
  if (name == "fp16") return DType::kF16;
  if (name == "i32") return DType::kI32;
  if (name == "i64") return DType::kI64;
  LINATTN_CHECK(false, "dtype: expected fp32, bf16, fp16, i32 or i64, got '", name, "'");
  return DType::kF32;
}

}  // namespace linattn::caps
