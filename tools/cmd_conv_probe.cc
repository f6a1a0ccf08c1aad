// `linattn conv-probe`: what cudaMemcpy D2D does that SM copy kernels do not (perf-notes "Version 10").
// Times the probe methods of src/cuda/conv/conv_probe.h (cudaMemcpy / memset, read-only, write-only,
// grid-stride copies with other shapes of access, block-level and grid-wide read / write phases) at each
// size, interleaved: per round, per size, per method 2 warm-up calls, --iters calls each timed by its own
// event pair with a sync (p50_ms), then --iters calls queued back to back (p50_ms_queued); p50 over every
// round. TB/s = bytes through DRAM (copies: read + written) / p50. One JSON line per (size, method).
//   linattn conv-probe [--mib 1024,256] [--methods memcpy,stride_v4_u4,...] [--rounds 3] [--iters 10]
//                      [--engine] [--range] [--calls N]
// --engine: also the engine test (does a D2D memcpy finish while spinning kernels hold every SM?).
// --range: no timing; each method's calls (--calls, default 1) between cudaProfilerStart / Stop, for
// `ncu --replay-mode app-range` (a memcpy done by a copy engine is no kernel: kernel replay never sees it).
// Buffers: x filled with cudaMemset (the bytes' values do not matter to a copy).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "cli.h"
#include "core/check.h"

#if LINATTN_WITH_CUDA
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include "cuda/conv/conv_probe.h"
#endif

