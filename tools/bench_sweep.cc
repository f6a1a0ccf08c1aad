// run_modes (bench_modes.h): one case in every mode, or a sweep.
//   --capacity T_max[,N_max]   the bucket (default: exactly the layout, 100% utilization)
//   --sweep length             every sequence of --lengths takes each length of --sweep-values
//                              (default 64,128,...,8192) in a bucket of exactly that size; the
//                              summary names the break-even length: the shortest from which on
//                              graph replay gains less than --break-even-gain (default 0.02) of the
//                              eager-live time (for graph-replay and for graph-update-replay).
//   --sweep utilization        a bucket of --capacity (default: the layout of --lengths) filled to
//                              each fraction of --sweep-values (default 0.1,...,1.0) by the number
//                              of sequences of --lengths, split evenly; the summary names the lowest
//                              utilization from which on graph-update-replay beats eager-live:
//                              below it, GraphBuckets should fall back to eager (min_utilization).
//   --csv / --json / default table; sweep lines carry "sweep" and "sweep_value"; a
//   {"kind":"summary",...} line ends a sweep. Progress goes to stderr.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "bench_modes.h"
#include "cli.h"
#include "core/check.h"

namespace linattn::bench {
namespace {

std::vector<double> parse_values(const std::string& s) {
  std::vector<double> r;
  std::stringstream ss(s);
  for (std::string tok; std::getline(ss, tok, ',');)
    if (!tok.empty()) r.push_back(std::stod(tok));
  return r;
}

std::string format_of(const BenchArgs& a) {
  return a.json ? "json" : cli::has_flag(a.extra, "csv") ? "csv" : "table";
}

// Gains of a graph mode over eager-live: by wall time (p50) and by process CPU time (cpu_ms: on a
// shared, loaded machine the wall time stretches with preemption, the CPU time does not).
double gain(const CaseResult& r, int mode, bool cpu) {
  const TimeStats &live = r.modes[0].t, &g = r.modes[mode].t;
  return cpu ? (live.cpu_ms - g.cpu_ms) / live.cpu_ms : (live.p50_ms - g.p50_ms) / live.p50_ms;
}

void progress(int i, int n, const std::string& what, const CaseResult& r) {
  std::fprintf(stderr, "%s[%d/%d] %s: eager-live %.3f ms (cpu %.3f); graph-replay %+.1f%% (cpu %+.1f%%), "
               "update+replay %+.1f%% (cpu %+.1f%%)%s",
               isatty(2) ? "\r" : "", i, n, what.c_str(), r.modes[0].t.p50_ms, r.modes[0].t.cpu_ms,
               100 * gain(r, 2, false), 100 * gain(r, 2, true), 100 * gain(r, 3, false), 100 * gain(r, 3, true),
               isatty(2) ? "   " : "\n");
  if (isatty(2) && i == n) std::fprintf(stderr, "\n");
}

// The capacity of --capacity T_max[,N_max], or the layout itself.
std::pair<int64_t, int64_t> capacity_of(const BenchArgs& a) {
  int64_t T = 0;
  for (int64_t l : a.lengths) T += l;
  int64_t N = static_cast<int64_t>(a.lengths.size());
  const std::string c = cli::flag(a.extra, "capacity", "");
  if (c.empty()) return {T, N};
  const size_t comma = c.find(',');
  const int64_t T_max = std::stoll(c.substr(0, comma));
  const int64_t N_max = comma == std::string::npos ? N : std::stoll(c.substr(comma + 1));
  return {T_max, N_max};
}

CaseResult run_point(const BenchArgs& a, const Machine& m, int64_t T_max, int64_t N_max, const std::string& extra) {
  std::unique_ptr<Workload> w = make_workload(a, T_max, N_max);
  const CaseResult r = measure_case(a, *w);
  print_case(a, m, *w, r, format_of(a), extra);
  return r;
}

// The smallest value from which on gain stays below `thr` (the last value if it never does: -1).
double stops_paying(const std::vector<double>& xs, const std::vector<double>& gains, double thr) {
  double r = -1;
  for (size_t i = xs.size(); i-- > 0;) {
    if (gains[i] >= thr) break;
    r = xs[i];
  }
  return r;
}

int sweep_length(const BenchArgs& a0, const Machine& m) {
  std::vector<double> xs = parse_values(cli::flag(a0.extra, "sweep-values", "64,128,256,512,1024,2048,4096,8192"));
  const double thr = std::stod(cli::flag(a0.extra, "break-even-gain", "0.02"));
  // gains[mode][by]: mode 0 = graph-replay, 1 = graph-update-replay; by 0 = wall, 1 = CPU time.
  std::vector<double> gains[2][2];
  for (size_t i = 0; i < xs.size(); ++i) {
    BenchArgs a = a0;
    for (auto& l : a.lengths) l = static_cast<int64_t>(xs[i]);
    const auto [T_max, N_max] = capacity_of(a);
    const CaseResult r = run_point(a, m, T_max, N_max, "\"sweep\":\"length\",\"sweep_value\":" + std::to_string(static_cast<int64_t>(xs[i])));
    for (int md = 0; md < 2; ++md)
      for (int by = 0; by < 2; ++by) gains[md][by].push_back(gain(r, 2 + md, by == 1));
    progress(static_cast<int>(i + 1), static_cast<int>(xs.size()), "length " + std::to_string(static_cast<int64_t>(xs[i])), r);
  }
  double be[2][2];
  for (int md = 0; md < 2; ++md)
    for (int by = 0; by < 2; ++by) be[md][by] = stops_paying(xs, gains[md][by], thr);
  std::ostringstream gl;
  for (size_t i = 0; i < xs.size(); ++i)
    gl << (i ? "," : "") << "[" << static_cast<int64_t>(xs[i]) << "," << gains[0][0][i] << "," << gains[0][1][i] << ","
       << gains[1][0][i] << "," << gains[1][1][i] << "]";
  if (a0.json)
    std::printf("{\"kind\":\"summary\",\"sweep\":\"length\",\"op\":\"%s\",\"pass\":\"%s\",\"backend\":\"%s\",\"dtype\":\"%s\","
                "\"threshold\":%g,\"break_even_length_replay\":%g,\"break_even_length_replay_cpu\":%g,"
                "\"break_even_length_update_replay\":%g,\"break_even_length_update_replay_cpu\":%g,"
                "\"gains_columns\":[\"length\",\"replay\",\"replay_cpu\",\"update_replay\",\"update_replay_cpu\"],"
                "\"gains\":[%s]}\n",
                a0.op.c_str(), a0.pass.c_str(), a0.backend.c_str(), a0.dtype.c_str(), thr, be[0][0], be[0][1], be[1][0],
                be[1][1], gl.str().c_str());
  else
    std::printf("# break-even (graph gains < %.0f%% of eager-live from this length on; -1: it pays at every length): "
                "replay %g (CPU time %g), update+replay %g (CPU time %g)\n", 100 * thr, be[0][0], be[0][1], be[1][0], be[1][1]);
  return 0;
}

int sweep_utilization(const BenchArgs& a0, const Machine& m) {
  std::vector<double> us = parse_values(cli::flag(a0.extra, "sweep-values", "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0"));
  const auto [T_max, N_max] = capacity_of(a0);
  const int64_t nseq = static_cast<int64_t>(a0.lengths.size());
  std::vector<double> wins[2], chunk_utils;  // graph-update-replay's gain over eager-live: wall, CPU time
  for (size_t i = 0; i < us.size(); ++i) {
    BenchArgs a = a0;
    const int64_t T = std::max<int64_t>(nseq, static_cast<int64_t>(std::llround(us[i] * static_cast<double>(T_max))));
    for (int64_t n = 0; n < nseq; ++n) a.lengths[n] = T / nseq + (n < T % nseq ? 1 : 0);
    std::ostringstream tag;
    tag << "\"sweep\":\"utilization\",\"sweep_value\":" << us[i];
    const CaseResult r = run_point(a, m, T_max, N_max, tag.str());
    for (int by = 0; by < 2; ++by) wins[by].push_back(gain(r, 3, by == 1));
    chunk_utils.push_back(r.chunk_util);
    std::ostringstream what;
    what << "utilization " << us[i];
    progress(static_cast<int>(i + 1), static_cast<int>(us.size()), what.str(), r);
  }
  // The lowest utilization from which on graph-update-replay is not slower than eager-live.
  double from[2] = {-1, -1}, from_chunks[2] = {-1, -1};
  for (int by = 0; by < 2; ++by)
    for (size_t i = us.size(); i-- > 0;) {
      if (wins[by][i] < 0) break;
      from[by] = us[i];
      from_chunks[by] = chunk_utils[i];
    }
  if (a0.json)
    std::printf("{\"kind\":\"summary\",\"sweep\":\"utilization\",\"op\":\"%s\",\"pass\":\"%s\",\"backend\":\"%s\",\"dtype\":\"%s\","
                "\"T_max\":%lld,\"N_max\":%lld,\"graph_wins_from_token_util\":%g,\"graph_wins_from_chunk_util\":%g,"
                "\"graph_wins_from_token_util_cpu\":%g,\"graph_wins_from_chunk_util_cpu\":%g}\n",
                a0.op.c_str(), a0.pass.c_str(), a0.backend.c_str(), a0.dtype.c_str(), static_cast<long long>(T_max),
                static_cast<long long>(N_max), from[0], from_chunks[0], from[1], from_chunks[1]);
  else
    std::printf("# graph-update-replay is not slower than eager-live from token utilization %g (chunks %g; by CPU "
                "time: %g, chunks %g) on; below that GraphBuckets should fall back to eager (-1: never)\n",
                from[0], from_chunks[0], from[1], from_chunks[1]);
  return 0;
}

}  // namespace

int run_modes(const BenchArgs& a, const Machine& m) {
  const std::string sweep = cli::flag(a.extra, "sweep", "");
  if (!sweep.empty()) {  // a sweep compares the modes: every mode is printed
    BenchArgs all = a;
    all.mode = "all";
    if (sweep == "length") return sweep_length(all, m);
    if (sweep == "utilization") return sweep_utilization(all, m);
  }
  LINATTN_CHECK(sweep.empty(), "--sweep: expected length or utilization, got '", sweep, "'");
  const auto [T_max, N_max] = capacity_of(a);
  run_point(a, m, T_max, N_max, "");
  return 0;
}

}  // namespace linattn::bench
