// Layers on CUDA (label gpu): GatedDeltaNet and KDA forward + backward on the GPU against the CPU
// layer with the same weights (fp32: tight; bf16: the CPU fp32 layer loaded with the bf16
// weights, so only activation rounding differs) and the forward against the fp64 composition of
// tools/layer_ref.h; one CUDA graph of the whole layer forward + backward (fixed capacity,
// reserve on the capture stream) replayed for six layouts with garbage padding, bitwise equal
// to the same fixed-capacity calls run eagerly and close to the exact-size eager layer (GDN and
// KDA); a forward-only graph likewise; GraphBuckets on the GPU stream driving a bf16 layer whose
// weights come from a safetensors file written by the CPU layer.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "layer_ref.h"
#include "linattn/error.h"
#include "linattn/graph.h"
#include "linattn/layers.h"

namespace linattn {
namespace {

const Device kGpu{DeviceType::kCUDA, 0};

LayerConfig config(LayerKind kind, DType dt, bool chunked_shape) {
  LayerConfig c;
  c.kind = kind;
  c.dtype = dt;
  c.hidden_size = chunked_shape ? 256 : 48;
  c.num_heads = 2;
  c.num_v_heads = kind == LayerKind::kKda ? 2 : 4;
  c.head_k_dim = chunked_shape ? 128 : 16;  // K = 128, bf16: the chunked CUDA kernels
  c.head_v_dim = chunked_shape ? 64 : 16;
  c.chunk_size = chunked_shape ? 64 : 16;
  return c;
}

Tensor randn(std::vector<int64_t> shape, uint64_t seed, DType dt, double sd = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, sd);
  Tensor t(DType::kF64, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, nd(rng));
  return t.to(dt);
}

Tensor cu_tensor(const std::vector<int64_t>& cu) {
  Tensor t(DType::kI32, {static_cast<int64_t>(cu.size())});
  for (size_t i = 0; i < cu.size(); ++i) t.set(static_cast<int64_t>(i), static_cast<double>(cu[i]));
  return t;
}

struct Dev {
  Buffer buf;
  TensorView v;
  Dev(const Tensor& h, cudaStream_t s) : buf(kGpu, std::max<size_t>(h.view().nbytes(), 1)) {
    v = TensorView::contiguous(buf.data(), h.dtype(), h.shape(), kGpu);
    ExecContext c;
    c.stream = s;
    copy_tensor(v, h.view(), c);
  }
};

Tensor host(const TensorView& v) {
  cudaDeviceSynchronize();
  Tensor h(v.dtype, std::vector<int64_t>(v.shape.begin(), v.shape.begin() + v.ndim));
  copy_tensor(h.view(), v);
  cudaDeviceSynchronize();
  return h;
}

// Relative RMS error over the first n elements, with the worst element in `why`.
double rel_rms(const Tensor& got, const Tensor& ref, int64_t n, std::string* why) {
  double num = 0, den = 0, worst = -1;
  int64_t wi = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = got.get(i) - ref.get(i);
    num += d * d;
    den += ref.get(i) * ref.get(i);
    if (std::fabs(d) > worst || std::isnan(d)) worst = std::isnan(d) ? 1e300 : std::fabs(d), wi = i;
  }
  if (why) *why = "worst at " + std::to_string(wi) + ": got " + std::to_string(got.get(wi)) + " ref " + std::to_string(ref.get(wi));
  return std::isnan(num) ? 1e300 : std::sqrt(num / (den + 1e-30));
}

struct LayerRun {
  Tensor y, dx;
  std::vector<Tensor> grads;
};

