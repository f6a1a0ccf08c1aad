// `linattn layer-demo [--backend cpu] [--kind gdn|kda|both] [--batches N] [--json]`: the layer
// path of the graph contract end to end. Builds a Qwen3.5-like GatedDeltaNet layer and a Kimi
// KDA layer with random weights (scaled down on the CPU: hidden 512, 4/8 heads of 64), streams
// random varlen prefill batches through them in the four modes of GRAPH_CONTRACT.md section 9
// (eager-live, eager-fixed, graph-replay, graph-update-replay through GraphBuckets), shows
// progress, and prints p50/p95 per mode, bucket hits / fallbacks, padding cost, the
// graph-vs-eager max difference and the check of one batch against the fp64 reference
// composition (layer_ref.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cli.h"
#include "layer_ref.h"
#include "linattn/graph.h"
#include "linattn/layers.h"

namespace linattn::cli {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

LayerConfig demo_config(LayerKind kind) {
  LayerConfig c;
  c.kind = kind;
  c.hidden_size = 512;
  c.num_heads = 4;
  c.num_v_heads = kind == LayerKind::kKda ? 4 : 8;
  c.head_k_dim = 64;
  c.head_v_dim = 64;
  return c;
}

struct Batch {
  std::vector<int64_t> cu;
  Tensor x, cu_t;
  int64_t T() const { return cu.back(); }
};

Batch random_batch(std::mt19937_64& rng, int64_t hid, int64_t max_tokens, int max_seqs) {
  Batch b;
  const int n = std::uniform_int_distribution<int>(1, max_seqs)(rng);
  const int64_t total = std::uniform_int_distribution<int64_t>(32, max_tokens)(rng);
  std::vector<double> w(n);
  for (auto& v : w) v = std::uniform_real_distribution<double>(0.05, 1.0)(rng);
  double s = 0;
  for (double v : w) s += v;
  b.cu = {0};
  for (int i = 0; i < n; ++i) b.cu.push_back(i + 1 == n ? total : b.cu.back() + static_cast<int64_t>(total * w[i] / s));
  b.x = Tensor(DType::kF32, {1, total, hid});
  std::normal_distribution<double> nd;
  for (int64_t i = 0; i < b.x.numel(); ++i) b.x.set(i, nd(rng));
  b.cu_t = Tensor(DType::kI32, {static_cast<int64_t>(b.cu.size())});
  for (size_t i = 0; i < b.cu.size(); ++i) b.cu_t.set(static_cast<int64_t>(i), static_cast<double>(b.cu[i]));
  return b;
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

double max_abs_diff(const TensorView& a, const TensorView& b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(a.ptr<float>()[i] - b.ptr<float>()[i])));
  return m;
}

// One bucket's static buffers for the eager-fixed and graph-replay modes.
struct StaticBucket {
  int64_t T_max, N_max;
  Tensor x, y, cu;
  Graph graph;
};

