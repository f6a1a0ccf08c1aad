// `linattn bench` shared pieces (see bench.h): timing, machine measurements, JSON lines, registry.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "bench.h"

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

// One thread's FMA throughput: 12 independent accumulator chains (enough to cover the FMA
// latency x pipes of current cores), `reps` x 12 vector FMAs. Returns FLOPs done.
double fma_loop(int64_t reps, float* sink) {
#if defined(__AVX512F__)
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t r = 0; r < reps; ++r)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  *sink += _mm512_reduce_add_ps(s);
  return static_cast<double>(reps) * 12 * 16 * 2;
#elif defined(__AVX2__) && defined(__FMA__)
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t r = 0; r < reps; ++r)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  float buf[8];
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  _mm256_storeu_ps(buf, s);
  for (float x : buf) *sink += x;
  return static_cast<double>(reps) * 12 * 8 * 2;
#else
  float acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = static_cast<float>(i) * 1e-3f;
  for (int64_t r = 0; r < reps; ++r)
    for (int i = 0; i < 12; ++i) acc[i] = std::fma(acc[i], 0.999999f, 1e-7f);
  for (float x : acc) *sink += x;
  return static_cast<double>(reps) * 12 * 2;
#endif
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

std::string shell_line(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  char buf[256] = {0};
  std::string out = fgets(buf, sizeof(buf), p) ? std::string(buf) : std::string();
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
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

TimeStats time_calls(const std::function<void()>& fn, int min_iters, double min_time_s) {
  fn();  // warm-up: scratch, caches, page faults
  std::vector<double> ms;
  const Clock::time_point start = Clock::now();
  while (static_cast<int>(ms.size()) < min_iters || (seconds_since(start) < min_time_s && ms.size() < 1000)) {
    const Clock::time_point t0 = Clock::now();
    fn();
    ms.push_back(seconds_since(t0) * 1e3);
  }
  TimeStats s;
  s.iters = static_cast<int>(ms.size());
  for (double x : ms) s.mean_ms += x / static_cast<double>(ms.size());
  std::sort(ms.begin(), ms.end());
  s.p50_ms = ms[ms.size() / 2];
  s.p95_ms = ms[std::min(ms.size() - 1, static_cast<size_t>(std::ceil(0.95 * static_cast<double>(ms.size()))) - 1)];
  return s;
}

Machine measure_machine(int threads) {
  Machine m;
  m.threads = std::max(1, threads);
  std::ostringstream dev;
  dev << "cpu: " << cpu_model() << " (" << m.threads << " threads, " << isa_name() << ")";
  m.device = dev.str();
  // FMA peak: every thread runs the loop ~0.2 s; best of 3 rounds.
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> ts;
    std::vector<double> flops(m.threads, 0.0);
    std::vector<float> sink(m.threads * 16, 0.0f);
    const Clock::time_point t0 = Clock::now();
    for (int t = 0; t < m.threads; ++t)
      ts.emplace_back([&, t] { flops[t] = fma_loop(4'000'000, &sink[t * 16]); });
    for (auto& t : ts) t.join();
    const double secs = seconds_since(t0);
    double total = 0;
    for (double f : flops) total += f;
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

std::string env_json(const Machine& m) {
  std::string commit = shell_line("git -C " LINATTN_SOURCE_DIR " rev-parse --short=12 HEAD 2>/dev/null");
  if (commit.empty()) commit = "unknown";
  else if (!shell_line("git -C " LINATTN_SOURCE_DIR " status --porcelain --untracked-files=no 2>/dev/null").empty())
    commit += "+dirty";
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return Json()
      .add("kind", "env")
      .add("device", m.device)
      .add("commit", commit)
      .add("date", date)
      .add("threads", m.threads)
      .add("peak_tflops", m.peak_gflops * 1e-3)
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
