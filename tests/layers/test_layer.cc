// Layers on the CPU: forward against the fp64 reference composition (layer_ref.h), weight and
// input gradients against central differences of that composition, padding isolation, and
// safetensors round trip / errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include "layer_ref.h"
#include "linattn/error.h"
#include "linattn/graph.h"
#include "layer_test_util.h"
#include "linattn/layers.h"

namespace linattn {
namespace {

using layer_test::rand_x;
using layer_test::tiny;

Tensor cu_tensor(const std::vector<int64_t>& cu) {
  Tensor t(DType::kI32, {static_cast<int64_t>(cu.size())});
  for (size_t i = 0; i < cu.size(); ++i) t.set(static_cast<int64_t>(i), static_cast<double>(cu[i]));
  return t;
}

double rel_err(const Tensor& got, const Tensor& ref, int64_t rows, int64_t width) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < rows * width; ++i) {
    const double d = got.get(i) - ref.get(i);
    num += d * d;
    den += ref.get(i) * ref.get(i);
  }
  return std::sqrt(num / (den + 1e-30));
}

class LayerTest : public ::testing::TestWithParam<LayerKind> {};

TEST_P(LayerTest, ForwardMatchesReferenceComposition) {
  const LayerConfig c = tiny(GetParam());
  LinearAttentionLayer layer(c, Device{});
  layer.init_random(5);
  const std::vector<int64_t> cu = {0, 7, 7, 26, 40};
  const int64_t T = 44;  // 4 padding rows with garbage
  Tensor x = rand_x(T, c.hidden_size, 9);
  for (int64_t i = 40 * c.hidden_size; i < x.numel(); ++i) x.set(i, 1e30);
  Tensor y(DType::kF32, {1, T, c.hidden_size});
  Tensor cut = cu_tensor(cu);
  layer.forward(x, cut, y, {});
  const auto P = test::params_f64(layer);
  Tensor x2 = x.to(DType::kF64);
  Tensor ref = test::layer_ref_forward(c, P, Tensor(x2), cu);
  EXPECT_LT(rel_err(y, ref, 40, c.hidden_size), 2e-5);
  for (int64_t i = 0; i < 40 * c.hidden_size; ++i) ASSERT_TRUE(std::isfinite(y.get(i))) << i;
}

TEST_P(LayerTest, GradientsMatchFiniteDifferences) {
  const LayerConfig c = tiny(GetParam());
  LinearAttentionLayer layer(c, Device{});
  layer.init_random(17);
  const std::vector<int64_t> cu = {0, 9, 30};
  const int64_t T = 33;
  Tensor x = rand_x(T, c.hidden_size, 3), dy = rand_x(T, c.hidden_size, 4);
  Tensor y(DType::kF32, {1, T, c.hidden_size}), dx(DType::kF32, {1, T, c.hidden_size});
  Tensor cut = cu_tensor(cu);
  LayerRunOptions opt;
  opt.training = true;
  layer.forward(x, cut, y, opt);
  layer.backward(dy, dx);
  auto P = test::params_f64(layer);
  Tensor x64 = x.to(DType::kF64);
  auto loss = [&]() {
    Tensor yr = test::layer_ref_forward(c, P, x64, cu);
    double l = 0;
    for (int64_t i = 0; i < 30 * c.hidden_size; ++i) l += yr.get(i) * dy.get(i);
    return l;
  };
  auto fd = [&](Tensor& t, int64_t i) {
    const double h = 1e-5, v = t.get(i);
    t.set(i, v + h);
    const double lp = loss();
    t.set(i, v - h);
    const double lm = loss();
    t.set(i, v);
    return (lp - lm) / (2 * h);
  };
  int checked = 0;
  for (auto& p : layer.params()) {
    Tensor g(DType::kF32, p.shape);
    copy_tensor(g.view(), p.grad_view());
    Tensor& t = P.at(p.name);
    double num = 0, den = 0;
    const int64_t step = std::max<int64_t>(1, t.numel() / 6);
    for (int64_t i = 0; i < t.numel(); i += step) {
      const double ref = fd(t, i);
      num += (g.get(i) - ref) * (g.get(i) - ref);
      den += ref * ref;
      ++checked;
    }
    EXPECT_LT(std::sqrt(num / (den + 1e-20)), 2e-3) << p.name;
  }
  double num = 0, den = 0;
  for (int64_t i = 0; i < 30 * c.hidden_size; i += 7) {
    const double ref = fd(x64, i);
    num += (dx.get(i) - ref) * (dx.get(i) - ref);
    den += ref * ref;
  }
  EXPECT_LT(std::sqrt(num / (den + 1e-20)), 2e-3) << "dx";
  for (int64_t i = 30 * c.hidden_size; i < T * c.hidden_size; ++i) EXPECT_EQ(dx.get(i), 0.0) << "padding dx " << i;
  EXPECT_GT(checked, 50);
}

