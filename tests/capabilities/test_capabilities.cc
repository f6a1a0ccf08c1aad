// The capability matrix (tools/capabilities.h) tells the truth: every cell the probe reports
// "supported" runs again with other seeds and other layouts (two more variants) and matches the
// fp64 reference within its bar; no cell fails; unsupported cells carry the library's reason;
// a backend without a device here reports exactly why; and the Checker the probes use does
// reject wrong, non-finite and non-bitwise results (so "supported" is not vacuous).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <set>

#include "capabilities.h"
#include "capabilities_util.h"

namespace linattn::caps {
namespace {

bool sanitized() { return std::getenv("LINATTN_SANITIZED") != nullptr; }

const std::vector<Cell>& matrix() {
  static const std::vector<Cell> cells = probe_all({});
  return cells;
}

TEST(Capabilities, EveryCellIsProbedAndNoneFails) {
  const auto& cells = matrix();
  size_t expected = 0;
  for (const auto& op : all_ops()) expected += all_backends().size() * dtypes_of(op).size() * 3 * 2;
  ASSERT_EQ(cells.size(), expected);
  std::set<std::string> seen;
  for (const Cell& c : cells) {
    EXPECT_TRUE(seen.insert(c.key.str()).second) << "probed twice: " << c.key.str();
    EXPECT_NE(c.status, Status::kFailed) << c.key.str() << ": " << c.category << ": " << c.reason;
    if (c.status == Status::kUnsupported || c.status == Status::kNotApplicable) {
      EXPECT_FALSE(c.reason.empty()) << c.key.str();
    }
    if (c.status == Status::kSupported) {
      EXPECT_GT(c.num_checked, 0) << c.key.str();
      EXPECT_LE(c.rel_rms_err, c.bar) << c.key.str() << " worst " << c.worst;
    }
  }
}

// The CPU backend is the reference backend of the project: every fp32 cell of every op runs.
TEST(Capabilities, CpuFp32CellsAreSupported) {
  for (const Cell& c : matrix())
    if (c.key.backend == "cpu" && (c.key.dtype == "fp32" || c.key.op == "metadata") &&
        c.status != Status::kNotApplicable) {
      EXPECT_EQ(c.status, Status::kSupported) << c.key.str() << ": " << c.reason;
    }
}

TEST(Capabilities, SupportedCellsMatchTheReferenceOnOtherSeedsAndLayouts) {
  int rechecked = 0;
  const std::vector<int> variants = sanitized() ? std::vector<int>{1} : std::vector<int>{1, 2};
  for (const Cell& c : matrix()) {
    if (c.status != Status::kSupported) continue;
    for (int v : variants) {
      const Cell r = probe_cell(c.key, v);
      ASSERT_EQ(r.status, Status::kSupported)
          << c.key.str() << " variant " << v << ": " << status_name(r.status) << " " << r.category << ": " << r.reason;
      EXPECT_GT(r.num_checked, 0) << c.key.str();
      EXPECT_LE(r.rel_rms_err, r.bar) << c.key.str() << " variant " << v << " worst " << r.worst;
      ++rechecked;
    }
  }
  EXPECT_GE(rechecked, 50);
}

TEST(Capabilities, UnavailableBackendSaysWhy) {
  const std::string why = backend_unavailable("cuda");
  for (const Cell& c : matrix()) {
    if (c.key.backend != "cuda" || c.status == Status::kNotApplicable) continue;
    if (!why.empty()) {
      EXPECT_EQ(c.status, Status::kUnsupported) << c.key.str();
      EXPECT_EQ(c.reason, why) << c.key.str();
    } else {
      EXPECT_NE(c.reason, "no CUDA device") << c.key.str();
    }
  }
  EXPECT_EQ(backend_unavailable("cpu"), "");
}

TEST(Capabilities, CheckerRejectsWrongResults) {
  Rng rng(5);
  const Tensor ref = rand_tensor(rng, DType::kF64, {64}, -1, 1);
  const test::Tolerance tol{1e-4, 1e-6};
  {
    Checker ok;
    ok.add("exact", ref, ref.to(DType::kF32), tol);
    EXPECT_TRUE(ok.ok());
  }
  {
    Tensor bad = ref.to(DType::kF32);
    bad.set(17, bad.get(17) + 0.05);
    Checker c;
    c.add("first", ref, ref.to(DType::kF32), tol);
    c.add("perturbed", ref, bad, tol);
    EXPECT_FALSE(c.ok());
    Cell cell;
    c.fill(cell);
    EXPECT_EQ(cell.status, Status::kFailed);
    EXPECT_EQ(cell.category, "mismatch");
    EXPECT_EQ(cell.worst, "perturbed");
  }
  {
    Tensor nan = ref.to(DType::kF32);
    nan.set(3, std::nan(""));
    Checker c;
    c.add("nan", ref, nan, tol);
    EXPECT_FALSE(c.ok());
  }
  {  // only the first `count` elements are compared (real rows, not padding)
    Tensor tail = ref.to(DType::kF32);
    tail.set(63, 1e6);
    Checker c;
    c.add("rows", ref, tail, tol, 63);
    EXPECT_TRUE(c.ok());
  }
  {  // bf16 results are held to the rounded reference, not excused
    Tensor b = ref.to(DType::kBF16);
    Checker exact;
    exact.add("bf16", ref, b, {1e-3, 0});
    EXPECT_TRUE(exact.ok());
    b.set(5, b.get(5) * 1.05);
    Checker off;
    off.add("bf16", ref, b, {1e-3, 0});
    EXPECT_FALSE(off.ok());
  }
  {
    Tensor a = ref.to(DType::kF32), b = a;
    b.set(9, std::nextafter(static_cast<float>(b.get(9)), 10.0f));
    Checker c;
    c.add_bitwise("x", a, b);
    EXPECT_FALSE(c.ok());
    Cell cell;
    c.fill(cell);
    EXPECT_EQ(cell.category, "graph-vs-fixed");
  }
  {
    Checker c;
    c.add_scalar("s", 1.0, 1.01, 2e-3);
    EXPECT_FALSE(c.ok());
  }
}

}  // namespace
}  // namespace linattn::caps
