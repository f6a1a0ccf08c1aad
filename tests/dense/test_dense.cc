// Dense helper ops on the CPU: GEMM against a naive fp64 product, gated RMSNorm forward against
// an fp64 formula and backward against central differences, padding-row zeroing read at run time,
// Buffer bounds, and validation errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/capture.h"
#include "linattn/dense.h"
#include "linattn/error.h"

namespace linattn {
namespace {

Tensor randn(std::vector<int64_t> shape, std::mt19937_64& rng, DType dt = DType::kF32) {
  Tensor t(DType::kF64, shape);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, nd(rng));
  return t.to(dt);
}

TEST(Dense, GemmMatchesNaiveAllTransposes) {
  std::mt19937_64 rng(7);
  const int64_t M = 37, N = 19, K = 53;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Tensor a = randn(ta ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K}, rng);
      Tensor b = randn(tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N}, rng);
      Tensor c = randn({M, N}, rng);
      Tensor c0 = c.to(DType::kF64);
      gemm(a, ta, b, tb, c, 0.5f, 2.0f);
      double worst = 0;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k)
            s += a.get(ta ? k * M + i : i * K + k) * b.get(tb ? j * K + k : k * N + j);
          const double ref = 0.5 * s + 2.0 * c0.get(i * N + j);
          worst = std::max(worst, std::fabs(ref - c.get(i * N + j)));
        }
      EXPECT_LT(worst, 1e-4) << "ta=" << ta << " tb=" << tb;
    }
}

TEST(Dense, GemmRejectsMismatch) {
  Tensor a(DType::kF32, {3, 4}), b(DType::kF32, {5, 2}), c(DType::kF32, {3, 2});
  try {
    gemm(a, false, b, false, c);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("inner dimension expected 4"), std::string::npos) << e.what();
  }
}

double norm_loss(const Tensor& x, const Tensor& g, const Tensor& w, const Tensor& dy, bool sig,
                 double eps, Tensor* y_out) {
  const int64_t R = x.shape()[0], D = x.shape()[1];
  double loss = 0;
  for (int64_t r = 0; r < R; ++r) {
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += x.get(r * D + d) * x.get(r * D + d);
    const double rstd = 1.0 / std::sqrt(ss / D + eps);
    for (int64_t d = 0; d < D; ++d) {
      const double gv = g.get(r * D + d), s = 1.0 / (1.0 + std::exp(-gv));
      const double y = x.get(r * D + d) * rstd * w.get(d) * (sig ? s : gv * s);
      if (y_out) y_out->set(r * D + d, y);
      loss += y * dy.get(r * D + d);
    }
  }
  return loss;
}

TEST(Dense, RmsNormGatedForwardAndBackward) {
  std::mt19937_64 rng(11);
  const int64_t R = 6, D = 24;
  const float eps = 1e-5f;
  for (bool sig : {false, true}) {
    Tensor x = randn({R, D}, rng), g = randn({R, D}, rng), w = randn({D}, rng), dy = randn({R, D}, rng);
    Tensor y(DType::kF32, {R, D}), rstd(DType::kF32, {R}), yref(DType::kF64, {R, D});
    const NormGate act = sig ? NormGate::kSigmoid : NormGate::kSilu;
    rms_norm_gated_fwd(x, g, w, y, rstd, act, eps);
    const Tensor x64 = x.to(DType::kF64), g64 = g.to(DType::kF64), w64 = w.to(DType::kF64),
                 dy64 = dy.to(DType::kF64);
    norm_loss(x64, g64, w64, dy64, sig, eps, &yref);
    for (int64_t i = 0; i < R * D; ++i) ASSERT_NEAR(y.get(i), yref.get(i), 1e-5) << i;
    Tensor dx(DType::kF32, {R, D}), dg(DType::kF32, {R, D}), dw(DType::kF32, {D});
    rms_norm_gated_bwd(x, g, w, dy, dx, dg, dw, act, eps);
    auto fd = [&](Tensor& t, int64_t i) {
      const double h = 1e-6, v = t.get(i);
      t.set(i, v + h);
      const double lp = norm_loss(x64, g64, w64, dy64, sig, eps, nullptr);
      t.set(i, v - h);
      const double lm = norm_loss(x64, g64, w64, dy64, sig, eps, nullptr);
      t.set(i, v);
      return (lp - lm) / (2 * h);
    };
    Tensor* xs[] = {const_cast<Tensor*>(&x64), const_cast<Tensor*>(&g64)};
    for (int64_t i = 0; i < R * D; i += 5) {
      EXPECT_NEAR(dx.get(i), fd(*xs[0], i), 2e-4) << "dx " << i;
      EXPECT_NEAR(dg.get(i), fd(*xs[1], i), 2e-4) << "dg " << i;
    }
    for (int64_t d = 0; d < D; ++d) EXPECT_NEAR(dw.get(d), fd(const_cast<Tensor&>(w64), d), 2e-4) << "dw " << d;
  }
}

