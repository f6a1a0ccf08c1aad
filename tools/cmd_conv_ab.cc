// `linattn conv-ab`: a same-process A/B of the CUDA short-conv forward variants
// (LINATTN_CONV_CUDA_FWD, src/cuda/conv/conv_run.cuh: FwdVariant) and of a device-to-device
// cudaMemcpy of the same bytes (x -> y: the copy reference at this size), interleaved: for each
// round, each shape, each variant: 2 warm-up calls, then --iters calls each timed by its own
// CUDA events with a sync after it (as `linattn bench`: p50_ms, the host's launch time included),
// then --iters calls queued back to back with an event pair around each and one sync at the end
// (FLA's bench method: p50_ms_queued); p50 / p95 over every round per (shape, variant).
// Inputs as `linattn bench --op conv`: bf16 x [1, T, D] (uniform(-1, 1)),
// fp32 weight [D, 4] and bias, silu, one sequence through cu_seqlens [0, T].
//   linattn conv-ab --shapes 8192x65536,8192x16384 --variants "default;v6;x=cp,waves=2;x=cp;memcpy"
//     [--rounds 3] [--iters 20] [--verify] [--fla 8192x65536=0.8135,8192x16384=0.2077]
// "default" = the variable unset (the library's dispatch); "memcpy" = cudaMemcpyAsync(y, x); any other
// entry is a LINATTN_CONV_CUDA_FWD value (v6, x=cp, blocks=N, waves=N: what remains after session 10's prune;
// a removed variant's value is reported as that variant's error row).
// --verify: in the first round y of every variant is compared bitwise with the default's
// (every variant computes each output with the same operations in the same order).
// --fla DxT=ms,...: FLA's forward time at those shapes (measured elsewhere: a run without FLA in the
// same process chain), printed with the ratios fla_over_ours (synced p50) and fla_over_ours_queued.
// Prints the parsed configuration (an env line), then one JSON line per (shape, variant).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cli.h"
#include "core/check.h"
#include "core/half.h"
#include "linattn/dense.h"
#include "linattn/ops.h"

#if LINATTN_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace linattn::cli {
namespace {

#if LINATTN_WITH_CUDA
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> r;
  size_t a = 0;
  while (a <= s.size()) {
    size_t b = s.find(sep, a);
    if (b == std::string::npos) b = s.size();
    if (b > a) r.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return r;
}

void cuda_ok(cudaError_t e, const char* what) {
  LINATTN_CHECK(e == cudaSuccess, "conv-ab: ", what, ": ", cudaGetErrorString(e));
}

// Seeded uniform(-scale, scale) values (xorshift).
void fill_random(std::vector<float>& v, uint64_t seed, float scale) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& f : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    f = (static_cast<float>(s >> 40) * (2.0f / 16777216.0f) - 1.0f) * scale;
  }
}

struct Shape {
  int64_t D = 0, T = 0;
};

struct Dev {
  Shape s;
  Buffer x, y, w, b, cu;
  ConvInputs in;
  ConvOutputs out;
};

Dev make_dev(Shape s) {
  Dev d;
  d.s = s;
  const size_t n = static_cast<size_t>(s.T * s.D);
  d.x = Buffer(Device{DeviceType::kCUDA, 0}, n * 2);
  d.y = Buffer(Device{DeviceType::kCUDA, 0}, n * 2);
  // x: a 16 MiB random block repeated (uploading 1 GiB of fresh randoms takes seconds).
  const size_t block = std::min<size_t>(n, size_t{1} << 23);
  std::vector<float> f(block);
  fill_random(f, 11, 1.0f);
  std::vector<uint16_t> h(block);
  for (size_t i = 0; i < block; ++i) h[i] = float_to_bf16_bits(f[i]);
  for (size_t o = 0; o < n; o += block) {
    const size_t m = std::min(block, n - o);
    cuda_ok(cudaMemcpy(static_cast<uint16_t*>(d.x.data()) + o, h.data(), m * 2, cudaMemcpyHostToDevice), "upload x");
  }
  std::vector<float> w(static_cast<size_t>(s.D * 4)), b(static_cast<size_t>(s.D));
  fill_random(w, 12, 0.5f), fill_random(b, 13, 0.5f);
  d.w = Buffer(Device{DeviceType::kCUDA, 0}, w.size() * 4);
  d.b = Buffer(Device{DeviceType::kCUDA, 0}, b.size() * 4);
  d.cu = Buffer(Device{DeviceType::kCUDA, 0}, 8);
  const int32_t cu[2] = {0, static_cast<int32_t>(s.T)};
  cuda_ok(cudaMemcpy(d.w.data(), w.data(), w.size() * 4, cudaMemcpyHostToDevice), "upload w");
  cuda_ok(cudaMemcpy(d.b.data(), b.data(), b.size() * 4, cudaMemcpyHostToDevice), "upload b");
  cuda_ok(cudaMemcpy(d.cu.data(), cu, 8, cudaMemcpyHostToDevice), "upload cu");
  d.in.x = d.x.view(DType::kBF16, {1, s.T, s.D});
  d.in.weight = d.w.view(DType::kF32, {s.D, 4});
  d.in.bias = d.b.view(DType::kF32, {s.D});
  d.in.cu_seqlens = d.cu.view(DType::kI32, {2});
  d.out.y = d.y.view(DType::kBF16, {1, s.T, s.D});
  return d;
}

