// The layer-level graph driven by GraphBuckets, with weights loaded from a safetensors file
// (issue 9): a layer saved with FLA's state-dict prefix is loaded into a fresh layer; GraphBuckets
// (two buckets) runs its forward + backward (one graph per bucket) over seven layouts, including
// one over capacity (eager fallback), one of low utilization (eager fallback) and repeats (hits);
// y, dx and every weight gradient must match the saved layer run eagerly at exact size, and the
// bucket statistics must count the routes. CPU, tiny shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "linattn/graph.h"
#include "layer_test_util.h"
#include "linattn/layers.h"

namespace linattn {
namespace {

using layer_test::rand_x;
using layer_test::tiny;

// Relative RMS error with the worst element in `why`.
double rel_err(const Tensor& got, const Tensor& ref, int64_t n, std::string* why) {
  double num = 0, den = 0, worst = -1;
  int64_t wi = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(got.get(i) - ref.get(i));
    num += d * d, den += ref.get(i) * ref.get(i);
    if (!(d <= worst)) worst = d, wi = i;
  }
  *why = "worst at " + std::to_string(wi) + ": got " + std::to_string(got.get(wi)) + ", ref " + std::to_string(ref.get(wi));
  return std::isfinite(num) ? std::sqrt(num / (den + 1e-30)) : 1e300;
}

std::vector<Tensor> grads(LinearAttentionLayer& layer) {
  std::vector<Tensor> g;
  for (auto& p : layer.params()) {
    Tensor h(DType::kF32, p.shape);
    copy_tensor(h.view(), p.grad_view());
    g.push_back(std::move(h));
  }
  return g;
}

class LayerBucketsTest : public ::testing::TestWithParam<LayerKind> {};

TEST_P(LayerBucketsTest, GraphBucketsDriveForwardBackwardWithSafetensorsWeights) {
  const LayerConfig c = tiny(GetParam());
  const int64_t hid = c.hidden_size;
  LinearAttentionLayer saved(c, Device{}), layer(c, Device{});
  saved.init_random(41);
  layer.init_random(42);  // different weights until the load
  const std::string path = ::testing::TempDir() + "/layer_buckets_" + std::to_string(static_cast<int>(c.kind)) + ".safetensors";
  saved.save_safetensors(path, "model.layers.3.linear_attn.");
  layer.load_safetensors(path, "model.layers.3.linear_attn.");
  std::remove(path.c_str());

  const std::vector<BucketShape> shapes = {{32, 2}, {64, 4}};
  layer.reserve(64, 4);
  auto describe = [hid](const Capacity& cap) {
    return std::vector<BucketBufferSpec>{
        {"x", DType::kF32, {1, cap.T_max, hid}, BufferRole::kInput, BufferScale::kTokens, 1},
        {"dy", DType::kF32, {1, cap.T_max, hid}, BufferRole::kInput, BufferScale::kTokens, 1},
        {"y", DType::kF32, {1, cap.T_max, hid}, BufferRole::kOutput, BufferScale::kTokens, 1},
        {"dx", DType::kF32, {1, cap.T_max, hid}, BufferRole::kOutput, BufferScale::kTokens, 1}};
  };
  LayerRunOptions gopt;
  gopt.use_graph = gopt.training = true;
  auto step = [&](const BucketStatic& s) {
    layer.forward(s.buffer("x"), s.cu_seqlens(), s.buffer("y"), gopt, s.exec());
    layer.backward(s.buffer("dy"), s.buffer("dx"), s.exec());
  };
  int eager_calls = 0;
  auto eager = [&](const TensorView& cu, const NamedTensors& in, const NamedTensors& out) {
    ++eager_calls;
    LayerRunOptions o;
    o.training = true;
    layer.forward(in[0].view, cu, out[0].view, o);
    layer.backward(in[1].view, out[1].view);
  };
  GraphBucketsOptions bo;
  bo.BT = c.chunk_size;
  GraphBuckets buckets(shapes, describe, step, eager, bo);

  // {lengths, expected route}: fill bucket 0, bucket 1, a repeat of each (hits), low utilization
  // of bucket 1 (1 chunk of 7), over capacity, and bucket 0 with an empty sequence.
  const std::vector<std::pair<std::vector<int64_t>, BucketRoute>> cases = {
      {{20, 12}, BucketRoute::kGraph},         {{16, 17, 0, 30}, BucketRoute::kGraph},
      {{31, 1}, BucketRoute::kGraph},          {{50, 9, 5}, BucketRoute::kGraph},
      {{0, 3, 0}, BucketRoute::kEagerLowUtilization}, {{40, 40}, BucketRoute::kEagerOverCapacity},
      {{0, 25}, BucketRoute::kGraph}};
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const auto& [lens, route] = cases[ci];
    std::vector<int64_t> cuv = {0};
    for (int64_t l : lens) cuv.push_back(cuv.back() + l);
    const int64_t T = cuv.back();
    Tensor cu(DType::kI32, {static_cast<int64_t>(cuv.size())});
    for (size_t i = 0; i < cuv.size(); ++i) cu.set(static_cast<int64_t>(i), static_cast<double>(cuv[i]));
    const Tensor x = rand_x(T, hid, 300 + ci), dy = rand_x(T, hid, 400 + ci);
    Tensor y(DType::kF32, {1, T, hid}), dx(DType::kF32, {1, T, hid});
    const BucketDecision d = buckets.run(cu, {{"x", x.view()}, {"dy", dy.view()}}, {{"y", y.view()}, {"dx", dx.view()}});
    const std::string where = "case " + std::to_string(ci) + " (T = " + std::to_string(T) + ")";
    EXPECT_EQ(d.route, route) << where << ": " << bucket_route_name(d.route);
    const std::vector<Tensor> g = grads(layer);

    Tensor ye(DType::kF32, {1, T, hid}), dxe(DType::kF32, {1, T, hid});
    LayerRunOptions eopt;
    eopt.training = true;
    saved.forward(x, cu, ye, eopt);
    saved.backward(dy, dxe);
    const std::vector<Tensor> ge = grads(saved);
    std::string why;
    EXPECT_LT(rel_err(y, ye, T * hid, &why), 1e-5) << where << " y " << why;
    EXPECT_LT(rel_err(dx, dxe, T * hid, &why), 1e-5) << where << " dx " << why;
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_LT(rel_err(g[i], ge[i], g[i].numel(), &why), 1e-5) << where << " d" << layer.params()[i].name << " " << why;
  }
  const GraphBucketsStats& st = buckets.stats();
  EXPECT_EQ(st.calls, 7);
  EXPECT_EQ(st.replays, 5);
  EXPECT_EQ(st.captures, 2);
  EXPECT_EQ(st.misses, 2);
  EXPECT_EQ(st.hits, 3);
  EXPECT_EQ(st.fallbacks_over_capacity, 1);
  EXPECT_EQ(st.fallbacks_low_utilization, 1);
  EXPECT_EQ(eager_calls, 2);
}

INSTANTIATE_TEST_SUITE_P(Kinds, LayerBucketsTest, ::testing::Values(LayerKind::kGatedDeltaNet, LayerKind::kKda),
                         [](const auto& info) { return info.param == LayerKind::kKda ? "Kda" : "Gdn"; });

}  // namespace
}  // namespace linattn