TEST(Dense, NormBackwardIgnoresPaddingRows) {
  std::mt19937_64 rng(3);
  const int64_t R = 8, D = 16;
  Tensor x = randn({R, D}, rng), g = randn({R, D}, rng), w = randn({D}, rng), dy = randn({R, D}, rng);
  Tensor dx(DType::kF32, {R, D}), dg(DType::kF32, {R, D}), dw(DType::kF32, {D}), dw5(DType::kF32, {D});
  rms_norm_gated_bwd(x, g, w, dy, dx, dg, dw5, NormGate::kSilu, 1e-5f, 5);
  for (int64_t r = 5; r < R; ++r)
    for (int64_t d = 0; d < D; ++d) {
      x.set(r * D + d, 1e30);  // garbage in padding must not matter
      ASSERT_EQ(dx.get(r * D + d), 0.0);
    }
  rms_norm_gated_bwd(x, g, w, dy, dx, dg, dw, NormGate::kSilu, 1e-5f, 5);
  for (int64_t d = 0; d < D; ++d) EXPECT_EQ(dw.get(d), dw5.get(d));
}

TEST(Dense, ZeroPaddingRowsReadsLayoutAtRunTime) {
  Tensor t(DType::kF32, {1, 10, 3});
  Tensor cu(DType::kI32, {3});
  struct Rec : CaptureSink {
    std::vector<std::function<void()>> w;
    void record(std::string, std::function<void()> f) override { w.push_back(std::move(f)); }
  } rec;
  set_active_cpu_capture(&rec);
  zero_padding_rows(t, cu);
  set_active_cpu_capture(nullptr);
  ASSERT_EQ(rec.w.size(), 1u);
  for (int layout : {4, 7}) {
    for (int64_t i = 0; i < 30; ++i) t.set(i, 1.0);
    cu.set(0, 0); cu.set(1, 2); cu.set(2, layout);
    rec.w[0]();
    for (int64_t r = 0; r < 10; ++r) EXPECT_EQ(t.get(r * 3 + 1), r < layout ? 1.0 : 0.0) << r;
  }
}

TEST(Dense, BufferViewsAreBoundsChecked) {
  Buffer b(Device{}, 1024);
  TensorView v = b.view(DType::kF32, {16, 16});
  EXPECT_EQ(v.numel(), 256);
  try {
    b.view(DType::kF32, {16, 16}, 4);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), FailureCategory::kAddressOrLifetime);
  }
  Tensor src(DType::kF32, {16, 16});
  for (int i = 0; i < 256; ++i) src.set(i, i * 0.5);
  copy_tensor(v, src);
  EXPECT_EQ(v.ptr<float>()[255], 127.5f);
  fill_zero(v);
  EXPECT_EQ(v.ptr<float>()[255], 0.0f);
}

