// `linattn layer-demo [--backend cpu|cuda] [--kind gdn|kda|both] [--batches N] [--json]`: the
// layer path of the graph contract end to end. Builds a GatedDeltaNet layer and a KDA layer with
// random weights and streams random varlen prefill batches through them in the four modes of
// GRAPH_CONTRACT.md section 9 (eager-live, eager-fixed, graph-replay, graph-update-replay through
// GraphBuckets), shows progress, and prints p50 / p95 per mode (host wall per call, stream
// synchronized), bucket hits / fallbacks, padding cost, the graph-vs-eager difference and a
// reference check.
//   cpu:  scaled down (hidden 512, 4 q/k heads, 8 (GDN) / 4 (KDA) v heads of 64, fp32), buckets
//         256/4, 512/8, 1024/8, <= 1500 tokens; checked against the fp64 composition (layer_ref.h).
//   cuda: full size, bf16: GDN Qwen3.5-like (hidden 2048, 16 q/k heads, 32 v heads, K = V = 128),
//         KDA Kimi-Linear-like (hidden 2048, 32 heads, K = V = 128); buckets 512/4, 1024/8,
//         2048/16, short prefill batches <= 2048 tokens (every 5th up to 3000: over capacity);
//         checked against the CPU fp32 layer loaded with the same bf16 weights on a small batch.
// With --backend cuda and no usable GPU (or no CUDA in this build) it says so and runs on the CPU.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "capabilities_util.h"
#include "cli.h"
#include "core/check.h"
#include "layer_ref.h"
#include "linattn/graph.h"
#include "linattn/layers.h"

namespace linattn::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Spec {
  LayerConfig cfg;
  std::vector<BucketShape> shapes;
  int64_t max_tokens, max_tokens_big;  // every 5th batch draws up to max_tokens_big
  int max_seqs;
};

Spec demo_spec(LayerKind kind, bool cuda) {
  Spec s;
  LayerConfig& c = s.cfg;
  c.kind = kind;
  const bool kda = kind == LayerKind::kKda;
  if (cuda) {
    c.hidden_size = 2048;
    c.num_heads = kda ? 32 : 16;
    c.num_v_heads = 32;
    c.head_k_dim = c.head_v_dim = 128;
    c.dtype = DType::kBF16;
    s.shapes = {{512, 4}, {1024, 8}, {2048, 16}};
    s.max_tokens = 2048, s.max_tokens_big = 3000, s.max_seqs = 16;
  } else {
    c.hidden_size = 512;
    c.num_heads = 4;
    c.num_v_heads = kda ? 4 : 8;
    c.head_k_dim = c.head_v_dim = 64;
    s.shapes = {{256, 4}, {512, 8}, {1024, 8}};
    s.max_tokens = 900, s.max_tokens_big = 1500, s.max_seqs = 8;
  }
  return s;
}

// Memory on the layer's device (host memory on the CPU) with a view of its first rows.
struct Mem {
  Buffer buf;
  TensorView full;
  Mem(Device dev, DType dt, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    buf = Buffer(dev, static_cast<size_t>(std::max<int64_t>(n, 1)) * dtype_size(dt));
    full = TensorView::contiguous(buf.data(), dt, shape, dev);
  }
  TensorView rows(int64_t T) const { return TensorView::contiguous(buf.data(), full.dtype, {1, T, full.shape[2]}, full.device); }
};

Tensor to_host(const TensorView& v, const caps::Backend& be) {
  Tensor h(v.dtype, std::vector<int64_t>(v.shape.begin(), v.shape.begin() + v.ndim));
  be.sync();
  copy_tensor(h.view(), v, be.ctx());
  be.sync();
  return h;
}

struct Batch {
  std::vector<int64_t> cu;
  Tensor x, cu_t;  // host: x [1, T, hidden] in the layer dtype, cu_seqlens int32
  int64_t T() const { return cu.back(); }
};

