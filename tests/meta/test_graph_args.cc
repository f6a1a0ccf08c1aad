// Fuzz of the graph-mode argument validator and of the eager cu_seqlens validator: random
// malformed arguments never crash and always raise the documented error (code, failure
// category, the argument's name, "expected" and "got"). Graph-mode validation never reads the
// data, so the buffers here are fake addresses.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>

#include "meta/capacity.h"
#include "meta/chunk_meta.h"
#include "meta/graph_args.h"
#include "meta_test_util.h"

namespace linattn {
namespace {

using testing::error_of;
using FC = FailureCategory;

void* fake(uintptr_t a) { return reinterpret_cast<void*>(a); }

struct Case {
  meta::GraphMetaArgs a;
  Capacity cap;
};

Case valid_case(std::mt19937_64& rng) {
  auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Case c;
  c.cap = meta::make_capacity(uni(1, 5000), uni(1, 64), 16 << uni(0, 2));
  meta::GraphMetaArgs& a = c.a;
  a.max_num_seqs = c.cap.N_max;
  a.T_max = c.cap.T_max;
  a.BT = c.cap.BT;
  a.device = Device{};
  a.cu_seqlens = TensorView::contiguous(fake(0x100000), uni(0, 1) ? DType::kI32 : DType::kI64,
                                        {c.cap.N_max + 1});
  a.require_tables = uni(0, 1);
  if (a.require_tables || uni(0, 1)) {
    a.chunk_indices = TensorView::contiguous(fake(0x200000), DType::kI32, {c.cap.NT_max(), 2});
    a.chunk_offsets = TensorView::contiguous(fake(0x300000), DType::kI32, {c.cap.N_max + 1});
  }
  return c;
}

struct Mutation {
  const char* what;
  ErrorCode code;
  FC category;
  const char* arg;  // the message starts with it
  std::function<void(Case&, std::mt19937_64&)> apply;
};

int64_t other_than(int64_t v, std::mt19937_64& rng) {
  static const int64_t kPick[] = {-1, 0, 1, 2, 3, std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max(), int64_t{1} << 41};
  int64_t x = kPick[rng() % 8];
  const bool small = v > -(int64_t{1} << 40) && v < (int64_t{1} << 40);
  if (small && rng() % 2) x = v + static_cast<int64_t>(rng() % 7) - 3;
  return x != v ? x : (small ? v + 1 : -1);
}

const DType kNotI32[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kF64,
                         static_cast<DType>(200)};
const DType kNotCu[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, static_cast<DType>(77)};

std::vector<Mutation> mutations() {
  const ErrorCode inv = ErrorCode::kInvalidArgument;
  std::vector<Mutation> m;
  auto add = [&](const char* w, ErrorCode code, FC cat, const char* arg,
                 std::function<void(Case&, std::mt19937_64&)> f) { m.push_back({w, code, cat, arg, f}); };
  add("BT", ErrorCode::kUnsupported, FC::kUnsupportedOp, "chunk_size", [](Case& c, auto& r) {
    static const int kBad[] = {0, -64, 8, 48, 128, 63, std::numeric_limits<int>::min()};
    c.a.BT = kBad[r() % 7];
  });
  add("cu absent", inv, FC::kStaleOrDynamicMetadata, "cu_seqlens", [](Case& c, auto&) { c.a.cu_seqlens = {}; });
  add("cu rank", inv, FC::kStaleOrDynamicMetadata, "cu_seqlens", [](Case& c, auto& r) {
    static const int kRank[] = {2, 3, 5, -1, 6, 100, std::numeric_limits<int>::min()};
    c.a.cu_seqlens.ndim = kRank[r() % 7];
    c.a.cu_seqlens.shape[1] = 1;
  });
  add("cu dim", inv, FC::kStaleOrDynamicMetadata, "cu_seqlens", [](Case& c, auto& r) {
    c.a.cu_seqlens.shape[0] = r() % 2 ? -static_cast<int64_t>(r() % 100) - 1 : int64_t{1} << 50;
  });
  add("cu dtype", inv, FC::kStaleOrDynamicMetadata, "cu_seqlens", [](Case& c, auto& r) {
    c.a.cu_seqlens.dtype = kNotCu[r() % 5];
  });
  add("max_num_seqs", inv, FC::kStaleOrDynamicMetadata, "max_num_seqs", [](Case& c, auto& r) {
    c.a.max_num_seqs = other_than(c.a.max_num_seqs, r);
  });
  add("cu size", inv, FC::kStaleOrDynamicMetadata, "max_num_seqs", [](Case& c, auto& r) {
    c.a.cu_seqlens.shape[0] = other_than(c.a.cu_seqlens.shape[0], r) & ((int64_t{1} << 39) - 1);
    if (c.a.cu_seqlens.shape[0] - 1 == c.a.max_num_seqs) c.a.cu_seqlens.shape[0] += 1;
  });
  add("cu device", inv, FC::kAddressOrLifetime, "cu_seqlens", [](Case& c, auto& r) {
    c.a.cu_seqlens.device = Device{DeviceType::kCUDA, static_cast<int>(r() % 4)};
  });
  add("cu stride", inv, FC::kAddressOrLifetime, "cu_seqlens", [](Case& c, auto& r) {
    c.a.cu_seqlens.strides[0] = r() % 2 ? 2 + static_cast<int64_t>(r() % 5) : -1;
  });
  add("cu null", inv, FC::kAddressOrLifetime, "cu_seqlens", [](Case& c, auto&) { c.a.cu_seqlens.data = nullptr; });
  add("T_max", inv, FC::kStaleOrDynamicMetadata, "T_max", [](Case& c, auto& r) {
    static const int64_t kBad[] = {0, -1, std::numeric_limits<int64_t>::min(), int64_t{1} << 31,
                                   std::numeric_limits<int64_t>::max()};
    c.a.T_max = kBad[r() % 5];
  });
  auto tables = [&](const char* arg, bool idx) {
    auto view = [idx](Case& c) -> TensorView& { return idx ? c.a.chunk_indices : c.a.chunk_offsets; };
    auto ensure = [](Case& c) {
      if (!c.a.chunk_indices.defined()) {
        c.a.chunk_indices = TensorView::contiguous(fake(0x200000), DType::kI32, {c.cap.NT_max(), 2});
        c.a.chunk_offsets = TensorView::contiguous(fake(0x300000), DType::kI32, {c.cap.N_max + 1});
      }
    };
    add("table rows", inv, FC::kSentinelOffsetOrPadding, arg, [=](Case& c, auto& r) {
      ensure(c);
      TensorView& t = view(c);
      t.shape[0] = other_than(t.shape[0], r) & ((int64_t{1} << 39) - 1);
      if (t.shape[0] == (idx ? c.cap.NT_max() : c.cap.N_max + 1)) t.shape[0] += 1;
    });
    add("table rank", inv, FC::kSentinelOffsetOrPadding, arg, [=](Case& c, auto& r) {
      ensure(c);
      TensorView& t = view(c);
      static const int kRank[] = {1, 2, 3, 4, -2, 9};
      t.ndim = kRank[r() % 6];
      if (t.ndim == (idx ? 2 : 1)) t.ndim = 3;
      t.shape[1] = t.shape[2] = t.shape[3] = 2;
    });
    add("table dtype", inv, FC::kSentinelOffsetOrPadding, arg, [=](Case& c, auto& r) {
      ensure(c);
      view(c).dtype = kNotI32[r() % 6];
    });
    add("table device", inv, FC::kAddressOrLifetime, arg, [=](Case& c, auto&) {
      ensure(c);
      view(c).device = Device{DeviceType::kCUDA, 0};
    });
    add("table null", inv, FC::kAddressOrLifetime, arg, [=](Case& c, auto&) {
      ensure(c);
      view(c).data = nullptr;
    });
    add("table strides", inv, FC::kAddressOrLifetime, arg, [=](Case& c, auto&) {
      ensure(c);
      if (idx) view(c).strides[1] = 2;  // the 2 columns are never a unit dim
      else view(c).strides[0] = 3;
    });
    add("table overlaps cu", inv, FC::kAddressOrLifetime, arg, [=](Case& c, auto& r) {
      ensure(c);
      view(c).data = static_cast<char*>(c.a.cu_seqlens.data) + 4 * (r() % 2);
    });
    add("table absent but required", inv, FC::kSentinelOffsetOrPadding, arg, [=](Case& c, auto&) {
      ensure(c);
      c.a.require_tables = true;
      view(c) = {};
    });
  };
  tables("chunk_indices", true);
  tables("chunk_offsets", false);
  return m;
}

TEST(GraphArgs, ValidArgumentsPass) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 2000; ++i) {
    Case c = valid_case(rng);
    EXPECT_EQ(meta::check_graph_meta_args(c.a), c.cap);
  }
}

