// GraphBuckets: bucket choice (smallest that fits), eager fallback above capacity and below the
// utilization threshold, results equal to the eager function, lazy and up-front capture (the
// warm-up must not double-apply an in-place state), statistics, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "linattn/graph.h"
#include "linattn/meta.h"
#include "meta_test_util.h"
#include "test_ops.h"

namespace linattn {
namespace {

using testing::cu_tensor;
using testing::error_of;

constexpr int64_t kD = 2;

// Buffers: x [1, T_max, D] in, y [1, T_max, D] out, s [N_max, D] in/out, tables scratch.
std::vector<BucketBufferSpec> describe(const Capacity& c) {
  return {
      {"x", DType::kF32, {1, c.T_max, kD}, BufferRole::kInput, BufferScale::kTokens, 1},
      {"y", DType::kF32, {1, c.T_max, kD}, BufferRole::kOutput, BufferScale::kTokens, 1},
      {"s", DType::kF32, {c.N_max, kD}, BufferRole::kInOut, BufferScale::kSequences, 0},
      {"idx", DType::kI32, {c.NT_max(), 2}, BufferRole::kScratch, BufferScale::kFixed, 0},
      {"off", DType::kI32, {c.N_max + 1}, BufferRole::kScratch, BufferScale::kFixed, 0},
  };
}

void step(const BucketStatic& b) {
  const Capacity& c = b.capacity();
  prepare_chunk_meta(c, b.cu_seqlens(), b.buffer("idx"), b.buffer("off"), b.exec());
  testing::chunk_scale(c, b.cu_seqlens(), b.buffer("idx"), b.buffer("x"), b.buffer("y"));
  testing::seq_sum(c, b.cu_seqlens(), b.buffer("off"), b.buffer("x"), b.buffer("s"));
}

struct Caller {
  int BT;
  int eager_calls = 0;
  BucketEagerFn eager() {
    return [this](const TensorView& cu, const NamedTensors& in, const NamedTensors& out) {
      ++eager_calls;
      std::vector<int64_t> c;
      for (int64_t i = 0; i < cu.shape[0]; ++i) c.push_back(cu.ptr<const int32_t>()[i]);
      auto get = [](const NamedTensors& ts, const char* n) {
        for (const auto& t : ts) if (t.name == n) return t.view;
        return TensorView{};
      };
      testing::chunk_scale_eager(c, BT, kD, get(in, "x").ptr<const float>(), get(out, "y").ptr<float>());
      float* s_out = get(out, "s").ptr<float>();
      std::memcpy(s_out, get(in, "s").ptr<const float>(), (c.size() - 1) * kD * sizeof(float));
      testing::seq_sum_eager(c, kD, get(in, "x").ptr<const float>(), s_out);
    };
  }
};

struct Call {
  Tensor cu, x, s_in, y, s_out;
  std::vector<int64_t> cuv;
  Call(std::vector<int64_t> c, std::mt19937_64& rng) : cuv(std::move(c)) {
    const int64_t T = cuv.back(), N = static_cast<int64_t>(cuv.size()) - 1;
    cu = cu_tensor(cuv, DType::kI32);
    x = Tensor(DType::kF32, {1, T, kD});
    s_in = Tensor(DType::kF32, {N, kD});
    y = Tensor(DType::kF32, {1, T, kD});
    s_out = Tensor(DType::kF32, {N, kD});
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
    for (int64_t i = 0; i < s_in.numel(); ++i) s_in.data<float>()[i] = u(rng);
  }
  NamedTensors in() const { return {{"x", x}, {"s", s_in}}; }
  NamedTensors out() const { return {{"y", y}, {"s", s_out}}; }
};

// The graph route gives exactly what the eager function gives on the same call.
void expect_same_as_eager(const Call& call, int BT) {
  Caller ref{BT};
  Tensor y(DType::kF32, call.y.shape()), s(DType::kF32, call.s_out.shape());
  ref.eager()(call.cu, call.in(), {{"y", y}, {"s", s}});
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(call.y.data<float>()[i], y.data<float>()[i]) << "y " << i;
  for (int64_t i = 0; i < s.numel(); ++i) ASSERT_EQ(call.s_out.data<float>()[i], s.data<float>()[i]) << "s " << i;
}

TEST(GraphBuckets, ChoosesTheSmallestFittingBucketOrFallsBack) {
  Caller caller{16};
  GraphBucketsOptions opt;
  opt.BT = 16;
  // Declared out of order; sorted by NT_max: {64,2}=5, {256,4}=19, {1024,8}=71.
  GraphBuckets gb({{1024, 8}, {64, 2}, {256, 4}}, describe, step, caller.eager(), opt);
  ASSERT_EQ(gb.num_buckets(), 3);
  EXPECT_EQ(gb.capacity(0), (Capacity{64, 2, 16}));
  EXPECT_EQ(gb.capacity(2), (Capacity{1024, 8, 16}));
  struct Want { std::vector<int64_t> cu; BucketRoute route; int bucket; };
  const Want wants[] = {
      {{0, 30, 64}, BucketRoute::kGraph, 0},                     // 2 + 3 = 5 of 5 chunks
      {{0, 64}, BucketRoute::kGraph, 0},                          // 4 / 5
      {{0, 20}, BucketRoute::kEagerLowUtilization, 0},            // 2 / 5 < 0.5
      {{0, 64, 128, 200}, BucketRoute::kGraph, 1},                // N = 3 > 2: 4+4+5 = 13 / 19
      {{0, 30, 64, 65}, BucketRoute::kEagerLowUtilization, 1},    // 2+3+1 = 6 / 19
      {{0, 65}, BucketRoute::kEagerLowUtilization, 1},            // 5 / 19
      {{0, 100, 200, 256}, BucketRoute::kGraph, 1},               // 7+7+4 = 18 / 19
      {{0, 1000, 1000, 1001, 1002, 1003, 1004, 1005, 1006}, BucketRoute::kGraph, 2},
      {{0, 1025}, BucketRoute::kEagerOverCapacity, -1},           // T > every T_max
      {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, BucketRoute::kEagerOverCapacity, -1},  // N = 9 > 8
  };
  for (const Want& w : wants) {
    const BucketDecision d = gb.choose(cu_tensor(w.cu, DType::kI32));
    EXPECT_EQ(d.route, w.route) << "layout ending " << w.cu.back() << ": " << bucket_route_name(d.route);
    EXPECT_EQ(d.bucket, w.bucket) << "layout ending " << w.cu.back();
    EXPECT_EQ(d.NT, count_chunks(cu_tensor(w.cu, DType::kI32), 16));
  }
  EXPECT_EQ(gb.stats().calls, 0);  // choose() has no side effects
  EXPECT_FALSE(gb.captured(0));
}

TEST(GraphBuckets, ThresholdIsConfigurable) {
  Caller caller{16};
  for (double thr : {0.0, 0.3, 0.9}) {
    GraphBucketsOptions opt;
    opt.BT = 16;
    opt.min_utilization = thr;
    GraphBuckets gb({{64, 2}}, describe, step, caller.eager(), opt);
    const BucketDecision d = gb.choose(cu_tensor({0, 20}, DType::kI32));  // 2 / 5 = 0.4
    EXPECT_EQ(d.route, 0.4 < thr ? BucketRoute::kEagerLowUtilization : BucketRoute::kGraph) << thr;
    EXPECT_DOUBLE_EQ(d.utilization, 0.4);
  }
  // Without an eager function, utilization never reroutes and over-capacity raises.
  GraphBuckets strict({{64, 2}}, describe, step, nullptr, GraphBucketsOptions{16});
  EXPECT_EQ(strict.choose(cu_tensor({0, 1}, DType::kI32)).route, BucketRoute::kGraph);
  std::mt19937_64 rng(3);
  Call big({0, 65}, rng);
  const auto e = error_of([&] { strict.run(big.cu, big.in(), big.out()); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->category(), FailureCategory::kEagerBackend);
  EXPECT_NE(e->message().find("got T = 65, N = 1"), std::string::npos) << e->message();
}

TEST(GraphBuckets, DefaultThresholdFollowsTheDevice) {
  EXPECT_DOUBLE_EQ(default_min_utilization(Device{DeviceType::kCPU, 0}), 0.5);
  EXPECT_DOUBLE_EQ(default_min_utilization(Device{DeviceType::kCUDA, 0}), 0.0);
  Caller caller{16};
  GraphBucketsOptions opt;  // min_utilization < 0: the CPU default, 0.5
  opt.BT = 16;
  ASSERT_LT(opt.min_utilization, 0.0);
  GraphBuckets gb({{64, 2}}, describe, step, caller.eager(), opt);
  EXPECT_EQ(gb.choose(cu_tensor({0, 20}, DType::kI32)).route, BucketRoute::kEagerLowUtilization);  // 0.4
  EXPECT_EQ(gb.choose(cu_tensor({0, 40}, DType::kI32)).route, BucketRoute::kGraph);                // 0.6
  for (double bad : {1.5, std::nan("")}) {
    opt.min_utilization = bad;
    const auto e = error_of([&] { GraphBuckets g({{64, 2}}, describe, step, caller.eager(), opt); });
    ASSERT_TRUE(e) << bad;
    EXPECT_NE(e->message().find("min_utilization: expected in [0, 1]"), std::string::npos) << e->message();
  }
}

TEST(GraphBuckets, RunsLikeTheEagerPathAndCountsEverything) {
  for (bool up_front : {false, true}) {
    Caller caller{32};
    GraphBucketsOptions opt;
    opt.BT = 32;
    opt.capture_up_front = up_front;
    opt.cu_dtype = up_front ? DType::kI64 : DType::kI32;
    GraphBuckets gb({{128, 2}, {512, 4}}, describe, step, caller.eager(), opt);  // NT_max 5, 19
    EXPECT_EQ(gb.stats().captures, up_front ? 2 : 0);
    std::mt19937_64 rng(11);
    const std::vector<std::vector<int64_t>> layouts = {
        {0, 64, 128},               // bucket 0, 4 chunks: graph (first use)
        {0, 100, 128},              // bucket 0, 5 chunks: graph (hit)
        {0, 10},                    // bucket 0, 1 chunk: eager (low utilization)
        {0, 200, 300, 300, 500},    // bucket 1, 7+4+0+7 = 18 chunks: graph
        {0, 600},                   // over capacity: eager
        {0, 40, 128},               // bucket 0 again, 2+3 = 5 chunks: graph (hit)
        {0, 500, 510, 512},         // bucket 1, 16+1+1 = 18: graph (hit)
    };
    int64_t real_tokens = 0, pad_tokens = 0, real_chunks = 0, pad_chunks = 0;
    for (const auto& L : layouts) {
      Call call(L, rng);
      const BucketDecision d = gb.run(call.cu, call.in(), call.out());
      SCOPED_TRACE("layout ending " + std::to_string(L.back()) + " route " + bucket_route_name(d.route));
      expect_same_as_eager(call, 32);
      if (d.route == BucketRoute::kGraph) {
        const Capacity c = gb.capacity(d.bucket);
        real_tokens += d.T;
        pad_tokens += c.T_max - d.T;
        real_chunks += d.NT;
        pad_chunks += c.NT_max() - d.NT;
      }
    }
    const GraphBucketsStats& s = gb.stats();
    SCOPED_TRACE(s.str());
    EXPECT_EQ(s.calls, 7);
    EXPECT_EQ(s.replays, 5);
    EXPECT_EQ(s.captures, 2);
    EXPECT_EQ(s.misses, up_front ? 0 : 2);
    EXPECT_EQ(s.hits, up_front ? 5 : 3);
    EXPECT_EQ(s.fallbacks_low_utilization, 1);
    EXPECT_EQ(s.fallbacks_over_capacity, 1);
    EXPECT_EQ(s.eager_tokens, 10 + 600);
    EXPECT_EQ(caller.eager_calls, 2);
    EXPECT_EQ(s.real_tokens, real_tokens);
    EXPECT_EQ(s.padding_tokens, pad_tokens);
    EXPECT_EQ(s.real_chunks, real_chunks);
    EXPECT_EQ(s.padding_chunks, pad_chunks);
    EXPECT_EQ(s.real_tokens, 128 + 128 + 500 + 128 + 512);
    EXPECT_EQ(s.real_chunks, 4 + 5 + 18 + 5 + 18);
    EXPECT_EQ(gb.bucket_stats(0).replays, 3);
    EXPECT_EQ(gb.bucket_stats(0).fallbacks_low_utilization, 1);
    EXPECT_EQ(gb.bucket_stats(1).replays, 2);
  }
}

// Garbage in the padding rows of the static input must not reach the outputs.
TEST(GraphBuckets, PaddingGarbageDoesNotLeak) {
  Caller caller{16};
  GraphBuckets gb({{96, 3}}, describe, step, caller.eager(), GraphBucketsOptions{16, 0.0});
  const BucketStatic& b = gb.bucket(0);
  float* x = b.buffer("x").ptr<float>();
  for (int64_t i = 0; i < 96 * kD; ++i) x[i] = i % 2 ? 1e30f : -7.0f;
  float* s = b.buffer("s").ptr<float>();
  for (int64_t i = 0; i < 3 * kD; ++i) s[i] = 1e30f;
  std::mt19937_64 rng(5);
  Call call({0, 17, 33}, rng);
  EXPECT_EQ(gb.run(call.cu, call.in(), call.out()).route, BucketRoute::kGraph);
  expect_same_as_eager(call, 16);
}

TEST(GraphBuckets, ArgumentErrorsNameTheTensor) {
  Caller caller{16};
  GraphBuckets gb({{64, 2}}, describe, step, caller.eager(), GraphBucketsOptions{16, 0.0});
  std::mt19937_64 rng(9);
  Call call({0, 20, 40}, rng);
  Tensor wrong(DType::kF32, {1, 39, kD});
  Tensor wrong_dt(DType::kF64, {1, 40, kD});
  struct Bad { NamedTensors in, out; const char* prefix; };
  const Bad bad[] = {
      {{{"s", call.s_in}}, call.out(), "inputs: expected a tensor named 'x', got none"},
      {{{"x", wrong}, {"s", call.s_in}}, call.out(), "inputs['x']: expected shape [1, 40, 2], got [1, 39, 2]"},
      {{{"x", wrong_dt}, {"s", call.s_in}}, call.out(), "inputs['x']: expected dtype fp32, got fp64"},
      {{{"x", call.x}, {"s", call.s_in}, {"q", call.x}}, call.out(), "inputs['q']: expected the name of a"},
      {{{"x", call.x}, {"x", call.x}, {"s", call.s_in}}, call.out(), "inputs['x']: expected each name once"},
      {call.in(), {{"s", call.s_out}}, "outputs: expected a tensor named 'y', got none"},
      {call.in(), {{"y", call.y}, {"s", call.s_out}, {"x", call.x}}, "outputs['x']: expected the name of a"},
  };
  for (const Bad& b : bad) {
    const auto e = error_of([&] { gb.run(call.cu, b.in, b.out); });
    ASSERT_TRUE(e) << b.prefix;
    EXPECT_EQ(e->category(), FailureCategory::kAddressOrLifetime);
    EXPECT_EQ(e->message().rfind(b.prefix, 0), 0u) << e->message();
  }
  EXPECT_EQ(gb.stats().calls, 0);  // nothing ran, nothing counted, nothing captured
  EXPECT_FALSE(gb.captured(0));
  // Malformed cu_seqlens and bucket declarations.
  EXPECT_TRUE(error_of([&] { gb.run(cu_tensor({0, 30, 20}, DType::kI32), call.in(), call.out()); }));
  auto e = error_of([&] { GraphBuckets x({{64, 2}, {64, 2}}, describe, step, nullptr); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->category(), FailureCategory::kStaleOrDynamicMetadata);
  e = error_of([&] { GraphBuckets x({{0, 2}}, describe, step, nullptr); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message().rfind("buckets[0]: Capacity.T_max", 0), 0u) << e->message();
  // A bad buffer spec is reported when the bucket is allocated.
  GraphBuckets bad_spec({{64, 2}}, [](const Capacity& c) {
    return std::vector<BucketBufferSpec>{{"x", DType::kF32, {2, c.T_max}, BufferRole::kInput, BufferScale::kTokens, 1}};
  }, step, nullptr);
  e = error_of([&] { bad_spec.bucket(0); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message().rfind("buffer 'x': expected size-1 dims before the scaled dim", 0), 0u) << e->message();
}

// A step that does forbidden work fails at capture with its category; the bucket stays
// uncaptured and the next call tries again.
TEST(GraphBuckets, ForbiddenWorkInTheStepFailsTheCapture) {
  Caller caller{16};
  bool forbid = true;
  GraphBuckets gb({{64, 2}}, describe, [&](const BucketStatic& b) {
    step(b);
    if (forbid) testing::allocating_op();
  }, caller.eager(), GraphBucketsOptions{16, 0.0});
  std::mt19937_64 rng(13);
  Call call({0, 20, 40}, rng);
  const auto e = error_of([&] { gb.run(call.cu, call.in(), call.out()); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::kCaptureViolation);
  EXPECT_EQ(e->category(), FailureCategory::kAddressOrLifetime);
  EXPECT_FALSE(gb.captured(0));
  EXPECT_EQ(gb.stats().captures, 0);
  forbid = false;
  gb.run(call.cu, call.in(), call.out());
  expect_same_as_eager(call, 16);
  EXPECT_EQ(gb.stats().captures, 1);
  // And GraphBuckets itself is not something to capture.
  Graph g;
  const auto e2 = error_of([&] { g.capture([&] { gb.run(call.cu, call.in(), call.out()); }); });
  ASSERT_TRUE(e2);
  EXPECT_EQ(e2->category(), FailureCategory::kUnsupportedOp);
}

}  // namespace
}  // namespace linattn
