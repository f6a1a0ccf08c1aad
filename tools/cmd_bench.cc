// `linattn bench`: times one op configuration on one backend and mode, printing ms, tokens/s,
// GFLOP/s, the fraction of the measured FMA peak and the ratio to the token-by-token fp32 path
// (same run), or with --json the PERFORMANCE.md section 6 lines (environment line first).
//   linattn bench --op gdn|kda|conv --pass fwd|bwd|fwdbwd --backend cpu|cuda
//     --mode eager-live|eager-fixed|graph-replay|graph-update-replay --hqk 16 --hv 16 --k 128
//     --v 128 --lengths 4096[,...] --dtype fp32|bf16|fp16 [--threads N] [--json]
// Extra: --bt 64, --min-time 1.0 (s per timed path), --iters 5 (minimum), --check
// auto|ref|baseline|off, --no-baseline; conv: --channels D --width W. Lengths accept "4096x8".
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "bench.h"
#include "cli.h"
#include "core/check.h"
#include "core/thread_pool.h"

namespace linattn::cli {
namespace {

std::vector<int64_t> parse_lengths(const std::string& s) {
  std::vector<int64_t> r;
  const size_t x = s.find('x');
  if (x != std::string::npos) {
    const int64_t len = std::stoll(s.substr(0, x)), count = std::stoll(s.substr(x + 1));
    LINATTN_CHECK(len >= 0 && count > 0, "--lengths: expected LEN x COUNT with COUNT > 0, got ", s);
    r.assign(static_cast<size_t>(count), len);
    return r;
  }
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string tok = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    LINATTN_CHECK(!tok.empty(), "--lengths: expected comma-separated token counts, got '", s, "'");
    r.push_back(std::stoll(tok));
    LINATTN_CHECK(r.back() >= 0, "--lengths: expected non-negative lengths, got ", r.back());
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return r;
}

void expect_one_of(const std::string& flag_name, const std::string& v, std::set<std::string> allowed) {
  std::string list;
  for (const auto& a : allowed) {
    if (!list.empty()) list += "|";
    list += a;
  }
  LINATTN_CHECK(allowed.count(v) > 0, "--", flag_name, ": expected one of ", list, ", got '", v, "'");
}

int cmd_bench(const Args& args) {
  bench::BenchArgs a;
  a.op = flag(args, "op", a.op);
  a.pass = flag(args, "pass", a.pass);
  a.backend = flag(args, "backend", a.backend);
  a.mode = flag(args, "mode", a.mode);
  a.hqk = std::stoll(flag(args, "hqk", "16"));
  a.hv = std::stoll(flag(args, "hv", "16"));
  a.k = std::stoll(flag(args, "k", "128"));
  a.v = std::stoll(flag(args, "v", "128"));
  a.lengths = parse_lengths(flag(args, "lengths", "4096"));
  a.dtype = flag(args, "dtype", a.dtype);
  a.threads = std::stoi(flag(args, "threads", "0"));
  a.json = has_flag(args, "json");
  a.bt = std::stoi(flag(args, "bt", "64"));
  a.min_time_s = std::stod(flag(args, "min-time", "1.0"));
  a.min_iters = std::stoi(flag(args, "iters", "5"));
  a.check = flag(args, "check", a.check);
  a.baseline = !has_flag(args, "no-baseline");
  a.channels = std::stoll(flag(args, "channels", "6144"));
  a.width = std::stoll(flag(args, "width", "4"));
  a.extra = args;
  expect_one_of("pass", a.pass, {"fwd", "bwd", "fwdbwd"});
  expect_one_of("backend", a.backend, {"cpu", "cuda"});
  expect_one_of("mode", a.mode, {"eager-live", "eager-fixed", "graph-replay", "graph-update-replay"});
  expect_one_of("dtype", a.dtype, {"fp32", "bf16", "fp16"});
  expect_one_of("check", a.check, {"auto", "ref", "baseline", "off"});
  a.dt = a.dtype == "fp32" ? DType::kF32 : a.dtype == "bf16" ? DType::kBF16 : DType::kF16;
  LINATTN_CHECK(a.threads >= 0, "--threads: expected >= 0, got ", a.threads);
  if (a.threads > 0) setenv("LINATTN_NUM_THREADS", std::to_string(a.threads).c_str(), 1);
  const bench::BenchFn fn = bench::find_bench_op(a.op);
  if (fn == nullptr) {
    std::string ops;
    for (const auto& o : bench::bench_ops()) {
      if (!ops.empty()) ops += "|";
      ops += o;
    }
    LINATTN_CHECK(false, "--op: expected one of ", ops, ", got '", a.op, "'");
  }
  const int threads = a.threads > 0 ? a.threads : ThreadPool::global().num_threads();
  const bench::Machine m = bench::measure_machine(threads);
  if (a.json) std::printf("%s\n", bench::env_json(m).c_str());
  else
    std::printf("# %s, FMA peak %.1f GFLOP/s (one core by CPU time: %.1f), copy %.1f GB/s\n", m.device.c_str(),
                m.peak_gflops, m.core_peak_gflops, m.copy_gbps);
  std::fflush(stdout);
  return fn(a, m);
}

}  // namespace
LINATTN_SUBCOMMAND("bench", "time one op configuration (see tools/cmd_bench.cc for the flags)", cmd_bench);
}  // namespace linattn::cli
