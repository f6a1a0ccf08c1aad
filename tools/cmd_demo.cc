// `linattn demo [--backend cpu|cuda] [--threads N]`: runs GDN and KDA on a sample varlen batch
// (5 sequences, one empty, 3637 tokens; 4 q/k heads, 8 value heads (GVA), K = V = 128; bf16
// q / k / v; raw gates and beta logits with the gate, sigmoid and L2 norm in kernel; an initial
// state in the [V, K] layout the FLA layers use) through the fp64 reference and the fast paths,
// and prints each path's time and its error against the reference (FLA's metric: rel RMS and
// max abs over o and the final state). Paths: the token-by-token fp32 recurrence (the CPU
// baseline), the chunked op eager (exact size) and replayed from a graph (fixed capacity).
// With --backend cuda the chunked op runs on the GPU when this build has the CUDA backend
// (otherwise it says so and stays on the CPU). Runs well under a minute on 2 cores.
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
#include "cli.h"
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

double time_ms(const std::function<void()>& fn, int reps) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
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
  TensorView put(const Tensor& t, Device dev) {
    if (!t.defined()) return {};
    bufs.emplace_back(dev, t.view().nbytes());
    TensorView v = t.view();
    v.data = bufs.back().data();
    v.device = dev;
    copy_tensor(v, t.view());
    return v;
  }
};

void print_row(const char* op, const char* path, double ms, const Err* e) {
  if (e) std::printf("  %-4s %-34s %10.2f ms   rel_rms %.2e   max_abs %.2e\n", op, path, ms, e->rel_rms, e->max_abs);
  else std::printf("  %-4s %-34s %10.2f ms   (the truth)\n", op, path, ms);
}

int cmd_demo(const Args& args) {
  const std::string backend = flag(args, "backend", "cpu");
  ExecContext ctx;
  ctx.num_threads = std::stoi(flag(args, "threads", "0"));
  Device dev{backend == "cuda" ? DeviceType::kCUDA : DeviceType::kCPU, 0};
  std::printf("linattn %s demo: varlen batch of %zu sequences (lengths 512, 0, 1000, 77, 2048), %lld/%lld heads, "
              "K = V = %lld, bf16 inputs, gate / beta sigmoid / L2 norm in kernel, h0 [N, HV, V, K]\n",
              version(), kLens.size(), static_cast<long long>(kH), static_cast<long long>(kHV),
              static_cast<long long>(kK));
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
    double ms = time_ms([&] { api::chunk_attn_fwd_token_recurrent(s.in(), out, s.opt, ctx); }, 3);
    Err e = error_of(ro, rh, o, h);
    print_row(name, "token by token fp32 (cpu)", ms, &e);

    Device run_dev = dev;
    OnDevice od;
    try {
      const std::pair<TensorView*, const Tensor*> fields[] = {
          {&od.in.q, &s.q},         {&od.in.k, &s.k},         {&od.in.v, &s.v},
          {&od.in.g, &s.g},         {&od.in.beta, &s.beta},   {&od.in.A_log, &s.A_log},
          {&od.in.dt_bias, &s.dt_bias}, {&od.in.initial_state, &s.h0}, {&od.in.cu_seqlens, &s.cu}};
      for (auto [dst, src] : fields) *dst = od.put(*src, dev);
      od.out = {od.put(o, dev), od.put(h, dev)};
    } catch (const Error& err) {
      std::printf("  (backend %s unavailable here: %s; running on the cpu)\n", backend.c_str(), err.message().c_str());
      run_dev = Device{};
      od = OnDevice{};
      od.in = s.in();
      od.out = out;
    }
    const std::string where = run_dev.type == DeviceType::kCUDA ? "cuda" : "cpu";
    ms = time_ms([&] { chunk_attn_fwd(od.in, od.out, s.opt, ctx); }, 5);
    copy_tensor(o.view(), od.out.o);
    copy_tensor(h.view(), od.out.final_state);
    e = error_of(ro, rh, o, h);
    print_row(name, ("chunked, eager (" + where + ")").c_str(), ms, &e);

    if (run_dev.type == DeviceType::kCPU) {  // fixed capacity, captured once, replayed
      ChunkAttnOptions gopt = s.opt;
      gopt.use_graph = true;
      gopt.max_num_seqs = static_cast<int64_t>(kLens.size());
      Tensor go(DType::kBF16, s.v.shape()), gh(DType::kF32, s.h0.shape());
      const ChunkAttnOutputs gout{go.view(), gh.view()};
      chunk_attn_fwd(s.in(), gout, gopt, ctx);  // warm-up
      Graph graph;
      graph.capture([&] { chunk_attn_fwd(s.in(), gout, gopt, ctx); });
      ms = time_ms([&] { graph.replay(); }, 5);
      e = error_of(ro, rh, go, gh);
      print_row(name, "chunked, graph replay (cpu)", ms, &e);
    }
  }
  return 0;
}

}  // namespace
LINATTN_SUBCOMMAND("demo", "run the reference and the fast paths on a sample varlen batch", cmd_demo);
}  // namespace linattn::cli