namespace linattn::cli {
namespace {

#if LINATTN_WITH_CUDA
std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> r;
  size_t a = 0;
  while (a <= s.size()) {
    size_t b = s.find(',', a);
    if (b == std::string::npos) b = s.size();
    if (b > a) r.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return r;
}

void ok(cudaError_t e, const char* what) {
  LINATTN_CHECK(e == cudaSuccess, "conv-probe: ", what, ": ", cudaGetErrorString(e));
}

int cmd_conv_probe(const Args& args) {
  std::vector<size_t> mibs;
  for (const std::string& m : split_list(flag(args, "mib", "1024,256"))) mibs.push_back(std::stoull(m));
  std::vector<std::string> methods = split_list(flag(args, "methods", ""));
  if (methods.empty()) methods = cuda::conv::probe_methods();
  const int rounds = std::max(1, std::atoi(flag(args, "rounds", "3").c_str()));
  const int iters = std::max(1, std::atoi(flag(args, "iters", "10").c_str()));
  const int calls = std::max(1, std::atoi(flag(args, "calls", "1").c_str()));
  const bool engine = has_flag(args, "engine"), range = has_flag(args, "range");
  const size_t max_mib = *std::max_element(mibs.begin(), mibs.end());
  void *x = nullptr, *y = nullptr;
  ok(cudaMalloc(&x, max_mib << 20), "malloc x");
  ok(cudaMalloc(&y, max_mib << 20), "malloc y");
  ok(cudaMemset(x, 1, max_mib << 20), "memset x");
  ok(cudaMemset(y, 2, max_mib << 20), "memset y");
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("{\"kind\":\"env\",\"tool\":\"conv-probe\",\"device\":\"%s\",\"sms\":%d,\"l2_bytes\":%d,"
              "\"mem_bus_bits\":%d,\"rounds\":%d,\"iters\":%d,\"range\":%s}\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize, prop.memoryBusWidth, rounds, iters,
              range ? "true" : "false");
  for (const std::string& m : methods)
    std::printf("{\"kind\":\"config\",\"method\":\"%s\",\"mib\":%zu,\"launch\":\"%s\"}\n", m.c_str(), mibs[0],
                cuda::conv::probe_config(m, mibs[0] << 20).c_str());
  std::fflush(stdout);
  cudaStream_t st;
  ok(cudaStreamCreate(&st), "stream");
  if (range) {  // ncu --replay-mode app-range: one range per method (and size)
    for (size_t mib : mibs)
      for (const std::string& m : methods) {
        cuda::conv::probe_run(m, x, y, mib << 20, st);  // warm-up outside the range
        ok(cudaStreamSynchronize(st), "sync");
        ok(cudaProfilerStart(), "profiler start");
        for (int i = 0; i < calls; ++i) cuda::conv::probe_run(m, x, y, mib << 20, st);
        ok(cudaStreamSynchronize(st), "sync");
        ok(cudaProfilerStop(), "profiler stop");
        std::printf("{\"kind\":\"range\",\"method\":\"%s\",\"mib\":%zu,\"calls\":%d}\n", m.c_str(), mib, calls);
      }
    return 0;
  }
  cudaEvent_t e0, e1;
  ok(cudaEventCreate(&e0), "event"), ok(cudaEventCreate(&e1), "event");
  std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(iters));
  for (cudaEvent_t& e : ev) ok(cudaEventCreate(&e), "event");
  std::map<std::pair<size_t, std::string>, std::vector<float>> ms, queued;
  std::map<std::pair<size_t, std::string>, double> moved;
  std::map<std::pair<size_t, std::string>, std::string> error;
  for (int r = 0; r < rounds; ++r)
    for (size_t mib : mibs)
      for (const std::string& m : methods) {
        const auto key = std::make_pair(mib, m);
        if (error.count(key)) continue;
        const size_t bytes = mib << 20;
        try {
          for (int i = 0; i < 2; ++i) moved[key] = cuda::conv::probe_run(m, x, y, bytes, st);
          ok(cudaStreamSynchronize(st), "warm-up");
          for (int i = 0; i < iters; ++i) {
            ok(cudaEventRecord(e0, st), "record");
            cuda::conv::probe_run(m, x, y, bytes, st);
            ok(cudaEventRecord(e1, st), "record");
            ok(cudaEventSynchronize(e1), "sync");
            float t = 0;
            ok(cudaEventElapsedTime(&t, e0, e1), "elapsed");
            ms[key].push_back(t);
          }
          for (int i = 0; i < iters; ++i) {
            ok(cudaEventRecord(ev[2 * i], st), "record");
            cuda::conv::probe_run(m, x, y, bytes, st);
            ok(cudaEventRecord(ev[2 * i + 1], st), "record");
          }
          ok(cudaStreamSynchronize(st), "sync");
          for (int i = 0; i < iters; ++i) {
            float t = 0;
            ok(cudaEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]), "elapsed");
            queued[key].push_back(t);
          }
        } catch (const std::exception& ex) {
          std::string s = ex.what();
          std::replace(s.begin(), s.end(), '"', '\'');
          error[key] = s;
          cudaGetLastError();
        }
      }
  for (size_t mib : mibs)
    for (const std::string& m : methods) {
      const auto key = std::make_pair(mib, m);
      std::printf("{\"kind\":\"probe\",\"tool\":\"conv-probe\",\"method\":\"%s\",\"mib\":%zu", m.c_str(), mib);
      if (error.count(key)) {
        std::printf(",\"error\":\"%s\"}\n", error[key].c_str());
        continue;
      }
      std::vector<float> t = ms[key], q = queued[key];
      std::sort(t.begin(), t.end()), std::sort(q.begin(), q.end());
      const double p50 = t[t.size() / 2], q50 = q[q.size() / 2];
      std::printf(",\"n\":%zu,\"p50_ms\":%.6f,\"min_ms\":%.6f,\"p50_ms_queued\":%.6f", t.size(), p50,
                  static_cast<double>(t.front()), q50);
      if (moved[key] > 0) std::printf(",\"tbps_queued\":%.4f", moved[key] / (q50 * 1e-3) * 1e-12);
      std::printf("}\n");
    }
  std::fflush(stdout);
  if (engine) {
    const cuda::conv::ProbeEngine r = cuda::conv::probe_memcpy_engine(x, y, mibs[0] << 20);
    std::printf("{\"kind\":\"engine\",\"tool\":\"conv-probe\",\"mib\":%zu,\"spin_blocks\":%d,\"spin_started\":%d,"
                "\"memcpy_done_while_sms_full\":%s,\"memcpy_ms_while_spinning\":%.4f,\"memcpy_ms_solo\":%.4f}\n",
                mibs[0], r.spin_blocks, r.spin_started, r.memcpy_done_while_full ? "true" : "false", r.memcpy_ms,
                r.solo_ms);
  }
  for (cudaEvent_t& e : ev) cudaEventDestroy(e);
  cudaEventDestroy(e0), cudaEventDestroy(e1), cudaStreamDestroy(st), cudaFree(x), cudaFree(y);
  return error.empty() ? 0 : 1;
}
#else
int cmd_conv_probe(const Args&) {
  std::fprintf(stderr, "conv-probe: built without CUDA\n");
  return 1;
}
#endif

}  // namespace

LINATTN_SUBCOMMAND("conv-probe", "copy-bandwidth probe: cudaMemcpy vs SM copy kernels of other access shapes",
                   cmd_conv_probe);

}  // namespace linattn::cli
