// bench_cp_cuda: context-parallel scaling 1 -> 2 GPUs (one process, one thread per GPU, NCCL).
// GDN configurations first, then the conv (--conv-d 0 skips it).
//   bench_cp_cuda [--t 131072,524288] [--hv 16,32] [--k 128] [--v 128] [--conv-d 4096]
//                 [--iters 5] [--chain 0] [--commit X] [--json out.jsonl]
// One sequence of T tokens. GDN: bf16 q / k / v, H = HV heads, the layer's in-kernel options (q/k
// L2 norm, gate from A_log / dt_bias, beta sigmoid), no initial / final state. Conv: bf16 x
// [1, T, D], W = 4, silu. Inputs are filled on GPU 0 (rank 0 uses its half in place, rank 1's half
// is copied peer to peer). Times (CUDA events, median of --iters after one warm-up): forward and
// forward + backward on 1 GPU (the public ops on all T rows) and on 2 GPUs (the CP ops, T / 2 rows
// per rank; an iteration is the slower rank's time, both ranks released together by a host
// barrier). GDN also reports the rel RMS difference of o (2 GPUs vs 1) over rank 1's first and
// last 4096 rows, the rows that depend on the exchange. --chain 1,0 runs the GDN CP rows once per
// exchange (LINATTN_CP_CHAIN: 1 chained; 0 the first version, the default), field "chain".
// JSON lines to stdout and --json.
#include <cuda_runtime.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cp_cuda_util.h"
#include "cuda/common/random_fill.h"
#include "parallel/cp_cuda.h"
#include "parallel/cp_ops.h"

namespace linattn::test {
namespace {

std::string flag(int argc, char** argv, const char* name, const char* def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == std::string("--") + name) return argv[i + 1];
  return def;
}

std::vector<int64_t> ints(const std::string& s) {
  std::vector<int64_t> r;
  for (size_t p = 0; p < s.size();) {
    const size_t q = s.find(',', p);
    r.push_back(std::stoll(s.substr(p, q - p)));
    p = q == std::string::npos ? s.size() : q + 1;
  }
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? NAN : v[v.size() / 2];
}

// Event time of fn() on s, median of iters after one warm-up.
double time_ms(const std::function<void()>& fn, cudaStream_t s, int iters) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  fn();
  cuda_ok(cudaStreamSynchronize(s), "sync");
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(a, s);
    fn();
    cudaEventRecord(b, s);
    cuda_ok(cudaEventSynchronize(b), "sync");
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(t);
}

// CP timing: setup(r, comm, s) once per rank, then run(r) warm-up + iters with both ranks released
// together; after(r) once at the end. Returns the median over iterations of the slower rank.
double time_cp(const std::function<void(int, parallel::Communicator&, cudaStream_t)>& setup,
               const std::function<void(int)>& run, const std::function<void(int)>& after, int iters) {
  std::vector<std::vector<double>> t(2);
  std::barrier sync(2);
  run_gpu_ranks(2, [&](int r, parallel::Communicator& comm) {
    cudaStream_t s;
    cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    setup(r, comm, s);
    cuda_ok(cudaDeviceSynchronize(), "sync");
    run(r);
    cuda_ok(cudaStreamSynchronize(s), "sync");
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < iters; ++i) {
      sync.arrive_and_wait();
      cudaEventRecord(a, s);
      run(r);
      cudaEventRecord(b, s);
      cuda_ok(cudaEventSynchronize(b), "sync");
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      t[r].push_back(ms);
    }
    after(r);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaStreamDestroy(s);
  });
  std::vector<double> worst;
  for (int i = 0; i < iters; ++i) worst.push_back(std::max(t[0][i], t[1][i]));
  return median(worst);
}

size_t row_bytes(const TensorView& t) { return t.nbytes() / static_cast<size_t>(t.shape[1]); }

// Rows [r0, r0 + n) of a [1, T, ...] view (no copy).
TensorView rows_of(TensorView t, int64_t r0, int64_t n) {
  t.data = static_cast<char*>(t.data) + r0 * row_bytes(t);
  t.shape[1] = n;
  return t;
}