TEST_P(LayerTest, SafetensorsRoundTripAndErrors) {
  const LayerConfig c = tiny(GetParam());
  LinearAttentionLayer a(c, Device{}), b(c, Device{});
  a.init_random(1);
  b.init_random(2);
  const std::string path = ::testing::TempDir() + "/layer_" + std::to_string(static_cast<int>(c.kind)) + ".safetensors";
  a.save_safetensors(path, "model.layers.0.linear_attn.");
  b.load_safetensors(path, "model.layers.0.linear_attn.");
  for (size_t i = 0; i < a.params().size(); ++i) {
    Tensor ha(DType::kF32, a.params()[i].shape), hb(DType::kF32, b.params()[i].shape);
    copy_tensor(ha.view(), a.params()[i].view());
    copy_tensor(hb.view(), b.params()[i].view());
    for (int64_t j = 0; j < ha.numel(); ++j) ASSERT_EQ(ha.get(j), hb.get(j)) << a.params()[i].name;
  }
  EXPECT_THROW(b.load_safetensors(path, "wrong."), Error);
  EXPECT_THROW(b.load_safetensors(path + ".missing"), Error);
  { std::ofstream f(path, std::ios::binary); f << "garbage"; }
  EXPECT_THROW(b.load_safetensors(path), Error);
  LayerConfig bigger = c;
  bigger.hidden_size = 16;
  LinearAttentionLayer d(bigger, Device{});
  a.save_safetensors(path);
  try {
    d.load_safetensors(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("shape"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Kinds, LayerTest, ::testing::Values(LayerKind::kGatedDeltaNet, LayerKind::kKda),
                         [](const auto& info) { return info.param == LayerKind::kKda ? "Kda" : "Gdn"; });

}  // namespace
}  // namespace linattn

namespace linattn {
namespace {

// GRAPH_CONTRACT.md section 8 for a whole layer: forward + backward captured once into one CPU
// graph on static buffers; replayed for six layouts (garbage in the padding rows of x and dy);
// compared with the eager exact-size layer on the same content.
TEST_P(LayerTest, GraphReplayMatchesEagerForwardBackward) {
  const LayerConfig c = tiny(GetParam());
  const int64_t T_max = 48, N_max = 4, hid = c.hidden_size;
  LinearAttentionLayer layer(c, Device{});
  layer.init_random(23);
  layer.reserve(T_max, N_max);
  Tensor x(DType::kF32, {1, T_max, hid}), y(DType::kF32, {1, T_max, hid});
  Tensor dy(DType::kF32, {1, T_max, hid}), dx(DType::kF32, {1, T_max, hid});
  Tensor cu(DType::kI32, {N_max + 1});
  for (int64_t i = 0; i <= N_max; ++i) cu.set(i, 0);
  LayerRunOptions gopt;
  gopt.use_graph = gopt.training = true;
  Graph graph;
  graph.capture([&] {
    layer.forward(x, cu, y, gopt);
    layer.backward(dy, dx);
  });
  EXPECT_GT(graph.num_nodes(), 20u);
  const std::vector<std::vector<int64_t>> layouts = {
      {12, 12, 12, 12}, {5, 0, 30, 0}, {48, 0, 0, 0}, {1, 15, 16, 16}, {0, 0, 0, 3}, {20, 7, 0, 0}};
  for (int round = 0; round < 2; ++round)
    for (size_t li = 0; li < layouts.size(); ++li) {
      const auto& lens = layouts[li];
      std::vector<int64_t> cuv = {0};
      for (int64_t l : lens) cuv.push_back(cuv.back() + l);
      const int64_t T = cuv.back();
      Tensor xe = rand_x(T, hid, 100 + li), dye = rand_x(T, hid, 200 + li);
      for (int64_t i = 0; i < T_max * hid; ++i) {  // static content + garbage padding
        x.set(i, i < T * hid ? xe.get(i) : 1e30);
        dy.set(i, i < T * hid ? dye.get(i) : std::nan(""));
      }
      for (size_t i = 0; i < cuv.size(); ++i) cu.set(static_cast<int64_t>(i), static_cast<double>(cuv[i]));
      graph.replay();
      std::vector<Tensor> gw;
      for (auto& p : layer.params()) {
        Tensor h(DType::kF32, p.shape);
        copy_tensor(h.view(), p.grad_view());
        gw.push_back(std::move(h));
      }
      // Eager exact size on the same content.
      Tensor cue = cu_tensor(cuv);
      Tensor ye(DType::kF32, {1, T, hid}), dxe(DType::kF32, {1, T, hid});
      LayerRunOptions eopt;
      eopt.training = true;
      layer.forward(xe, cue, ye, eopt);
      layer.backward(dye, dxe);
      const std::string where = "round " + std::to_string(round) + " layout " + std::to_string(li);
      EXPECT_LT(rel_err(y, ye, T, hid), 1e-5) << where;
      EXPECT_LT(rel_err(dx, dxe, T, hid), 1e-5) << where;
      for (int64_t i = T * hid; i < T_max * hid; ++i) ASSERT_EQ(dx.get(i), 0.0) << where << " padding dx " << i;
      for (size_t pi = 0; pi < gw.size(); ++pi) {
        Tensor h(DType::kF32, layer.params()[pi].shape);
        copy_tensor(h.view(), layer.params()[pi].grad_view());
        EXPECT_LT(rel_err(gw[pi], h, 1, h.numel()), 1e-5) << where << " " << layer.params()[pi].name;
        for (int64_t i = 0; i < h.numel(); ++i) ASSERT_TRUE(std::isfinite(gw[pi].get(i))) << where << layer.params()[pi].name;
      }
    }
}

}  // namespace
}  // namespace linattn
