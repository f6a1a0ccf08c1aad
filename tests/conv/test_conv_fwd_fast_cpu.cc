// The CPU forward's 16-bit paths (perf-notes "CPU forward v3" / "v4"): silu_fast and the prescaled
// silu_pre (16-bit outputs) against fp64 over a wide range and at special values; the bf16 paths of
// conv_fwd_bf16dp.h (W 2 / 4: fma_rows<4> for row quads, fma_rows<2> for the pairs left over, the
// vdpbf16ps dot_row for single rows with bf16-exact weights (one
// product per tap) or fp32 / fp16 weights (hi + lo split)) against the fp64 reference,
// with channel counts that leave 16- and non-16 tails after the 32-channel groups, several
// blocks, awkward lengths, initial state, bias on / off, silu on / off, streaming stores on / off;
// the cases the path leaves to the generic code (W 3, residual) next to them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>

#include "conv_case.h"
#include "cpu/conv_simd.h"

namespace linattn::testing {
namespace {

bool sanitized() { return std::getenv("LINATTN_SANITIZED") != nullptr; }

double silu64(double z) { return z / (1.0 + std::exp(-z)); }

// Worst relative error against fp64 over 20000 vectors of z (odd lanes in [-90, 90], even in
// [-6, 6]); act(z, out, zk) writes the activation of the vector z and the z the kernel really saw
// (zk: after any prescaling round trip). Relative, with an absolute floor far under the 16-bit
// outputs' smallest normals' scale. wz / wg: the worst z and its value.
template <class Act>
double worst_silu_error(uint64_t seed, Act act, double& wz, double& wg) {
  namespace s = linattn::cpu::simd;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> wide(-90.0f, 90.0f), narrow(-6.0f, 6.0f);
  double worst = 0;
  for (int it = 0; it < 20000; ++it) {
    float z[s::kLanes], out[s::kLanes];
    double zk[s::kLanes];
    for (int l = 0; l < s::kLanes; ++l) z[l] = l % 2 ? wide(rng) : narrow(rng);
    act(z, out, zk);
    for (int l = 0; l < s::kLanes; ++l) {
      const double r = silu64(zk[l]);
      const double err = std::fabs(out[l] - r) / (std::fabs(r) + 1e-30);
      if (std::fabs(r) > 1e-30 && err > worst) worst = err, wz = zk[l], wg = out[l];
    }
  }
  return worst;
}

TEST(ConvFwdFastCpu, SiluFastWithinTwoTenThousandthsRelative) {
  namespace s = linattn::cpu::simd;
  double wz = 0, wg = 0;
  const double worst = worst_silu_error(7, [](const float* z, float* out, double* zk) {
    s::store(out, s::silu_fast(s::load(z)));
    for (int l = 0; l < s::kLanes; ++l) zk[l] = z[l];
  }, wz, wg);
  EXPECT_LE(worst, 2e-4) << "worst at z = " << wz << ": got " << wg << ", ref " << silu64(wz);
  float sp[s::kLanes] = {INFINITY, -200.0f, 200.0f, NAN, 0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f};
  float out[s::kLanes];
  s::store(out, s::silu_fast(s::load(sp)));
  EXPECT_EQ(out[0], INFINITY);
  EXPECT_EQ(out[1], 0.0f);  // -200 e^-200 underflows (-0)
  EXPECT_EQ(out[2], 200.0f);
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_EQ(out[4], 0.0f);
  EXPECT_EQ(out[5], 0.0f);
  EXPECT_NEAR(out[6], 0.5e-30f, 1e-34f);
  EXPECT_NEAR(out[7], -0.5e-30f, 1e-34f);
  EXPECT_NEAR(out[8], 88.0f, 1e-4f);
  EXPECT_NEAR(out[9], silu64(-88.0), 1e-36);
}

// silu_pre (fma_rows: the weights and bias carry the -log2(e) scale) from y = c z: the
// same relative bar as silu_fast; special values as silu_fast, large z within the 14-bit estimate.
TEST(ConvFwdFastCpu, SiluPreWithinTwoTenThousandthsRelative) {
  namespace s = linattn::cpu::simd;
  double wz = 0, wg = 0;
  const double worst = worst_silu_error(8, [](const float* z, float* out, double* zk) {
    float y[s::kLanes];
    for (int l = 0; l < s::kLanes; ++l) y[l] = z[l] * s::kSiluPreScale;
    s::store(out, s::silu_pre(s::load(y)));
    for (int l = 0; l < s::kLanes; ++l) zk[l] = y[l] / static_cast<double>(s::kSiluPreScale);  // the z the kernel sees
  }, wz, wg);
  EXPECT_LE(worst, 2e-4) << "worst at z = " << wz << ": got " << wg << ", ref " << silu64(wz);
  const float c = s::kSiluPreScale;
  float sp[s::kLanes] = {-INFINITY, -200.0f * c, 200.0f * c, NAN, 0.0f, -0.0f, 1e-30f * c, -1e-30f * c,
                         88.0f * c, -88.0f * c, INFINITY};
  float out[s::kLanes];
  s::store(out, s::silu_pre(s::load(sp)));
  EXPECT_EQ(out[0], INFINITY);  // z = +inf
  EXPECT_EQ(out[1], 0.0f);      // z = -200: -200 e^-200 underflows (-0)
  EXPECT_NEAR(out[2], 200.0f, 200.0f * 0x1p-13f);
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_EQ(out[4], 0.0f);
  EXPECT_EQ(out[5], 0.0f);
  EXPECT_NEAR(out[6], 0.5e-30f, 1e-34f);
  EXPECT_NEAR(out[7], -0.5e-30f, 1e-34f);
  EXPECT_NEAR(out[8], 88.0f, 88.0f * 0x1p-13f);
  EXPECT_NEAR(out[9], silu64(-88.0), 2e-4 * std::fabs(silu64(-88.0)));
  EXPECT_TRUE(std::isnan(out[10]));  // z = -inf: -inf / (1 + inf), as in fp64
}

void check_case(const ConvCase& c) {
  ConvData d = make_data(c);
  ConvResults r = make_results(d, c.seed + 99);
  ConvResults before = clone(r);
  ExecContext ctx;
  conv_fwd(d.inputs(), r.outputs(), d.options(), ctx);
  conv_bwd(d.inputs(), d.dy.view, d.c.dht ? TensorView(d.dht) : TensorView(), r.grads(), d.options(), ctx);
  expect_matches_ref(d, r, before);
}

TEST(ConvFwdFastCpu, Bf16DotPathExactAndSplitWeights) {
  const bool small = sanitized();
  std::mt19937_64 rng(99);
  int seed = 500;
  // 32: one group; 45: group + 13; 80: 2 groups + 16; 1072 / 1090: a full 1024-channel block
  // and a second one with a group and a 16 / 2-channel tail
  const std::vector<int64_t> widths = small ? std::vector<int64_t>{32, 45, 80, 1072}
                                            : std::vector<int64_t>{32, 45, 80, 1072, 1090};
  for (DType wdt : {DType::kBF16, DType::kF32, DType::kF16})
    for (int W : {4, 2, 3})
      for (int64_t D : widths) {
        ConvCase c;
        c.dtype = DType::kBF16, c.small_dtype = wdt, c.W = W, c.D = D, c.seed = ++seed;
        c.act = rng() % 4 ? Activation::kSilu : Activation::kNone;
        c.bias = rng() % 3 != 0, c.h0 = rng() % 2, c.ht = rng() % 2;
        c.residual = rng() % 5 == 0;  // residual: generic path
        if (D > 1000) {
          c.lens = {0, 1, W + 1, small ? int64_t{40} : int64_t{150}, 2};
        } else if (rng() % 2) {
          c.lens = {0, 1, std::max(W - 1, 0), W, W + 1, 70, 0, 2};
        } else {
          c.B = 2, c.T = 37;
        }
        SCOPED_TRACE(c.str());
        check_case(c);
      }
}

// Streaming (aligned) and plain stores of the 64-byte dot-path rows.
TEST(ConvFwdFastCpu, Bf16DotPathStreamingStores) {
  setenv("LINATTN_CONV_STREAM_MIN_BYTES", "0", 1);
  int seed = 700;
  for (DType wdt : {DType::kBF16, DType::kF32})
    for (bool strided : {false, true}) {
      ConvCase c;
      c.dtype = DType::kBF16, c.small_dtype = wdt, c.W = 4, c.D = 112, c.seed = ++seed, c.strided = strided;
      c.bias = c.h0 = c.ht = true;
      c.lens = {70, 3, 41};
      SCOPED_TRACE(c.str());
      check_case(c);
    }
  unsetenv("LINATTN_CONV_STREAM_MIN_BYTES");
}

}  // namespace
}  // namespace linattn::testing
