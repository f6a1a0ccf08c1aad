// `linattn bench-cuda-bwd`: GDN / KDA (--op kda) backward and forward + backward on the CUDA backend
// for the issues' training configs (or one given by --hqk --hv --lengths), printing PERFORMANCE.md
// section 6 JSON lines (pass "bwd" / "fwdbwd"). Inputs generated on the device (seeded) with the
// layers' options (in-kernel l2norm, gate, beta sigmoid, fp32 state, d_final_state; GDN V-first
// state; KDA per-channel raw gate [T, HV, K] with A_log, dt_bias [HV * K], lower_bound = -5 and
// safe_gate, K-first state). When the CUDA forward of the op is not available (KDA until its
// forward lands) only the backward rows are printed, the graph ones capturing the backward alone.
// Modes: eager-live (exact size), eager-fixed (use_graph path), and for forward + backward captured
// in one graph: graph-replay and graph-update-replay (copy inputs, d_o, cu_seqlens, replay).
// Per row: p50 / p95 of CUDA-event times, host-inclusive ms, TFLOP/s (backward work count below),
// workspace MiB as the peak extra memory; errors: eager-live gradients vs the token-by-token CUDA
// backward (rel RMS over dq, dk, dv, dg; only when the shape is small enough, --check-max-tokens),
// graph rows vs eager-fixed (max abs, must be 0).
// --segments S sets ChunkAttnOptions::segments (tier 3; 0 = planner, 1 = off), echoed as "segments".
// --saved 1: the forward fills a training cache (ChunkAttnOutputs::saved) that the backward reads instead
// of recomputing its prep; "saved_mib" is its size (0: none), counted in every row's peak extra memory.
#include <string>

#include "cli.h"

#if LINATTN_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

#include "api/backend_cuda.h"
#include "bench_cuda_util.h"
#include "core/half.h"
#include "core/util.h"
#include "cuda/common/cuda_graph.h"
#include "cuda/common/random_fill.h"
#include "linattn/dense.h"
#include "linattn/error.h"
#include "meta/chunk_attn_desc.h"