// Eager forward + backward of `layer` on x / dy (host tensors in the layer dtype) on `dev`.
LayerRun run_layer(LinearAttentionLayer& layer, Device dev, const Tensor& x, const Tensor& dy, const std::vector<int64_t>& cu,
              cudaStream_t s) {
  const int64_t T = x.shape()[1], hid = x.shape()[2];
  const DType dt = x.dtype();
  LayerRunOptions opt;
  opt.training = true;
  LayerRun r;
  if (dev.type == DeviceType::kCPU) {
    Tensor y(dt, {1, T, hid}), dx(dt, {1, T, hid});
    Tensor cut = cu_tensor(cu);
    layer.forward(x, cut, y, opt);
    layer.backward(dy, dx);
    r.y = y, r.dx = dx;
  } else {
    ExecContext c;
    c.stream = s;
    Dev X(x, s), DY(dy, s), Y(Tensor(dt, {1, T, hid}), s), DX(Tensor(dt, {1, T, hid}), s), CU(cu_tensor(cu), s);
    layer.forward(X.v, CU.v, Y.v, opt, c);
    layer.backward(DY.v, DX.v, c);
    r.y = host(Y.v), r.dx = host(DX.v);
  }
  for (auto& p : layer.params()) r.grads.push_back(host(p.grad_view()));
  return r;
}

// tol_head_sum (default tol_g): dA_log's bar, one per-head sum of cancelling gate-gradient terms
// over every token (bf16: see tools/capabilities_layer.cc grad_bar and bench/emu/kda_layer_dalog_precision.py).
void compare_runs(LinearAttentionLayer& gpu, const LayerRun& a, const LayerRun& ref, int64_t n_real, double tol_y, double tol_g,
                  const std::string& where, double tol_head_sum = -1) {
  std::string why;
  EXPECT_LT(rel_rms(a.y, ref.y, n_real, &why), tol_y) << where << " y " << why;
  EXPECT_LT(rel_rms(a.dx, ref.dx, n_real, &why), tol_g) << where << " dx " << why;
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_LT(rel_rms(a.grads[i], ref.grads[i], ref.grads[i].numel(), &why),
              gpu.params()[i].name == "A_log" && tol_head_sum > 0 ? tol_head_sum : tol_g)
        << where << " d" << gpu.params()[i].name << " " << why;
  for (int64_t i = n_real; i < a.dx.numel(); ++i) ASSERT_EQ(a.dx.get(i), 0.0) << where << " padding dx " << i;
}

struct StreamGuard {
  cudaStream_t s = nullptr;
  StreamGuard() { cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }
  ~StreamGuard() { cudaStreamDestroy(s); }
};

TEST(LayerCuda, Fp32MatchesCpuLayerAndReference) {
  StreamGuard st;
  const LayerConfig c = config(LayerKind::kGatedDeltaNet, DType::kF32, false);
  LinearAttentionLayer gpu(c, kGpu), cpu(c, Device{});
  gpu.init_random(3);
  cpu.init_random(3);  // same seed, same fp32 weights
  const std::vector<int64_t> cu = {0, 17, 17, 60, 90};
  const int64_t T = 96, hid = c.hidden_size;
  Tensor x = randn({1, T, hid}, 5, DType::kF32), dy = randn({1, T, hid}, 6, DType::kF32);
  for (int64_t i = 90 * hid; i < T * hid; ++i) x.set(i, 1e30), dy.set(i, std::nan(""));
  const LayerRun g = run_layer(gpu, kGpu, x, dy, cu, st.s), r = run_layer(cpu, Device{}, x, dy, cu, st.s);
  compare_runs(gpu, g, r, 90 * hid, 2e-5, 2e-4, "fp32 vs cpu");
  const Tensor ref = test::layer_ref_forward(c, test::params_f64(gpu), x.to(DType::kF64), cu);
  std::string why;
  EXPECT_LT(rel_rms(g.y, ref, 90 * hid, &why), 2e-5) << "fp32 vs fp64 composition " << why;
}

