// `linattn bench-cuda`: GDN or KDA (--op kda) forward on the CUDA backend in the four modes of GRAPH_CONTRACT.md
// section 9 (eager-live, eager-fixed, graph-replay, graph-update-replay) for the PERFORMANCE.md
// configs (or one given by --hqk --hv --lengths), printing PERFORMANCE.md section 6 JSON lines.
// Inputs are generated on the device (seeded), with the GatedDeltaNet layer's options (in-kernel
// l2norm, gate and beta sigmoid, V-first fp32 state in and out). Per mode: p50/p95 of per-call
// CUDA-event times, host-inclusive ms (back-to-back calls, one sync), workspace MiB as the peak
// extra memory, and errors: eager-live vs the independent token-by-token CUDA kernel (rel RMS),
// graph modes vs eager-fixed (max abs, must be 0). Lengths: "1xT" one sequence, "LxN" N sequences
// of L, or "a,b,c". KDA: per-channel raw gates [T, HV, K], dt_bias [HV * K], default configs from
// issue 7 (32/32 1x4096, 1x32768, 4096x8, short varlen prefills). Built only with CUDA; the CPU
// bench is `linattn bench`.
// --segments S sets ChunkAttnOptions::segments (tier 3 on CUDA; 0 = the planner decides, 1 = off);
// each row carries it as "segments".
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"

#if LINATTN_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <sstream>

#include "api/backend_cuda.h"
#include "bench_cuda_util.h"
#include "core/half.h"
#include "cuda/common/cuda_graph.h"
#include "cuda/common/random_fill.h"
#include "linattn/dense.h"
#include "meta/chunk_attn_desc.h"