// A copy of src (on GPU 0) on the current GPU.
TensorView peer_copy(DevMem& m, const TensorView& src) {
  TensorView t = m.alloc(src.dtype, std::vector<int64_t>(src.shape.begin(), src.shape.begin() + src.ndim), true);
  cuda_ok(cudaMemcpyPeer(t.data, m.device(), src.data, 0, t.nbytes()), "cudaMemcpyPeer");
  return t;
}

// Rank r's rows of a GPU-0 token tensor: in place on rank 0, a peer copy on rank 1.
TensorView shard(DevMem& m, int r, const TensorView& src, int64_t half) {
  const int64_t T = src.shape[1];
  return r == 0 ? rows_of(src, 0, half) : peer_copy(m, rows_of(src, half, T - half));
}

TensorView index_tensor(DevMem& m, const std::vector<int64_t>& v) {
  Tensor h(DType::kI64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) h.data<int64_t>()[i] = v[i];
  return m.up(h);
}

void fill(const TensorView& t, uint64_t seed, float mean, float sd) {
  cuda::fill_normal(t.data, t.dtype == DType::kBF16 ? cuda::ElemType::kBF16 : cuda::ElemType::kF32, t.numel(), seed,
                    mean, sd, nullptr);
}

std::vector<float> rows_f32(const TensorView& bf16, int64_t r0, int64_t n) {
  const TensorView t = rows_of(bf16, r0, n);
  std::vector<uint16_t> raw(static_cast<size_t>(t.numel()));
  cuda_ok(cudaMemcpy(raw.data(), t.data, t.nbytes(), cudaMemcpyDeviceToHost), "download");
  std::vector<float> f(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const uint32_t u = uint32_t(raw[i]) << 16;
    std::memcpy(&f[i], &u, 4);
  }
  return f;
}