Batch make_batch(std::mt19937_64& rng, const std::vector<int64_t>& lens, int64_t hid, DType dt) {
  Batch b;
  b.cu = {0};
  for (int64_t l : lens) b.cu.push_back(b.cu.back() + l);
  b.x = Tensor(dt, {1, b.T(), hid});
  std::normal_distribution<double> nd;
  for (int64_t i = 0; i < b.x.numel(); ++i) b.x.set(i, nd(rng));
  b.cu_t = Tensor(DType::kI32, {static_cast<int64_t>(b.cu.size())});
  for (size_t i = 0; i < b.cu.size(); ++i) b.cu_t.set(static_cast<int64_t>(i), static_cast<double>(b.cu[i]));
  return b;
}

std::vector<int64_t> random_lens(std::mt19937_64& rng, int64_t max_tokens, int max_seqs) {
  const int n = std::uniform_int_distribution<int>(1, max_seqs)(rng);
  const int64_t total = std::uniform_int_distribution<int64_t>(32, max_tokens)(rng);
  std::vector<double> w(n);
  double s = 0;
  for (auto& v : w) s += (v = std::uniform_real_distribution<double>(0.05, 1.0)(rng));
  std::vector<int64_t> lens;
  int64_t used = 0;
  for (int i = 0; i < n; ++i) {
    lens.push_back(i + 1 == n ? total - used : static_cast<int64_t>(total * w[i] / s));
    used += lens.back();
  }
  return lens;
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

struct Diff {
  double max_abs = 0, num = 0, den = 0;
  void add(const Tensor& got, const Tensor& ref, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const double g = got.get(i), r = ref.get(i), d = std::isnan(g) ? 1e300 : std::fabs(g - r);
      max_abs = std::max(max_abs, d);
      num += d * d, den += r * r;
    }
  }
  double rel() const { return std::sqrt(num / (den + 1e-300)); }
};

// One bucket's static buffers and graph for the eager-fixed and graph-replay modes.
struct StaticBucket {
  BucketShape shape;
  Mem x, y, cu;
  Tensor cu_host;
  Graph graph;
};

// Relative RMS error of the layer's y against the reference on a small fixed batch: the fp64
// composition (cpu) or the CPU fp32 layer with the same (bf16) weights (cuda).
double reference_check(LinearAttentionLayer& layer, const caps::Backend& be) {
  const LayerConfig& cfg = layer.config();
  std::mt19937_64 rng(99);
  const Batch b = make_batch(rng, {100, 0, 37, 250}, cfg.hidden_size, cfg.dtype);
  const int64_t n = b.T() * cfg.hidden_size;
  Mem x(be.device(), cfg.dtype, {1, b.T(), cfg.hidden_size}), y(be.device(), cfg.dtype, {1, b.T(), cfg.hidden_size});
  Mem cu(be.device(), DType::kI32, {1, 1, static_cast<int64_t>(b.cu.size())});
  copy_tensor(x.full, b.x.view(), be.ctx());
  copy_tensor(TensorView::contiguous(cu.buf.data(), DType::kI32, {static_cast<int64_t>(b.cu.size())}, be.device()),
              b.cu_t.view(), be.ctx());
  layer.forward(x.full, TensorView::contiguous(cu.buf.data(), DType::kI32, {static_cast<int64_t>(b.cu.size())}, be.device()),
                y.full, {}, be.ctx());
  const Tensor got = to_host(y.full, be);
  Tensor ref;
  if (!be.cuda()) {
    ref = test::layer_ref_forward(cfg, test::params_f64(layer), b.x.to(DType::kF64), b.cu);
  } else {
    LayerConfig c32 = cfg;
    c32.dtype = DType::kF32;
    LinearAttentionLayer cpu(c32, Device{});
    for (size_t i = 0; i < layer.params().size(); ++i)
      copy_tensor(cpu.params()[i].view(), to_host(layer.params()[i].view(), be).to(DType::kF32).view());
    ref = Tensor(DType::kF32, {1, b.T(), cfg.hidden_size});
    const Tensor x32 = b.x.to(DType::kF32);
    cpu.forward(x32.view(), b.cu_t.view(), ref.view(), {});
  }
  Diff d;
  d.add(got, ref, n);
  return d.rel();
}