namespace linattn::cli {
namespace {

using namespace cuda_bench;

constexpr int kWarmup = 2;  // warm-up calls before timing (the backward is long)

struct Config {
  int hqk, hv;
  std::string lengths;
  bool kda = false;
  int segments = 0;  // ChunkAttnOptions::segments (--segments; 0 = planner)
  bool saved = false;  // --saved 1: the forward fills a training cache the backward reads
};

// rel RMS of a vs b (b the reference) and max |a - b|, accumulated over several tensors.
struct Err {
  double num = 0, den = 0, max_abs = 0;
  size_t n = 0;
  void add(const TensorView& a, const TensorView& b) {
    const auto x = host_values(a), y = host_values(b);
    for (size_t i = 0; i < x.size(); ++i) {
      const double d = x[i] - y[i];
      num += d * d;
      den += y[i] * y[i];
      max_abs = std::max(max_abs, std::fabs(d));
    }
    n += x.size();
  }
  double rel() const { return n ? std::sqrt(num / n) / (std::sqrt(den / n) + 1e-8) : NAN; }
};

struct Grads {
  ChunkAttnGrads g;
  TensorView d_o, dht;
};

void run_config(const Config& c, int iters, int64_t check_max_tokens, FILE* json, const std::string& commit) {
  const std::vector<int64_t> lens = parse_lengths(c.lengths);
  const int64_t N = static_cast<int64_t>(lens.size()), H = c.hqk, HV = c.hv, K = 128, V = 128;
  int64_t T = 0;
  for (int64_t l : lens) T += l;
  const Device dev{DeviceType::kCUDA, 0};
  cudaStream_t st;
  LINATTN_BENCH_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::vector<Buffer> bufs;
  auto make = [&](DType dt, std::initializer_list<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    bufs.emplace_back(dev, static_cast<size_t>(std::max<int64_t>(n, 1)) * dtype_size(dt));
    return bufs.back().view(dt, shape);
  };
  ChunkAttnInputs in;
  in.q = make(DType::kBF16, {1, T, H, K});
  in.k = make(DType::kBF16, {1, T, H, K});
  in.v = make(DType::kBF16, {1, T, HV, V});
  const int64_t GW = c.kda ? K : 1;  // gate values per (token, value head)
  in.g = c.kda ? make(DType::kF32, {1, T, HV, K}) : make(DType::kF32, {1, T, HV});
  in.beta = make(DType::kF32, {1, T, HV});
  in.A_log = make(DType::kF32, {HV});
  in.dt_bias = make(DType::kF32, {HV * GW});
  in.initial_state = make(DType::kF32, {N, HV, V, K});
  in.cu_seqlens = make(DType::kI32, {N + 1});
  uint64_t seed = 1;
  const auto bf = cuda::ElemType::kBF16, f32 = cuda::ElemType::kF32;
  cuda::fill_normal(in.q.data, bf, in.q.numel(), seed++, 0.f, 1.f, st);
  cuda::fill_normal(in.k.data, bf, in.k.numel(), seed++, 0.f, 1.f, st);
  cuda::fill_normal(in.v.data, bf, in.v.numel(), seed++, 0.f, 1.f, st);
  cuda::fill_normal(in.g.data, f32, in.g.numel(), seed++, 0.f, 1.f, st);
  cuda::fill_normal(in.beta.data, f32, in.beta.numel(), seed++, 0.f, 1.f, st);
  cuda::fill_uniform(in.A_log.data, f32, HV, seed++, 0.f, 2.7f, st);
  cuda::fill_normal(in.dt_bias.data, f32, HV * GW, seed++, -2.f, 1.f, st);
  cuda::fill_normal(in.initial_state.data, f32, in.initial_state.numel(), seed++, 0.f, 0.1f, st);
  std::vector<int32_t> cu(N + 1, 0);
  for (int64_t i = 0; i < N; ++i) cu[i + 1] = cu[i] + static_cast<int32_t>(lens[i]);
  int32_t* cu_pinned = nullptr;
  LINATTN_BENCH_CUDA(cudaMallocHost(&cu_pinned, (N + 1) * sizeof(int32_t)));
  std::copy(cu.begin(), cu.end(), cu_pinned);
  LINATTN_BENCH_CUDA(cudaMemcpyAsync(in.cu_seqlens.data, cu_pinned, (N + 1) * 4, cudaMemcpyHostToDevice, st));

  ChunkAttnOptions opt;
  opt.use_qk_l2norm_in_kernel = opt.use_gate_in_kernel = opt.use_beta_sigmoid_in_kernel = true;
  opt.state_v_first = !c.kda;
  opt.output_final_state = true;
  if (c.kda) {
    opt.op = ChunkOp::kKda;
    opt.has_lower_bound = opt.safe_gate = true;
    opt.lower_bound = -5.0;
  }
  opt.segments = c.segments;
  ChunkAttnOptions gopt = opt;
  gopt.use_graph = true;
  gopt.max_num_seqs = N;
  ChunkAttnInputs gin = in;
  const int64_t nt_max = (T + 63) / 64 + N - 1;
  gin.chunk_indices = make(DType::kI32, {nt_max, 2});
  gin.chunk_offsets = make(DType::kI32, {N + 1});
  ChunkAttnOutputs out{make(DType::kBF16, {1, T, HV, V}), make(DType::kF32, {N, HV, V, K})};
  auto make_grads = [&] {
    Grads r;
    r.g.dq = make(DType::kBF16, {1, T, H, K});
    r.g.dk = make(DType::kBF16, {1, T, H, K});
    r.g.dv = make(DType::kBF16, {1, T, HV, V});
    r.g.dg = c.kda ? make(DType::kF32, {1, T, HV, K}) : make(DType::kF32, {1, T, HV});
    r.g.dbeta = make(DType::kF32, {1, T, HV});
    r.g.dA_log = make(DType::kF32, {HV});
    r.g.ddt_bias = make(DType::kF32, {HV * GW});
    r.g.dinitial_state = make(DType::kF32, {N, HV, V, K});
    return r;
  };
  Grads gr = make_grads(), gfix = make_grads();
  gr.d_o = gfix.d_o = make(DType::kBF16, {1, T, HV, V});
  gr.dht = gfix.dht = make(DType::kF32, {N, HV, V, K});
  cuda::fill_normal(gr.d_o.data, bf, gr.d_o.numel(), seed++, 0.f, 1.f, st);
  cuda::fill_normal(gr.dht.data, f32, gr.dht.numel(), seed++, 0.f, 0.1f, st);

  const meta::ChunkAttnDesc desc = meta::describe_chunk_attn(in, opt);
  const meta::ChunkAttnDesc gdesc = meta::describe_chunk_attn(gin, gopt);
  size_t fwd_ws = 0;
  bool has_fwd = true;
  try {
    fwd_ws = std::max(api::chunk_attn_fwd_workspace_bytes_cuda(desc, in, opt),
                      api::chunk_attn_fwd_workspace_bytes_cuda(gdesc, gin, gopt));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kUnsupported) throw;
    has_fwd = false;
    std::fprintf(stderr, "bench-cuda-bwd: no CUDA forward for this op (%s): backward rows only\n", e.what());
  }
  // Training cache (--saved 1; ChunkAttnOutputs::saved): filled by every forward below, read by every
  // backward (the "bwd" rows' cache comes from the forward run once before them).
  size_t saved_bytes = 0;
  if (c.saved && has_fwd)
    saved_bytes = std::max(api::chunk_attn_saved_bytes_cuda(desc, in, opt),
                           api::chunk_attn_saved_bytes_cuda(gdesc, gin, gopt));
  if (saved_bytes > 0) {
    const TensorView sv = make(DType::kI32, {static_cast<int64_t>(saved_bytes / 4 + 1)});
    out.saved = sv.data;
    in.saved = gin.saved = sv.data;
    out.saved_bytes = in.saved_bytes = gin.saved_bytes = sv.nbytes();
  }
  const size_t bwd_ws = std::max(api::chunk_attn_bwd_workspace_bytes_cuda(desc, in, opt),
                                 api::chunk_attn_bwd_workspace_bytes_cuda(gdesc, gin, gopt));
  const TensorView wf = make(DType::kI32, {static_cast<int64_t>(fwd_ws / 4 + 1)});
  const TensorView wb = make(DType::kI32, {static_cast<int64_t>(bwd_ws / 4 + 1)});
  const ExecContext cf{st, wf.data, wf.nbytes()}, cb{st, wb.data, wb.nbytes()};

