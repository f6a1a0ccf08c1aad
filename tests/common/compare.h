// Comparison helpers shared by every test: FLA's metric (rel RMS error, ALGORITHMS.md section 8)
// plus max abs error, the worst element (flat index, coordinates, both values) and a NaN/Inf check
// (any NaN/Inf in either tensor fails). Host tensors of any float dtype and strides.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/tolerances.h"
#include "linattn/tensor.h"

namespace linattn::test {

struct CompareResult {
  bool ok = false;
  bool shape_mismatch = false;
  bool non_finite = false;   // NaN or Inf in ref or got
  double rel_rms = 0.0;      // rms(ref - got) / (rms(ref) + 1e-8)
  double max_abs = 0.0;      // max |ref - got|
  int64_t worst = -1;        // flat index of the largest |ref - got| (or first non-finite)
  std::string worst_coords;  // "[b, t, h, d]"
  double ref_at_worst = 0.0, got_at_worst = 0.0;
  int64_t numel = 0;
  std::string describe(const std::string& name, const Tolerance& tol) const;
};

// Element `flat` (row-major logical index) of a host float tensor, any strides.
double element(const TensorView& t, int64_t flat);
std::string coords_of(const TensorView& t, int64_t flat);

CompareResult compare(const TensorView& ref, const TensorView& got, const Tolerance& tol);

// For EXPECT_TRUE / ASSERT_TRUE: success, or a message with both errors, the bar and the worst
// element. Example: EXPECT_TRUE(tensors_close("o", ref.o, got.o, tolerance(DType::kBF16,
// Qty::kO)));
::testing::AssertionResult tensors_close(const std::string& name, const TensorView& ref,
                                         const TensorView& got, const Tolerance& tol);

// Rows [start, start + length) of dimension `dim` (a view; no copy).
TensorView narrow(const TensorView& t, int dim, int64_t start, int64_t length);

// Largest |x| of a tensor; NaN/Inf count as infinite.
double max_abs_value(const TensorView& t);
bool all_finite(const TensorView& t);

}  // namespace linattn::test