int run_kind(LayerKind kind, const caps::Backend& be, int batches, bool json) {
  const bool cuda = be.cuda();
  const Spec sp = demo_spec(kind, cuda);
  const LayerConfig& cfg = sp.cfg;
  const int64_t hid = cfg.hidden_size;
  const DType dt = cfg.dtype;
  const ExecContext ctx = be.ctx();
  const Device dev = be.device();
  LinearAttentionLayer layer(cfg, dev);
  layer.init_random(42);
  int64_t T_max = 0, N_max = 0;
  for (const auto& s : sp.shapes) T_max = std::max(T_max, s.T_max), N_max = std::max(N_max, s.N_max);
  layer.reserve(T_max, N_max, ctx);
  std::printf("%s layer on %s (%s): %s, buckets T_max/N_max", kind == LayerKind::kKda ? "KDA" : "GatedDeltaNet",
              device_name(dev).c_str(), dtype_name(dt), cfg.describe().c_str());
  for (const auto& s : sp.shapes) std::printf(" %lld/%lld", static_cast<long long>(s.T_max), static_cast<long long>(s.N_max));
  std::printf("\n");
  std::fflush(stdout);

  LayerRunOptions gopt;
  gopt.use_graph = true;
  std::vector<StaticBucket> stat;
  for (const auto& s : sp.shapes) {
    StaticBucket b{s, Mem(dev, dt, {1, s.T_max, hid}), Mem(dev, dt, {1, s.T_max, hid}),
                   Mem(dev, DType::kI32, {1, 1, s.N_max + 1}), Tensor(DType::kI32, {s.N_max + 1}), Graph(dev, be.stream())};
    for (int64_t i = 0; i <= s.N_max; ++i) b.cu_host.set(i, 0);
    fill_zero(b.x.full, ctx);
    copy_tensor(TensorView::contiguous(b.cu.buf.data(), DType::kI32, {s.N_max + 1}, dev), b.cu_host.view(), ctx);
    stat.push_back(std::move(b));
  }
  auto cu_view = [&](const StaticBucket& b) {
    return TensorView::contiguous(b.cu.buf.data(), DType::kI32, {b.shape.N_max + 1}, dev);
  };
  for (auto& b : stat) {
    layer.forward(b.x.full, cu_view(b), b.y.full, gopt, ctx);  // warm-up, then one graph per bucket
    b.graph.capture([&] { layer.forward(b.x.full, cu_view(b), b.y.full, gopt, ctx); });
  }

  auto describe = [hid, dt](const Capacity& cap) {
    return std::vector<BucketBufferSpec>{{"x", dt, {1, cap.T_max, hid}, BufferRole::kInput, BufferScale::kTokens, 1},
                                         {"y", dt, {1, cap.T_max, hid}, BufferRole::kOutput, BufferScale::kTokens, 1}};
  };
  auto step = [&](const BucketStatic& s) { layer.forward(s.buffer("x"), s.cu_seqlens(), s.buffer("y"), gopt, s.exec()); };
  TensorView live_cu;  // the current batch's cu_seqlens on the device (the eager fallback's)
  auto eager = [&](const TensorView&, const NamedTensors& in, const NamedTensors& out) {
    layer.forward(in[0].view, live_cu, out[0].view, {}, ctx);
  };
  GraphBucketsOptions bo;
  bo.device = dev;
  bo.stream = be.stream();
  GraphBuckets buckets(sp.shapes, describe, step, eager, bo);

  auto timed = [&](auto&& fn) {
    const auto t0 = Clock::now();
    fn();
    be.sync();
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  std::mt19937_64 rng(7 + static_cast<int>(kind));
  // eager-live-again: the same batch once more into a fresh output after every other mode ran, so
  // the GPU is busy and this T was seen before: its gap to eager-live is the first-call cost of a
  // new layout (new shapes for cuBLAS, lazily loaded kernels) or of a GPU idle while the host built
  // the batch, not of the layer's own work.
  std::vector<double> t_live, t_fixed, t_replay, t_update, t_again;
  Diff vs_live;
  bool replay_bitwise = true, update_bitwise = true;  // vs eager-fixed (same buffers / another bucket's)
  bool again_bitwise = true;                          // eager-live twice on one batch: deterministic
  int64_t real_tokens = 0, padded_tokens = 0;
  const bool tty = isatty(fileno(stderr));
  for (int bi = -1; bi < batches; ++bi) {  // bi = -1: an untimed warm-up batch
    const Batch b = make_batch(rng, random_lens(rng, bi % 5 == 4 ? sp.max_tokens_big : sp.max_tokens, sp.max_seqs), hid, dt);
    const int64_t T = b.T();
    Mem x(dev, dt, {1, T, hid}), y_live(dev, dt, {1, T, hid}), y_upd(dev, dt, {1, T, hid});
    Mem cu(dev, DType::kI32, {1, 1, static_cast<int64_t>(b.cu.size())});
    copy_tensor(x.full, b.x.view(), ctx);
    live_cu = TensorView::contiguous(cu.buf.data(), DType::kI32, {static_cast<int64_t>(b.cu.size())}, dev);
    copy_tensor(live_cu, b.cu_t.view(), ctx);
    be.sync();
    const double ms_live = timed([&] { layer.forward(x.full, live_cu, y_live.full, {}, ctx); });
    if (bi < 0) continue;
    t_live.push_back(ms_live);
    BucketDecision dec;
    t_update.push_back(timed([&] { dec = buckets.run(b.cu_t.view(), {{"x", x.full}}, {{"y", y_upd.full}}); }));
    const Tensor yl = to_host(y_live.full, be);
    if (dec.route == BucketRoute::kGraph) {
      StaticBucket& s = stat[dec.bucket];
      copy_tensor(s.x.rows(T), x.full, ctx);  // padding rows keep older batches' rows: the layer ignores them
      for (int64_t i = 0; i <= s.shape.N_max; ++i)
        s.cu_host.set(i, static_cast<double>(b.cu[std::min<size_t>(static_cast<size_t>(i), b.cu.size() - 1)]));
      copy_tensor(cu_view(s), s.cu_host.view(), ctx);
      t_fixed.push_back(timed([&] { layer.forward(s.x.full, cu_view(s), s.y.full, gopt, ctx); }));
      const Tensor yf = to_host(s.y.rows(T), be);
      t_replay.push_back(timed([&] { s.graph.replay(); }));
      const Tensor yr = to_host(s.y.rows(T), be), yu = to_host(y_upd.full, be);
      replay_bitwise = replay_bitwise && std::memcmp(yr.view().data, yf.view().data, yr.view().nbytes()) == 0;
      update_bitwise = update_bitwise && std::memcmp(yu.view().data, yf.view().data, yu.view().nbytes()) == 0;
      vs_live.add(yr, yl, T * hid);
      vs_live.add(yu, yl, T * hid);
      real_tokens += T;
      padded_tokens += s.shape.T_max - T;
    }
    Mem y_again(dev, dt, {1, T, hid});
    t_again.push_back(timed([&] { layer.forward(x.full, live_cu, y_again.full, {}, ctx); }));
    const Tensor ya = to_host(y_again.full, be);
    again_bitwise = again_bitwise && std::memcmp(ya.view().data, yl.view().data, ya.view().nbytes()) == 0;
    std::fprintf(stderr, "%s  batch %d/%d: %lld tokens in %zu seqs -> %s%s", tty ? "\r" : "", bi + 1, batches,
                 static_cast<long long>(T), b.cu.size() - 1, bucket_route_name(dec.route), tty ? "          " : "\n");
  }
  if (tty) std::fprintf(stderr, "\n");
  const double ref_err = reference_check(layer, be);
  const double ref_bar = cuda ? 2e-2 : 1e-4, graph_bar = cuda ? 1e-2 : 1e-5;
  const bool ok = ref_err < ref_bar && vs_live.rel() < graph_bar && replay_bitwise && again_bitwise;
  std::printf("  %-20s %9s %9s %7s\n", "mode", "p50 ms", "p95 ms", "calls");
  const struct { const char* name; const std::vector<double>* t; } rows[] = {
      {"eager-live", &t_live}, {"eager-fixed", &t_fixed}, {"graph-replay", &t_replay}, {"graph-update-replay", &t_update},
      {"eager-live-again", &t_again}};
  for (const auto& r : rows) std::printf("  %-20s %9.3f %9.3f %7zu\n", r.name, pct(*r.t, 0.5), pct(*r.t, 0.95), r.t->size());
  std::printf("  buckets: %s\n", buckets.stats().str().c_str());
  std::printf("  padding cost: %.1f%% of replayed tokens were padding (eager-fixed p50 / eager-live p50 = %.2f)\n",
              100.0 * padded_tokens / std::max<int64_t>(1, real_tokens + padded_tokens),
              pct(t_fixed, 0.5) / std::max(1e-9, pct(t_live, 0.5)));
  std::printf("  graph vs eager-live: max |diff| %.3g, rel RMS %.3g (bar %.0e); == eager-fixed bitwise: graph-replay %s,"
              " graph-update-replay %s\n", vs_live.max_abs, vs_live.rel(), graph_bar, replay_bitwise ? "yes" : "NO",
              update_bitwise ? "yes" : "no");
  std::printf("  eager-live twice on one batch: %s\n", again_bitwise ? "bitwise equal" : "DIFFERENT (nondeterministic)");
  std::printf("  reference check (y rel RMS vs %s, 387 tokens in 4 seqs): %.3g (bar %.0e) %s\n",
              cuda ? "the CPU fp32 layer with the same bf16 weights" : "the fp64 composition", ref_err, ref_bar,
              ok ? "ok" : "FAILED");
  if (json)
    for (const auto& r : rows)
      std::printf("{\"kind\":\"case\",\"op\":\"%s\",\"pass\":\"fwd\",\"backend\":\"%s\",\"mode\":\"%s\",\"dtype\":\"%s\","
                  "\"hidden\":%lld,\"hqk\":%lld,\"hv\":%lld,\"k\":%lld,\"v\":%lld,\"bt\":%d,\"lengths\":\"random varlen <= %lld\","
                  "\"calls\":%zu,\"p50_ms\":%.4f,\"p95_ms\":%.4f,\"graph_vs_eager_max\":%.3g,\"graph_vs_eager_rel_rms\":%.3g,"
                  "\"replay_bitwise_fixed\":%s,\"ref_rel_rms\":%.3g}\n",
                  kind == LayerKind::kKda ? "kda_layer" : "gdn_layer", cuda ? "cuda" : "cpu", r.name, dtype_name(dt),
                  static_cast<long long>(hid), static_cast<long long>(cfg.num_heads), static_cast<long long>(cfg.num_v_heads),
                  static_cast<long long>(cfg.head_k_dim), static_cast<long long>(cfg.head_v_dim), cfg.chunk_size,
                  static_cast<long long>(sp.max_tokens_big), r.t->size(), pct(*r.t, 0.5), pct(*r.t, 0.95), vs_live.max_abs,
                  vs_live.rel(), replay_bitwise ? "true" : "false", ref_err);
  std::fflush(stdout);
  return ok ? 0 : 1;
}

int cmd_layer_demo(const Args& args) {
  std::string backend = flag(args, "backend", "cpu");
  LINATTN_CHECK(backend == "cpu" || backend == "cuda", "--backend: expected cpu or cuda, got '", backend, "'");
  const std::string why = caps::backend_unavailable(backend);
  if (!why.empty()) {
    std::printf("layer-demo: backend %s unavailable here (%s); running on the cpu\n", backend.c_str(), why.c_str());
    backend = "cpu";
  }
  const caps::Backend be(backend);
  const std::string kind = flag(args, "kind", "both");
  const int batches = std::stoi(flag(args, "batches", be.cuda() ? "40" : "12"));
  const bool json = has_flag(args, "json");
  int rc = 0;
  if (kind == "gdn" || kind == "both") rc |= run_kind(LayerKind::kGatedDeltaNet, be, batches, json);
  if (kind == "kda" || kind == "both") rc |= run_kind(LayerKind::kKda, be, batches, json);
  return rc;
}

}  // namespace
LINATTN_SUBCOMMAND("layer-demo", "stream varlen prefill batches through GDN / KDA layers in the four graph modes",
                   cmd_layer_demo);
}  // namespace linattn::cli