  auto bwd = [&] { api::chunk_attn_bwd_cuda(desc, in, gr.d_o, gr.dht, gr.g, opt, cb); };
  auto fwdbwd = [&] {
    api::chunk_attn_fwd_cuda(desc, in, out, opt, cf);
    bwd();
  };
  auto fwdbwd_fixed = [&] {  // the graph's body: forward (when available) + backward
    if (has_fwd) api::chunk_attn_fwd_cuda(gdesc, gin, out, gopt, cf);
    api::chunk_attn_bwd_cuda(gdesc, gin, gfix.d_o, gfix.dht, gfix.g, gopt, cb);
  };
  const char* gpass = has_fwd ? "fwdbwd" : "bwd";

  // Backward work (chunk form, per token and value head): prep ~4 BT K; forward sweep
  // 4 K V + 2 BT V; reverse sweep 6 K V + 4 BT V; chunk kernel 6 K V + 6 BT V + 8 BT K. The
  // same count for KDA (the chunk-form work FLA does), whatever the path that runs.
  const double per = 16.0 * K * V + 12.0 * 64 * V + 12.0 * 64 * K;
  const double bwd_flops = double(T) * HV * per;
  const double fwd_flops = has_fwd ? double(T) * HV * (6.0 * K * V + 2.0 * 64 * (3 * K + 2 * V)) : 0.0;
  const char* op_name = c.kda ? "kda" : "gdn";
  auto emit = [&](const char* pass, const char* mode, const Stats& s, double flops, double max_abs, double rel) {
    std::fprintf(json,
                 "{\"kind\":\"case\",\"op\":\"%s\",\"pass\":\"%s\",\"backend\":\"cuda\",\"mode\":\"%s\","
                 "\"dtype\":\"bf16\",\"hqk\":%d,\"hv\":%d,\"k\":128,\"v\":128,\"bt\":64,\"lengths\":\"%s\","
                 "\"segments\":%d,\"saved_mib\":%.1f,"
                 "\"p50_ms\":%.5f,\"p95_ms\":%.5f,\"host_ms\":%.5f,\"tflops\":%.2f,\"peak_extra_mib\":%.1f,"
                 "\"max_abs_err\":%s,\"rel_rms_err\":%s,\"commit\":\"%s\"}\n",
                 op_name, pass, mode, c.hqk, c.hv, c.lengths.c_str(), c.segments, saved_bytes / 1048576.0, s.p50, s.p95,
                 s.host, flops / (s.p50 * 1e9),
                 (bwd_ws + saved_bytes + (std::string(pass) == "fwdbwd" ? fwd_ws : 0)) / 1048576.0,
                 json_num(max_abs).c_str(),
                 json_num(rel).c_str(), commit.c_str());
    std::fflush(json);
  };