double rel_rms(const std::vector<float>& ref, const std::vector<float>& got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (ref[i] - got[i]) * double(ref[i] - got[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

struct Emit {
  FILE* json = nullptr;
  std::string commit;
  void line(const char* s) {
    std::printf("%s\n", s);
    std::fflush(stdout);
    if (json) {
      std::fprintf(json, "%s\n", s);
      std::fflush(json);
    }
  }
};

struct Gdn {
  ChunkAttnInputs in;
  ChunkAttnOutputs out;
  ChunkAttnGrads g;
  TensorView d_o;
};

void alloc_out(DevMem& m, Gdn& x, int64_t T) {
  const int64_t HV = x.in.v.shape[2], K = x.in.q.shape[3], V = x.in.v.shape[3];
  x.out.o = m.alloc(DType::kBF16, {1, T, HV, V});
  x.g.dq = m.alloc(DType::kBF16, {1, T, HV, K});
  x.g.dk = m.alloc(DType::kBF16, {1, T, HV, K});
  x.g.dv = m.alloc(DType::kBF16, {1, T, HV, V});
  x.g.dg = m.alloc(DType::kF32, {1, T, HV});
  x.g.dbeta = m.alloc(DType::kF32, {1, T, HV});
  x.g.dA_log = m.alloc(DType::kF32, {HV});
  x.g.ddt_bias = m.alloc(DType::kF32, {HV});
}

void bench_gdn(Emit& e, int64_t T, int64_t HV, int64_t K, int64_t V, int iters, const std::vector<int64_t>& chains) {
  cuda_ok(cudaSetDevice(0), "cudaSetDevice");
  DevMem m0;
  Gdn one;
  one.in.q = m0.alloc(DType::kBF16, {1, T, HV, K});
  one.in.k = m0.alloc(DType::kBF16, {1, T, HV, K});
  one.in.v = m0.alloc(DType::kBF16, {1, T, HV, V});
  one.in.g = m0.alloc(DType::kF32, {1, T, HV});
  one.in.beta = m0.alloc(DType::kF32, {1, T, HV});
  one.in.A_log = m0.alloc(DType::kF32, {HV});
  one.in.dt_bias = m0.alloc(DType::kF32, {HV});
  one.d_o = m0.alloc(DType::kBF16, {1, T, HV, V});
  fill(one.in.q, 1, 0, 1);
  fill(one.in.k, 2, 0, 1);
  fill(one.in.v, 3, 0, 1);
  fill(one.in.g, 4, 0, 1);
  fill(one.in.beta, 5, 0, 1);
  fill(one.in.A_log, 6, 0, 0.5f);
  fill(one.in.dt_bias, 7, -3, 0.5f);
  fill(one.d_o, 8, 0, 1);
  one.in.cu_seqlens = index_tensor(m0, {0, T});
  alloc_out(m0, one, T);
  ChunkAttnOptions opt;
  opt.use_qk_l2norm_in_kernel = opt.use_gate_in_kernel = opt.use_beta_sigmoid_in_kernel = true;
  cudaStream_t s0;
  cuda_ok(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking), "cudaStreamCreate");
  const size_t fb = chunk_attn_fwd_workspace_bytes(one.in, opt), bb = chunk_attn_bwd_workspace_bytes(one.in, opt);
  const ExecContext cf{s0, m0.raw(fb), fb, 0}, cb{s0, m0.raw(bb), bb, 0};
  cuda_ok(cudaDeviceSynchronize(), "sync");
  const double f1 = time_ms([&] { chunk_attn_fwd(one.in, one.out, opt, cf); }, s0, iters);
  const double fb1 = time_ms(
      [&] {
        chunk_attn_fwd(one.in, one.out, opt, cf);
        chunk_attn_bwd(one.in, one.d_o, {}, one.g, opt, cb);
      },
      s0, iters);
  chunk_attn_fwd(one.in, one.out, opt, cf);
  cuda_ok(cudaStreamSynchronize(s0), "sync");
  const int64_t half = T / 2, probe = std::min<int64_t>(4096, T - half);
  const std::vector<float> ref_a = rows_f32(one.out.o, half, probe), ref_b = rows_f32(one.out.o, T - probe, probe);
  for (const int64_t chain : chains)
  for (const bool bwd : {false, true}) {
    setenv("LINATTN_CP_CHAIN", chain ? "1" : "0", 1);  // read by every CP call; set before the rank threads
    struct Rank {
      std::unique_ptr<DevMem> m;
      Gdn x;
      parallel::CpContext cp;
      ExecContext cf, cb;
    };
    std::vector<Rank> rk(2);
    double err = NAN;
    auto setup = [&](int r, parallel::Communicator& comm, cudaStream_t s) {
      Rank& k = rk[r];
      k.m = std::make_unique<DevMem>();
      for (auto [dst, src] : {std::pair{&k.x.in.q, &one.in.q}, {&k.x.in.k, &one.in.k}, {&k.x.in.v, &one.in.v},
                              {&k.x.in.g, &one.in.g}, {&k.x.in.beta, &one.in.beta}, {&k.x.d_o, &one.d_o}})
        *dst = shard(*k.m, r, *src, half);
      k.x.in.A_log = r == 0 ? one.in.A_log : peer_copy(*k.m, one.in.A_log);
      k.x.in.dt_bias = r == 0 ? one.in.dt_bias : peer_copy(*k.m, one.in.dt_bias);
      alloc_out(*k.m, k.x, r == 0 ? half : T - half);
      k.x.in.cu_seqlens = index_tensor(*k.m, {0, T});
      k.cp = parallel::CpContext{&comm, index_tensor(*k.m, {0, half, T}), true};
      const size_t wf = parallel::cp_chunk_attn_workspace_bytes(k.cp, k.x.in, opt, false);
      const size_t wb = parallel::cp_chunk_attn_workspace_bytes(k.cp, k.x.in, opt, true);
      k.cf = ExecContext{s, k.m->raw(wf), wf, 0};
      k.cb = ExecContext{s, k.m->raw(wb), wb, 0};
    };
    auto run = [&](int r) {
      Rank& k = rk[r];
      parallel::cp_chunk_attn_fwd(k.cp, k.x.in, k.x.out, opt, k.cf);
      if (bwd) parallel::cp_chunk_attn_bwd(k.cp, k.x.in, k.x.d_o, {}, k.x.g, opt, k.cb);
    };
    auto after = [&](int r) {
      Rank& k = rk[r];
      cuda_ok(cudaDeviceSynchronize(), "sync");
      if (r == 1 && !bwd) {
        const int64_t n = T - half;
        err = std::max(rel_rms(ref_a, rows_f32(k.x.out.o, 0, probe)), rel_rms(ref_b, rows_f32(k.x.out.o, n - probe, probe)));
      }
      k.m.reset();
    };
    const double ms = time_cp(setup, run, after, iters);
    const double single = bwd ? fb1 : f1;
    char errs[32] = "null";  // the output is checked in the forward rows only (JSON has no NaN)
    if (std::isfinite(err)) std::snprintf(errs, sizeof errs, "%.3g", err);
    char buf[640];
    std::snprintf(buf, sizeof buf,
                  "{\"bench\":\"cp_cuda\",\"op\":\"gdn\",\"pass\":\"%s\",\"T\":%lld,\"H\":%lld,\"HV\":%lld,\"K\":%lld,"
                  "\"V\":%lld,\"dtype\":\"bf16\",\"ms_1gpu\":%.3f,\"ms_2gpu\":%.3f,\"speedup\":%.3f,"
                  "\"o_rel_rms_vs_1gpu\":%s,\"state_pass\":\"%s\",\"chain\":%d,\"commit\":\"%s\"}",
                  bwd ? "fwd+bwd" : "fwd", (long long)T, (long long)HV, (long long)HV, (long long)K, (long long)V, single,
                  ms, single / ms, errs, parallel::cp_cuda_tier3_state_pass() ? "tier3" : "token", int(chain),
                  e.commit.c_str());
    e.line(buf);
  }
  cudaStreamDestroy(s0);
}

void bench_conv(Emit& e, int64_t T, int64_t D, int iters) {
  cuda_ok(cudaSetDevice(0), "cudaSetDevice");
  DevMem m0;
  const int64_t W = 4, half = T / 2;
  ConvInputs in;
  in.x = m0.alloc(DType::kBF16, {1, T, D});
  in.weight = m0.alloc(DType::kF32, {D, W});
  in.cu_seqlens = index_tensor(m0, {0, T});
  const TensorView dy = m0.alloc(DType::kBF16, {1, T, D});
  fill(in.x, 11, 0, 1);
  fill(in.weight, 12, 0, 0.5f);
  fill(dy, 13, 0, 1);
  ConvOptions opt;
  ConvOutputs out{m0.alloc(DType::kBF16, {1, T, D}), {}};
  ConvGrads g{m0.alloc(DType::kBF16, {1, T, D}), m0.alloc(DType::kF32, {D, W}), {}, {}, {}};
  cudaStream_t s0;
  cuda_ok(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking), "cudaStreamCreate");
  const size_t wb = conv_bwd_workspace_bytes(in, opt);
  const ExecContext c0{s0, m0.raw(wb), wb, 0};
  cuda_ok(cudaDeviceSynchronize(), "sync");
  {  // the op on GPU 1 alone first: a failure there would leave rank 0 waiting in NCCL
    cuda_ok(cudaSetDevice(1), "cudaSetDevice");
    DevMem m1;
    ConvInputs in1 = in;
    in1.x = peer_copy(m1, in.x);
    in1.weight = peer_copy(m1, in.weight);
    in1.cu_seqlens = peer_copy(m1, in.cu_seqlens);
    conv_fwd(in1, ConvOutputs{m1.alloc(DType::kBF16, {1, T, D}), {}}, opt);
    cuda_ok(cudaDeviceSynchronize(), "sync");
    cuda_ok(cudaSetDevice(0), "cudaSetDevice");
  }
  const double f1 = time_ms([&] { conv_fwd(in, out, opt, c0); }, s0, iters);
  const double fb1 = time_ms(
      [&] {
        conv_fwd(in, out, opt, c0);
        conv_bwd(in, dy, {}, g, opt, c0);
      },
      s0, iters);
  for (const bool bwd : {false, true}) {
    struct Rank {
      std::unique_ptr<DevMem> m;
      ConvInputs in;
      ConvOutputs out;
      ConvGrads g;
      TensorView dy;
      parallel::CpContext cp;
      ExecContext c;
    };
    std::vector<Rank> rk(2);
    auto setup = [&](int r, parallel::Communicator& comm, cudaStream_t s) {
      Rank& k = rk[r];
      k.m = std::make_unique<DevMem>();
      const int64_t n = r == 0 ? half : T - half;
      k.in.x = shard(*k.m, r, in.x, half);
      k.dy = shard(*k.m, r, dy, half);
      k.in.weight = r == 0 ? in.weight : peer_copy(*k.m, in.weight);
      k.in.cu_seqlens = index_tensor(*k.m, {0, T});
      k.out.y = k.m->alloc(DType::kBF16, {1, n, D});
      k.g.dx = k.m->alloc(DType::kBF16, {1, n, D});
      k.g.dweight = k.m->alloc(DType::kF32, {D, W});
      k.cp = parallel::CpContext{&comm, index_tensor(*k.m, {0, half, T}), true};
      const size_t b = parallel::cp_conv_workspace_bytes(k.cp, k.in, opt);
      k.c = ExecContext{s, k.m->raw(b), b, 0};
    };
    auto run = [&](int r) {
      Rank& k = rk[r];
      parallel::cp_conv_fwd(k.cp, k.in, k.out, opt, k.c);
      if (bwd) parallel::cp_conv_bwd(k.cp, k.in, k.dy, {}, k.g, opt, k.c);
    };
    auto after = [&](int r) {
      cuda_ok(cudaDeviceSynchronize(), "sync");
      rk[r].m.reset();
    };
    const double ms = time_cp(setup, run, after, iters);
    const double single = bwd ? fb1 : f1;
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "{\"bench\":\"cp_cuda\",\"op\":\"conv\",\"pass\":\"%s\",\"T\":%lld,\"D\":%lld,\"W\":%lld,"
                  "\"dtype\":\"bf16\",\"ms_1gpu\":%.3f,\"ms_2gpu\":%.3f,\"speedup\":%.3f,\"commit\":\"%s\"}",
                  bwd ? "fwd+bwd" : "fwd", (long long)T, (long long)D, (long long)W, single, ms, single / ms,
                  e.commit.c_str());
    e.line(buf);
  }
  cudaStreamDestroy(s0);
}

}  // namespace
}  // namespace linattn::test

