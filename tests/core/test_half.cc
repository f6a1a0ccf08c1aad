// Host fp16 / bf16 conversion: exhaustive over all 16-bit patterns (round trip, NaN/Inf kept),
// and float -> 16-bit rounding against an exact round-to-nearest-even computed in double,
// over every float exponent with random mantissas plus the ties.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/half.h"

namespace linattn {
namespace {

// Exact RNE of a finite float to a format with `mant` mantissa bits, exponent range [emin, emax].
double rne_reference(double x, int mant, int emin, int emax, double max_finite) {
  if (x == 0) return x;
  const double ax = std::fabs(x);
  int e = std::ilogb(ax);
  if (e < emin) e = emin;
  const double ulp = std::ldexp(1.0, e - mant);
  double q = ax / ulp;
  double fl = std::floor(q);
  double r = q - fl;
  if (r > 0.5 || (r == 0.5 && std::fmod(fl, 2.0) == 1.0)) fl += 1.0;
  double y = fl * ulp;
  // overflow: values that round past max_finite go to infinity
  if (y > max_finite) y = std::numeric_limits<double>::infinity();
  (void)emax;
  return std::copysign(y, x);
}

TEST(Half, Fp16RoundTripAllPatterns) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = fp16_bits_to_float(h);
    const bool is_nan = ((h & 0x7c00u) == 0x7c00u) && (h & 0x3ffu);
    if (is_nan) {
      EXPECT_TRUE(std::isnan(f)) << b;
      EXPECT_TRUE(std::isnan(fp16_bits_to_float(float_to_fp16_bits(f)))) << b;
    } else {
      EXPECT_EQ(float_to_fp16_bits(f), h) << b;
    }
  }
  EXPECT_TRUE(std::isinf(fp16_bits_to_float(0x7c00)));
  EXPECT_EQ(fp16_bits_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_bits_to_float(0x0001), std::ldexp(1.0f, -24));
}

TEST(Half, Bf16RoundTripAllPatterns) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = bf16_bits_to_float(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(f)))) << b;
    } else {
      EXPECT_EQ(float_to_bf16_bits(f), h) << b;
    }
  }
}

TEST(Half, RoundingMatchesExactReference) {
  std::mt19937 rng(1234);
  const double fp16_max = 65504.0, bf16_max = std::ldexp(255.0 / 128.0, 127);
  for (int exp = -150; exp <= 127; ++exp) {
    for (int trial = 0; trial < 400; ++trial) {
      uint32_t mant = rng() & 0x7fffffu;
      if (trial < 4) mant = (trial == 0) ? 0x1000u : (trial == 1 ? 0x3000u : (trial == 2 ? 0x8000u : 0x18000u));
      float f = std::ldexp(1.0f + static_cast<float>(mant) / 8388608.0f, exp);
      if (!std::isfinite(f) || f == 0) continue;
      for (float s : {f, -f}) {
        const double r16 = rne_reference(s, 10, -14, 15, fp16_max);
        const float got16 = round_to_fp16(s);
        if (std::isinf(r16)) EXPECT_TRUE(std::isinf(got16)) << s;
        else EXPECT_EQ(static_cast<double>(got16), r16) << s;
        const double rb = rne_reference(s, 7, -126, 127, bf16_max);
        const float gotb = round_to_bf16(s);
        if (std::isinf(rb)) EXPECT_TRUE(std::isinf(gotb)) << s;
        else EXPECT_EQ(static_cast<double>(gotb), rb) << s;
      }
    }
  }
  EXPECT_TRUE(std::isinf(round_to_fp16(65520.0f)));
  EXPECT_EQ(round_to_fp16(65519.0f), 65504.0f);
  EXPECT_TRUE(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isinf(round_to_bf16(std::numeric_limits<float>::infinity())));
}

}  // namespace
}  // namespace linattn
