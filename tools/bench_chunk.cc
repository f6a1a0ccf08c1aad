// `linattn bench --op gdn|kda`: the chunked GDN / KDA ops. Inputs: one varlen batch (B = 1,
// cu_seqlens from --lengths), unit-norm q / k rows, v ~ U(-1, 1), log-sigmoid gates, beta in
// (0.5, 0.73), no initial state, final state written (a prefill that fills a cache). The
// workspace is allocated once outside the timed calls. In the same run it times the project's
// token-by-token fp32 path (what ggml's GATED_DELTA_NET does) and checks the output against the
// fp64 reference (or, for big problems, the token-by-token path).
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>

#include "api/chunk_attn_fwd_cpu.h"
#include "bench.h"
#include "core/check.h"
#include "linattn/ops.h"
#include "meta/chunk_attn_desc.h"
#include "meta/cost.h"
#include "ref/chunk_attn_ref.h"

namespace linattn::bench {
namespace {

struct Data {
  Tensor q, k, v, g, beta, cu, o, ht;
  ChunkAttnOptions opt;
  ChunkAttnInputs in() const {
    ChunkAttnInputs r;
    r.q = q;
    r.k = k;
    r.v = v;
    r.g = g;
    r.beta = beta;
    r.cu_seqlens = cu;
    return r;
  }
  ChunkAttnOutputs out() const { return {o.view(), ht.view()}; }
};

Data make_data(const BenchArgs& a, bool kda) {
  Data d;
  const int64_t T = std::accumulate(a.lengths.begin(), a.lengths.end(), int64_t{0});
  const int64_t N = static_cast<int64_t>(a.lengths.size());
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  d.q = Tensor(a.dt, {1, T, a.hqk, a.k});
  d.k = Tensor(a.dt, {1, T, a.hqk, a.k});
  for (Tensor* t : {&d.q, &d.k}) {
    std::vector<float> row(static_cast<size_t>(a.k));
    for (int64_t r = 0; r < T * a.hqk; ++r) {
      double ss = 0;
      for (auto& x : row) {
        x = u(rng);
        ss += x * x;
      }
      const double inv = 1.0 / std::sqrt(ss + 1e-12);
      for (int64_t c = 0; c < a.k; ++c) t->set(r * a.k + c, row[c] * inv);
    }
  }
  d.v = Tensor(a.dt, {1, T, a.hv, a.v});
  for (int64_t i = 0; i < d.v.numel(); ++i) d.v.set(i, u(rng));
  d.g = kda ? Tensor(DType::kF32, {1, T, a.hv, a.k}) : Tensor(DType::kF32, {1, T, a.hv});
  for (int64_t i = 0; i < d.g.numel(); ++i) d.g.set(i, -std::log1p(std::exp(-(2.0 + 2.0 * u(rng)))));
  d.beta = Tensor(DType::kF32, {1, T, a.hv});
  for (int64_t i = 0; i < d.beta.numel(); ++i) d.beta.set(i, 1.0 / (1.0 + std::exp(-(0.5 + 0.5 * u(rng)))));
  d.cu = Tensor(DType::kI32, {N + 1});
  int64_t c = 0;
  d.cu.set(0, 0);
  for (int64_t n = 0; n < N; ++n) d.cu.set(n + 1, static_cast<double>(c += a.lengths[n]));
  d.o = Tensor(a.dt, {1, T, a.hv, a.v});
  d.ht = Tensor(DType::kF32, {N, a.hv, a.k, a.v});
  d.opt.op = kda ? ChunkOp::kKda : ChunkOp::kGdn;
  d.opt.chunk_size = a.bt;
  d.opt.output_final_state = true;
  if (a.mode != "eager-live") {
    d.opt.use_graph = true;
    d.opt.max_num_seqs = N;
  }
  return d;
}

struct Err {
  double max_abs = 0, rel_rms = 0;
};

Err compare(const Tensor& ref, const Tensor& got) {
  Err e;
  double num = 0, den = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double r = ref.get(i), x = got.get(i);
    e.max_abs = std::max(e.max_abs, std::fabs(r - x));
    num += (r - x) * (r - x);
    den += r * r;
  }
  const double n = static_cast<double>(std::max<int64_t>(1, ref.numel()));
  e.rel_rms = std::sqrt(num / n) / (std::sqrt(den / n) + 1e-8);
  return e;
}

Err combine(Err a, Err b) { return {std::max(a.max_abs, b.max_abs), std::max(a.rel_rms, b.rel_rms)}; }

int run_chunk(const BenchArgs& a, const Machine& m) {
  if (a.backend == "cuda") LINATTN_UNSUPPORTED("--backend cuda: the bench's CUDA path comes with the CUDA backend");
  if (a.pass != "fwd") LINATTN_UNSUPPORTED("--pass ", a.pass, ": needs the CPU backward (chunk_attn_bwd), not on main yet");
  if (a.mode == "graph-replay" || a.mode == "graph-update-replay")
    LINATTN_UNSUPPORTED("--mode ", a.mode, ": needs the CPU Graph (src/runtime), not on main yet");
  const bool kda = a.op == "kda";
  Data d = make_data(a, kda);
  ExecContext ctx;
  ctx.num_threads = a.threads;
  const size_t ws_bytes = chunk_attn_fwd_workspace_bytes(d.in(), d.opt, ctx);
  auto ws_store = std::make_unique<std::byte[]>(ws_bytes + 256);
  ctx.workspace = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws_store.get()) + 255) & ~uintptr_t{255});
  ctx.workspace_bytes = ws_bytes;
  const std::string plan = api::chunk_attn_fwd_plan(d.in(), d.opt, ctx);
  const TimeStats ts = time_calls([&] { chunk_attn_fwd(d.in(), d.out(), d.opt, ctx); }, a.min_iters, a.min_time_s);

  // Baseline: token by token, fp32 state, same inputs.
  Tensor o_tok = Tensor(a.dt, d.o.shape()), ht_tok = Tensor(DType::kF32, d.ht.shape());
  TimeStats tb;
  ExecContext bctx;
  bctx.num_threads = a.threads;
  const ChunkAttnOutputs tok_out{o_tok.view(), ht_tok.view()};
  if (a.baseline || a.check == "baseline")
    tb = time_calls([&] { api::chunk_attn_fwd_token_recurrent(d.in(), tok_out, d.opt, bctx); },
                    a.baseline ? 3 : 0, a.baseline ? 0.5 * a.min_time_s : 0.0);

  const meta::ChunkAttnDesc desc = meta::describe_chunk_attn(d.in(), d.opt);
  const meta::OpCost cost = meta::chunk_fwd_cost(desc, a.lengths);
  const int64_t tokens = std::accumulate(a.lengths.begin(), a.lengths.end(), int64_t{0});
  std::string check = a.check;
  if (check == "auto") check = static_cast<double>(tokens * a.hv * a.k * a.v) <= 1.5e9 ? "ref" : "baseline";
  Err err;
  bool checked = false;
  if (check == "ref") {
    Data r = d;
    r.q = d.q.to(DType::kF64);
    r.k = d.k.to(DType::kF64);
    r.v = d.v.to(DType::kF64);
    r.o = Tensor(DType::kF64, d.o.shape());
    r.ht = Tensor(DType::kF64, d.ht.shape());
    ChunkAttnOptions ropt = d.opt;
    ropt.use_graph = false;
    ropt.max_num_seqs = 0;
    ref::chunk_attn_fwd(r.in(), r.out(), ropt);
    err = combine(compare(r.o, d.o), compare(r.ht, d.ht));
    checked = true;
  } else if (check == "baseline" && tb.iters > 0) {
    err = combine(compare(o_tok, d.o), compare(ht_tok, d.ht));
    checked = true;
  }
  const double gflops = cost.flops / (ts.p50_ms * 1e-3) * 1e-9;
  const double pct = m.peak_gflops > 0 ? gflops / m.peak_gflops : 0.0;
  const double toks = static_cast<double>(tokens) / (ts.p50_ms * 1e-3);
  if (a.json) {
    Json j;
    j.add("kind", "case").add("op", a.op).add("pass", a.pass).add("backend", a.backend).add("mode", a.mode);
    j.add("dtype", a.dtype).add("hqk", a.hqk).add("hv", a.hv).add("k", a.k).add("v", a.v).add("bt", a.bt);
    j.add_raw("lengths", lengths_json(a.lengths));
    j.add("threads", m.threads).add("p50_ms", ts.p50_ms).add("p95_ms", ts.p95_ms).add("host_ms", ts.mean_ms);
    j.add("iters", ts.iters).add("tokens_per_s", toks).add("gflops", gflops).add("gbps", cost.bytes / (ts.p50_ms * 1e-3) * 1e-9);
    j.add("pct_of_peak", pct).add("peak_extra_mib", static_cast<double>(ws_bytes) / (1 << 20));
    if (tb.iters > 0)
      j.add("baseline", "token_fp32").add("baseline_p50_ms", tb.p50_ms).add("speedup_vs_baseline", tb.p50_ms / ts.p50_ms);
    if (checked) j.add("check", check == "ref" ? "fp64_ref" : "token_fp32").add("max_abs_err", err.max_abs).add("rel_rms_err", err.rel_rms);
    j.add("plan", plan);
    std::printf("%s\n", j.str().c_str());
  } else {
    std::printf("%s %s %s %s %s %lld/%lld K%lld V%lld BT%d lengths %s\n", a.op.c_str(), a.pass.c_str(),
                a.backend.c_str(), a.mode.c_str(), a.dtype.c_str(), static_cast<long long>(a.hqk),
                static_cast<long long>(a.hv), static_cast<long long>(a.k), static_cast<long long>(a.v), a.bt,
                lengths_json(a.lengths).c_str());
    std::printf("  p50 %.3f ms (p95 %.3f, %d calls)  %.3g tokens/s  %.1f GFLOP/s = %.1f%% of FMA peak\n", ts.p50_ms,
                ts.p95_ms, ts.iters, toks, gflops, 100.0 * pct);
    if (tb.iters > 0)
      std::printf("  token-by-token fp32 path: p50 %.3f ms -> chunked is %.2fx faster\n", tb.p50_ms, tb.p50_ms / ts.p50_ms);
    if (checked)
      std::printf("  check vs %s: rel_rms %.3g, max_abs %.3g\n", check == "ref" ? "fp64 reference" : "token-by-token fp32",
                  err.rel_rms, err.max_abs);
    std::printf("  scratch %.2f MiB; plan: %s\n", static_cast<double>(ws_bytes) / (1 << 20), plan.c_str());
  }
  return 0;
}

}  // namespace
LINATTN_BENCH_OP("gdn", run_chunk);
LINATTN_BENCH_OP("kda", run_chunk);
}  // namespace linattn::bench
