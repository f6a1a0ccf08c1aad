// `linattn demo [--backend cpu|cuda] [--threads N]`: runs GDN and KDA on a sample varlen batch
// (5 sequences, one empty, 3637 tokens; 4 q/k heads, 8 value heads (GVA), K = V = 128; bf16
// q / k / v; raw gates and beta logits with the gate, sigmoid and L2 norm in kernel; an initial
// state in the [V, K] layout the FLA layers use) through the fp64 reference and the fast paths,
// and prints each path's time and its error against the reference (FLA's metric: rel RMS and
// max abs over o and the final state). Paths: the token-by-token fp32 recurrence (the CPU
// baseline), the chunked op eager (exact size) and replayed from a graph (fixed capacity).
// With --backend cuda the chunked op runs on the GPU (its own stream; eager, and replayed from a
// CUDA graph) when this build has the CUDA backend and a device is present (otherwise it says so
// and stays on the CPU). Times are host wall per call with the stream synchronized. Runs well
// under a minute on 2 cores.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "api/chunk_attn_fwd_cpu.h"
#include "capabilities_util.h"
#include "cli.h"
#include "core/check.h"
#include "linattn/dense.h"
#include "linattn/error.h"
#include "linattn/graph.h"
#include "linattn/ops.h"
#include "ref/chunk_attn_ref.h"

namespace linattn::cli {
namespace {

const std::vector<int64_t> kLens = {512, 0, 1000, 77, 2048};
constexpr int64_t kH = 4, kHV = 8, kK = 128, kV = 128;

struct Sample {
  Tensor q, k, v, g, beta, A_log, dt_bias, h0, cu;
  ChunkAttnOptions opt;
  ChunkAttnInputs in() const {
    ChunkAttnInputs r;
    r.q = q;
    r.k = k;
    r.v = v;
    r.g = g;
    r.beta = beta;
    r.A_log = A_log;
    r.dt_bias = dt_bias;
    r.initial_state = h0;
    r.cu_seqlens = cu;
    return r;
  }
};

Tensor randn(std::mt19937& rng, DType dt, std::vector<int64_t> shape, double sd) {
  std::normal_distribution<double> n(0.0, sd);
  Tensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, n(rng));
  return t;
}

Sample make_sample(ChunkOp op) {
  std::mt19937 rng(op == ChunkOp::kGdn ? 7 : 8);
  const int64_t T = std::accumulate(kLens.begin(), kLens.end(), int64_t{0});
  const int64_t N = static_cast<int64_t>(kLens.size());
  Sample s;
  s.q = randn(rng, DType::kBF16, {1, T, kH, kK}, 1.0);
  s.k = randn(rng, DType::kBF16, {1, T, kH, kK}, 1.0);
  s.v = randn(rng, DType::kBF16, {1, T, kHV, kV}, 1.0);
  s.g = op == ChunkOp::kGdn ? randn(rng, DType::kF32, {1, T, kHV}, 1.0) : randn(rng, DType::kF32, {1, T, kHV, kK}, 1.0);
  s.beta = randn(rng, DType::kF32, {1, T, kHV}, 1.0);
  s.A_log = randn(rng, DType::kF32, {kHV}, 0.5);
  s.dt_bias = op == ChunkOp::kGdn ? randn(rng, DType::kF32, {kHV}, 0.5) : randn(rng, DType::kF32, {kHV * kK}, 0.5);
  s.h0 = randn(rng, DType::kF32, {N, kHV, kV, kK}, 0.1);
  s.cu = Tensor(DType::kI32, {N + 1});
  int64_t c = 0;
  s.cu.set(0, 0);
  for (int64_t n = 0; n < N; ++n) s.cu.set(n + 1, static_cast<double>(c += kLens[n]));
  s.opt.op = op;
  s.opt.use_qk_l2norm_in_kernel = s.opt.use_gate_in_kernel = s.opt.use_beta_sigmoid_in_kernel = true;
  s.opt.state_v_first = true;
  s.opt.output_final_state = true;
  return s;
}

double time_ms(const std::function<void()>& fn, int reps, const caps::Backend* be = nullptr) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    if (be) be->sync();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct Err {
  double rel_rms = 0, max_abs = 0;
};

// Max over o (valid rows) and the final state of FLA's metric against the fp64 reference.
Err error_of(const Tensor& ro, const Tensor& rh, const Tensor& o, const Tensor& h) {
  Err e;
  for (auto [r, x] : {std::pair{&ro, &o}, {&rh, &h}}) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < r->numel(); ++i) {
      const double a = r->get(i), b = x->get(i);
      e.max_abs = std::max(e.max_abs, std::fabs(a - b));
      num += (a - b) * (a - b);
      den += a * a;
    }
    const double n = static_cast<double>(std::max<int64_t>(1, r->numel()));
    e.rel_rms = std::max(e.rel_rms, std::sqrt(num / n) / (std::sqrt(den / n) + 1e-8));
  }
  return e;
}

// The sample's inputs and outputs on `dev` (copies of the host tensors).
struct OnDevice {
  std::vector<Buffer> bufs;
  ChunkAttnInputs in;
  ChunkAttnOutputs out;
  TensorView put(const Tensor& t, const caps::Backend& be) {
    if (!t.defined()) return {};
    bufs.emplace_back(be.device(), t.view().nbytes());
    TensorView v = t.view();
    v.data = bufs.back().data();
    v.device = be.device();
    copy_tensor(v, t.view(), be.ctx());
    be.sync();
    return v;
  }
};

