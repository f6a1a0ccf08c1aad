// `linattn bench`: times one op configuration on one backend and mode, printing ms, tokens/s,
// GFLOP/s, the fraction of the measured FMA peak and the ratio to the token-by-token fp32 path
// (same run), or with --json the PERFORMANCE.md section 6 lines (environment line first).
//   linattn bench --op gdn|kda|conv --pass fwd|bwd|fwdbwd --backend cpu|cuda
//     --mode eager-live|eager-fixed|graph-replay|graph-update-replay --hqk 16 --hv 16 --k 128
//     --v 128 --lengths 4096[,...] --dtype fp32|bf16|fp16 [--threads N] [--json]
// Extra: --bt 64, --min-time 1.0 (s per timed path), --iters 5 (minimum), --check
// auto|ref|baseline|off, --no-baseline; conv: --channels D --width W. Lengths accept "4096x8".
// All modes in one run, buckets, sweeps, CSV, layers (bench_modes.h, bench_sweep.cc): --mode all,
// --capacity T_max[,N_max], --sweep length|utilization [--sweep-values ..], --csv,
// --op gdn_layer|kda_layer [--hidden H]; on CUDA --energy-s S adds NVML energy per call (each
// mode run alone for S seconds; 1 s keeps the counter's step error to a few percent). --cases FILE runs every line of a case file
// (bench/cases/*.txt: one case's flags per line, # comments) after one environment line.
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "bench.h"
#include "bench_modes.h"
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

bench::BenchArgs parse_args(const Args& args) {
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
  a.energy_s = std::stod(flag(args, "energy-s", "0"));
  LINATTN_CHECK(a.energy_s >= 0, "--energy-s: expected >= 0 seconds, got ", a.energy_s);
  a.check = flag(args, "check", a.check);
  a.baseline = !has_flag(args, "no-baseline");
  a.channels = std::stoll(flag(args, "channels", "6144"));
  a.width = std::stoll(flag(args, "width", "4"));
  a.extra = args;
  expect_one_of("pass", a.pass, {"fwd", "bwd", "fwdbwd"});
  expect_one_of("backend", a.backend, {"cpu", "cuda"});
  expect_one_of("mode", a.mode, {"eager-live", "eager-fixed", "graph-replay", "graph-update-replay", "all"});
  expect_one_of("dtype", a.dtype, {"fp32", "bf16", "fp16"});
  expect_one_of("check", a.check, {"auto", "ref", "baseline", "off"});
  a.dt = a.dtype == "fp32" ? DType::kF32 : a.dtype == "bf16" ? DType::kBF16 : DType::kF16;
  LINATTN_CHECK(a.threads >= 0, "--threads: expected >= 0, got ", a.threads);
  if (a.threads > 0) setenv("LINATTN_NUM_THREADS", std::to_string(a.threads).c_str(), 1);
  return a;
}

int dispatch(const bench::BenchArgs& a, const bench::Machine& m) {
  // Every mode at once, buckets, sweeps, CSV and the layers: the all-modes runner (bench_modes.h).
  if (a.mode == "all" || a.op == "gdn_layer" || a.op == "kda_layer" || !flag(a.extra, "sweep", "").empty() ||
      !flag(a.extra, "capacity", "").empty() || has_flag(a.extra, "csv"))
    return bench::run_modes(a, m);
  const bench::BenchFn fn = bench::find_bench_op(a.op);
  if (fn == nullptr) {
    std::string ops;
    for (const auto& o : bench::bench_ops()) {
      if (!ops.empty()) ops += "|";
      ops += o;
    }
    LINATTN_CHECK(false, "--op: expected one of ", ops, "|gdn_layer|kda_layer, got '", a.op, "'");
  }
  return fn(a, m);
}

int cmd_bench(const Args& args) {
  const bench::BenchArgs a = parse_args(args);
  const std::string cases = flag(args, "cases", "");
  const int threads = a.threads > 0 ? a.threads : ThreadPool::global().num_threads();
  const bench::Machine m = bench::measure_machine(threads);
  if (a.json) std::printf("%s\n", bench::env_json(m).c_str());
  else if (has_flag(args, "csv")) {
    std::printf("# %s\n", bench::env_json(m).c_str());
    bench::print_csv_header();
  } else
    std::printf("# %s, FMA peak %.1f GFLOP/s (one core by CPU time: %.1f), copy %.1f GB/s\n", m.device.c_str(),
                m.peak_gflops, m.core_peak_gflops, m.copy_gbps);
  std::fflush(stdout);
  if (cases.empty()) return dispatch(a, m);
  // A case file: each line's flags first (they win), then the command line's.
  const std::vector<Args> lines = bench::read_case_file(cases);
  int rc = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    Args merged = lines[i];
    merged.insert(merged.end(), args.begin(), args.end());
    std::string text;
    for (const auto& s : lines[i]) text += " " + s;
    std::fprintf(stderr, "== case %zu/%zu:%s\n", i + 1, lines.size(), text.c_str());
    try {
      rc |= dispatch(parse_args(merged), m);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "case %zu failed: %s\n", i + 1, e.what());
      rc = 1;
    }
  }
  return rc;
}

}  // namespace
LINATTN_SUBCOMMAND("bench", "time one op configuration (see tools/cmd_bench.cc for the flags)", cmd_bench);
}  // namespace linattn::cli
