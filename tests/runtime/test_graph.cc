// linattn::Graph on the CPU backend: capture records without running, replay runs with the
// data of the moment (stale-metadata test), forbidden work during capture fails with its
// category and records nothing, lifecycle misuse is reported, CUDA graphs are Unsupported in
// a CPU-only build.
#include <gtest/gtest.h>

#include <thread>

#include "core/capture.h"
#include "linattn/graph.h"
#include "linattn/meta.h"
#include "meta_test_util.h"
#include "test_ops.h"

namespace linattn {
namespace {

using testing::cu_tensor;
using testing::error_of;

// Static buffers of one capacity: cu, tables, x, y.
struct Static {
  Capacity cap;
  int64_t D = 3;
  Tensor cu, idx, off, x, y, s;
  Static(Capacity c, DType cu_dtype) : cap(c) {
    cu = Tensor(cu_dtype, {cap.N_max + 1});
    idx = Tensor(DType::kI32, {cap.NT_max(), 2});
    off = Tensor(DType::kI32, {cap.N_max + 1});
    x = Tensor(DType::kF32, {1, cap.T_max, D});
    y = Tensor(DType::kF32, {1, cap.T_max, D});
    s = Tensor(DType::kF32, {cap.N_max, D});
    for (int64_t i = 0; i < cu.numel(); ++i) cu.set(i, 0);
  }
  void step() {
    prepare_chunk_meta(cap, cu, idx, off);
    testing::chunk_scale(cap, cu, idx, x, y);
    testing::seq_sum(cap, cu, off, x, s);
  }
  void load(const std::vector<int64_t>& cu_vals, std::mt19937_64& rng) {  // copy_ into statics
    for (size_t i = 0; i < cu_vals.size(); ++i) cu.set(static_cast<int64_t>(i), static_cast<double>(cu_vals[i]));
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
    for (int64_t i = 0; i < s.numel(); ++i) s.data<float>()[i] = u(rng);
    for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = 12345.0f;  // padding marker
  }
};

// Replay result == eager exact-size result on the same content, bitwise; padding untouched.
void expect_matches_eager(const Static& st, const std::vector<int64_t>& cu, const std::vector<float>& s_in) {
  const int64_t T = cu.back(), D = st.D;
  std::vector<float> y(static_cast<size_t>(T * D)), s(s_in.begin(), s_in.begin() + (cu.size() - 1) * D);
  testing::chunk_scale_eager(cu, st.cap.BT, D, st.x.data<float>(), y.data());
  testing::seq_sum_eager(cu, D, st.x.data<float>(), s.data());
  for (int64_t i = 0; i < T * D; ++i) ASSERT_EQ(st.y.data<float>()[i], y[i]) << "y index " << i;
  for (int64_t i = T * D; i < st.cap.T_max * D; ++i) ASSERT_EQ(st.y.data<float>()[i], 12345.0f) << "padding " << i;
  for (size_t i = 0; i < s.size(); ++i) ASSERT_EQ(st.s.data<float>()[i], s[i]) << "state index " << i;
  const ChunkMetaTables e = prepare_chunk_meta_eager(cu_tensor(cu, DType::kI64), st.cap.BT);
  for (int64_t r = 0; r < st.cap.NT_max(); ++r) {
    const bool real = r < e.num_chunks;
    ASSERT_EQ(st.idx.data<int32_t>()[2 * r], real ? e.chunk_indices.data<int32_t>()[2 * r] : -1) << "row " << r;
    ASSERT_EQ(st.idx.data<int32_t>()[2 * r + 1], real ? e.chunk_indices.data<int32_t>()[2 * r + 1] : 0);
  }
}

TEST(Graph, CaptureRecordsWithoutRunningThenReplays) {
  Static st(Capacity{100, 4, 16}, DType::kI32);
  std::mt19937_64 rng(1);
  st.load({0, 10, 40, 40, 97}, rng);
  Graph g;
  EXPECT_EQ(g.state(), Graph::State::kEmpty);
  g.begin_capture();
  EXPECT_EQ(g.state(), Graph::State::kCapturing);
  st.step();
  g.end_capture();
  EXPECT_EQ(g.state(), Graph::State::kReady);
  EXPECT_EQ(g.node_names(), (std::vector<std::string>{"chunk_meta", "chunk_scale", "seq_sum"}));
  EXPECT_EQ(st.y.data<float>()[0], 12345.0f);  // nothing ran during capture
  const std::vector<float> s_in(st.s.data<float>(), st.s.data<float>() + st.s.numel());
  g.replay();
  expect_matches_eager(st, {0, 10, 40, 40, 97}, s_in);
}

// Capture once, then for many layouts change cu_seqlens (and the data) in place and replay:
// every replay must use the new layout. Layouts come back (same buffer, same pointer, older
// contents) to catch any cache keyed by identity.
TEST(Graph, StaleMetadataReplayUsesTheNewLayout) {
  for (DType dt : {DType::kI32, DType::kI64}) {
    for (int BT : {16, 32, 64}) {
      const Capacity cap{200, 5, BT};
      Static st(cap, dt);
      Graph g;
      g.capture([&] { st.step(); });
      const std::vector<std::vector<int64_t>> layouts = {
          {0, 40, 80, 120, 160, 200},   // dense batch
          {0, 3, 67, 68, 150, 199},     // varlen
          {0, 50, 50, 50, 50, 50},      // zero-length tail sequences
          {0, 10, 20, 30, 40, 41},      // actual T < T_max
          {0, 200, 200, 200, 200, 200}, // one sequence fills the bucket
          {0, 0, 0, 0, 0, 0},           // empty
          {0, 1, 64, 65, 129, 130},     // other splits
      };
      std::mt19937_64 rng(static_cast<uint64_t>(BT) + 7 * (dt == DType::kI64));
      for (int rep = 0; rep < 3; ++rep) {
        for (const auto& L : layouts) {
          st.load(L, rng);
          const std::vector<float> s_in(st.s.data<float>(), st.s.data<float>() + st.s.numel());
          g.replay();
          SCOPED_TRACE(cap.str() + " dtype " + dtype_name(dt) + " layout ending " + std::to_string(L.back()));
          expect_matches_eager(st, L, s_in);
        }
      }
    }
  }
}

TEST(Graph, ForbiddenWorkDuringCaptureFailsWithItsCategory) {
  Static st(Capacity{64, 2, 32}, DType::kI32);
  Tensor cu = cu_tensor({0, 5, 9}, DType::kI32);
  struct Case { const char* what; FailureCategory cat; std::function<void()> f; };
  alignas(256) static int32_t fake_dev[64];
  const TensorView dcu = TensorView::contiguous(fake_dev, DType::kI32, {3}, Device{DeviceType::kCUDA, 0});
  const TensorView didx = TensorView::contiguous(fake_dev + 8, DType::kI32, {3, 2}, Device{DeviceType::kCUDA, 0});
  const TensorView doff = TensorView::contiguous(fake_dev + 16, DType::kI32, {3}, Device{DeviceType::kCUDA, 0});
  Graph other;
  other.capture([] {});
  const std::vector<Case> cases = {
      {"host-built metadata", FailureCategory::kStaleOrDynamicMetadata,
       [&] { prepare_chunk_meta_eager(cu, 32); }},
      {"eager path", FailureCategory::kEagerBackend, [] { testing::eager_only_op(); }},
      {"allocation", FailureCategory::kAddressOrLifetime, [] { testing::allocating_op(); }},
      {"device op under a CPU capture", FailureCategory::kAddressOrLifetime,
       [&] { prepare_chunk_meta(Capacity{64, 2, 32}, dcu, didx, doff); }},
      {"nested capture", FailureCategory::kAddressOrLifetime, [] { Graph inner; inner.begin_capture(); }},
      {"replay inside a capture", FailureCategory::kUnsupportedOp, [&] { other.replay(); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Graph g;
    g.begin_capture();
    st.step();  // three legal nodes first
    const auto e = error_of(c.f);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), ErrorCode::kCaptureViolation) << e->what();
    EXPECT_EQ(e->category(), c.cat) << e->what();
    EXPECT_EQ(g.num_nodes(), 3u);  // the forbidden work was not recorded
    g.end_capture();
    // Through capture(body): the error propagates, the capture is dropped, nothing stays active.
    Graph h;
    const auto e2 = error_of([&] { h.capture([&] { st.step(); c.f(); }); });
    ASSERT_TRUE(e2);
    EXPECT_EQ(e2->category(), c.cat);
    EXPECT_EQ(h.state(), Graph::State::kEmpty);
    EXPECT_EQ(h.num_nodes(), 0u);
    EXPECT_EQ(active_cpu_capture(), nullptr);
  }
  // Outside a capture the same eager work is fine.
  EXPECT_EQ(prepare_chunk_meta_eager(cu, 32).num_chunks, 2);
  testing::eager_only_op();
}

TEST(Graph, LifecycleMisuseIsReported) {
  auto expect_life = [](const std::function<void()>& f, const char* prefix) {
    const auto e = error_of(f);
    ASSERT_TRUE(e) << prefix;
    EXPECT_EQ(e->category(), FailureCategory::kAddressOrLifetime) << e->what();
    EXPECT_EQ(e->message().rfind(prefix, 0), 0u) << e->what();
  };
  Graph g;
  expect_life([&] { g.replay(); }, "Graph::replay: expected state ready, got empty");
  expect_life([&] { g.end_capture(); }, "Graph::end_capture: expected state capturing, got empty");
  int runs = 0;
  g.begin_capture();
  run_or_record("count", [&runs] { ++runs; });
  expect_life([&] { g.replay(); }, "Graph::replay: expected state ready, got capturing");
  std::thread([&] { expect_life([&] { g.end_capture(); }, "Graph::end_capture: expected the thread"); }).join();
  g.end_capture();
  expect_life([&] { g.begin_capture(); }, "Graph::begin_capture: expected state empty, got ready");
  g.replay();
  g.replay();
  EXPECT_EQ(runs, 2);
  Graph moved = std::move(g);
  moved.replay();
  EXPECT_EQ(runs, 3);
  expect_life([&] { g.replay(); }, "Graph::replay: expected state ready, got empty");  // NOLINT: moved-from
  moved.reset();
  EXPECT_EQ(moved.state(), Graph::State::kEmpty);
  moved.capture([&] { run_or_record("twice", [&runs] { runs += 2; }); });
  moved.replay();
  EXPECT_EQ(runs, 5);
  // Destroying a graph mid-capture releases the thread's capture.
  { Graph d; d.begin_capture(); }
  EXPECT_EQ(active_cpu_capture(), nullptr);
}

#if !LINATTN_WITH_CUDA
TEST(Graph, CudaGraphIsUnsupportedInACpuOnlyBuild) {
  const auto e = error_of([] { Graph g(Device{DeviceType::kCUDA, 0}); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::kUnsupported);
  EXPECT_EQ(e->category(), FailureCategory::kUnsupportedOp);
}
#endif

}  // namespace
}  // namespace linattn
