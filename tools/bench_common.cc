// `linattn bench` shared pieces (see bench.h): timing, machine measurements, JSON lines, registry.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <time.h>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "bench.h"
#include "bench_meter.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace linattn::bench {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::map<std::string, BenchFn>& registry() {
  static std::map<std::string, BenchFn> r;
  return r;
}

// One thread's FMA throughput: 12 independent accumulator chains held in named registers (an
// array would be spilled to memory by the compiler and measure store forwarding instead),
// enough to cover the FMA latency x pipes of current cores. Returns FLOPs done.
#if defined(__AVX512F__)
using PeakVec = __m512;
constexpr int kPeakLanes = 16;
inline PeakVec peak_set(float x) { return _mm512_set1_ps(x); }
inline PeakVec peak_fma(PeakVec a, PeakVec b, PeakVec c) { return _mm512_fmadd_ps(a, b, c); }
inline PeakVec peak_add(PeakVec a, PeakVec b) { return _mm512_add_ps(a, b); }
inline float peak_sum(PeakVec a) { return _mm512_reduce_add_ps(a); }
#elif defined(__AVX2__) && defined(__FMA__)
using PeakVec = __m256;
constexpr int kPeakLanes = 8;
inline PeakVec peak_set(float x) { return _mm256_set1_ps(x); }
inline PeakVec peak_fma(PeakVec a, PeakVec b, PeakVec c) { return _mm256_fmadd_ps(a, b, c); }
inline PeakVec peak_add(PeakVec a, PeakVec b) { return _mm256_add_ps(a, b); }
inline float peak_sum(PeakVec a) {
  float buf[8];
  _mm256_storeu_ps(buf, a);
  float s = 0;
  for (float x : buf) s += x;
  return s;
}
#else
using PeakVec = float;
constexpr int kPeakLanes = 1;
inline PeakVec peak_set(float x) { return x; }
inline PeakVec peak_fma(PeakVec a, PeakVec b, PeakVec c) { return std::fma(a, b, c); }
inline PeakVec peak_add(PeakVec a, PeakVec b) { return a + b; }
inline float peak_sum(PeakVec a) { return a; }
#endif

double fma_loop(int64_t reps, float* sink) {
  // Distinct starting values: identical chains would be merged into one by the compiler.
  PeakVec a0 = peak_set(0.10f), a1 = peak_set(0.11f), a2 = peak_set(0.12f), a3 = peak_set(0.13f),
          a4 = peak_set(0.14f), a5 = peak_set(0.15f), a6 = peak_set(0.16f), a7 = peak_set(0.17f),
          a8 = peak_set(0.18f), a9 = peak_set(0.19f), a10 = peak_set(0.20f), a11 = peak_set(0.21f);
  const PeakVec m = peak_set(0.999999f), c = peak_set(1e-7f);
  for (int64_t r = 0; r < reps; ++r) {
    a0 = peak_fma(a0, m, c); a1 = peak_fma(a1, m, c); a2 = peak_fma(a2, m, c); a3 = peak_fma(a3, m, c);
    a4 = peak_fma(a4, m, c); a5 = peak_fma(a5, m, c); a6 = peak_fma(a6, m, c); a7 = peak_fma(a7, m, c);
    a8 = peak_fma(a8, m, c); a9 = peak_fma(a9, m, c); a10 = peak_fma(a10, m, c); a11 = peak_fma(a11, m, c);
  }
  const PeakVec s = peak_add(peak_add(peak_add(peak_add(a0, a1), peak_add(a2, a3)), peak_add(peak_add(a4, a5), peak_add(a6, a7))),
                             peak_add(peak_add(a8, a9), peak_add(a10, a11)));
  *sink += peak_sum(s);
  return static_cast<double>(reps) * 12 * kPeakLanes * 2;
}

const char* isa_name() {
#if defined(__AVX512F__)
  return "avx512";
#elif defined(__AVX2__)
  return "avx2";
#else
  return "scalar";
#endif
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      return c == std::string::npos ? line : line.substr(c + 2);
    }
  return "unknown cpu";
}


