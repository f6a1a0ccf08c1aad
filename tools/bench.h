// `linattn bench` infrastructure shared by the per-op benchmark files (tools/bench_<op>.cc):
// the parsed arguments (the interface of issue 4, kept from now on), the machine measurements
// (FMA peak, copy bandwidth), robust timing (p50 / p95 over repeated calls), the JSON lines of
// PERFORMANCE.md section 6, and a registry: each op file registers itself with
// LINATTN_BENCH_OP("conv", run_conv) and cmd_bench.cc dispatches on --op.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "linattn/tensor.h"

namespace linattn::bench {

struct BenchArgs {
  std::string op = "gdn";             // gdn | kda | conv | ... (registered ops)
  std::string pass = "fwd";           // fwd | bwd | fwdbwd
  std::string backend = "cpu";        // cpu | cuda
  std::string mode = "eager-live";    // eager-live | eager-fixed | graph-replay | graph-update-replay
  int64_t hqk = 16, hv = 16, k = 128, v = 128;
  std::vector<int64_t> lengths{4096};
  std::string dtype = "fp32";         // fp32 | bf16 | fp16
  DType dt = DType::kF32;
  int threads = 0;                    // 0 = the library pool
  bool json = false;
  int bt = 64;
  double min_time_s = 1.0;            // per timed path
  int min_iters = 5;
  double energy_s = 0;                // CUDA, --mode all: NVML energy run of each mode (s; 0 = off)
  std::string check = "auto";         // auto | ref | baseline | off
  bool baseline = true;               // also time the token-by-token fp32 path
  int64_t channels = 6144;            // conv: D
  int64_t width = 4;                  // conv: W
  std::vector<std::string> extra;     // unparsed flags, for op-specific options
};

struct Machine {
  std::string device;      // "cpu: <model> (N threads, avx512)"
  int threads = 1;
  double peak_gflops = 0;  // measured fp32 FMA peak on `threads` threads (wall time)
  double core_peak_gflops = 0;  // one core's FMA peak by its thread CPU time (load-independent)
  double copy_gbps = 0;    // measured memcpy read + write bandwidth (one thread)
  std::string gpu;         // "NVIDIA H200, driver 13.0, 132 SMs, ..." when a CUDA device is present
};

struct TimeStats {
  double p50_ms = 0, p95_ms = 0, mean_ms = 0;
  // Process CPU time per call (all threads), median. On a machine shared with other jobs the
  // wall time stretches with preemption; cpu_ms / threads estimates the unloaded wall time of a
  // balanced parallel call (idle pool threads block and use no CPU).
  double cpu_ms = 0;
  // CUDA: the call's span on the GPU from CUDA events (p50 / p95), -1 when not measured (CPU).
  double device_p50_ms = -1, device_p95_ms = -1;
  double energy_mj = -1;  // CUDA: NVML energy per call (a separate run of the mode), -1 if unknown
  int iters = 0;
};

// Calls fn() once to warm up, then at least min_iters times and for at least min_time_s.
TimeStats time_calls(const std::function<void()>& fn, int min_iters, double min_time_s);
// Several functions timed in interleaved rounds (f0 f1 .. f0 f1 ..) so that a load change on a
// shared machine hits all alike: each warmed up once, then >= min_iters rounds and >= min_time_s
// per function. Wall time covers fn + sync; with a CUDA stream, CUDA events around fn give the
// device span (device_p50_ms / device_p95_ms).
std::vector<TimeStats> time_interleaved(const std::vector<std::function<void()>>& fns, const std::function<void()>& sync,
                                        void* cuda_stream, int min_iters, double min_time_s);

Machine measure_machine(int threads);
std::string env_json(const Machine& m);  // {"kind":"env",...,"commit":...,"date":...}
// The commit of the source tree this binary was built from (.commit of a copied tree, else its
// own git, +dirty when modified; "unknown"), and the first line a shell command prints.
std::string source_commit();
std::string shell_line(const std::string& cmd);

// A JSON object built field by field: Json().add("op","gdn").add("p50_ms",1.2).str().
class Json {
 public:
  Json& add(const std::string& key, const std::string& value);
  Json& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  Json& add(const std::string& key, double value);
  Json& add(const std::string& key, int64_t value);
  Json& add(const std::string& key, int value) { return add(key, static_cast<int64_t>(value)); }
  Json& add(const std::string& key, bool value);
  Json& add_raw(const std::string& key, const std::string& raw);  // already-JSON value
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(const std::string& k);
  std::string body_;
};

std::string lengths_json(const std::vector<int64_t>& lengths);  // [4096,4096] or "4096x8"

using BenchFn = int (*)(const BenchArgs&, const Machine&);
struct BenchOpRegistrar {
  BenchOpRegistrar(const char* op, BenchFn fn);
};
BenchFn find_bench_op(const std::string& op);
std::vector<std::string> bench_ops();

}  // namespace linattn::bench

#define LINATTN_BENCH_CAT2(a, b) a##b
#define LINATTN_BENCH_CAT(a, b) LINATTN_BENCH_CAT2(a, b)
#define LINATTN_BENCH_OP(name, fn) \
  static ::linattn::bench::BenchOpRegistrar LINATTN_BENCH_CAT(linattn_bench_op_, __COUNTER__)(name, fn)