void bf16_case(LayerKind kind) {
  StreamGuard st;
  const LayerConfig c = config(kind, DType::kBF16, true);
  LayerConfig c32 = c;
  c32.dtype = DType::kF32;
  LinearAttentionLayer gpu(c, kGpu), cpu(c32, Device{});
  gpu.init_random(7);
  const std::string path = ::testing::TempDir() + "/layer_cuda_bf16.safetensors";
  gpu.save_safetensors(path);
  cpu.load_safetensors(path);  // the bf16 weights, exactly, in fp32
  std::remove(path.c_str());
  const std::vector<int64_t> cu = {0, 130, 131, 300, 420};
  const int64_t T = 448, hid = c.hidden_size;
  Tensor x = randn({1, T, hid}, 8, DType::kBF16), dy = randn({1, T, hid}, 9, DType::kBF16);
  for (int64_t i = 420 * hid; i < T * hid; ++i) x.set(i, 3e38), dy.set(i, std::nan(""));
  const LayerRun g = run_layer(gpu, kGpu, x, dy, cu, st.s);
  const LayerRun r = run_layer(cpu, Device{}, x.to(DType::kF32), dy.to(DType::kF32), cu, st.s);
  compare_runs(gpu, g, r, 420 * hid, 2e-2, 5e-2, kind == LayerKind::kKda ? "kda bf16 vs cpu fp32" : "bf16 vs cpu fp32", 8e-2);
  const Tensor ref = test::layer_ref_forward(c, test::params_f64(gpu), x.to(DType::kF64), cu);
  std::string why;
  EXPECT_LT(rel_rms(g.y, ref, 420 * hid, &why), 2e-2) << "bf16 vs fp64 composition " << why;
}

TEST(LayerCuda, Bf16ChunkedMatchesCpuLayerAndReference) { bf16_case(LayerKind::kGatedDeltaNet); }
TEST(LayerCuda, KdaBf16ChunkedMatchesCpuLayerAndReference) { bf16_case(LayerKind::kKda); }

// One CUDA graph of forward + backward (and one of forward only) on static buffers.
void graph_case(bool with_backward, LayerKind kind = LayerKind::kGatedDeltaNet) {
  StreamGuard st;
  ExecContext ctx;
  ctx.stream = st.s;
  const LayerConfig c = config(kind, DType::kBF16, true);
  const int64_t T_max = 512, N_max = 4, hid = c.hidden_size;
  LinearAttentionLayer layer(c, kGpu);
  layer.init_random(23);
  layer.reserve(T_max, N_max, ctx);
  Dev X(Tensor(DType::kBF16, {1, T_max, hid}), st.s), Y(Tensor(DType::kBF16, {1, T_max, hid}), st.s);
  Dev DY(Tensor(DType::kBF16, {1, T_max, hid}), st.s), DX(Tensor(DType::kBF16, {1, T_max, hid}), st.s);
  Tensor cu(DType::kI32, {N_max + 1});
  for (int64_t i = 0; i <= N_max; ++i) cu.set(i, 0);
  Dev CU(cu, st.s);
  LayerRunOptions gopt;
  gopt.use_graph = true;
  gopt.training = with_backward;
  auto step = [&] {
    layer.forward(X.v, CU.v, Y.v, gopt, ctx);
    if (with_backward) layer.backward(DY.v, DX.v, ctx);
  };
  step();  // warm-up on the static buffers (eager, fixed capacity)
  Graph graph(kGpu, st.s);
  graph.capture(step);
  EXPECT_GT(graph.num_nodes(), with_backward ? 40u : 15u);
  const std::vector<std::vector<int64_t>> layouts = {
      {128, 128, 128, 128}, {5, 0, 300, 0}, {512, 0, 0, 0}, {1, 63, 64, 65}, {0, 0, 0, 3}, {200, 77, 0, 0}};
  for (size_t li = 0; li < layouts.size(); ++li) {
    std::vector<int64_t> cuv = {0};
    for (int64_t l : layouts[li]) cuv.push_back(cuv.back() + l);
    const int64_t T = cuv.back();
    Tensor x = randn({1, T_max, hid}, 100 + li, DType::kBF16), dy = randn({1, T_max, hid}, 200 + li, DType::kBF16);
    for (int64_t i = T * hid; i < T_max * hid; ++i) x.set(i, 3e38), dy.set(i, std::nan(""));
    for (size_t i = 0; i < cuv.size(); ++i) cu.set(static_cast<int64_t>(i), static_cast<double>(cuv[i]));
    copy_tensor(X.v, x.view(), ctx);
    copy_tensor(DY.v, dy.view(), ctx);
    copy_tensor(CU.v, cu.view(), ctx);
    graph.replay();
    LayerRun gr{host(Y.v), host(DX.v), {}};
    if (with_backward)
      for (auto& p : layer.params()) gr.grads.push_back(host(p.grad_view()));
    step();  // the same fixed-capacity calls, eager
    LayerRun fx{host(Y.v), host(DX.v), {}};
    if (with_backward)
      for (auto& p : layer.params()) fx.grads.push_back(host(p.grad_view()));
    const std::string where = std::string(kind == LayerKind::kKda ? "kda " : "gdn ") +
                              (with_backward ? "fwd+bwd" : "fwd") + " layout " + std::to_string(li);
    auto bitwise = [&](const Tensor& a, const Tensor& b, int64_t n, const std::string& what) {
      EXPECT_EQ(std::memcmp(a.view().data, b.view().data, n * dtype_size(a.dtype())), 0) << where << " " << what
                                                                                          << ": replay != eager-fixed";
    };
    bitwise(gr.y, fx.y, T * hid, "y");
    if (with_backward) {
      bitwise(gr.dx, fx.dx, T_max * hid, "dx");
      for (size_t i = 0; i < gr.grads.size(); ++i) bitwise(gr.grads[i], fx.grads[i], gr.grads[i].numel(), layer.params()[i].name);
    }
    // Exact-size eager layer on the same content.
    Tensor xe(DType::kBF16, {1, T, hid}), dye(DType::kBF16, {1, T, hid});
    std::memcpy(xe.view().data, x.view().data, xe.view().nbytes());
    std::memcpy(dye.view().data, dy.view().data, dye.view().nbytes());
    const LayerRun ev = run_layer(layer, kGpu, xe, dye, cuv, st.s);
    std::string why;
    EXPECT_LT(rel_rms(gr.y, ev.y, T * hid, &why), 1e-2) << where << " y vs eager-live " << why;
    if (with_backward) {
      EXPECT_LT(rel_rms(gr.dx, ev.dx, T * hid, &why), 1e-2) << where << " dx vs eager-live " << why;
      for (int64_t i = T * hid; i < T_max * hid; ++i) ASSERT_EQ(gr.dx.get(i), 0.0) << where << " padding dx " << i;
      for (size_t i = 0; i < gr.grads.size(); ++i)
        EXPECT_LT(rel_rms(gr.grads[i], ev.grads[i], ev.grads[i].numel(), &why), 3e-2)
            << where << " d" << layer.params()[i].name << " vs eager-live " << why;
    }
  }
}

