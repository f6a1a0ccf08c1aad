// `linattn seqpar [--op gdn|kda] [--hqk 2] [--hv 8] [--k 128] [--v 128] [--t 32768]
//  [--segments 1,2,4,8] [--threads N] [--dtype bf16|f32] [--pass fwd|fwdbwd] [--iters 3]
//  [--a-log X]` (X: every A_log = X, e.g. -6 for weak decay; default N(0, 1) per head):
// times the CPU chunked op with tier 3 (exact in-sequence splitting) forced at each segment
// count (1 = off: the planner's tier 1/2) on one long sequence with layer options (gate, beta
// sigmoid and q/k L2 norm in kernel, initial and final state), and prints per segment count the
// median wall time and process CPU time (the VM is shared: CPU time / threads estimates the
// unloaded wall of balanced runs), the ratio to segments = 1, the plan line, and the largest rel RMS difference
// of o / final state (and, with fwdbwd, of every gradient) to segments = 1.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "api/chunk_attn_fwd_cpu.h"
#include "cli.h"
#include "linattn/ops.h"

namespace linattn::cli {
namespace {

Tensor randn_t(std::mt19937_64& gen, std::vector<int64_t> shape, double sd, DType dt) {
  Tensor f(DType::kF32, std::move(shape));
  std::normal_distribution<float> nd(0.0f, static_cast<float>(sd));
  float* p = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i) p[i] = nd(gen);
  return dt == DType::kF32 ? f : f.to(dt);
}

double rel_rms(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return 0.0;
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.get(i), y = b.get(i);
    num += (x - y) * (x - y);
    den += x * x;
  }
  return std::sqrt(num / a.numel()) / (std::sqrt(den / a.numel()) + 1e-8);
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> r;
  size_t p = 0;
  while (p < s.size()) {
    const size_t q = s.find(',', p);
    r.push_back(std::stoi(s.substr(p, q == std::string::npos ? std::string::npos : q - p)));
    p = q == std::string::npos ? s.size() : q + 1;
  }
  return r;
}

int run(const Args& args) {
  const bool kda = flag(args, "op", "gdn") == "kda";
  const int64_t H = std::stoll(flag(args, "hqk", "2")), HV = std::stoll(flag(args, "hv", "8"));
  const int64_t K = std::stoll(flag(args, "k", "128")), V = std::stoll(flag(args, "v", "128"));
  const int64_t T = std::stoll(flag(args, "t", "32768"));
  const int threads = std::stoi(flag(args, "threads", "0")), iters = std::stoi(flag(args, "iters", "3"));
  const DType dt = flag(args, "dtype", "bf16") == "f32" ? DType::kF32 : DType::kBF16;
  const bool bwd = flag(args, "pass", "fwd") == "fwdbwd";
  const std::vector<int> segs = parse_list(flag(args, "segments", "1,2,4,8"));
  std::mt19937_64 gen(1);
  ChunkAttnOptions opt;
  opt.op = kda ? ChunkOp::kKda : ChunkOp::kGdn;
  opt.use_gate_in_kernel = opt.use_beta_sigmoid_in_kernel = opt.use_qk_l2norm_in_kernel = true;
  opt.output_final_state = true;
  Tensor q = randn_t(gen, {1, T, H, K}, 1.0, dt), k = randn_t(gen, {1, T, H, K}, 1.0, dt);
  Tensor v = randn_t(gen, {1, T, HV, V}, 1.0, dt);
  Tensor g = randn_t(gen, kda ? std::vector<int64_t>{1, T, HV, K} : std::vector<int64_t>{1, T, HV}, 1.0, DType::kF32);
  Tensor beta = randn_t(gen, {1, T, HV}, 1.0, DType::kF32), A_log = randn_t(gen, {HV}, 1.0, DType::kF32);
  const std::string a_log = flag(args, "a-log", "");
  if (!a_log.empty())
    for (int64_t j = 0; j < HV; ++j) A_log.set(j, std::stod(a_log));
  Tensor dt_bias = randn_t(gen, kda ? std::vector<int64_t>{HV * K} : std::vector<int64_t>{HV}, 1.0, DType::kF32);
  Tensor h0 = randn_t(gen, {1, HV, K, V}, 0.1, DType::kF32), d_o = randn_t(gen, {1, T, HV, V}, 1.0, DType::kF32);
  Tensor dht = randn_t(gen, {1, HV, K, V}, 1.0, DType::kF32);
  ChunkAttnInputs in;
  in.q = q;
  in.k = k;
  in.v = v;
  in.g = g;
  in.beta = beta;
  in.A_log = A_log;
  in.dt_bias = dt_bias;
  in.initial_state = h0;
  ExecContext ctx;
  ctx.num_threads = threads;
  std::printf("# seqpar: %s %s, 1 x %lld tokens, %lld / %lld heads, K = %lld, V = %lld, %s, threads %d, A_log %s\n",
              kda ? "kda" : "gdn", bwd ? "fwd+bwd" : "fwd", static_cast<long long>(T), static_cast<long long>(H),
              static_cast<long long>(HV), static_cast<long long>(K), static_cast<long long>(V), dtype_name(dt), threads,
              a_log.empty() ? "N(0,1)" : a_log.c_str());
  std::printf("segments,wall_ms,cpu_ms,wall_ratio_to_1,cpu_ratio_to_1,max_rel_rms_vs_1,plan\n");
  std::vector<Tensor> base;
  double base_ms = 0.0, base_cpu = 0.0;
  for (int s : segs) {
    ChunkAttnOptions o = opt;
    o.segments = s;
    std::vector<Tensor> res = {Tensor(dt, {1, T, HV, V}), Tensor(DType::kF32, {1, HV, K, V})};
    if (bwd)
      for (const Tensor* t : {&q, &k, &v, &g, &beta, &A_log, &dt_bias, &h0})
        res.push_back(Tensor(t->dtype() == DType::kBF16 ? DType::kBF16 : DType::kF32, t->shape()));
    auto once = [&] {
      chunk_attn_fwd(in, ChunkAttnOutputs{res[0], res[1]}, o, ctx);
      if (bwd) {
        ChunkAttnGrads gr{res[2], res[3], res[4], res[5], res[6], res[7], res[8], res[9]};
        chunk_attn_bwd(in, d_o, dht, gr, o, ctx);
      }
    };
    once();  // warm-up
    std::vector<double> ms, cpu;
    for (int i = 0; i < iters; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const std::clock_t c0 = std::clock();
      once();
      cpu.push_back(1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::sort(cpu.begin(), cpu.end());
    const double med = ms[ms.size() / 2], cmed = cpu[cpu.size() / 2];
    double err = 0.0;
    if (base.empty()) {
      base = res;
      base_ms = med;
      base_cpu = cmed;
    } else {
      for (size_t i = 0; i < res.size(); ++i) err = std::max(err, rel_rms(base[i], res[i]));
    }
    std::printf("%d,%.2f,%.2f,%.3f,%.3f,%.2e,\"%s\"\n", s, med, cmed, med / base_ms, cmed / base_cpu, err,
                api::chunk_attn_fwd_plan(in, o, ctx).c_str());
  }
  return 0;
}

}  // namespace

LINATTN_SUBCOMMAND("seqpar", "time tier 3 (exact sequence splitting) against tiers 1/2 on one long sequence", run);

}  // namespace linattn::cli
