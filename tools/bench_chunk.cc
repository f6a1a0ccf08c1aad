// `linattn bench --op gdn|kda`: the chunked GDN / KDA ops, --pass fwd | bwd | fwdbwd, in the four
// modes (eager-live; eager-fixed = use_graph without a graph; graph-replay = one capture, timed
// replays; graph-update-replay = copy inputs + cu_seqlens (+ d_o) into the static buffers, then
// replay). Inputs: one varlen batch (B = 1, cu_seqlens from --lengths), unit-norm q / k rows,
// v ~ U(-1, 1), log-sigmoid gates, beta in (0.5, 0.73), no initial state, final state written.
// Workspaces are allocated once outside the timed calls. In the same run it times the project's
// token-by-token fp32 forward (what ggml's GATED_DELTA_NET does) and checks the results against
// the fp64 reference (small problems), the token path (big forward) or the eager call (graphs).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>

#include "api/chunk_attn_fwd_cpu.h"
#include "bench.h"
#include "core/check.h"
#include "linattn/graph.h"
#include "linattn/ops.h"
#include "meta/chunk_attn_desc.h"
#include "meta/cost.h"
#include "ref/chunk_attn_ref.h"

namespace linattn::bench {
namespace {

struct Data {
  Tensor q, k, v, g, beta, cu, o, ht;          // inputs / outputs (the static buffers in graph modes)
  Tensor d_o, d_ht, dq, dk, dv, dg, dbeta;     // backward
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
  ChunkAttnGrads grads() const {
    ChunkAttnGrads r;
    r.dq = dq;
    r.dk = dk;
    r.dv = dv;
    r.dg = dg;
    r.dbeta = dbeta;
    return r;
  }
};

Tensor random_tensor(std::mt19937& rng, DType dt, std::vector<int64_t> shape, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  return t;
}

Data make_data(const BenchArgs& a, bool kda, bool backward) {
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
  d.v = random_tensor(rng, a.dt, {1, T, a.hv, a.v}, -1, 1);
  d.g = kda ? Tensor(DType::kF32, {1, T, a.hv, a.k}) : Tensor(DType::kF32, {1, T, a.hv});
  for (int64_t i = 0; i < d.g.numel(); ++i) d.g.set(i, -std::log1p(std::exp(-(2.0 + 2.0 * u(rng)))));
  d.beta = random_tensor(rng, DType::kF32, {1, T, a.hv}, 0.5, 0.73);
  d.cu = Tensor(DType::kI32, {N + 1});
  int64_t c = 0;
  d.cu.set(0, 0);
  for (int64_t n = 0; n < N; ++n) d.cu.set(n + 1, static_cast<double>(c += a.lengths[n]));
  d.o = Tensor(a.dt, {1, T, a.hv, a.v});
  d.ht = Tensor(DType::kF32, {N, a.hv, a.k, a.v});
  if (backward) {
    d.d_o = random_tensor(rng, a.dt, {1, T, a.hv, a.v}, -1, 1);
    d.d_ht = random_tensor(rng, DType::kF32, {N, a.hv, a.k, a.v}, -0.1, 0.1);
    d.dq = Tensor(a.dt, d.q.shape());
    d.dk = Tensor(a.dt, d.k.shape());
    d.dv = Tensor(a.dt, d.v.shape());
    d.dg = Tensor(DType::kF32, d.g.shape());
    d.dbeta = Tensor(DType::kF32, d.beta.shape());
  }
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

// A 256-byte aligned scratch buffer.
struct Scratch {
  std::unique_ptr<std::byte[]> store;
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit Scratch(size_t n) : store(std::make_unique<std::byte[]>(n + 256)), bytes(n) {
    ptr = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(store.get()) + 255) & ~uintptr_t{255});
  }
};

// The fp64 reference on copies of the inputs: forward outputs and (when asked) gradients.
Err check_against_ref(const Data& d, bool fwd, bool bwd) {
  Data r = d;
  r.q = d.q.to(DType::kF64);
  r.k = d.k.to(DType::kF64);
  r.v = d.v.to(DType::kF64);
  ChunkAttnOptions ropt = d.opt;
  ropt.use_graph = false;
  ropt.max_num_seqs = 0;
  Err err;
  if (fwd) {
    r.o = Tensor(DType::kF64, d.o.shape());
    r.ht = Tensor(DType::kF64, d.ht.shape());
    ref::chunk_attn_fwd(r.in(), r.out(), ropt);
    err = combine(compare(r.o, d.o), compare(r.ht, d.ht));
  }
  if (bwd) {
    for (Tensor* t : {&r.dq, &r.dk, &r.dv, &r.dg, &r.dbeta}) *t = Tensor(DType::kF64, t->shape());
    ref::chunk_attn_bwd(r.in(), d.d_o.to(DType::kF64), d.d_ht, r.grads(), ropt);
    for (auto [x, y] : {std::pair{&r.dq, &d.dq}, {&r.dk, &d.dk}, {&r.dv, &d.dv}, {&r.dg, &d.dg}, {&r.dbeta, &d.dbeta}})
      err = combine(err, compare(*x, *y));
  }
  return err;
}

int run_chunk(const BenchArgs& a, const Machine& m) {
  if (a.backend == "cuda") LINATTN_UNSUPPORTED("--backend cuda: the bench's CUDA path comes with the CUDA backend");
  const bool kda = a.op == "kda";
  const bool do_fwd = a.pass != "bwd", do_bwd = a.pass != "fwd";
  const bool graph = a.mode == "graph-replay" || a.mode == "graph-update-replay";
  Data d = make_data(a, kda, do_bwd);
  ExecContext ctx;
  ctx.num_threads = a.threads;
  Scratch fws(do_fwd ? chunk_attn_fwd_workspace_bytes(d.in(), d.opt, ctx) : 0);
  Scratch bws(do_bwd ? chunk_attn_bwd_workspace_bytes(d.in(), d.opt, ctx) : 0);
  ExecContext fctx = ctx, bctx = ctx;
  fctx.workspace = fws.ptr;
  fctx.workspace_bytes = fws.bytes;
  bctx.workspace = bws.ptr;
  bctx.workspace_bytes = bws.bytes;
  const std::string plan = api::chunk_attn_fwd_plan(d.in(), d.opt, ctx);
  auto step = [&] {
    if (do_fwd) chunk_attn_fwd(d.in(), d.out(), d.opt, fctx);
    if (do_bwd) chunk_attn_bwd(d.in(), d.d_o, d.d_ht, d.grads(), d.opt, bctx);
  };
  // graph-update-replay copies fresh inputs (here: saved copies of the same values) into the
  // static buffers before every replay, as a serving loop would.
  std::vector<std::pair<Tensor, Tensor*>> updates;
  if (a.mode == "graph-update-replay")
    for (Tensor* t : {&d.q, &d.k, &d.v, &d.g, &d.beta, &d.cu, &d.d_o, &d.d_ht})
      if (t->defined()) updates.push_back({t->to(t->dtype()), t});
  Graph g;
  if (graph) {
    step();  // eager warm-up
    g.capture(step);
  }
  auto timed = [&] {
    for (auto& [src, dst] : updates) std::memcpy(dst->view().data, src.view().data, src.view().nbytes());
    if (graph) g.replay();
    else step();
  };
  const TimeStats ts = time_calls(timed, a.min_iters, a.min_time_s);

  // Baseline: the token-by-token fp32 forward, same inputs.
  Tensor o_tok = Tensor(a.dt, d.o.shape()), ht_tok = Tensor(DType::kF32, d.ht.shape());
  const ChunkAttnOutputs tok_out{o_tok.view(), ht_tok.view()};
  ChunkAttnOptions tok_opt = d.opt;
  tok_opt.use_graph = false;
  tok_opt.max_num_seqs = 0;
  TimeStats tb;
  if (a.baseline || (a.check == "baseline" && do_fwd))
    tb = time_calls([&] { api::chunk_attn_fwd_token_recurrent(d.in(), tok_out, tok_opt, ctx); },
                    a.baseline ? 3 : 0, a.baseline ? 0.5 * a.min_time_s : 0.0);

  const meta::ChunkAttnDesc desc = meta::describe_chunk_attn(d.in(), d.opt);
  meta::OpCost cost;
  if (do_fwd) cost = meta::chunk_fwd_cost(desc, a.lengths);
  if (do_bwd) {
    const meta::OpCost b = meta::chunk_bwd_cost(desc, a.lengths);
    cost.flops += b.flops;
    cost.bytes += b.bytes;
  }
  const int64_t tokens = std::accumulate(a.lengths.begin(), a.lengths.end(), int64_t{0});
  std::string check = a.check;
  const double work = static_cast<double>(tokens * a.hv * a.k * a.v);
  if (check == "auto") check = graph ? "eager" : work <= (do_bwd ? 2e8 : 1.5e9) ? "ref" : do_fwd ? "baseline" : "off";
  if (check == "baseline" && !do_fwd) check = "off";
  Err err;
  std::string check_name;
  if (check == "ref") {
    err = check_against_ref(d, do_fwd, do_bwd);
    check_name = "fp64_ref";
  } else if (check == "eager") {  // graph modes: replay vs the eager fixed-capacity call
    Data e = d;
    for (Tensor* t : {&e.o, &e.ht, &e.dq, &e.dk, &e.dv, &e.dg, &e.dbeta})
      if (t->defined()) *t = Tensor(t->dtype(), t->shape());
    if (do_fwd) chunk_attn_fwd(e.in(), e.out(), e.opt, fctx);
    if (do_bwd) chunk_attn_bwd(e.in(), e.d_o, e.d_ht, e.grads(), e.opt, bctx);
    for (auto [x, y] : {std::pair{&e.o, &d.o}, {&e.ht, &d.ht}, {&e.dq, &d.dq}, {&e.dk, &d.dk}, {&e.dv, &d.dv},
                        {&e.dg, &d.dg}, {&e.dbeta, &d.dbeta}})
      if ((x == &e.o || x == &e.ht) ? do_fwd : do_bwd) err = combine(err, compare(*x, *y));
    check_name = "eager_fixed";
  } else if (check == "baseline" && tb.iters > 0) {
    err = combine(compare(o_tok, d.o), compare(ht_tok, d.ht));
    check_name = "token_fp32";
  }
  const double gflops = cost.flops / (ts.p50_ms * 1e-3) * 1e-9;
  const double pct = m.peak_gflops > 0 ? gflops / m.peak_gflops : 0.0;
  const double toks = static_cast<double>(tokens) / (ts.p50_ms * 1e-3);
  const double scratch_mib = static_cast<double>(fws.bytes + bws.bytes) / (1 << 20);
  if (a.json) {
    Json j;
    j.add("kind", "case").add("op", a.op).add("pass", a.pass).add("backend", a.backend).add("mode", a.mode);
    j.add("dtype", a.dtype).add("hqk", a.hqk).add("hv", a.hv).add("k", a.k).add("v", a.v).add("bt", a.bt);
    j.add_raw("lengths", lengths_json(a.lengths));
    j.add("threads", m.threads).add("p50_ms", ts.p50_ms).add("p95_ms", ts.p95_ms).add("host_ms", ts.mean_ms);
    j.add("cpu_ms", ts.cpu_ms);
    if (m.core_peak_gflops > 0) j.add("pct_of_peak_cpu_time", cost.flops / (ts.cpu_ms * 1e-3) * 1e-9 / m.core_peak_gflops);
    if (tb.iters > 0) j.add("baseline_cpu_ms", tb.cpu_ms);
    j.add("iters", ts.iters).add("tokens_per_s", toks).add("gflops", gflops).add("gbps", cost.bytes / (ts.p50_ms * 1e-3) * 1e-9);
    j.add("pct_of_peak", pct).add("peak_extra_mib", scratch_mib);
    if (tb.iters > 0)
      j.add("baseline", "token_fp32_fwd").add("baseline_p50_ms", tb.p50_ms).add("speedup_vs_baseline", tb.p50_ms / ts.p50_ms);
    if (!check_name.empty()) j.add("check", check_name).add("max_abs_err", err.max_abs).add("rel_rms_err", err.rel_rms);
    j.add("plan", plan);
    std::printf("%s\n", j.str().c_str());
  } else {
    std::printf("%s %s %s %s %s %lld/%lld K%lld V%lld BT%d lengths %s\n", a.op.c_str(), a.pass.c_str(),
                a.backend.c_str(), a.mode.c_str(), a.dtype.c_str(), static_cast<long long>(a.hqk),
                static_cast<long long>(a.hv), static_cast<long long>(a.k), static_cast<long long>(a.v), a.bt,
                lengths_json(a.lengths).c_str());
    std::printf("  p50 %.3f ms (p95 %.3f, %d calls)  %.3g tokens/s  %.1f GFLOP/s = %.1f%% of FMA peak\n", ts.p50_ms,
                ts.p95_ms, ts.iters, toks, gflops, 100.0 * pct);
    std::printf("  process CPU time %.3f ms per call (/ %d threads = %.3f ms)\n", ts.cpu_ms, m.threads,
                ts.cpu_ms / m.threads);
    if (tb.iters > 0)
      std::printf("  token-by-token fp32 forward: p50 %.3f ms -> ratio %.2fx (CPU time ratio %.2fx)\n", tb.p50_ms,
                  tb.p50_ms / ts.p50_ms, tb.cpu_ms / ts.cpu_ms);
    if (!check_name.empty())
      std::printf("  check vs %s: rel_rms %.3g, max_abs %.3g\n", check_name.c_str(), err.rel_rms, err.max_abs);
    std::printf("  scratch %.2f MiB; plan: %s\n", scratch_mib, plan.c_str());
  }
  return 0;
}

}  // namespace
LINATTN_BENCH_OP("gdn", run_chunk);
LINATTN_BENCH_OP("kda", run_chunk);
}  // namespace linattn::bench
