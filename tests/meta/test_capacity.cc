// Capacity: NT_max formula, validation (field named, Unsupported for BT), printing, and that
// NT_max bounds (tightly) the chunk count of every layout that fits.
#include <gtest/gtest.h>

#include <sstream>

#include "meta/capacity.h"
#include "meta_test_util.h"

namespace linattn {
namespace {

using testing::error_of;

TEST(Capacity, NTMaxAndPrinting) {
  EXPECT_EQ((Capacity{4096, 8, 64}.NT_max()), 64 + 7);
  EXPECT_EQ((Capacity{4097, 8, 64}.NT_max()), 65 + 7);
  EXPECT_EQ((Capacity{1, 1, 16}.NT_max()), 1);
  EXPECT_EQ((Capacity{100, 3, 32}.str()), "Capacity{T_max=100, N_max=3, BT=32, NT_max=6}");
  std::ostringstream os;
  os << Capacity{64, 2, 16};
  EXPECT_EQ(os.str(), "Capacity{T_max=64, N_max=2, BT=16, NT_max=5}");
  EXPECT_TRUE((Capacity{64, 2, 16}.fits(64, 2)));
  EXPECT_FALSE((Capacity{64, 2, 16}.fits(65, 2)));
  EXPECT_FALSE((Capacity{64, 2, 16}.fits(64, 3)));
}

TEST(Capacity, Validation) {
  struct Bad { Capacity c; ErrorCode code; const char* prefix; };
  const Bad bad[] = {
      {{64, 2, 48}, ErrorCode::kUnsupported, "Capacity.BT: expected one of {16, 32, 64}, got 48"},
      {{64, 2, 0}, ErrorCode::kUnsupported, "Capacity.BT"},
      {{0, 2, 64}, ErrorCode::kInvalidArgument, "Capacity.T_max: expected >= 1, got 0"},
      {{-5, 2, 64}, ErrorCode::kInvalidArgument, "Capacity.T_max"},
      {{64, 0, 64}, ErrorCode::kInvalidArgument, "Capacity.N_max: expected >= 1, got 0"},
      {{int64_t{1} << 31, 1, 64}, ErrorCode::kInvalidArgument, "Capacity.T_max: expected <= 2147483647"},
      {{1 << 30, int64_t{1} << 31, 16}, ErrorCode::kInvalidArgument, "Capacity.N_max: expected NT_max"},
  };
  for (const Bad& b : bad) {
    auto e = error_of([&] { b.c.validate(); });
    ASSERT_TRUE(e) << b.prefix;
    EXPECT_EQ(e->code(), b.code);
    EXPECT_EQ(e->message().rfind(b.prefix, 0), 0u) << e->message();
  }
  EXPECT_FALSE(error_of([] { meta::make_capacity(1 << 20, 1 << 10, 16); }));
}

// Exhaustive over small capacities: the max over all layouts of sum ceil(len/BT) is <= NT_max,
// and is attained when T_max is a multiple of BT (N_max - 1 one-token sequences + the rest).
TEST(Capacity, NTMaxBoundsEveryLayout) {
  const int BT = 16;
  for (int64_t T_max = 1; T_max <= 40; ++T_max) {
    for (int64_t N_max = 1; N_max <= 4; ++N_max) {
      const Capacity cap = meta::make_capacity(T_max, N_max, BT);
      int64_t best = 0;
      // All compositions of at most T_max tokens into N_max lengths (odometer).
      std::vector<int64_t> len(static_cast<size_t>(N_max), 0);
      while (true) {
        int64_t T = 0, nt = 0;
        for (int64_t l : len) T += l, nt += meta::chunks_of(l, BT);
        if (T <= T_max) best = std::max(best, nt);
        size_t i = 0;
        while (i < len.size() && ++len[i] > T_max) len[i++] = 0;
        if (i == len.size()) break;
      }
      ASSERT_LE(best, cap.NT_max()) << cap;
      if (T_max % BT == 0) { ASSERT_EQ(best, cap.NT_max()) << cap; }
    }
  }
}

}  // namespace
}  // namespace linattn