void print_row(const char* op, const char* path, double ms, const Err* e) {
  if (e) std::printf("  %-4s %-34s %10.2f ms   rel_rms %.2e   max_abs %.2e\n", op, path, ms, e->rel_rms, e->max_abs);
  else std::printf("  %-4s %-34s %10.2f ms   (the truth)\n", op, path, ms);
}

int cmd_demo(const Args& args) {
  std::string backend = flag(args, "backend", "cpu");
  LINATTN_CHECK(backend == "cpu" || backend == "cuda", "--backend: expected cpu or cuda, got '", backend, "'");
  const std::string why = caps::backend_unavailable(backend);
  if (!why.empty()) {
    std::printf("demo: backend %s unavailable here (%s); running on the cpu\n", backend.c_str(), why.c_str());
    backend = "cpu";
  }
  const caps::Backend be(backend);
  ExecContext ctx = be.ctx();
  ctx.num_threads = std::stoi(flag(args, "threads", "0"));
  ExecContext host_ctx;
  host_ctx.num_threads = ctx.num_threads;
  std::printf("linattn %s demo: varlen batch of %zu sequences (lengths 512, 0, 1000, 77, 2048), %lld/%lld heads, "
              "K = V = %lld, bf16 inputs, gate / beta sigmoid / L2 norm in kernel, h0 [N, HV, V, K]\n",
              version(), kLens.size(), static_cast<long long>(kH), static_cast<long long>(kHV),
              static_cast<long long>(kK));
  int rc = 0;
  for (ChunkOp op : {ChunkOp::kGdn, ChunkOp::kKda}) {
    const char* name = op == ChunkOp::kGdn ? "gdn" : "kda";
    const Sample s = make_sample(op);
    // fp64 reference on fp64 copies of the bf16 inputs.
    Sample r = s;
    r.q = s.q.to(DType::kF64);
    r.k = s.k.to(DType::kF64);
    r.v = s.v.to(DType::kF64);
    Tensor ro(DType::kF64, s.v.shape()), rh(DType::kF64, s.h0.shape());
    const double ref_ms = time_ms([&] { ref::chunk_attn_fwd(r.in(), {ro.view(), rh.view()}, r.opt); }, 1);
    print_row(name, "reference (fp64, token by token)", ref_ms, nullptr);

    Tensor o(DType::kBF16, s.v.shape()), h(DType::kF32, s.h0.shape());
    const ChunkAttnOutputs out{o.view(), h.view()};
    double ms = time_ms([&] { api::chunk_attn_fwd_token_recurrent(s.in(), out, s.opt, host_ctx); }, 3);
    Err e = error_of(ro, rh, o, h);
    print_row(name, "token by token fp32 (cpu)", ms, &e);

    try {
    OnDevice od;
    const std::pair<TensorView*, const Tensor*> fields[] = {
        {&od.in.q, &s.q},         {&od.in.k, &s.k},         {&od.in.v, &s.v},
        {&od.in.g, &s.g},         {&od.in.beta, &s.beta},   {&od.in.A_log, &s.A_log},
        {&od.in.dt_bias, &s.dt_bias}, {&od.in.initial_state, &s.h0}, {&od.in.cu_seqlens, &s.cu}};
    for (auto [dst, src] : fields) *dst = od.put(*src, be);
    od.out = {od.put(o, be), od.put(h, be)};
    const std::string where = be.cuda() ? "cuda" : "cpu";
    chunk_attn_fwd(od.in, od.out, s.opt, ctx);  // warm-up (first-call setup)
    ms = time_ms([&] { chunk_attn_fwd(od.in, od.out, s.opt, ctx); }, 5, &be);
    copy_tensor(o.view(), od.out.o, ctx);
    copy_tensor(h.view(), od.out.final_state, ctx);
    be.sync();
    e = error_of(ro, rh, o, h);
    print_row(name, ("chunked, eager (" + where + ")").c_str(), ms, &e);

    // Fixed capacity (the graph path of the op, its scratch in a caller workspace), captured
    // once, replayed.
    ChunkAttnOptions gopt = s.opt;
    gopt.use_graph = true;
    gopt.max_num_seqs = static_cast<int64_t>(kLens.size());
    const caps::Workspace ws(be, chunk_attn_fwd_workspace_bytes(od.in, gopt, ctx));
    const ExecContext gctx = [&] { ExecContext c = ws.ctx(be); c.num_threads = ctx.num_threads; return c; }();
    Tensor go(DType::kBF16, s.v.shape()), gh(DType::kF32, s.h0.shape());
    const ChunkAttnOutputs gout{od.put(go, be), od.put(gh, be)};
    chunk_attn_fwd(od.in, gout, gopt, gctx);  // warm-up
    be.sync();
    Graph graph(be.device(), be.stream());
    graph.capture([&] { chunk_attn_fwd(od.in, gout, gopt, gctx); });
    ms = time_ms([&] { graph.replay(); }, 5, &be);
    copy_tensor(go.view(), gout.o, ctx);
    copy_tensor(gh.view(), gout.final_state, ctx);
    be.sync();
    e = error_of(ro, rh, go, gh);
    print_row(name, ("chunked, graph replay (" + where + ")").c_str(), ms, &e);
    } catch (const Error& err) {  // say which path failed and go on with the next op
      std::printf("  %-4s chunked on %s: FAILED: %s\n", name, be.cuda() ? "cuda" : "cpu", err.what());
      rc = 1;
    }
  }
  return rc;
}

}  // namespace
LINATTN_SUBCOMMAND("demo", "run the reference and the fast paths on a sample varlen batch", cmd_demo);
}  // namespace linattn::cli
