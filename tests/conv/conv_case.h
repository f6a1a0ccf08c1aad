// Test fixtures for the short conv: a case description (shape, layout, dtype, options), seeded
// random host inputs (never zeros; garbage in graph-mode padding rows), host result buffers
// pre-filled with garbage, the fp64 reference, and comparisons that report the worst element.
// Shared by the CPU tests and the gpu-labelled CUDA tests.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "linattn/ops.h"
#include "linattn/tensor.h"
#include "ref/conv_ref.h"

namespace linattn::testing {

struct ConvCase {
  int64_t B = 1, T = 0, D = 16, W = 4;
  std::vector<int64_t> lens;  // varlen when non-empty (B = 1); T = capacity >= sum(lens)
  DType dtype = DType::kF32;
  DType cu_dtype = DType::kI32;
  DType small_dtype = DType::kF32;  // weight, bias, initial_state, dweight, dbias, dinitial_state
  Activation act = Activation::kSilu;
  bool bias = true, residual = false, h0 = false, ht = false, dht = false;
  bool strided = false;  // x, residual, dy, y, dx live in rows padded by 16 elements
  bool graph = false;    // use_graph = true (needs lens)
  uint64_t seed = 1;

  bool varlen() const { return !lens.empty(); }
  int64_t N() const { return varlen() ? static_cast<int64_t>(lens.size()) : B; }
  int64_t real_rows() const;  // rows that belong to a sequence
  std::string str() const;
};

// A [B, T, D] host tensor, possibly with padded rows (view != storage layout).
// Outputs are shifted to a 64-byte boundary inside the store's slack so that the kernels'
// aligned (streaming-store) paths are exercised.
struct Rows {
  Tensor store;
  TensorView view;
  int64_t shift_bytes = 0;
};
Rows make_rows(int64_t B, int64_t T, int64_t D, DType dt, bool strided, bool align64 = false);

struct ConvData {
  ConvCase c;
  Rows x, residual, dy;
  Tensor weight, bias, h0, cu, dht;
  ConvInputs inputs() const;
  ConvOptions options() const;
};
ConvData make_data(const ConvCase& c);
// Fills every real row of x / residual / dy and all small tensors with new random values and
// the padding rows with garbage (keeps shapes and buffers).
void refill(ConvData& d, uint64_t seed);

struct ConvResults {
  Rows y, dx, dres;
  Tensor ht, dw, db, dh0;
  ConvOutputs outputs() const;
  ConvGrads grads() const;
};
// Results for d, every element pre-set to seeded garbage.
ConvResults make_results(const ConvData& d, uint64_t seed);
// New garbage in place (buffers, and so recorded graphs, stay valid).
void refill_results(ConvResults& r, uint64_t seed);
ConvResults clone(const ConvResults& r);

// got vs the fp64 reference on the real rows (or all elements for non-row tensors).
::testing::AssertionResult close_rows(const char* name, const ConvData& d, const TensorView& got,
                                      const Tensor& ref, double rtol, double atol);
::testing::AssertionResult close_flat(const char* name, const Tensor& got, const Tensor& ref,
                                      double rtol, double atol);
// Padding rows of got equal those of before (bitwise).
::testing::AssertionResult padding_untouched(const char* name, const ConvData& d, const TensorView& got,
                                             const TensorView& before);
// Bitwise equality of two [B, T, D] views on the real rows / of two tensors.
::testing::AssertionResult same_rows(const char* name, const ConvData& d, const TensorView& a,
                                     const TensorView& b);
::testing::AssertionResult same_flat(const char* name, const Tensor& a, const Tensor& b);

// Relative tolerance of one rounding to dtype (plus fp32 accumulation).
double rtol_of(DType t);

// Checks every output of a forward + backward run against the reference, and the padding
// rows against `before` (results as they were before the run).
void expect_matches_ref(const ConvData& d, const ConvResults& got, const ConvResults& before);

}  // namespace linattn::testing