TEST(GraphArgs, FuzzSingleMutationRaisesTheDocumentedError) {
  std::mt19937_64 rng(2);
  const std::vector<Mutation> muts = mutations();
  for (int i = 0; i < 20000; ++i) {
    Case c = valid_case(rng);
    const Mutation& m = muts[rng() % muts.size()];
    m.apply(c, rng);
    const auto e = error_of([&] { meta::check_graph_meta_args(c.a); });
    ASSERT_TRUE(e) << "no error for mutation '" << m.what << "' on " << c.cap;
    SCOPED_TRACE(std::string("mutation '") + m.what + "': " + e->what());
    ASSERT_EQ(e->code(), m.code);
    ASSERT_EQ(e->category(), m.category);
    ASSERT_EQ(e->message().rfind(m.arg, 0), 0u);
    ASSERT_NE(e->message().find("expected"), std::string::npos);
    ASSERT_NE(e->message().find("got"), std::string::npos);
  }
}

TEST(GraphArgs, FuzzGarbageNeverCrashes) {
  std::mt19937_64 rng(3);
  const std::vector<Mutation> muts = mutations();
  auto garbage_view = [&](TensorView& t) {
    t.ndim = static_cast<int>(rng() % 13) - 3;
    for (int d = 0; d < kMaxDims; ++d) {
      t.shape[d] = rng() % 3 ? static_cast<int64_t>(rng() % 9) - 2 : static_cast<int64_t>(rng());
      t.strides[d] = static_cast<int64_t>(rng());
    }
    t.dtype = static_cast<DType>(rng() % 256);
    t.device = Device{static_cast<DeviceType>(rng() % 3), static_cast<int>(rng() % 3)};
    t.data = rng() % 4 ? fake(rng()) : nullptr;
  };
  int raised = 0;
  for (int i = 0; i < 20000; ++i) {
    Case c = valid_case(rng);
    if (i % 2) {
      for (int k = 0; k < 2 + static_cast<int>(rng() % 4); ++k) muts[rng() % muts.size()].apply(c, rng);
    } else {
      garbage_view(c.a.cu_seqlens);
      if (rng() % 2) garbage_view(c.a.chunk_indices);
      if (rng() % 2) garbage_view(c.a.chunk_offsets);
      c.a.max_num_seqs = static_cast<int64_t>(rng()) >> (rng() % 64);
      c.a.T_max = static_cast<int64_t>(rng()) >> (rng() % 64);
    }
    const auto e = error_of([&] { meta::check_graph_meta_args(c.a); });
    if (!e) continue;  // a garbage draw can be valid; it was then not dereferenced
    ++raised;
    ASSERT_NE(e->category(), FC::kNone) << e->what();
    ASSERT_TRUE(e->code() == ErrorCode::kInvalidArgument || e->code() == ErrorCode::kUnsupported);
    ASSERT_NE(e->message().find("expected"), std::string::npos) << e->what();
  }
  EXPECT_GT(raised, 19000);
}