  if (saved_bytes > 0) api::chunk_attn_fwd_cuda(desc, in, out, opt, cf);  // fills the cache the bwd rows read
  double rel = NAN, mabs = NAN;
  // KDA with LINATTN_CUDA_KDA_BWD=token runs the token path: nothing independent to compare then.
  if (T <= check_max_tokens && (!c.kda || env_or("LINATTN_CUDA_KDA_BWD", "") != "token")) {
    Grads tok = make_grads();
    tok.d_o = gr.d_o;
    tok.dht = gr.dht;
    bwd();
    api::chunk_attn_bwd_cuda_forced(desc, in, tok.d_o, tok.dht, tok.g, opt, cb, api::CudaGdnPath::kRecurrent, 0);
    LINATTN_BENCH_CUDA(cudaStreamSynchronize(st));
    Err e;
    e.add(gr.g.dq, tok.g.dq);
    e.add(gr.g.dk, tok.g.dk);
    e.add(gr.g.dv, tok.g.dv);
    e.add(gr.g.dg, tok.g.dg);
    rel = e.rel();
    mabs = e.max_abs;
  }
  emit("bwd", "eager-live", time_events(bwd, st, iters, kWarmup), bwd_flops, mabs, rel);
  if (has_fwd) emit("fwdbwd", "eager-live", time_events(fwdbwd, st, iters, kWarmup), bwd_flops + fwd_flops, NAN, NAN);
  emit(gpass, "eager-fixed", time_events(fwdbwd_fixed, st, iters, kWarmup), bwd_flops + fwd_flops, NAN, NAN);
  cuda::CudaGraph graph(st);
  graph.begin();
  fwdbwd_fixed();
  graph.end();
  auto graph_diff = [&] {  // replay vs eager-fixed on the same inputs (bitwise: 0)
    Grads ref = make_grads();
    ref.d_o = gfix.d_o;
    ref.dht = gfix.dht;
    if (has_fwd) api::chunk_attn_fwd_cuda(gdesc, gin, out, gopt, cf);
    api::chunk_attn_bwd_cuda(gdesc, gin, ref.d_o, ref.dht, ref.g, gopt, cb);
    graph.replay();
    LINATTN_BENCH_CUDA(cudaStreamSynchronize(st));
    Err e;
    e.add(gfix.g.dq, ref.g.dq);
    e.add(gfix.g.dk, ref.g.dk);
    e.add(gfix.g.dv, ref.g.dv);
    e.add(gfix.g.dg, ref.g.dg);
    e.add(gfix.g.dinitial_state, ref.g.dinitial_state);
    return e.max_abs;
  };
  auto replay = [&] { graph.replay(); };
  emit(gpass, "graph-replay", time_events(replay, st, iters, kWarmup), bwd_flops + fwd_flops, graph_diff(), NAN);
  std::vector<std::pair<TensorView, TensorView>> staged;
  for (const TensorView* t : {&in.q, &in.k, &in.v, &in.g, &in.beta, &gfix.d_o}) {
    const TensorView s = make(t->dtype, {t->numel()});
    LINATTN_BENCH_CUDA(cudaMemcpyAsync(s.data, t->data, t->nbytes(), cudaMemcpyDeviceToDevice, st));
    staged.emplace_back(*t, s);
  }
  auto update = [&] {
    LINATTN_BENCH_CUDA(cudaMemcpyAsync(in.cu_seqlens.data, cu_pinned, (N + 1) * 4, cudaMemcpyHostToDevice, st));
    for (auto& [dst, src] : staged)
      LINATTN_BENCH_CUDA(cudaMemcpyAsync(dst.data, src.data, dst.nbytes(), cudaMemcpyDeviceToDevice, st));
    graph.replay();
  };
  emit(gpass, "graph-update-replay", time_events(update, st, iters, kWarmup), bwd_flops + fwd_flops, NAN, NAN);
  std::fprintf(stderr, "bench-cuda-bwd %d/%d %s: workspace fwd %.1f + bwd %.1f MiB, graph nodes %zu\n", c.hqk,
               c.hv, c.lengths.c_str(), fwd_ws / 1048576.0, bwd_ws / 1048576.0, graph.num_nodes());
  cudaFreeHost(cu_pinned);
  cudaStreamDestroy(st);
}

int cmd_bench_cuda_bwd(const Args& args) {
  std::vector<Config> configs;
  const bool kda = flag(args, "op", "gdn") == "kda";
  if (flag(args, "lengths", "") != "") {
    configs.push_back({std::stoi(flag(args, "hqk", "16")), std::stoi(flag(args, "hv", "32")),
                       flag(args, "lengths", "1x8192"), kda});
  } else if (kda) {  // issue 7: small first, then the target configs
    configs = {{32, 32, "512x16", true}, {32, 32, "1x4096", true}, {32, 32, "4096x8", true}, {32, 32, "1x32768", true}};
  } else {
    configs = {{16, 32, "512x16"}, {16, 32, "1x8192"}, {16, 32, "1x32768"}, {16, 32, "4096x8"}, {2, 4, "1x32768"}};
  }
  const int iters = std::stoi(flag(args, "iters", "20"));
  const int64_t check_max = std::stoll(flag(args, "check-max-tokens", "8192"));
  const std::string commit = flag(args, "commit", "unknown");
  cudaDeviceProp prop{};
  LINATTN_BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  // The KDA backward variant (LINATTN_CUDA_KDA_BWD: token | chunked | chunked7; unset = default).
  const std::string kda_bwd = env_or("LINATTN_CUDA_KDA_BWD", "default");
  std::printf(
      "{\"kind\":\"env\",\"device\":\"%s\",\"sm_count\":%d,\"commit\":\"%s\",\"backend\":\"cuda\","
      "\"kda_bwd\":\"%s\"}\n",
      prop.name, prop.multiProcessorCount, commit.c_str(), kda_bwd.c_str());
  const int segments = std::stoi(flag(args, "segments", "0"));  // tier 3 (0: the planner decides)
  const bool saved = flag(args, "saved", "0") == "1";  // training cache (ChunkAttnOutputs::saved)
  for (Config& c : configs) {
    c.segments = segments;
    c.saved = saved;
  }
  for (const Config& c : configs) run_config(c, iters, check_max, stdout, commit);
  return 0;
}

}  // namespace
LINATTN_SUBCOMMAND("bench-cuda-bwd", "GDN / KDA (--op kda) backward, forward+backward on CUDA: eager / fixed / graph",
                   cmd_bench_cuda_bwd);
}  // namespace linattn::cli
#endif
