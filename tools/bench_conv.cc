// `linattn bench --op conv`: the short causal conv, forward / backward / both, CPU or CUDA,
// modes eager-live (exact size), eager-fixed (use_graph = true, no graph) and graph-replay.
// Inputs: one packed varlen batch (B = 1, cu_seqlens from --lengths), x / dy ~ U(-1, 1),
// weight [D, W] and bias [D] fp32 (--channels D --width W); bias and silu on by default
// (--act none, --no-bias, --residual, --state adds an initial and a final state).
// Bytes = the minimum traffic: forward reads x (+ residual) and writes y; backward reads x and
// dy and writes dx (+ dresidual). GB/s is compared with a copy measured in the same run
// (CPU: memcpy split over the benchmark's threads; CUDA: device-to-device cudaMemcpy).
// Inputs rotate over several copies when one set would stay in the last-level cache.
// Check: fp64 reference when rows * D <= 2^22, else (CUDA) the CPU path, else off.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "bench.h"
#include "cli.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "core/util.h"
#include "linattn/dense.h"
#include "linattn/graph.h"
#include "linattn/ops.h"
#include "ref/conv_ref.h"

#if LINATTN_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace linattn::bench {
double process_cpu_ms();  // bench_common.cc
namespace {

struct Cfg {
  int64_t D = 0, W = 0, T = 0, N = 0;
  bool bias = true, silu = true, residual = false, state = false;
  bool fwd = true, bwd = false, cuda = false, fixed = false, graph = false;
  DType dt = DType::kF32;
};

// One set of tensors on the benchmark's device (host tensors are the source of truth).
struct Set {
  Buffer x, res, dy, y, dx, dres;
};

struct Bench {
  Cfg c;
  Device dev;
  Tensor hx, hres, hdy, hw, hb, hh0, hdht, hcu;  // host inputs
  Buffer w, b, h0, dht, cu, ht, dw, db, dh0, ws;
  std::vector<Set> sets;

  TensorView rows(const Buffer& buf) const { return buf.view(c.dt, {1, c.T, c.D}); }
  ConvOptions opt() const {
    ConvOptions o;
    o.activation = c.silu ? Activation::kSilu : Activation::kNone;
    o.output_final_state = c.state;
    o.use_graph = c.fixed || c.graph;
    o.max_num_seqs = o.use_graph ? c.N : 0;
    return o;
  }
  ConvInputs in(const Set& s) const {
    ConvInputs r;
    r.x = rows(s.x), r.weight = w.view(DType::kF32, {c.D, c.W}), r.cu_seqlens = cu.view(DType::kI32, {c.N + 1});
    if (c.bias) r.bias = b.view(DType::kF32, {c.D});
    if (c.residual) r.residual = rows(s.res);
    if (c.state) r.initial_state = h0.view(c.dt, {c.N, c.D, c.W});
    return r;
  }
  void call(const Set& s, const ExecContext& ctx) const {
    const ConvInputs i = in(s);
    const TensorView st = c.state ? ht.view(c.dt, {c.N, c.D, c.W}) : TensorView();
    if (c.fwd) conv_fwd(i, {rows(s.y), st}, opt(), ctx);
    if (c.bwd) {
      ConvGrads g;
      g.dx = rows(s.dx), g.dweight = dw.view(DType::kF32, {c.D, c.W});
      if (c.bias) g.dbias = db.view(DType::kF32, {c.D});
      if (c.residual) g.dresidual = rows(s.dres);
      if (c.state) g.dinitial_state = dh0.view(DType::kF32, {c.N, c.D, c.W});
      conv_bwd(i, rows(s.dy), c.state ? dht.view(DType::kF32, {c.N, c.D, c.W}) : TensorView(), g, opt(), ctx);
    }
  }
  double bytes() const {
    const double row = static_cast<double>(c.T * c.D * static_cast<int64_t>(dtype_size(c.dt)));
    double b2 = 0;
    if (c.fwd) b2 += row * (2 + (c.residual ? 1 : 0));
    if (c.bwd) b2 += row * (3 + (c.residual ? 1 : 0));
    return b2;
  }
};

// Seeded uniform(-1, 1) values, filled in parallel chunks (large inputs take ~1 s otherwise).
Tensor random_tensor(DType dt, std::vector<int64_t> shape, uint64_t seed) {
  Tensor t(dt, std::move(shape));
  const int64_t n = t.numel(), chunk = int64_t{1} << 16;
  parallel_for(ceil_div(n, chunk), [&](int64_t c0, int64_t c1, int) {
    for (int64_t c = c0; c < c1; ++c) {
      uint64_t s = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(c) * 0xBF58476D1CE4E5B9ull);
      for (int64_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        const float v = static_cast<float>(s >> 40) * (2.0f / 16777216.0f) - 1.0f;
        switch (dt) {
          case DType::kBF16: t.data<uint16_t>()[i] = float_to_bf16_bits(v); break;
          case DType::kF16: t.data<uint16_t>()[i] = float_to_fp16_bits(v); break;
          default: t.data<float>()[i] = v; break;
        }
      }
    }
  });
  return t;
}

