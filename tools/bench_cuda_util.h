// Host helpers shared by the CUDA-only benchmarks (`linattn bench-cuda`, `bench-cuda-bwd`):
// a checked CUDA call that throws, the lengths syntax of those tools ("1xT" one sequence of T,
// "LxN" N sequences of L, "a,b,c"), JSON numbers (NaN -> null), CUDA-event timing of a callable
// on a stream (p50 / p95 of per-call event times, then host-inclusive ms of back-to-back calls
// with one synchronization), and device -> host copies of bf16 / fp32 tensors as doubles.
#pragma once
#if LINATTN_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/half.h"
#include "linattn/tensor.h"

#define LINATTN_BENCH_CUDA(call)                                                                       \
  do {                                                                                                 \
    cudaError_t e_ = (call);                                                                           \
    if (e_ != cudaSuccess) throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(e_)); \
  } while (0)

namespace linattn::cli::cuda_bench {

inline std::vector<int64_t> parse_lengths(const std::string& s) {
  std::vector<int64_t> r;
  const auto x = s.find('x');
  if (x != std::string::npos) {
    const int64_t a = std::stoll(s.substr(0, x)), b = std::stoll(s.substr(x + 1));
    if (a == 1) r.push_back(b);
    else r.assign(static_cast<size_t>(b), a);
    return r;
  }
  std::stringstream ss(s);
  for (std::string tok; std::getline(ss, tok, ',');) r.push_back(std::stoll(tok));
  return r;
}

inline std::string json_num(double x) {  // JSON has no NaN: unmeasured values are null
  if (std::isnan(x)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

struct Stats {
  double p50 = 0, p95 = 0, host = 0;
};

template <class F>
Stats time_events(F&& fn, cudaStream_t st, int iters, int warmup) {
  for (int i = 0; i < warmup; ++i) fn();
  LINATTN_BENCH_CUDA(cudaStreamSynchronize(st));
  std::vector<cudaEvent_t> ev(2 * iters);
  for (auto& e : ev) LINATTN_BENCH_CUDA(cudaEventCreate(&e));
  for (int i = 0; i < iters; ++i) {
    LINATTN_BENCH_CUDA(cudaEventRecord(ev[2 * i], st));
    fn();
    LINATTN_BENCH_CUDA(cudaEventRecord(ev[2 * i + 1], st));
  }
  LINATTN_BENCH_CUDA(cudaStreamSynchronize(st));
  std::vector<double> ms(iters);
  for (int i = 0; i < iters; ++i) {
    float m = 0;
    LINATTN_BENCH_CUDA(cudaEventElapsedTime(&m, ev[2 * i], ev[2 * i + 1]));
    ms[i] = m;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  Stats s;
  s.p50 = ms[iters / 2];
  s.p95 = ms[std::min(iters - 1, iters * 95 / 100)];
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) fn();
  LINATTN_BENCH_CUDA(cudaStreamSynchronize(st));
  s.host = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / iters;
  return s;
}

// A bf16 or fp32 device tensor's values on the host.
inline std::vector<double> host_values(const TensorView& t) {
  const int64_t n = t.numel();
  std::vector<double> r(static_cast<size_t>(n));
  if (t.dtype == DType::kBF16) {
    std::vector<uint16_t> raw(static_cast<size_t>(n));
    LINATTN_BENCH_CUDA(cudaMemcpy(raw.data(), t.data, n * 2, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < n; ++i) r[i] = bf16_bits_to_float(raw[i]);
  } else {
    std::vector<float> raw(static_cast<size_t>(n));
    LINATTN_BENCH_CUDA(cudaMemcpy(raw.data(), t.data, n * 4, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < n; ++i) r[i] = raw[i];
  }
  return r;
}

}  // namespace linattn::cli::cuda_bench
#endif