TEST(LayerCuda, GraphForwardBackwardReplaysSixLayouts) { graph_case(true); }
TEST(LayerCuda, GraphForwardReplaysSixLayouts) { graph_case(false); }
TEST(LayerCuda, KdaGraphForwardBackwardReplaysSixLayouts) { graph_case(true, LayerKind::kKda); }

TEST(LayerCuda, KdaFp32MatchesCpuLayerAndReference) {
  StreamGuard st;
  const LayerConfig c = config(LayerKind::kKda, DType::kF32, false);
  LinearAttentionLayer gpu(c, kGpu), cpu(c, Device{});
  gpu.init_random(31);
  cpu.init_random(31);
  const std::vector<int64_t> cu = {0, 20, 20, 45};
  const int64_t T = 48, hid = c.hidden_size;
  Tensor x = randn({1, T, hid}, 32, DType::kF32), dy = randn({1, T, hid}, 33, DType::kF32);
  for (int64_t i = 45 * hid; i < T * hid; ++i) x.set(i, 1e30), dy.set(i, std::nan(""));
  const LayerRun g = run_layer(gpu, kGpu, x, dy, cu, st.s), r = run_layer(cpu, Device{}, x, dy, cu, st.s);
  compare_runs(gpu, g, r, 45 * hid, 2e-5, 2e-4, "kda fp32 vs cpu");
  const Tensor ref = test::layer_ref_forward(c, test::params_f64(gpu), x.to(DType::kF64), cu);
  std::string why;
  EXPECT_LT(rel_rms(g.y, ref, 45 * hid, &why), 2e-5) << "kda fp32 vs fp64 composition " << why;
}