Buffer upload(const Tensor& t, Device dev) {
  Buffer b(dev, std::max<size_t>(static_cast<size_t>(t.numel()) * dtype_size(t.dtype()), 1));
  if (t.numel() > 0) copy_tensor(TensorView::contiguous(b.data(), t.dtype(), t.shape(), dev), t);
  return b;
}

void sync(const Bench& b, void* stream) {
#if LINATTN_WITH_CUDA
  if (b.c.cuda) cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
#else
  (void)b, (void)stream;
#endif
}

// memcpy of `bytes` split over `threads` static ranges.
void parallel_copy(char* dst, const char* src, size_t bytes, int threads) {
  parallel_for(
      threads,
      [&](int64_t p0, int64_t p1, int) {
        for (int64_t p = p0; p < p1; ++p) {
          int64_t lo, hi;
          static_range(static_cast<int64_t>(bytes), threads, static_cast<int>(p), &lo, &hi);
          std::memcpy(dst + lo, src + lo, static_cast<size_t>(hi - lo));
        }
      },
      threads);
}

// CUDA copy bandwidth (bytes read + written per second): device-to-device cudaMemcpy of 1 GiB,
// best of 5 after one warm-up.
double cuda_copy_gbps() {
  double best = 0;
#if LINATTN_WITH_CUDA
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  cudaMalloc(&a, bytes), cudaMalloc(&b, bytes);
  cudaMemset(a, 1, bytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  for (int i = 0; i < 6; ++i) {
    cudaEventRecord(e0);
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / (ms * 1e-3) * 1e-9);
  }
  cudaFree(a), cudaFree(b);
#endif
  return best;
}

// Error of `got` ([T, D] view on the device) against `ref` (host, fp64 or any dtype), on at most
// ~4M evenly strided elements.
void compare(const Bench& b, const TensorView& got, const Tensor& ref, double* max_abs, double* rel_rms) {
  Tensor h(got.dtype, {got.numel()});
  copy_tensor(h.view(), TensorView::contiguous(got.data, got.dtype, {got.numel()}, b.dev));
  const int64_t step = std::max<int64_t>(1, ref.numel() >> 22);
  double se = 0, sr = 0;
  for (int64_t i = 0; i < ref.numel(); i += step) {
    const double d = h.get(i) - ref.get(i);
    *max_abs = std::max(*max_abs, std::fabs(d));
    se += d * d, sr += ref.get(i) * ref.get(i);
  }
  *rel_rms = std::max(*rel_rms, std::sqrt(se / std::max(sr, 1e-30)));
}