int run_kind(LayerKind kind, int batches, bool json) {
  const LayerConfig cfg = demo_config(kind);
  const int64_t hid = cfg.hidden_size;
  const std::vector<BucketShape> shapes = {{256, 4}, {512, 8}, {1024, 8}};
  LinearAttentionLayer layer(cfg, Device{});
  layer.init_random(42);
  layer.reserve(1024, 8);
  std::printf("%s layer: %s, buckets T_max/N_max 256/4, 512/8, 1024/8\n",
              kind == LayerKind::kKda ? "KDA" : "GatedDeltaNet", cfg.describe().c_str());

  std::vector<StaticBucket> stat;
  LayerRunOptions gopt;
  gopt.use_graph = true;
  for (const auto& s : shapes) {
    StaticBucket b{s.T_max, s.N_max, Tensor(DType::kF32, {1, s.T_max, hid}), Tensor(DType::kF32, {1, s.T_max, hid}),
                   Tensor(DType::kI32, {s.N_max + 1}), Graph()};
    for (int64_t i = 0; i < b.x.numel(); ++i) b.x.set(i, 0.0);
    for (int64_t i = 0; i <= s.N_max; ++i) b.cu.set(i, 0);
    stat.push_back(std::move(b));
  }
  for (auto& b : stat) b.graph.capture([&] { layer.forward(b.x, b.cu, b.y, gopt); });

  auto describe = [hid](const Capacity& cap) {
    return std::vector<BucketBufferSpec>{
        {"x", DType::kF32, {1, cap.T_max, hid}, BufferRole::kInput, BufferScale::kTokens, 1},
        {"y", DType::kF32, {1, cap.T_max, hid}, BufferRole::kOutput, BufferScale::kTokens, 1}};
  };
  auto step = [&](const BucketStatic& s) { layer.forward(s.buffer("x"), s.cu_seqlens(), s.buffer("y"), gopt); };
  auto eager = [&](const TensorView& cu, const NamedTensors& in, const NamedTensors& out) {
    layer.forward(in[0].view, cu, out[0].view, {});
  };
  GraphBucketsOptions bo;
  GraphBuckets buckets(shapes, describe, step, eager, bo);

  std::mt19937_64 rng(7 + static_cast<int>(kind));
  std::vector<double> t_live, t_fixed, t_replay, t_update;
  double worst_graph_diff = 0;
  int64_t real_tokens = 0, padded_tokens = 0;
  double ref_err = -1;
  for (int bi = 0; bi < batches; ++bi) {
    Batch b = random_batch(rng, hid, bi % 5 == 4 ? 1500 : 900, 8);
    const int64_t T = b.T();
    Tensor y_live(DType::kF32, {1, T, hid}), y_upd(DType::kF32, {1, T, hid});
    auto t0 = Clock::now();
    layer.forward(b.x, b.cu_t, y_live, {});
    t_live.push_back(ms_since(t0));
    t0 = Clock::now();
    const BucketDecision dec = buckets.run(b.cu_t, {{"x", b.x.view()}}, {{"y", y_upd.view()}});
    t_update.push_back(ms_since(t0));
    if (dec.route == BucketRoute::kGraph) {
      StaticBucket& s = stat[dec.bucket];
      for (int64_t i = 0; i < s.x.numel(); ++i) s.x.set(i, i < b.x.numel() ? b.x.get(i) : 0.0);
      for (int64_t i = 0; i <= s.N_max; ++i) s.cu.set(i, static_cast<double>(b.cu[std::min<size_t>(i, b.cu.size() - 1)]));
      t0 = Clock::now();
      layer.forward(s.x, s.cu, s.y, gopt);
      t_fixed.push_back(ms_since(t0));
      t0 = Clock::now();
      s.graph.replay();
      t_replay.push_back(ms_since(t0));
      worst_graph_diff = std::max(worst_graph_diff, max_abs_diff(s.y.view(), y_live.view(), T * hid));
      worst_graph_diff = std::max(worst_graph_diff, max_abs_diff(y_upd.view(), y_live.view(), T * hid));
      real_tokens += T;
      padded_tokens += s.T_max - T;
    }
    if (bi == 0) {  // the fp64 reference composition on the first batch
      const auto P = test::params_f64(layer);
      Tensor ref = test::layer_ref_forward(cfg, P, b.x.to(DType::kF64), b.cu);
      double num = 0, den = 0;
      for (int64_t i = 0; i < T * hid; ++i) {
        const double d = y_live.get(i) - ref.get(i);
        num += d * d;
        den += ref.get(i) * ref.get(i);
      }
      ref_err = std::sqrt(num / den);
    }
    std::fprintf(stderr, "\r  batch %d/%d: %lld tokens in %zu seqs -> %s          ", bi + 1, batches,
                 static_cast<long long>(T), b.cu.size() - 1, bucket_route_name(dec.route));
  }
  std::fprintf(stderr, "\n");
  const auto& st = buckets.stats();
  std::printf("  %-20s %9s %9s %7s\n", "mode", "p50 ms", "p95 ms", "calls");
  const struct { const char* name; const std::vector<double>* t; } rows[] = {
      {"eager-live", &t_live}, {"eager-fixed", &t_fixed}, {"graph-replay", &t_replay}, {"graph-update-replay", &t_update}};
  for (const auto& r : rows)
    std::printf("  %-20s %9.3f %9.3f %7zu\n", r.name, pct(*r.t, 0.5), pct(*r.t, 0.95), r.t->size());
  std::printf("  buckets: %s\n", st.str().c_str());
  std::printf("  padding cost: %.1f%% of replayed tokens were padding (eager-fixed p50 / eager-live p50 = %.2f)\n",
              100.0 * padded_tokens / std::max<int64_t>(1, real_tokens + padded_tokens),
              pct(t_fixed, 0.5) / std::max(1e-9, pct(t_live, 0.5)));
  std::printf("  graph vs eager max |diff|: %.3g    reference check (rel RMS vs fp64 composition): %.3g %s\n",
              worst_graph_diff, ref_err, ref_err < 1e-4 && worst_graph_diff < 1e-3 ? "ok" : "FAILED");
  if (json)
    for (const auto& r : rows)
      std::printf("{\"kind\":\"case\",\"op\":\"%s\",\"pass\":\"fwd\",\"backend\":\"cpu\",\"mode\":\"%s\",\"dtype\":\"fp32\","
                  "\"hqk\":%lld,\"hv\":%lld,\"k\":%lld,\"v\":%lld,\"bt\":64,\"lengths\":\"random varlen <= 1500\","
                  "\"p50_ms\":%.4f,\"p95_ms\":%.4f,\"max_abs_err\":%.3g,\"rel_rms_err\":%.3g}\n",
                  kind == LayerKind::kKda ? "kda_layer" : "gdn_layer", r.name, static_cast<long long>(cfg.num_heads),
                  static_cast<long long>(cfg.num_v_heads), static_cast<long long>(cfg.head_k_dim),
                  static_cast<long long>(cfg.head_v_dim), pct(*r.t, 0.5), pct(*r.t, 0.95), worst_graph_diff, ref_err);
  return ref_err < 1e-4 && worst_graph_diff < 1e-3 ? 0 : 1;
}

int cmd_layer_demo(const Args& args) {
  const std::string backend = flag(args, "backend", "cpu");
  if (backend != "cpu") {
    std::printf("layer-demo: the layers run on the CPU backend in this build (CUDA layers: issue 9, CUDA part);"
                " running on cpu\n");
  }
  const std::string kind = flag(args, "kind", "both");
  const int batches = std::stoi(flag(args, "batches", "12"));
  const bool json = has_flag(args, "json");
  int rc = 0;
  if (kind == "gdn" || kind == "both") rc |= run_kind(LayerKind::kGatedDeltaNet, batches, json);
  if (kind == "kda" || kind == "both") rc |= run_kind(LayerKind::kKda, batches, json);
  return rc;
}

}  // namespace
LINATTN_SUBCOMMAND("layer-demo", "stream varlen prefill batches through GDN / KDA layers in the four graph modes",
                   cmd_layer_demo);
}  // namespace linattn::cli
