// Eager (exact-size) vs static (fixed-capacity) chunk metadata on >= 10,000 random layouts,
// the static kernel on malformed layouts (never out of bounds, documented result), and the
// public helpers (count_chunks, chunk_meta_workspace_bytes).
#include <gtest/gtest.h>

#include <limits>

#include "linattn/meta.h"
#include "meta/capacity.h"
#include "meta/chunk_meta.h"
#include "meta_test_util.h"

namespace linattn {
namespace {

using testing::cu_tensor;
using testing::error_of;
using testing::Layout;

constexpr int32_t kCanary = 0x5a5a5a5a;
constexpr int64_t kGuard = 16;

// A static int32 table with guard zones of canaries on both sides.
struct Guarded {
  std::vector<int32_t> buf;
  int64_t n;
  explicit Guarded(int64_t count) : buf(static_cast<size_t>(count + 2 * kGuard), kCanary), n(count) {
    for (int64_t i = 0; i < n; ++i) buf[kGuard + i] = 0x11111111 * static_cast<int32_t>(i % 7 + 1);
  }
  int32_t* data() { return buf.data() + kGuard; }
  int32_t operator[](int64_t i) const { return buf[kGuard + i]; }
  bool guards_intact() const {
    for (int64_t i = 0; i < kGuard; ++i) {
      if (buf[i] != kCanary || buf[kGuard + n + i] != kCanary) return false;
    }
    return true;
  }
};

struct StaticTables {
  Guarded idx, off;
  StaticTables(const Capacity& cap) : idx(2 * cap.NT_max()), off(cap.N_max + 1) {}
  void build(const Capacity& cap, const Tensor& cu) {
    prepare_chunk_meta(cap, cu,
                       TensorView::contiguous(idx.data(), DType::kI32, {cap.NT_max(), 2}),
                       TensorView::contiguous(off.data(), DType::kI32, {cap.N_max + 1}));
  }
};

TEST(ChunkMeta, EagerEqualsStaticOnRandomLayouts) {
  std::mt19937_64 rng(20240601);
  int n_one = 0, n_full = 0, n_tmax = 0, n_tail = 0, n_mult = 0, n_nonmult = 0, n_empty = 0;
  constexpr int kLayouts = 12000;
  for (int it = 0; it < kLayouts; ++it) {
    const Layout L = testing::random_layout(rng);
    const Capacity& cap = L.cap;
    const DType dt = it % 2 ? DType::kI64 : DType::kI32;
    const int64_t T = L.T(), N = L.N, NT_max = cap.NT_max();
    n_one += N == 1;
    n_full += N == cap.N_max;
    n_tmax += T == cap.T_max;
    n_tail += N < cap.N_max || (N > 1 && L.cu[N - 1] == T);
    n_mult += L.multiples;
    n_nonmult += T % cap.BT != 0;
    n_empty += T == 0;

    // Eager over the N real sequences (exact end) and over all N_max (zero-length tail).
    const std::vector<int64_t> real(L.cu.begin(), L.cu.begin() + N + 1);
    const ChunkMetaTables e = prepare_chunk_meta_eager(cu_tensor(real, dt), cap.BT, T, true);
    const ChunkMetaTables ef = prepare_chunk_meta_eager(cu_tensor(L.cu, dt), cap.BT, T, true);
    const Tensor cu = cu_tensor(L.cu, dt);
    StaticTables s(cap);
    s.build(cap, cu);

    SCOPED_TRACE(cap.str() + " N=" + std::to_string(N) + " T=" + std::to_string(T) + " dtype=" +
                 dtype_name(dt) + " iter=" + std::to_string(it));
    ASSERT_TRUE(s.idx.guards_intact() && s.off.guards_intact());
    const int64_t NT = e.num_chunks;
    ASSERT_LE(NT, NT_max);
    ASSERT_EQ(ef.num_chunks, NT);
    // Naive definition: sum of ceil(len / BT), rows in sequence order.
    int64_t naive = 0;
    for (int64_t n = 0; n < N; ++n) naive += meta::chunks_of(L.cu[n + 1] - L.cu[n], cap.BT);
    ASSERT_EQ(NT, naive);
    ASSERT_EQ(count_chunks(cu, cap.BT), NT);
    for (int64_t r = 0; r < NT; ++r) {
      const int32_t* er = e.chunk_indices.data<int32_t>() + 2 * r;
      ASSERT_EQ(s.idx[2 * r], er[0]) << "row " << r;
      ASSERT_EQ(s.idx[2 * r + 1], er[1]) << "row " << r;
      ASSERT_EQ(e.chunk_offsets.data<int32_t>()[er[0]] + er[1], r) << "row " << r;
    }
    for (int64_t r = NT; r < NT_max; ++r) {
      ASSERT_EQ(s.idx[2 * r], -1) << "sentinel row " << r;
      ASSERT_EQ(s.idx[2 * r + 1], 0) << "sentinel row " << r;
    }
    for (int64_t n = 0; n <= cap.N_max; ++n) {
      const int32_t want = n <= N ? e.chunk_offsets.data<int32_t>()[n] : static_cast<int32_t>(NT);
      ASSERT_EQ(s.off[n], want) << "offset " << n;
      ASSERT_EQ(ef.chunk_offsets.data<int32_t>()[n], want) << "offset " << n;
    }
  }
  // Every case the contract names is covered many times.
  for (int c : {n_one, n_full, n_tmax, n_tail, n_mult, n_nonmult, n_empty}) EXPECT_GT(c, 200);
}

// Reference model of the documented static semantics (src/meta/chunk_meta.h), for any data.
void model(const std::vector<int64_t>& cu, const Capacity& cap, std::vector<int32_t>* idx,
           std::vector<int32_t>* off) {
  const int64_t NT_max = cap.NT_max();
  idx->assign(static_cast<size_t>(2 * NT_max), 0);
  off->assign(static_cast<size_t>(cap.N_max + 1), 0);
  auto c = [&](int64_t n) { return std::min(std::max<int64_t>(cu[n], 0), cap.T_max); };
  int64_t o = 0;
  for (int64_t n = 0; n < cap.N_max; ++n) {
    const int64_t len = std::max<int64_t>(c(n + 1) - c(n), 0);
    for (int64_t k = 0; k < meta::chunks_of(len, cap.BT) && o < NT_max; ++k, ++o) {
      (*idx)[2 * o] = static_cast<int32_t>(n);
      (*idx)[2 * o + 1] = static_cast<int32_t>(k);
    }
    (*off)[n + 1] = static_cast<int32_t>(o);
  }
  for (; o < NT_max; ++o) (*idx)[2 * o] = -1;
}

TEST(ChunkMeta, StaticKernelOnMalformedLayoutsStaysInBounds) {
  std::mt19937_64 rng(777);
  auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
  constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
  for (int it = 0; it < 3000; ++it) {
    const Capacity cap = meta::make_capacity(uni(1, 200), uni(1, 10), 16 << uni(0, 2));
    const DType dt = it % 2 ? DType::kI64 : DType::kI32;
    std::vector<int64_t> cu(static_cast<size_t>(cap.N_max + 1));
    for (auto& v : cu) {
      switch (uni(0, 5)) {
        case 0: v = uni(-3 * cap.T_max, 3 * cap.T_max); break;  // negative / past T_max
        case 1: v = dt == DType::kI64 ? kI64Min : std::numeric_limits<int32_t>::min(); break;
        case 2: v = dt == DType::kI64 ? kI64Max : std::numeric_limits<int32_t>::max(); break;
        case 3: v = cap.T_max; break;
        default: v = uni(0, cap.T_max);                          // non-monotone
      }
    }
    const Tensor t = cu_tensor(cu, dt);
    StaticTables s(cap);
    s.build(cap, t);
    std::vector<int32_t> want_idx, want_off;
    model(cu, cap, &want_idx, &want_off);
    SCOPED_TRACE(cap.str() + " iter=" + std::to_string(it));
    ASSERT_TRUE(s.idx.guards_intact() && s.off.guards_intact()) << "wrote out of bounds";
    for (int64_t i = 0; i < 2 * cap.NT_max(); ++i) ASSERT_EQ(s.idx[i], want_idx[i]) << "idx " << i;
    ASSERT_EQ(s.off[0], 0);
    for (int64_t n = 0; n <= cap.N_max; ++n) {
      ASSERT_EQ(s.off[n], want_off[n]) << "offset " << n;
      if (n) { ASSERT_LE(s.off[n - 1], s.off[n]); }
      ASSERT_LE(s.off[n], cap.NT_max());
    }
    for (int64_t r = 0; r < cap.NT_max(); ++r) {  // every real row is in range
      if (s.idx[2 * r] < 0) continue;
      ASSERT_LT(s.idx[2 * r], cap.N_max);
      ASSERT_LT(s.idx[2 * r + 1], meta::chunks_of(cap.T_max, cap.BT));
    }
  }
}

TEST(ChunkMeta, MalformedLayoutExamples) {
  auto run = [](const Capacity& cap, std::vector<int64_t> cu) {
    StaticTables s(cap);
    s.build(cap, cu_tensor(cu, DType::kI64));
    EXPECT_TRUE(s.idx.guards_intact() && s.off.guards_intact());
    std::vector<int32_t> v;
    for (int64_t i = 0; i < 2 * cap.NT_max(); ++i) v.push_back(s.idx[i]);
    for (int64_t i = 0; i <= cap.N_max; ++i) v.push_back(s.off[i]);
    return v;
  };
  const Capacity cap = meta::make_capacity(64, 3, 32);  // NT_max = 2 + 2 = 4
  // Decreasing entry: the negative length counts as empty, the next sequence restarts at 10.
  EXPECT_EQ(run(cap, {0, 40, 10, 64}), (std::vector<int32_t>{0, 0, 0, 1, 2, 0, 2, 1, 0, 2, 2, 4}));
  // Past T_max and negative entries are clamped to [0, T_max].
  EXPECT_EQ(run(cap, {-5, 1000, 1000, 1000}),
            (std::vector<int32_t>{0, 0, 0, 1, -1, 0, -1, 0, 0, 2, 2, 2}));
  // More chunks than NT_max (zig-zag, 4 + 0 + 4 > 6): the extra chunks are dropped and the
  // offsets saturate at NT_max.
  const Capacity cap16 = meta::make_capacity(64, 3, 16);  // NT_max = 4 + 2 = 6
  EXPECT_EQ(run(cap16, {0, 64, 0, 64}),
            (std::vector<int32_t>{0, 0, 0, 1, 0, 2, 0, 3, 2, 0, 2, 1, 0, 4, 4, 6}));
}

TEST(ChunkMeta, EagerRejectsBadLayoutsAndCountsChunks) {
  auto cat = [](std::vector<int64_t> cu, int64_t T, bool exact) {
    return error_of([&] { prepare_chunk_meta_eager(cu_tensor(cu, DType::kI32), 64, T, exact); });
  };
  auto e = cat({1, 4}, -1, false);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message().find("cu_seqlens[0]: expected 0, got 1"), std::string::npos) << e->message();
  e = cat({0, 5, 4}, -1, false);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message().find("cu_seqlens[2]: expected >= cu_seqlens[1] = 5"), std::string::npos);
  e = cat({0, 5, 9}, 8, false);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message().find("expected <= T = 8"), std::string::npos) << e->message();
  e = cat({0, 5, 7}, 8, true);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message().find("expected T = 8"), std::string::npos) << e->message();
  EXPECT_EQ(e->code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(cat({0, 5, 8}, 8, true));
  EXPECT_EQ(count_chunks(cu_tensor({0, 1, 64, 64, 193}, DType::kI64), 64), 1 + 1 + 0 + 3);
  EXPECT_EQ(count_chunks(cu_tensor({0, 1, 64, 64, 193}, DType::kI32), 16), 1 + 4 + 0 + 9);
  auto u = error_of([&] { count_chunks(cu_tensor({0, 4}, DType::kI32), 48); });
  ASSERT_TRUE(u);
  EXPECT_EQ(u->code(), ErrorCode::kUnsupported);
  EXPECT_EQ(u->category(), FailureCategory::kUnsupportedOp);
}

TEST(ChunkMeta, WorkspaceBytesOfTheTables) {
  const Capacity cap = meta::make_capacity(1000, 7, 64);  // NT_max = 16 + 6 = 22
  // [22, 2] int32 = 176 B -> 256, then [8] int32 = 32 B -> 256.
  EXPECT_EQ(chunk_meta_workspace_bytes(cap), 512u);
  EXPECT_TRUE(error_of([] { chunk_meta_workspace_bytes(Capacity{0, 1, 64}); }));
}

}  // namespace
}  // namespace linattn
