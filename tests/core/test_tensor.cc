// TensorView and Tensor basics: shapes, strides, conversions.
#include <gtest/gtest.h>

#include "linattn/error.h"
#include "linattn/tensor.h"

namespace linattn {
namespace {

TEST(Tensor, ContiguousShapeAndStrides) {
  Tensor t(DType::kF32, {2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.view().strides[0], 12);
  EXPECT_EQ(t.view().strides[2], 1);
  EXPECT_TRUE(t.view().is_contiguous());
  EXPECT_EQ(t.view().shape_str(), "[2, 3, 4]");
  TensorView absent;
  EXPECT_FALSE(absent.defined());
  EXPECT_EQ(absent.shape_str(), "absent");
}

TEST(Tensor, ConvertsBetweenDtypes) {
  Tensor t(DType::kF64, {5});
  for (int i = 0; i < 5; ++i) t.set(i, 0.1 * (i + 1) - 0.25);
  Tensor b = t.to(DType::kBF16);
  Tensor h = t.to(DType::kF16);
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(b.get(i), t.get(i), 4e-3);
    EXPECT_NEAR(h.get(i), t.get(i), 5e-4);
  }
  Tensor n(DType::kI64, {2});
  n.set(1, 7);
  EXPECT_EQ(n.to(DType::kI32).get(1), 7);
}

TEST(Tensor, RejectsBadRank) {
  float x = 0;
  EXPECT_THROW(TensorView::contiguous(&x, DType::kF32, {1, 1, 1, 1, 1, 1}), Error);
  EXPECT_THROW(TensorView::contiguous(&x, DType::kF32, {2, -1}), Error);
}

}  // namespace
}  // namespace linattn