TEST(GraphArgs, MaxNumSeqsMustMatchCuSeqlens) {
  Case c;
  c.a.cu_seqlens = TensorView::contiguous(fake(0x100000), DType::kI64, {9});
  c.a.max_num_seqs = 4;
  c.a.T_max = 100;
  const auto e = error_of([&] { meta::check_graph_meta_args(c.a); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message(), "max_num_seqs: expected cu_seqlens.size(0) - 1 = 8, got 4");
  EXPECT_EQ(e->category(), FC::kStaleOrDynamicMetadata);
  c.a.max_num_seqs = 8;
  EXPECT_EQ(meta::check_graph_meta_args(c.a), (Capacity{100, 8, 64}));
}

// The eager validator reads the data: real buffers, random malformed contents and views.
TEST(GraphArgs, FuzzEagerCuSeqlensValidator) {
  std::mt19937_64 rng(4);
  auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 20000; ++i) {
    const int64_t N = uni(1, 12), T = uni(0, 500);
    std::vector<int64_t> cu{0};
    for (int64_t n = 1; n < N; ++n) cu.push_back(uni(0, T));
    std::sort(cu.begin(), cu.end());
    cu.push_back(T);
    int64_t total = T;
    bool exact = uni(0, 1);
    const DType dt = uni(0, 1) ? DType::kI32 : DType::kI64;
    Tensor t = testing::cu_tensor(cu, dt);
    TensorView v = t.view();
    switch (uni(0, 8)) {
      case 0: v.data = nullptr; break;
      case 1: t.set(0, static_cast<double>(uni(1, 9) * (uni(0, 1) ? 1 : -1))); break;
      case 2: { const int64_t k = uni(1, N); t.set(k, t.get(k - 1) - static_cast<double>(uni(1, 50))); break; }
      case 3:
        if (T == 0) { total = 1; exact = true; }
        else { total = T - uni(1, std::min<int64_t>(10, T)); exact = false; }
        break;
      case 4: total = T + uni(1, 10); exact = true; break;
      case 5: v.dtype = kNotCu[uni(0, 4)]; break;
      case 6: v.device = Device{DeviceType::kCUDA, 0}; break;
      case 7: v.ndim = static_cast<int>(uni(2, 9)); v.shape[1] = 1; break;
      default: v.shape[0] = uni(-3, 1); break;
    }
    const auto e = error_of([&] { meta::check_cu_seqlens_host(v, total, exact); });
    ASSERT_TRUE(e) << "iteration " << i;
    ASSERT_EQ(e->code(), ErrorCode::kInvalidArgument) << e->what();
    ASSERT_EQ(e->message().rfind("cu_seqlens", 0), 0u) << e->what();
    ASSERT_NE(e->message().find("expected"), std::string::npos) << e->what();
    ASSERT_NE(e->message().find("got"), std::string::npos) << e->what();
  }
}

}  // namespace
}  // namespace linattn