int run_conv(const BenchArgs& a, const Machine& m) {
  Bench b;
  Cfg& c = b.c;
  c.D = a.channels, c.W = a.width, c.dt = a.dt;
  c.N = static_cast<int64_t>(a.lengths.size());
  c.T = std::accumulate(a.lengths.begin(), a.lengths.end(), int64_t{0});
  c.fwd = a.pass != "bwd", c.bwd = a.pass != "fwd";
  c.cuda = a.backend == "cuda";
  c.fixed = a.mode == "eager-fixed", c.graph = a.mode == "graph-replay" || a.mode == "graph-update-replay";
  c.silu = cli::flag(a.extra, "act", "silu") != "none";
  c.bias = !cli::has_flag(a.extra, "no-bias");
  c.residual = cli::has_flag(a.extra, "residual");
  c.state = cli::has_flag(a.extra, "state");
  b.dev = c.cuda ? Device{DeviceType::kCUDA, 0} : Device{};

  b.hx = random_tensor(c.dt, {1, c.T, c.D}, 1), b.hdy = random_tensor(c.dt, {1, c.T, c.D}, 2);
  if (c.residual) b.hres = random_tensor(c.dt, {1, c.T, c.D}, 3);
  b.hw = random_tensor(DType::kF32, {c.D, c.W}, 4), b.hb = random_tensor(DType::kF32, {c.D}, 5);
  b.hh0 = random_tensor(c.dt, {c.N, c.D, c.W}, 6), b.hdht = random_tensor(DType::kF32, {c.N, c.D, c.W}, 7);
  b.hcu = Tensor(DType::kI32, {c.N + 1});
  for (int64_t i = 0, s = 0; i <= c.N; s += i < c.N ? a.lengths[i] : 0, ++i) b.hcu.set(i, static_cast<double>(s));
  b.w = upload(b.hw, b.dev), b.b = upload(b.hb, b.dev), b.h0 = upload(b.hh0, b.dev);
  b.dht = upload(b.hdht, b.dev), b.cu = upload(b.hcu, b.dev);
  const size_t state_bytes = static_cast<size_t>(c.N * c.D * c.W) * 4 + 16;
  b.ht = Buffer(b.dev, state_bytes), b.dh0 = Buffer(b.dev, state_bytes);
  b.dw = Buffer(b.dev, static_cast<size_t>(c.D * c.W) * 4), b.db = Buffer(b.dev, static_cast<size_t>(c.D) * 4);
  // Rotate input sets until they exceed twice the last-level cache (60 MB L2 / 32 MB L3).
  const double set_bytes = b.bytes() + 1;
  const int nsets = static_cast<int>(std::clamp(std::ceil((c.cuda ? 128e6 : 64e6) / set_bytes), 1.0, 8.0));
  for (int i = 0; i < nsets; ++i) {
    Set s;
    s.x = upload(b.hx, b.dev), s.dy = upload(b.hdy, b.dev);
    if (c.residual) s.res = upload(b.hres, b.dev);
    const size_t rb = static_cast<size_t>(c.T * c.D) * dtype_size(c.dt) + 16;
    s.y = Buffer(b.dev, rb), s.dx = Buffer(b.dev, rb), s.dres = Buffer(b.dev, rb);
    b.sets.push_back(std::move(s));
  }
  b.ws = Buffer(b.dev, std::max<size_t>(conv_bwd_workspace_bytes(b.in(b.sets[0]), b.opt()), 256));

  void* stream = nullptr;
#if LINATTN_WITH_CUDA
  cudaStream_t cs = nullptr;
  if (c.cuda) cudaStreamCreate(&cs), stream = cs;
  std::vector<cudaGraphExec_t> execs;
#endif
  ExecContext ctx;
  ctx.stream = stream, ctx.workspace = b.ws.data(), ctx.workspace_bytes = b.ws.bytes();
  std::vector<std::unique_ptr<Graph>> cpu_graphs;
  for (const Set& s : b.sets) b.call(s, ctx);  // warm-up (allocations, page faults, attributes)
  sync(b, stream);
  if (c.graph) {
    for (const Set& s : b.sets) {
      if (!c.cuda) {
        cpu_graphs.push_back(std::make_unique<Graph>());
        cpu_graphs.back()->capture([&] { b.call(s, ctx); });
        continue;
      }
#if LINATTN_WITH_CUDA
      cudaGraph_t g;
      cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal);
      b.call(s, ctx);
      cudaStreamEndCapture(cs, &g);
      cudaGraphExec_t e;
      cudaGraphInstantiate(&e, g, 0);
      cudaGraphDestroy(g);
      execs.push_back(e);
#endif
    }
  }
  int next = 0;
  auto step = [&] {
    const int i = next++ % nsets;
    if (!c.graph) b.call(b.sets[i], ctx);
    else if (!c.cuda) cpu_graphs[i]->replay();
#if LINATTN_WITH_CUDA
    else cudaGraphLaunch(execs[i], cs);
#endif
  };
  TimeStats ts;
  double copy = 0, copy_cpu_ms = 0;
  if (!c.cuda) {
    // The development machine is shared: every call is paired with a copy of the same bytes
    // (half read, half written), so that both see the same load; copy = their median.
    const size_t half = static_cast<size_t>(b.bytes() / 2);
    std::vector<char> src(half, 1), dst(half, 2);
    std::vector<double> copy_gbps, ms, cpu, copy_cpu;
    const auto start = std::chrono::steady_clock::now();
    const auto since = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
    step();
    while (static_cast<int>(ms.size()) < a.min_iters || (since(start) < a.min_time_s && ms.size() < 1000)) {
      auto t0 = std::chrono::steady_clock::now();
      double c0 = process_cpu_ms();
      parallel_copy(dst.data(), src.data(), half, m.threads);
      copy_gbps.push_back(2.0 * static_cast<double>(half) / since(t0) * 1e-9);
      copy_cpu.push_back(process_cpu_ms() - c0);
      t0 = std::chrono::steady_clock::now();
      c0 = process_cpu_ms();
      step();
      ms.push_back(since(t0) * 1e3);
      cpu.push_back(process_cpu_ms() - c0);
    }
    // Process CPU time / threads estimates the unloaded wall time (the VM preempts us).
    std::sort(cpu.begin(), cpu.end());
    std::sort(copy_cpu.begin(), copy_cpu.end());
    ts.cpu_ms = cpu[cpu.size() / 2];
    copy_cpu_ms = copy_cpu[copy_cpu.size() / 2];
    std::sort(copy_gbps.begin(), copy_gbps.end());
    copy = copy_gbps[copy_gbps.size() / 2];
    ts.iters = static_cast<int>(ms.size());
    for (double x : ms) ts.mean_ms += x / static_cast<double>(ms.size());
    std::sort(ms.begin(), ms.end());
    ts.p50_ms = ms[ms.size() / 2], ts.p95_ms = ms[std::min(ms.size() - 1, ms.size() * 95 / 100)];
  } else {
    copy = cuda_copy_gbps();
#if LINATTN_WITH_CUDA
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    std::vector<double> ms;
    const auto start = std::chrono::steady_clock::now();
    while (static_cast<int>(ms.size()) < std::max(a.min_iters, 20) ||
           (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < a.min_time_s &&
            ms.size() < 2000)) {
      cudaEventRecord(e0, cs);
      step();
      cudaEventRecord(e1, cs);
      cudaEventSynchronize(e1);
      float t = 0;
      cudaEventElapsedTime(&t, e0, e1);
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    ts.iters = static_cast<int>(ms.size());
    ts.p50_ms = ms[ms.size() / 2], ts.p95_ms = ms[ms.size() * 95 / 100];
    const auto h0 = std::chrono::steady_clock::now();  // host-inclusive: back-to-back, one sync
    for (int i = 0; i < 20; ++i) step();
    cudaStreamSynchronize(cs);
    ts.mean_ms = std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count() * 1e3 / 20;
#endif
  }

  // Check the last call of set 0 against the reference (small) or the CPU path (CUDA, large).
  double max_abs = 0, rel_rms = 0;
  std::string check = "off";
  const bool small = c.T * c.D <= (int64_t{1} << 22);
  if (a.check != "off" && (small || c.cuda)) {
    b.call(b.sets[0], ctx);
    sync(b, stream);
    ConvInputs hin;
    hin.x = b.hx, hin.weight = b.hw, hin.cu_seqlens = b.hcu;
    if (c.bias) hin.bias = b.hb;
    if (c.residual) hin.residual = b.hres;
    if (c.state) hin.initial_state = b.hh0;
    ConvOptions o = b.opt();
    o.use_graph = false, o.max_num_seqs = 0;
    Tensor y_ref, dx_ref;
    if (small) {
      check = "fp64_ref";
      if (c.fwd) y_ref = std::move(ref::conv_ref_fwd(hin, o).y);
      if (c.bwd) dx_ref = std::move(ref::conv_ref_bwd(hin, b.hdy, c.state ? TensorView(b.hdht) : TensorView(), o).dx);
    } else {
      check = "cpu";
      y_ref = Tensor(c.dt, {1, c.T, c.D}), dx_ref = Tensor(c.dt, {1, c.T, c.D});
      Tensor ht(c.dt, {c.N, c.D, c.W}), dw(DType::kF32, {c.D, c.W});
      if (c.fwd) conv_fwd(hin, {y_ref, c.state ? TensorView(ht) : TensorView()}, o);
      ConvGrads g;
      g.dx = dx_ref, g.dweight = dw;
      if (c.bwd) conv_bwd(hin, b.hdy, c.state ? TensorView(b.hdht) : TensorView(), g, o);
    }
    if (c.fwd) compare(b, b.rows(b.sets[0].y), y_ref, &max_abs, &rel_rms);
    if (c.bwd) compare(b, b.rows(b.sets[0].dx), dx_ref, &max_abs, &rel_rms);
  }

  const double gbps = b.bytes() / (ts.p50_ms * 1e-3) * 1e-9;
  if (a.json) {
    Json j;
    j.add("kind", "case").add("op", "conv").add("pass", a.pass).add("backend", a.backend).add("mode", a.mode);
    j.add("dtype", a.dtype).add("hqk", int64_t{0}).add("hv", int64_t{0}).add("k", int64_t{0}).add("v", int64_t{0});
    j.add("bt", int64_t{0}).add("d", c.D).add("w", c.W).add_raw("lengths", lengths_json(a.lengths));
    j.add("bias", c.bias).add("act", c.silu ? "silu" : "none").add("residual", c.residual).add("state", c.state);
    j.add("threads", m.threads).add("p50_ms", ts.p50_ms).add("p95_ms", ts.p95_ms).add("host_ms", ts.mean_ms);
    j.add("iters", ts.iters).add("input_sets", nsets).add("gbps", gbps).add("copy_gbps", copy);
    j.add("pct_of_copy", 100.0 * gbps / copy).add("peak_extra_mib", static_cast<double>(b.ws.bytes()) / (1 << 20));
    if (!c.cuda) {
      const double per_thread = ts.cpu_ms / m.threads, copy_per_thread = copy_cpu_ms / m.threads;
      j.add("cpu_ms", ts.cpu_ms).add("cpu_ms_per_thread", per_thread);
      j.add("gbps_cpu_time", b.bytes() / (per_thread * 1e-3) * 1e-9);
      j.add("copy_gbps_cpu_time", b.bytes() / (copy_per_thread * 1e-3) * 1e-9);
    }
    j.add("check", check);
    if (check != "off") j.add("max_abs_err", max_abs).add("rel_rms_err", rel_rms);
    std::printf("%s\n", j.str().c_str());
  } else {
    std::printf("conv %s %s %s %s D=%lld W=%lld T=%lld N=%lld: p50 %.3f ms p95 %.3f ms, %.1f GB/s = %.0f%% of copy "
                "(%.1f GB/s), check %s max_abs %.2e rel_rms %.2e\n",
                a.pass.c_str(), a.backend.c_str(), a.mode.c_str(), a.dtype.c_str(), static_cast<long long>(c.D),
                static_cast<long long>(c.W), static_cast<long long>(c.T), static_cast<long long>(c.N), ts.p50_ms,
                ts.p95_ms, gbps, 100.0 * gbps / copy, copy, check.c_str(), max_abs, rel_rms);
    if (!c.cuda)
      std::printf("  process CPU time %.3f ms per call (/ %d threads = %.3f ms; the same bytes copied: %.3f ms)\n",
                  ts.cpu_ms, m.threads, ts.cpu_ms / m.threads, copy_cpu_ms / m.threads);
  }
#if LINATTN_WITH_CUDA
  for (auto e : execs) cudaGraphExecDestroy(e);
  if (cs) cudaStreamDestroy(cs);
#endif
  return 0;
}

}  // namespace

LINATTN_BENCH_OP("conv", run_conv);

}  // namespace linattn::bench