// copy_tensors on the CPU: every pair copied (seeded data, several dtypes / ranks, an empty pair), recorded as
// one op under a CPU capture (run at replay, reading the sources then), and every bad pair rejected naming it
// before anything is copied.
TEST(Dense, CopyTensorsCopiesEveryPairAndRecordsOneOp) {
  std::mt19937_64 rng(71);
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<Tensor> src, dst;
  const std::vector<std::pair<DType, std::vector<int64_t>>> specs = {
      {DType::kF32, {3, 5}}, {DType::kBF16, {1, 7, 2, 3}}, {DType::kI32, {9}}, {DType::kF16, {0, 4}}, {DType::kF64, {2, 2}}};
  for (const auto& [dt, shape] : specs) {
    src.emplace_back(dt, shape);
    dst.emplace_back(dt, shape);
    for (int64_t i = 0; i < src.back().numel(); ++i) src.back().set(i, dt == DType::kI32 ? double(i * 3 - 7) : u(rng));
  }
  std::vector<TensorCopy> c;
  for (size_t i = 0; i < src.size(); ++i) c.push_back({dst[i].view(), src[i].view()});
  copy_tensors(c.data(), c.size());
  for (size_t i = 0; i < src.size(); ++i)
    for (int64_t j = 0; j < src[i].numel(); ++j) ASSERT_EQ(dst[i].get(j), src[i].get(j)) << i << " " << j;
  struct Rec : CaptureSink {
    std::vector<std::function<void()>> w;
    void record(std::string, std::function<void()> f) override { w.push_back(std::move(f)); }
  } rec;
  set_active_cpu_capture(&rec);
  copy_tensors(c.data(), c.size());
  set_active_cpu_capture(nullptr);
  ASSERT_EQ(rec.w.size(), 1u);
  src[0].set(4, 123.0);  // read when the recorded op runs
  rec.w[0]();
  EXPECT_EQ(dst[0].get(4), 123.0);
  copy_tensors(nullptr, 0);  // nothing to do
}

TEST(Dense, CopyTensorsRejectsBadPairsBeforeCopying) {
  Tensor a(DType::kF32, {4, 4}), b(DType::kF32, {4, 4}), c(DType::kF32, {4, 4});
  for (int64_t i = 0; i < 16; ++i) a.set(i, i + 1.0);
  Tensor wide(DType::kF32, {4, 5}), flat(DType::kF32, {16}), half(DType::kF16, {4, 4});
  TensorView strided = wide.view();
  strided.shape[1] = 4;  // a [4, 4] view with a row stride of 5: not contiguous
  auto expect_throws = [&](std::vector<TensorCopy> pairs, const std::string& needle) {
    try {
      copy_tensors(pairs.data(), pairs.size());
      FAIL() << "expected an error naming " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      EXPECT_NE(e.message().find(needle), std::string::npos) << e.what();
    }
    for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(b.get(i), 0.0) << "pair 0 was copied before the check failed";
  };
  expect_throws({{b.view(), a.view()}, {flat.view(), a.view()}}, "copies[1].dst");  // rank
  expect_throws({{b.view(), a.view()}, {wide.view(), a.view()}}, "copies[1].dst");  // dims
  expect_throws({{b.view(), a.view()}, {half.view(), a.view()}}, "copies[1].dst");  // dtype
  expect_throws({{b.view(), a.view()}, {c.view(), strided}}, "copies[1].src");      // layout
  expect_throws({{b.view(), a.view()}, {c.view(), b.view()}}, "copies[0].dst overlaps copies[1].src");
  expect_throws({{b.view(), a.view()}, {b.view(), c.view()}}, "copies[0].dst overlaps copies[1].dst");
  TensorView shifted = a.view();
  shifted.data = a.view().ptr<float>() + 4;
  shifted.shape[0] = 3;
  TensorView head = a.view();
  head.shape[0] = 3;
  expect_throws({{b.view(), c.view()}, {shifted, head}}, "copies[1].dst overlaps copies[1].src");
  try {
    copy_tensors(nullptr, 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("copies"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace linattn