std::string escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') { r += "\\n"; continue; }
    r += c;
  }
  return r;
}

}  // namespace

std::string shell_line(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  char buf[256] = {0};
  std::string out = fgets(buf, sizeof(buf), p) ? std::string(buf) : std::string();
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

double process_cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

namespace {
double seconds_since_ms(Clock::time_point t0) { return seconds_since(t0) * 1e3; }
// Median (upper middle for even counts) and 95th percentile of v (sorted in place).
double p50_of(std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double p95_of(std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(std::ceil(0.95 * static_cast<double>(v.size()))) - 1)];
}
}  // namespace

std::vector<TimeStats> time_interleaved(const std::vector<std::function<void()>>& fns, const std::function<void()>& sync,
                                        void* cuda_stream, int min_iters, double min_time_s) {
  const size_t k = fns.size();
  std::vector<std::vector<double>> wall(k), cpu(k), dev(k);
  EventTimer ev(cuda_stream);
  for (const auto& f : fns) {  // warm-up
    f();
    sync();
  }
  const Clock::time_point start = Clock::now();
  const double budget_ms = min_time_s * 1e3 * static_cast<double>(k);
  while (static_cast<int>(wall[0].size()) < min_iters || (seconds_since_ms(start) < budget_ms && wall[0].size() < 1000))
    for (size_t i = 0; i < k; ++i) {
      const double c0 = process_cpu_ms();
      const Clock::time_point t0 = Clock::now();
      ev.start();
      fns[i]();
      ev.stop();
      sync();
      wall[i].push_back(seconds_since_ms(t0));
      cpu[i].push_back(process_cpu_ms() - c0);
      if (ev.active()) dev[i].push_back(ev.read_ms());
    }
  std::vector<TimeStats> r(k);
  for (size_t i = 0; i < k; ++i) {
    for (double x : wall[i]) r[i].mean_ms += x / static_cast<double>(wall[i].size());
    r[i].iters = static_cast<int>(wall[i].size());
    r[i].p50_ms = p50_of(wall[i]);
    r[i].p95_ms = p95_of(wall[i]);
    r[i].cpu_ms = p50_of(cpu[i]);
    if (!dev[i].empty()) {
      r[i].device_p50_ms = p50_of(dev[i]);
      r[i].device_p95_ms = p95_of(dev[i]);
    }
  }
  return r;
}

TimeStats time_calls(const std::function<void()>& fn, int min_iters, double min_time_s) {
  return time_interleaved({fn}, [] {}, nullptr, min_iters, min_time_s)[0];
}

Machine measure_machine(int threads) {
  Machine m;
  m.threads = std::max(1, threads);
  std::ostringstream dev;
  dev << "cpu: " << cpu_model() << " (" << m.threads << " threads, " << isa_name() << ")";
  m.device = dev.str();
  m.gpu = gpu_description();
  // FMA peak: every thread runs the loop ~0.2 s; best of 3 rounds.
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> ts;
    std::vector<double> flops(m.threads, 0.0), cpu_s(m.threads, 0.0);
    std::vector<float> sink(m.threads * 16, 0.0f);
    const Clock::time_point t0 = Clock::now();
    for (int t = 0; t < m.threads; ++t)
      ts.emplace_back([&, t] {
        timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        flops[t] = fma_loop(20'000'000, &sink[t * 16]);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        cpu_s[t] = static_cast<double>(b.tv_sec - a.tv_sec) + static_cast<double>(b.tv_nsec - a.tv_nsec) * 1e-9;
      });
    for (auto& t : ts) t.join();
    const double secs = seconds_since(t0);
    double total = 0;
    for (int t = 0; t < m.threads; ++t) {
      total += flops[t];
      m.core_peak_gflops = std::max(m.core_peak_gflops, flops[t] / cpu_s[t] * 1e-9);
    }
    m.peak_gflops = std::max(m.peak_gflops, total / secs * 1e-9);
  }
  // Copy bandwidth: 64 MiB memcpy, best of 3 (bytes read + written).
  const size_t bytes = 64u << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  for (int round = 0; round < 3; ++round) {
    const Clock::time_point t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    const double secs = seconds_since(t0);
    m.copy_gbps = std::max(m.copy_gbps, 2.0 * static_cast<double>(bytes) / secs * 1e-9);
    std::swap(a, b);
  }
  return m;
}