// GraphBuckets on the GPU stream driving the bf16 layer's forward (one graph per bucket), the
// weights loaded from a safetensors file the fp32 CPU layer wrote (converted to bf16 on load):
// every routed layout within 1e-2 of the GPU layer eager at exact size and 2e-2 of the CPU layer.
TEST(LayerCuda, GraphBucketsDriveBf16LayerWithSafetensorsWeights) {
  StreamGuard st;
  ExecContext ctx;
  ctx.stream = st.s;
  const LayerConfig c = config(LayerKind::kGatedDeltaNet, DType::kBF16, true);
  LayerConfig c32 = c;
  c32.dtype = DType::kF32;
  const int64_t hid = c.hidden_size;
  LinearAttentionLayer cpu(c32, Device{}), gpu(c, kGpu);
  cpu.init_random(51);
  const std::string path = ::testing::TempDir() + "/layer_cuda_buckets.safetensors";
  cpu.save_safetensors(path, "model.layers.0.linear_attn.");
  gpu.load_safetensors(path, "model.layers.0.linear_attn.");
  gpu.save_safetensors(path);
  cpu.load_safetensors(path);  // the CPU layer now holds the bf16-rounded weights exactly
  std::remove(path.c_str());
  gpu.reserve(512, 8, ctx);
  auto describe = [hid](const Capacity& cap) {
    return std::vector<BucketBufferSpec>{
        {"x", DType::kBF16, {1, cap.T_max, hid}, BufferRole::kInput, BufferScale::kTokens, 1},
        {"y", DType::kBF16, {1, cap.T_max, hid}, BufferRole::kOutput, BufferScale::kTokens, 1}};
  };
  LayerRunOptions gopt;
  gopt.use_graph = true;
  auto step = [&](const BucketStatic& s) { gpu.forward(s.buffer("x"), s.cu_seqlens(), s.buffer("y"), gopt, s.exec()); };
  const TensorView* live_cu = nullptr;
  auto eager = [&](const TensorView&, const NamedTensors& in, const NamedTensors& out) {
    gpu.forward(in[0].view, *live_cu, out[0].view, {}, ctx);
  };
  GraphBucketsOptions bo;
  bo.device = kGpu;
  bo.stream = st.s;
  GraphBuckets buckets({{256, 4}, {512, 8}}, describe, step, eager, bo);
  const std::vector<std::vector<int64_t>> layouts = {
      {100, 100, 50}, {300, 0, 150, 60}, {130, 120}, {64, 1, 1, 1, 1, 300, 2}, {700}, {256}};
  const std::vector<BucketRoute> routes = {BucketRoute::kGraph, BucketRoute::kGraph, BucketRoute::kGraph,
                                           BucketRoute::kGraph, BucketRoute::kEagerOverCapacity, BucketRoute::kGraph};
  for (size_t li = 0; li < layouts.size(); ++li) {
    std::vector<int64_t> cuv = {0};
    for (int64_t l : layouts[li]) cuv.push_back(cuv.back() + l);
    const int64_t T = cuv.back();
    const Tensor x = randn({1, T, hid}, 600 + li, DType::kBF16), cu_host = cu_tensor(cuv);
    Dev X(x, st.s), Y(Tensor(DType::kBF16, {1, T, hid}), st.s), YE(Tensor(DType::kBF16, {1, T, hid}), st.s), CU(cu_host, st.s);
    live_cu = &CU.v;
    const BucketDecision d = buckets.run(cu_host.view(), {{"x", X.v}}, {{"y", Y.v}});
    const std::string where = "layout " + std::to_string(li);
    EXPECT_EQ(d.route, routes[li]) << where << ": " << bucket_route_name(d.route);
    gpu.forward(X.v, CU.v, YE.v, {}, ctx);
    const Tensor y = host(Y.v), ye = host(YE.v);
    Tensor yc(DType::kF32, {1, T, hid});
    const Tensor x32 = x.to(DType::kF32);
    cpu.forward(x32.view(), cu_host.view(), yc.view(), {});
    std::string why;
    EXPECT_LT(rel_rms(y, ye, T * hid, &why), 1e-2) << where << " buckets vs eager-live " << why;
    EXPECT_LT(rel_rms(y, yc, T * hid, &why), 2e-2) << where << " buckets vs cpu fp32 layer " << why;
  }
  EXPECT_EQ(buckets.stats().replays, 5);
  EXPECT_EQ(buckets.stats().fallbacks_over_capacity, 1);
  EXPECT_EQ(buckets.stats().captures, 2);
}

}  // namespace
}  // namespace linattn