namespace linattn::cli {
namespace {

using namespace cuda_bench;

struct Config {
  int hqk, hv;
  std::string lengths;
  int segments = 0;  // ChunkAttnOptions::segments (--segments; 0 = planner)
};

void run_config(const Config& c, int iters, bool check, FILE* json, const std::string& commit, bool kda) {
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
  const int64_t gw = kda ? K : 1;  // gate values per (token, value head)
  in.g = kda ? make(DType::kF32, {1, T, HV, K}) : make(DType::kF32, {1, T, HV});
  in.beta = make(DType::kF32, {1, T, HV});
  in.A_log = make(DType::kF32, {HV});
  in.dt_bias = make(DType::kF32, {HV * gw});
  in.initial_state = make(DType::kF32, {N, HV, V, K});
  in.cu_seqlens = make(DType::kI32, {N + 1});
  uint64_t seed = 1;
  auto bf = cuda::ElemType::kBF16, f32 = cuda::ElemType::kF32;
  cuda::fill_normal(in.q.data, bf, in.q.numel(), seed++, 0.f, 1.f, st);
  cuda::fill_normal(in.k.data, bf, in.k.numel(), seed++, 0.f, 1.f, st);
  cuda::fill_normal(in.v.data, bf, in.v.numel(), seed++, 0.f, 1.f, st);
  cuda::fill_normal(in.g.data, f32, in.g.numel(), seed++, 0.f, 1.f, st);
  cuda::fill_normal(in.beta.data, f32, in.beta.numel(), seed++, 0.f, 1.f, st);
  cuda::fill_uniform(in.A_log.data, f32, HV, seed++, 0.f, 2.7f, st);
  cuda::fill_normal(in.dt_bias.data, f32, HV * gw, seed++, -2.f, 1.f, st);
  cuda::fill_normal(in.initial_state.data, f32, in.initial_state.numel(), seed++, 0.f, 0.1f, st);
  std::vector<int32_t> cu(N + 1, 0);
  for (int64_t i = 0; i < N; ++i) cu[i + 1] = cu[i] + static_cast<int32_t>(lens[i]);
  int32_t* cu_pinned = nullptr;
  LINATTN_BENCH_CUDA(cudaMallocHost(&cu_pinned, (N + 1) * sizeof(int32_t)));
  std::copy(cu.begin(), cu.end(), cu_pinned);
  LINATTN_BENCH_CUDA(cudaMemcpyAsync(in.cu_seqlens.data, cu_pinned, (N + 1) * 4, cudaMemcpyHostToDevice, st));

  ChunkAttnOptions opt;
  opt.op = kda ? ChunkOp::kKda : ChunkOp::kGdn;
  opt.use_qk_l2norm_in_kernel = opt.use_gate_in_kernel = opt.use_beta_sigmoid_in_kernel = true;
  opt.state_v_first = opt.output_final_state = true;
  ChunkAttnOutputs out{make(DType::kBF16, {1, T, HV, V}), make(DType::kF32, {N, HV, V, K})};
  ChunkAttnOutputs out_fixed{make(DType::kBF16, {1, T, HV, V}), make(DType::kF32, {N, HV, V, K})};
  opt.segments = c.segments;
  ChunkAttnOptions gopt = opt;
  gopt.use_graph = true;
  gopt.max_num_seqs = N;
  ChunkAttnInputs gin = in;
  const int64_t nt_max = (T + 63) / 64 + N - 1;
  gin.chunk_indices = make(DType::kI32, {nt_max, 2});
  gin.chunk_offsets = make(DType::kI32, {N + 1});
  const meta::ChunkAttnDesc desc = meta::describe_chunk_attn(in, opt);
  const meta::ChunkAttnDesc gdesc = meta::describe_chunk_attn(gin, gopt);
  const size_t ws_bytes = std::max(api::chunk_attn_fwd_workspace_bytes_cuda(desc, in, opt),
                                   api::chunk_attn_fwd_workspace_bytes_cuda(gdesc, gin, gopt));
  TensorView ws = make(DType::kI32, {static_cast<int64_t>(ws_bytes / 4 + 1)});
  const ExecContext ctx{st, ws.data, ws.nbytes()};
  // staging copies for graph-update-replay
  std::vector<std::pair<TensorView, TensorView>> staged;
  for (const TensorView* t : {&in.q, &in.k, &in.v, &in.g, &in.beta}) {
    TensorView s = make(t->dtype, {t->numel()});
    LINATTN_BENCH_CUDA(cudaMemcpyAsync(s.data, t->data, t->nbytes(), cudaMemcpyDeviceToDevice, st));
    staged.emplace_back(*t, s);
  }

  const double flops = double(T) * HV * (6.0 * K * V + 2.0 * 64 * (3 * K + 2 * V));
  const double bytes = double(T) * (2.0 * H * K * 2 + 2.0 * HV * V * 2 + HV * 8) + 2.0 * N * HV * K * V * 4;
  auto emit = [&](const char* mode, const Stats& s, double max_abs, double rel) {
    std::fprintf(json,
                 "{\"kind\":\"case\",\"op\":\"%s\",\"pass\":\"fwd\",\"backend\":\"cuda\",\"mode\":\"%s\","
                 "\"dtype\":\"bf16\",\"hqk\":%d,\"hv\":%d,\"k\":128,\"v\":128,\"bt\":64,\"lengths\":\"%s\","
                 "\"segments\":%d,"
                 "\"p50_ms\":%.5f,\"p95_ms\":%.5f,\"host_ms\":%.5f,\"tflops\":%.2f,\"gbps\":%.1f,"
                 "\"peak_extra_mib\":%.1f,\"max_abs_err\":%s,\"rel_rms_err\":%s,\"commit\":\"%s\"}\n",
                 kda ? "kda" : "gdn", mode, c.hqk, c.hv, c.lengths.c_str(), c.segments, s.p50, s.p95,
                 s.host, flops / (s.p50 * 1e9),
                 bytes / (s.p50 * 1e6), ws_bytes / 1048576.0, json_num(max_abs).c_str(), json_num(rel).c_str(),
                 commit.c_str());
    std::fflush(json);
  };

  auto eager = [&] { api::chunk_attn_fwd_cuda(desc, in, out, opt, ctx); };
  auto fixed = [&] { api::chunk_attn_fwd_cuda(gdesc, gin, out_fixed, gopt, ctx); };
  double rel = NAN;
  if (check) {
    ChunkAttnOutputs out_ref{make(DType::kBF16, {1, T, HV, V}), make(DType::kF32, {N, HV, V, K})};
    api::chunk_attn_fwd_cuda_forced(desc, in, out_ref, opt, ctx, api::CudaGdnPath::kRecurrent, 0);
    eager();
    LINATTN_BENCH_CUDA(cudaStreamSynchronize(st));
    const auto a = host_values(out.o), b = host_values(out_ref.o);
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      num += double(a[i] - b[i]) * (a[i] - b[i]);
      den += double(b[i]) * b[i];
    }
    rel = std::sqrt(num / std::max<double>(1.0, a.size())) / (std::sqrt(den / std::max<double>(1.0, a.size())) + 1e-8);
  }
  emit("eager-live", time_events(eager, st, iters, 3), NAN, rel);
  emit("eager-fixed", time_events(fixed, st, iters, 3), NAN, NAN);
  cuda::CudaGraph graph(st);
  graph.begin();
  fixed();
  graph.end();
  auto diff_vs_fixed = [&] {
    if (!check) return double(NAN);
    const ChunkAttnOutputs saved{make(DType::kBF16, {1, T, HV, V}), TensorView{}};
    LINATTN_BENCH_CUDA(cudaMemcpyAsync(saved.o.data, out_fixed.o.data, out_fixed.o.nbytes(), cudaMemcpyDeviceToDevice, st));
    fixed();
    LINATTN_BENCH_CUDA(cudaStreamSynchronize(st));
    const auto a = host_values(saved.o), b = host_values(out_fixed.o);
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
    return m;
  };
  auto replay = [&] { graph.replay(); };
  const Stats sr = time_events(replay, st, iters, 3);
  emit("graph-replay", sr, diff_vs_fixed(), NAN);
  auto update = [&] {
    LINATTN_BENCH_CUDA(cudaMemcpyAsync(in.cu_seqlens.data, cu_pinned, (N + 1) * 4, cudaMemcpyHostToDevice, st));
    for (auto& [dst, src] : staged)
      LINATTN_BENCH_CUDA(cudaMemcpyAsync(dst.data, src.data, dst.nbytes(), cudaMemcpyDeviceToDevice, st));
    graph.replay();
  };
  emit("graph-update-replay", time_events(update, st, iters, 3), NAN, NAN);
  std::fprintf(stderr, "bench-cuda %s %d/%d %s: workspace %.1f MiB, graph nodes %zu\n", kda ? "kda" : "gdn",
               c.hqk, c.hv, c.lengths.c_str(), ws_bytes / 1048576.0, graph.num_nodes());
  cudaFreeHost(cu_pinned);
  cudaStreamDestroy(st);
}

int cmd_bench_cuda(const Args& args) {
  std::vector<Config> configs;
  const bool kda = flag(args, "op", "gdn") == "kda";
  if (has_flag(args, "lengths") || flag(args, "lengths", "") != "") {
    configs.push_back({std::stoi(flag(args, "hqk", "16")), std::stoi(flag(args, "hv", "64")),
                       flag(args, "lengths", "1x2048")});
  } else if (kda) {
    configs = {{32, 32, "1x4096"}, {32, 32, "1x32768"}, {32, 32, "4096x8"}, {32, 32, "128,96,200,88"},
               {32, 32, "64x16"}};
  } else {
    configs = {{16, 64, "1x2048"}, {16, 64, "1x8192"}, {16, 64, "1x32768"}, {16, 64, "4096x8"},
               {2, 8, "1x2048"},   {2, 8, "1x32768"},  {16, 32, "1x4096"},  {16, 32, "128,96,200,88"},
               {16, 32, "64x16"}};
  }
  const int iters = std::stoi(flag(args, "iters", "50"));
  const bool check = flag(args, "check", "1") != "0";
  const std::string commit = flag(args, "commit", "unknown");
  cudaDeviceProp prop{};
  LINATTN_BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("{\"kind\":\"env\",\"device\":\"%s\",\"sm_count\":%d,\"commit\":\"%s\",\"backend\":\"cuda\"}\n",
              prop.name, prop.multiProcessorCount, commit.c_str());
  const int segments = std::stoi(flag(args, "segments", "0"));  // tier 3 (0: the planner decides)
  for (Config& c : configs) c.segments = segments;
  for (const Config& c : configs) run_config(c, iters, check, stdout, commit, kda);
  return 0;
}

}  // namespace
LINATTN_SUBCOMMAND("bench-cuda", "GDN / KDA (--op kda) forward on CUDA: eager / fixed / graph modes, JSON lines",
                   cmd_bench_cuda);
}  // namespace linattn::cli
#endif