std::string source_commit() {
  // A copy of the tree sent to another machine carries its commit in .commit (it may sit inside
  // an unrelated checkout whose git would answer); otherwise git, only if it is this tree's own.
  // Prebuilt binaries run elsewhere: their runner names the commit in LINATTN_COMMIT.
  if (const char* e = std::getenv("LINATTN_COMMIT"); e != nullptr && *e != '\0') return e;
  std::string commit = shell_line("cat " LINATTN_SOURCE_DIR "/.commit 2>/dev/null");
  const bool own_git = shell_line("git -C " LINATTN_SOURCE_DIR " rev-parse --show-toplevel 2>/dev/null") ==
                       shell_line("cd " LINATTN_SOURCE_DIR " && pwd -P");
  if (commit.empty() && own_git) commit = shell_line("git -C " LINATTN_SOURCE_DIR " rev-parse --short=12 HEAD 2>/dev/null");
  if (commit.empty()) return "unknown";
  if (own_git && !shell_line("git -C " LINATTN_SOURCE_DIR " status --porcelain --untracked-files=no 2>/dev/null").empty())
    commit += "+dirty";
  return commit;
}

std::string env_json(const Machine& m) {
  const std::string commit = source_commit();
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return Json()
      .add("kind", "env")
      .add("device", m.gpu.empty() ? m.device : m.gpu)
      .add("cpu", m.device)
      .add("commit", commit)
      .add("date", date)
      .add("threads", m.threads)
      .add("peak_tflops", m.peak_gflops * 1e-3)
      .add("core_peak_gflops_cpu_time", m.core_peak_gflops)
      .add("copy_tbps", m.copy_gbps * 1e-3)
      .str();
}

void Json::key(const std::string& k) {
  if (!body_.empty()) body_ += ",";
  body_ += '"';
  body_ += escape(k);
  body_ += "\":";
}
Json& Json::add(const std::string& k, const std::string& v) {
  key(k);
  body_ += '"';
  body_ += escape(v);
  body_ += '"';
  return *this;
}
Json& Json::add(const std::string& k, double v) {
  key(k);
  char buf[64];
  if (!std::isfinite(v)) std::snprintf(buf, sizeof(buf), "null");
  else std::snprintf(buf, sizeof(buf), "%.6g", v);
  body_ += buf;
  return *this;
}
Json& Json::add(const std::string& k, int64_t v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}
Json& Json::add(const std::string& k, bool v) {
  key(k);
  body_ += v ? "true" : "false";
  return *this;
}
Json& Json::add_raw(const std::string& k, const std::string& raw) {
  key(k);
  body_ += raw;
  return *this;
}

std::string lengths_json(const std::vector<int64_t>& lengths) {
  const bool same = !lengths.empty() && std::all_of(lengths.begin(), lengths.end(), [&](int64_t x) { return x == lengths[0]; });
  if (same && lengths.size() > 4) {
    std::string r = "\"";
    r += std::to_string(lengths[0]);
    r += 'x';
    r += std::to_string(lengths.size());
    r += '"';
    return r;
  }
  std::string r = "[";
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (i) r += ",";
    r += std::to_string(lengths[i]);
  }
  r += "]";
  return r;
}

BenchOpRegistrar::BenchOpRegistrar(const char* op, BenchFn fn) { registry()[op] = fn; }

BenchFn find_bench_op(const std::string& op) {
  auto it = registry().find(op);
  return it == registry().end() ? nullptr : it->second;
}

std::vector<std::string> bench_ops() {
  std::vector<std::string> r;
  for (auto& [k, v] : registry()) r.push_back(k);
  return r;
}

}  // namespace linattn::bench
