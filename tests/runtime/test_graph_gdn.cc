// GraphBuckets over the real CPU GDN forward (chunk_attn_fwd, use_graph = true): one capture
// per bucket, then many layouts replayed with new data and new cu_seqlens (NaN / -inf garbage in
// the padding rows of the static inputs), against the eager exact-size call on the same content.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "linattn/graph.h"
#include "linattn/ops.h"

namespace linattn {
namespace {

constexpr int64_t H = 2, HV = 4, K = 16, V = 8;

std::vector<BucketBufferSpec> specs(const Capacity& c) {
  const int64_t T = c.T_max, N = c.N_max;
  const auto in = BufferRole::kInput;
  const auto tok = BufferScale::kTokens;
  return {
      {"q", DType::kF32, {1, T, H, K}, in, tok, 1},
      {"k", DType::kF32, {1, T, H, K}, in, tok, 1},
      {"v", DType::kF32, {1, T, HV, V}, in, tok, 1},
      {"g", DType::kF32, {1, T, HV}, in, tok, 1},
      {"beta", DType::kF32, {1, T, HV}, in, tok, 1},
      {"h0", DType::kF32, {N, HV, K, V}, in, BufferScale::kSequences, 0},
      {"o", DType::kF32, {1, T, HV, V}, BufferRole::kOutput, tok, 1},
      {"ht", DType::kF32, {N, HV, K, V}, BufferRole::kOutput, BufferScale::kSequences, 0},
  };
}

ChunkAttnOptions options(int BT, bool graph, int64_t N_max) {
  ChunkAttnOptions o;
  o.chunk_size = BT;
  o.output_final_state = true;
  o.use_graph = graph;
  o.max_num_seqs = graph ? N_max : 0;
  return o;
}

void run_fwd(const TensorView& cu, const std::function<TensorView(const char*)>& t, int BT, bool graph,
             int64_t N_max, const ExecContext& ctx) {
  ChunkAttnInputs in;
  in.q = t("q"); in.k = t("k"); in.v = t("v"); in.g = t("g"); in.beta = t("beta");
  in.initial_state = t("h0");
  in.cu_seqlens = cu;
  chunk_attn_fwd(in, ChunkAttnOutputs{t("o"), t("ht")}, options(BT, graph, N_max), ctx);
}

TensorView lookup(const NamedTensors& a, const NamedTensors& b, const char* name) {
  for (const auto* ts : {&a, &b}) {
    for (const NamedTensor& t : *ts) if (t.name == name) return t.view;
  }
  return {};
}

TEST(GraphBucketsGdn, ReplaysMatchTheEagerExactCall) {
  const int BT = 32;
  int eager_calls = 0;
  GraphBucketsOptions opt;
  opt.BT = BT;
  opt.min_utilization = 0.0;
  GraphBuckets gb(
      {{96, 3}, {256, 4}}, specs,
      [&](const BucketStatic& b) {
        run_fwd(b.cu_seqlens(), [&](const char* n) { return b.buffer(n); }, BT, true, b.capacity().N_max, b.exec());
      },
      [&](const TensorView& cu, const NamedTensors& in, const NamedTensors& out) {
        ++eager_calls;
        run_fwd(cu, [&](const char* n) { return lookup(in, out, n); }, BT, false, 0, {});
      },
      opt);
  std::mt19937_64 rng(2024);
  std::normal_distribution<float> nd(0.0f, 0.3f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  const std::vector<std::vector<int64_t>> layouts = {
      {0, 32, 64, 96}, {0, 5, 70, 70}, {0, 1, 31, 33}, {0, 96}, {0, 0, 0, 17},
      {0, 100, 101, 200, 256}, {0, 255}, {0, 7, 7, 7}, {0, 32, 64, 96}};
  for (int rep = 0; rep < 2; ++rep) {
    for (const auto& L : layouts) {
      const int64_t T = L.back(), N = static_cast<int64_t>(L.size()) - 1;
      Tensor cu(DType::kI64, {N + 1});
      for (int64_t i = 0; i <= N; ++i) cu.data<int64_t>()[i] = L[i];
      auto make = [&](std::vector<int64_t> shape, float lo, float hi, bool normal) {
        Tensor t(DType::kF32, std::move(shape));
        for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal ? nd(rng) : lo + (hi - lo) * ud(rng);
        return t;
      };
      Tensor q = make({1, T, H, K}, 0, 0, true), k = make({1, T, H, K}, 0, 0, true);
      Tensor v = make({1, T, HV, V}, 0, 0, true), g = make({1, T, HV}, -0.7f, -0.01f, false);
      Tensor beta = make({1, T, HV}, 0.05f, 0.95f, false), h0 = make({N, HV, K, V}, 0, 0, true);
      Tensor o(DType::kF32, {1, T, HV, V}), ht(DType::kF32, {N, HV, K, V});
      const NamedTensors in = {{"q", q}, {"k", k}, {"v", v}, {"g", g}, {"beta", beta}, {"h0", h0}};
      // Garbage in the whole static inputs before the copy-in: the padding keeps it.
      const BucketStatic& b = gb.bucket(gb.choose(cu).bucket);
      for (const char* n : {"q", "k", "v", "beta", "h0"}) {
        const TensorView t = b.buffer(n);
        for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = std::numeric_limits<float>::quiet_NaN();
      }
      const TensorView gs = b.buffer("g");
      for (int64_t i = 0; i < gs.numel(); ++i) gs.ptr<float>()[i] = -std::numeric_limits<float>::infinity();
      const BucketDecision d = gb.run(cu, in, {{"o", o}, {"ht", ht}});
      ASSERT_EQ(d.route, BucketRoute::kGraph);
      Tensor o_ref(DType::kF32, {1, T, HV, V}), ht_ref(DType::kF32, {N, HV, K, V});
      const NamedTensors out_ref = {{"o", o_ref}, {"ht", ht_ref}};
      run_fwd(cu, [&](const char* n) { return lookup(in, out_ref, n); }, BT, false, 0, {});
      for (const auto& [got, want, name] : {std::tuple{&o, &o_ref, "o"}, std::tuple{&ht, &ht_ref, "ht"}}) {
        double worst = 0;
        int64_t at = -1;
        for (int64_t i = 0; i < got->numel(); ++i) {
          const double a = got->data<float>()[i], b = want->data<float>()[i];
          const double err = std::isfinite(a) ? std::abs(a - b) / (1e-3 + std::abs(b)) : 1e30;
          if (err > worst) worst = err, at = i;
        }
        ASSERT_LE(worst, 1e-4) << name << " layout ending " << T << ": worst index " << at << " graph "
                               << got->data<float>()[at] << " eager " << want->data<float>()[at];
      }
    }
  }
  EXPECT_EQ(gb.stats().captures, 2);
  EXPECT_EQ(gb.stats().replays, 2 * static_cast<int64_t>(layouts.size()));
  EXPECT_EQ(eager_calls, 0);
}

}  // namespace
}  // namespace linattn
