// Count-then-carve: the same layout function sizes and slices, slices are 256-B aligned,
// disjoint, in order and named; a short, null or misaligned workspace is refused with
// address-or-lifetime; nested layouts compose.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "meta/capacity.h"
#include "meta/chunk_meta.h"
#include "meta/workspace.h"
#include "meta_test_util.h"

namespace linattn {
namespace {

using meta::Workspace;
using testing::error_of;

struct Desc { int64_t T, HV, K, V; };
struct Bufs { float* w; float* u; double* h; int8_t* flag; meta::ChunkTables tables; };

void layout(const Desc& d, const Capacity& cap, Workspace& ws, Bufs* b) {
  b->w = ws.take<float>("w", d.T * d.HV * d.K);
  b->u = ws.take<float>("u", d.T * d.HV * d.V);
  b->h = ws.take<double>("h", cap.NT_max() * d.HV * d.K * d.V);
  b->flag = ws.take<int8_t>("flag", 3);
  b->tables = meta::carve_chunk_tables(ws, cap);  // a nested layout
}

struct Aligned {
  std::unique_ptr<std::byte, decltype(&std::free)> p{nullptr, &std::free};
  explicit Aligned(size_t n) : p(static_cast<std::byte*>(std::aligned_alloc(256, (n + 255) / 256 * 256 + 256)), &std::free) {}
  std::byte* get() const { return p.get(); }
};

TEST(Workspace, CountAndCarveAgree) {
  std::mt19937_64 rng(5);
  for (int it = 0; it < 500; ++it) {
    const Desc d{static_cast<int64_t>(rng() % 300), 1 + static_cast<int64_t>(rng() % 4),
                 1 + static_cast<int64_t>(rng() % 64), 1 + static_cast<int64_t>(rng() % 64)};
    const Capacity cap = meta::make_capacity(1 + static_cast<int64_t>(rng() % 500),
                                             1 + static_cast<int64_t>(rng() % 9), 64);
    Bufs counted{};
    const size_t need = meta::workspace_bytes_of([&](Workspace& ws) { layout(d, cap, ws, &counted); });
    EXPECT_EQ(counted.w, nullptr);  // counting hands out no pointers
    EXPECT_EQ(need % kWorkspaceAlignment, 0u);
    Aligned buf(need);
    Bufs b{};
    const Workspace ws = meta::carve_workspace(buf.get(), need, [&](Workspace& w) { layout(d, cap, w, &b); });
    ASSERT_EQ(ws.bytes(), need);
    const auto& s = ws.slices();
    ASSERT_EQ(s.size(), 6u);
    const char* names[] = {"w", "u", "h", "flag", "chunk_indices", "chunk_offsets"};
    const size_t sizes[] = {sizeof(float) * d.T * d.HV * d.K, sizeof(float) * d.T * d.HV * d.V,
                            sizeof(double) * cap.NT_max() * d.HV * d.K * d.V, 3,
                            sizeof(int32_t) * 2 * cap.NT_max(), sizeof(int32_t) * (cap.N_max + 1)};
    const void* ptrs[] = {b.w, b.u, b.h, b.flag, b.tables.indices, b.tables.offsets};
    for (size_t i = 0; i < s.size(); ++i) {
      EXPECT_STREQ(s[i].name, names[i]);
      EXPECT_EQ(s[i].bytes, sizes[i]);
      EXPECT_EQ(s[i].offset % kWorkspaceAlignment, 0u);
      EXPECT_EQ(ptrs[i], buf.get() + s[i].offset);
      EXPECT_LE(s[i].offset + s[i].bytes, need);
      if (i) { EXPECT_GE(s[i].offset, s[i - 1].offset + s[i - 1].bytes); }  // disjoint, in order
    }
  }
}

TEST(Workspace, RefusesShortNullOrMisalignedBuffers) {
  const Desc d{100, 2, 16, 16};
  const Capacity cap = meta::make_capacity(100, 3, 32);
  Bufs b{};
  auto lay = [&](Workspace& ws) { layout(d, cap, ws, &b); };
  const size_t need = meta::workspace_bytes_of(lay);
  Aligned buf(need + 256);
  auto short_ = error_of([&] { meta::carve_workspace(buf.get(), need - 1, lay); });
  ASSERT_TRUE(short_);
  EXPECT_EQ(short_->message(), "workspace_bytes: expected >= " + std::to_string(need) + ", got " +
                                   std::to_string(need - 1));
  EXPECT_EQ(short_->category(), FailureCategory::kAddressOrLifetime);
  auto null = error_of([&] { meta::carve_workspace(nullptr, need, lay); });
  ASSERT_TRUE(null);
  EXPECT_EQ(null->category(), FailureCategory::kAddressOrLifetime);
  auto mis = error_of([&] { meta::carve_workspace(buf.get() + 16, need, lay); });
  ASSERT_TRUE(mis);
  EXPECT_NE(mis->message().find("aligned to 256"), std::string::npos);
  EXPECT_EQ(mis->category(), FailureCategory::kAddressOrLifetime);
  // An empty layout needs nothing, not even a buffer.
  EXPECT_EQ(meta::workspace_bytes_of([](Workspace&) {}), 0u);
  EXPECT_FALSE(error_of([] { meta::carve_workspace(nullptr, 0, [](Workspace&) {}); }));
}

TEST(Workspace, NonDeterministicLayoutIsAnInternalError) {
  int calls = 0;
  auto lay = [&](Workspace& ws) { ws.take<float>("x", 64 * (++calls)); };  // grows every call
  Aligned buf(4096);
  auto e = error_of([&] { meta::carve_workspace(buf.get(), 256, lay); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::kInternal);
}

TEST(Workspace, PrintsItsSlices) {
  Workspace ws;
  ws.take<float>("a", 10);
  ws.take<int32_t>("b", 100);
  EXPECT_EQ(ws.str(), "a@0+40 b@256+400 (768 B)");
}

}  // namespace
}  // namespace linattn