void set_variant(const std::string& v) {
  if (v == "default" || v == "memcpy") unsetenv("LINATTN_CONV_CUDA_FWD");
  else setenv("LINATTN_CONV_CUDA_FWD", v.c_str(), 1);
}

void call(const Dev& d, const std::string& v, cudaStream_t st) {
  if (v == "memcpy") {
    cuda_ok(cudaMemcpyAsync(d.y.data(), d.x.data(), d.x.bytes(), cudaMemcpyDeviceToDevice, st), "memcpy");
    return;
  }
  ExecContext ctx;
  ctx.stream = st;
  ConvOptions o;
  o.activation = Activation::kSilu;
  conv_fwd(d.in, d.out, o, ctx);
}

// y into h (resized once per shape: a reused buffer skips the page faults of a fresh 1 GiB vector).
void download(const Dev& d, std::vector<uint16_t>& h) {
  h.resize(d.y.bytes() / 2);
  cuda_ok(cudaMemcpy(h.data(), d.y.data(), d.y.bytes(), cudaMemcpyDeviceToHost), "download y");
}

int cmd_conv_ab(const Args& args) {
  std::vector<Shape> shapes;
  for (const std::string& t : split(flag(args, "shapes", "8192x65536"), ',')) {
    const size_t x = t.find('x');
    LINATTN_CHECK(x != std::string::npos, "--shapes: expected DxT, got ", t);
    shapes.push_back({std::stoll(t.substr(0, x)), std::stoll(t.substr(x + 1))});
  }
  const std::vector<std::string> variants = split(flag(args, "variants", "default;x=cp,waves=2;memcpy"), ';');
  const int rounds = std::max(1, std::atoi(flag(args, "rounds", "3").c_str()));
  const int iters = std::max(1, std::atoi(flag(args, "iters", "20").c_str()));
  const bool verify = has_flag(args, "verify");
  std::map<std::string, double> fla;  // "DxT" -> ms
  for (const std::string& t : split(flag(args, "fla", ""), ',')) {
    const size_t eq = t.find('=');
    LINATTN_CHECK(eq != std::string::npos, "--fla: expected DxT=ms, got ", t);
    fla[t.substr(0, eq)] = std::atof(t.c_str() + eq + 1);
  }
  // The parsed configuration first (before any CUDA call): what the rows below were measured with.
  std::printf("{\"kind\":\"env\",\"tool\":\"conv-ab\",\"rounds\":%d,\"iters\":%d,\"verify\":%s,\"shapes\":[", rounds,
              iters, verify ? "true" : "false");
  for (size_t i = 0; i < shapes.size(); ++i)
    std::printf("%s\"%lldx%lld\"", i ? "," : "", static_cast<long long>(shapes[i].D), static_cast<long long>(shapes[i].T));
  std::printf("],\"variants\":[");
  for (size_t i = 0; i < variants.size(); ++i) std::printf("%s\"%s\"", i ? "," : "", variants[i].c_str());
  std::printf("]}\n");
  std::fflush(stdout);
  cudaStream_t st;
  cuda_ok(cudaStreamCreate(&st), "stream");
  cudaEvent_t e0, e1;
  cuda_ok(cudaEventCreate(&e0), "event"), cuda_ok(cudaEventCreate(&e1), "event");
  std::map<std::pair<size_t, std::string>, std::vector<float>> ms, queued;
  std::map<std::pair<size_t, std::string>, std::string> equal, error;
  for (size_t si = 0; si < shapes.size(); ++si) {
    Dev d = make_dev(shapes[si]);  // one shape's buffers at a time (8192 x 65536: 2 GiB)
    std::vector<uint16_t> ref, cur;
    for (int r = 0; r < rounds; ++r) {
      for (const std::string& v : variants) {
        const auto key = std::make_pair(si, v);
        if (error.count(key)) continue;
        try {
          set_variant(v);
          for (int i = 0; i < 2; ++i) call(d, v, st);
          cuda_ok(cudaStreamSynchronize(st), "warm-up");
          for (int i = 0; i < iters; ++i) {
            cuda_ok(cudaEventRecord(e0, st), "record");
            call(d, v, st);
            cuda_ok(cudaEventRecord(e1, st), "record");
            cuda_ok(cudaEventSynchronize(e1), "sync");
            float t = 0;
            cuda_ok(cudaEventElapsedTime(&t, e0, e1), "elapsed");
            ms[key].push_back(t);
          }
          // FLA's method (bench/fla/bench_fla_conv.py: events_time): event pairs around calls queued
          // back to back, one sync at the end; the host's launch time hides behind the previous call.
          std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(iters));
          for (cudaEvent_t& e : ev) cuda_ok(cudaEventCreate(&e), "event");
          for (int i = 0; i < iters; ++i) {
            cuda_ok(cudaEventRecord(ev[2 * i], st), "record");
            call(d, v, st);
            cuda_ok(cudaEventRecord(ev[2 * i + 1], st), "record");
          }
          cuda_ok(cudaStreamSynchronize(st), "sync");
          for (int i = 0; i < iters; ++i) {
            float t = 0;
            cuda_ok(cudaEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]), "elapsed");
            queued[key].push_back(t);
          }
          for (cudaEvent_t& e : ev) cudaEventDestroy(e);
          if (verify && r == 0 && v != "memcpy") {  // "default" first in --variants: the reference
            if (v == "default") {
              download(d, ref);
            } else if (!ref.empty()) {
              download(d, cur);
              equal[key] = cur == ref ? "true" : "false";
            }
          }
        } catch (const std::exception& ex) {
          std::string m = ex.what();
          std::replace(m.begin(), m.end(), '"', '\'');
          error[key] = m;
        }
      }
    }
  }
  unsetenv("LINATTN_CONV_CUDA_FWD");
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape s = shapes[si];
    const double bytes = 2.0 * static_cast<double>(s.T * s.D) * 2.0;
    double copy_p50 = 0;
    if (ms.count({si, "memcpy"})) {
      std::vector<float> c = ms[{si, "memcpy"}];
      std::sort(c.begin(), c.end());
      copy_p50 = c[c.size() / 2];
    }
    for (const std::string& v : variants) {
      const auto key = std::make_pair(si, v);
      std::printf("{\"kind\":\"case\",\"tool\":\"conv-ab\",\"op\":\"conv\",\"pass\":\"fwd\",\"backend\":\"cuda\","
                  "\"dtype\":\"bf16\",\"d\":%lld,\"w\":4,\"lengths\":[%lld],\"bias\":true,\"act\":\"silu\",\"variant\":\"%s\"",
                  static_cast<long long>(s.D), static_cast<long long>(s.T), v.c_str());
      if (error.count(key)) {
        std::printf(",\"error\":\"%s\"}\n", error[key].c_str());
        continue;
      }
      std::vector<float> t = ms[key];
      std::sort(t.begin(), t.end());
      const double p50 = t[t.size() / 2], p95 = t[std::min(t.size() - 1, t.size() * 95 / 100)];
      std::printf(",\"n\":%zu,\"p50_ms\":%.6f,\"p95_ms\":%.6f,\"min_ms\":%.6f,\"gbps\":%.1f", t.size(), p50, p95,
                  static_cast<double>(t.front()), bytes / (p50 * 1e-3) * 1e-9);
      if (copy_p50 > 0) std::printf(",\"pct_of_memcpy\":%.2f", 100.0 * copy_p50 / p50);
      std::vector<float> q = queued[key];
      std::sort(q.begin(), q.end());
      if (!q.empty()) std::printf(",\"p50_ms_queued\":%.6f", static_cast<double>(q[q.size() / 2]));
      const auto f = fla.find(std::to_string(s.D) + "x" + std::to_string(s.T));
      if (f != fla.end() && f->second > 0) {
        std::printf(",\"fla_ms\":%.4f,\"fla_over_ours\":%.4f", f->second, f->second / p50);
        if (!q.empty()) std::printf(",\"fla_over_ours_queued\":%.4f", f->second / q[q.size() / 2]);
      }
      if (equal.count(key)) std::printf(",\"bitwise_equal_default\":%s", equal[key].c_str());
      std::printf("}\n");
    }
  }
  std::fflush(stdout);
  cudaEventDestroy(e0), cudaEventDestroy(e1), cudaStreamDestroy(st);
  return error.empty() ? 0 : 1;
}
#else
int cmd_conv_ab(const Args&) {
  std::fprintf(stderr, "conv-ab: built without CUDA\n");
  return 1;
}
#endif

}  // namespace

LINATTN_SUBCOMMAND("conv-ab", "CUDA conv forward variants (LINATTN_CONV_CUDA_FWD) and memcpy, same-process A/B",
                   cmd_conv_ab);

}  // namespace linattn::cli
