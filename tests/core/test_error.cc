// linattn::Error: codes, categories, location and message.
#include <gtest/gtest.h>

#include "core/check.h"

namespace linattn {
namespace {

TEST(Error, CarriesCodeCategoryAndLocation) {
  try {
    LINATTN_CHECK(1 == 2, "q: expected ", 3, " got ", 4);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.category(), FailureCategory::kNone);
    EXPECT_EQ(e.message(), "q: expected 3 got 4");
    EXPECT_GT(e.line(), 0);
    EXPECT_NE(std::string(e.what()).find("test_error.cc"), std::string::npos);
  }
  try {
    LINATTN_UNSUPPORTED("head dim 300 (allowed: <= 256)");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(e.category(), FailureCategory::kUnsupportedOp);
    EXPECT_NE(std::string(e.what()).find("unsupported-op"), std::string::npos);
  }
  EXPECT_STREQ(failure_category_name(FailureCategory::kSentinelOffsetOrPadding),
               "sentinel-offset-or-padding");
}

}  // namespace
}  // namespace linattn