int main(int argc, char** argv) {
  using namespace linattn::test;
  if (gpu_count() < 2) {
    std::printf("bench_cp_cuda: needs 2 GPUs, found %d\n", gpu_count());
    return 1;
  }
  Emit e;
  e.commit = flag(argc, argv, "commit", "unknown");
  const std::string json = flag(argc, argv, "json", "");
  if (!json.empty()) e.json = std::fopen(json.c_str(), "a");
  const int iters = static_cast<int>(std::stoll(flag(argc, argv, "iters", "5")));
  const int64_t K = std::stoll(flag(argc, argv, "k", "128")), V = std::stoll(flag(argc, argv, "v", "128"));
  const int64_t D = std::stoll(flag(argc, argv, "conv-d", "4096"));
  const std::vector<int64_t> ts = ints(flag(argc, argv, "t", "131072,524288"));
  try {
    for (int64_t T : ts)
      for (int64_t HV : ints(flag(argc, argv, "hv", "16,32")))
        bench_gdn(e, T, HV, K, V, iters, ints(flag(argc, argv, "chain", "0")));
    for (int64_t T : ts)
      if (D > 0) bench_conv(e, T, D, iters);
  } catch (const std::exception& ex) {
    std::printf("bench_cp_cuda: %s\n", ex.what());
    return 1;
  }
  if (e.json) std::fclose(e.json);
  return 0;
}
