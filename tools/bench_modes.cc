// measure_case and the output of the all-modes bench (see bench_modes.h). Order inside one run:
// a cold eager-fixed call (warm-up time), one eager-live and one eager-fixed call (outputs kept),
// capture (begin + the recorded step: capture time; end_capture: instantiate time), one replay
// (compared with both), then every mode timed in interleaved rounds (eager-live, eager-fixed,
// graph-replay, the update copies alone, update + replay) so load changes hit all alike; on CUDA
// also CUDA-event device times and, per mode in a run of its own, NVML energy per call. Memory: VmRSS / VmHWM of /proc/self/status (host), cudaMemGetInfo (device).
// The graph's memory overhead is the growth of RSS (and device use) across capture.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "bench_meter.h"
#include "bench_modes.h"
#include "linattn/graph.h"
#include "linattn/meta.h"

#if LINATTN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace linattn::bench {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double status_mib(const char* key) {  // a "VmXXX:  1234 kB" line of /proc/self/status
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(f, line))
    if (line.compare(0, n, key) == 0) return std::stod(line.substr(n + 1)) / 1024.0;
  return 0;
}

double device_used_mib() {
#if LINATTN_WITH_CUDA
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) return static_cast<double>(total_b - free_b) / (1 << 20);
#endif
  return -1;
}

int64_t chunks_of(const std::vector<int64_t>& lens, int BT) {
  int64_t n = 0;
  for (int64_t l : lens) n += (l + BT - 1) / BT;
  return n;
}

}  // namespace

// NVML energy per call of each function, each run alone for >= seconds and >= 10 calls (the
// counter advances in steps: 0.25 s windows scattered by +-40% on the H200, hence ~1 s);
// -1 when there is no counter.
static void measure_energy(const std::vector<std::function<void()>>& fns, const std::function<void()>& sync,
                           double seconds, std::vector<TimeStats>& out) {
  if (gpu_energy_mj() < 0) return;
  for (size_t i = 0; i < fns.size(); ++i) {
    sync();
    const double e0 = gpu_energy_mj();
    const Clock::time_point t0 = Clock::now();
    int n = 0;
    while (n < 10 || ms_since(t0) < 1e3 * seconds) {
      fns[i]();
      if (++n % 8 == 0) sync();  // bounded queue, still back to back
    }
    sync();
    out[i].energy_mj = (gpu_energy_mj() - e0) / n;
  }
}

CaseResult measure_case(const BenchArgs& a, Workload& w) {
  CaseResult r;
  { std::ofstream("/proc/self/clear_refs") << "5"; }  // resets VmHWM: the peak is this case's
  Clock::time_point t0 = Clock::now();
  w.fixed_step();
  w.sync();
  r.warmup_ms = ms_since(t0);
  w.eager_live();
  const std::vector<Tensor> live = w.live_outputs();
  w.fixed_step();
  const std::vector<Tensor> fixed = w.static_outputs();

  const double rss0 = status_mib("VmRSS:"), dev0 = device_used_mib();
  Graph g(w.device(), w.stream());
  t0 = Clock::now();
  g.begin_capture();
  w.fixed_step();
  const Clock::time_point t1 = Clock::now();
  g.end_capture();
  r.capture_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  r.instantiate_ms = ms_since(t1);
  r.graph_nodes = static_cast<int64_t>(g.num_nodes());
  r.graph_mem_mib = status_mib("VmRSS:") - rss0;
  if (dev0 >= 0) r.graph_mem_mib += device_used_mib() - dev0;
  g.replay();
  const std::vector<Tensor> graph = w.static_outputs();
  r.replay_bitwise_fixed = true;
  double sq = 0, n = 0;
  for (size_t i = 0; i < graph.size(); ++i) {
    const size_t bytes = graph[i].view().nbytes();
    if (bytes != fixed[i].view().nbytes() || std::memcmp(graph[i].view().data, fixed[i].view().data, bytes) != 0)
      r.replay_bitwise_fixed = false;
    for (int64_t j = 0; j < graph[i].numel(); ++j) {
      const double d = graph[i].get(j) - live[i].get(j);
      r.graph_vs_eager_max = std::max(r.graph_vs_eager_max, std::fabs(d));
      sq += d * d;
      n += 1;
    }
  }
  r.graph_vs_eager_rms = n > 0 ? std::sqrt(sq / n) : 0;
  {  // how many ops the update copies are (captured into a graph of their own)
    Graph gu(w.device(), w.stream());
    gu.capture([&] { w.update(); });
    r.update_nodes = static_cast<int64_t>(gu.num_nodes());
  }
  const std::vector<std::function<void()>> fns = {[&] { w.eager_live(); }, [&] { w.fixed_step(); },
                                                  [&] { g.replay(); }, [&] { w.update(); }, [&] {
                                                    w.update();
                                                    g.replay();
                                                  }};
  void* ev_stream = w.device().type == DeviceType::kCUDA ? w.stream() : nullptr;
  std::vector<TimeStats> t = time_interleaved(fns, [&] { w.sync(); }, ev_stream, a.min_iters, a.min_time_s);
  if (ev_stream && a.energy_s > 0) measure_energy(fns, [&] { w.sync(); }, a.energy_s, t);
  r.modes = {{"eager-live", t[0]}, {"eager-fixed", t[1]}, {"graph-replay", t[2]}, {"graph-update-replay", t[4]}};
  r.update_ms = t[3].p50_ms;
  r.token_util = w.T_max > 0 ? static_cast<double>(w.T) / static_cast<double>(w.T_max) : 0;
  const int64_t nt_max = Capacity{w.T_max, w.N_max, w.BT}.NT_max();
  r.chunk_util = nt_max > 0 ? static_cast<double>(chunks_of(a.lengths, w.BT)) / static_cast<double>(nt_max) : 0;
  r.rss_mib = status_mib("VmRSS:");
  r.peak_rss_mib = status_mib("VmHWM:");
  r.device_used_mib = device_used_mib();
  r.padding_cost_ms = r.modes[1].t.p50_ms - r.modes[0].t.p50_ms;
  return r;
}

const TimeStats& mode_stats(const CaseResult& r, const std::string& mode) {
  for (const auto& m : r.modes)
    if (m.mode == mode) return m.t;
  return r.modes[0].t;
}

void print_csv_header() {
  std::printf("op,backend,mode,dtype,N,T,H,HV,K,V,BT,p50_us,p95_us,tflops,gbps,pct_of_peak,check,"
              "T_max,N_max,token_util,chunk_util,host_us,cpu_us,warmup_ms,capture_ms,instantiate_ms,update_us,"
              "launches,kernels,rss_mib,peak_rss_mib,graph_mem_mib,graph_vs_eager_max,graph_vs_eager_rms,"
              "padding_cost_us\n");
}

void print_case(const BenchArgs& a, const Machine& m, const Workload& w, const CaseResult& r,
                const std::string& format, const std::string& extra) {
  const bool json = format == "json", csv = format == "csv";
  if (format == "table") {
    std::printf("%s %s %s %s %lld/%lld K%lld V%lld BT%d lengths %s, bucket T_max %lld N_max %lld (tokens %.0f%%, chunks "
                "%.0f%%)\n",
                a.op.c_str(), a.pass.c_str(), a.backend.c_str(), a.dtype.c_str(), static_cast<long long>(a.hqk),
                static_cast<long long>(a.hv), static_cast<long long>(a.k), static_cast<long long>(a.v), a.bt,
                lengths_json(a.lengths).c_str(), static_cast<long long>(w.T_max), static_cast<long long>(w.N_max),
                100 * r.token_util, 100 * r.chunk_util);
    std::printf("  %-20s %10s %10s %10s %10s %9s %7s %9s %9s\n", "mode", "p50 ms", "p95 ms", "cpu ms", "device ms", "GFLOP/s",
                "%peak", "launches", "mJ/call");
  }
  for (const auto& ms : r.modes) {
    if (a.mode != "all" && a.mode != ms.mode) continue;
    const TimeStats& t = ms.t;
    const bool graph = ms.mode.rfind("graph", 0) == 0;
    const double gflops = w.flops / (t.p50_ms * 1e-3) * 1e-9, gbps = w.bytes / (t.p50_ms * 1e-3) * 1e-9;
    const double pct = m.peak_gflops > 0 ? gflops / m.peak_gflops : 0;
    // Host launches per call: every recorded op when eager; one graph launch (+ the update copies).
    const int64_t launches = !graph ? r.graph_nodes : ms.mode == "graph-replay" ? 1 : 1 + r.update_nodes;
    const std::string check = ms.mode == "eager-live" ? "-"
                              : graph ? (r.replay_bitwise_fixed ? "bitwise==fixed" : "DIFFERS-from-fixed")
                                      : "vs-live";
    if (json) {
      Json j;
      j.add("kind", "case").add("op", a.op).add("pass", a.pass).add("backend", a.backend).add("mode", ms.mode);
      j.add("dtype", a.dtype).add("hqk", a.hqk).add("hv", a.hv).add("k", a.k).add("v", a.v).add("bt", a.bt);
      j.add_raw("lengths", lengths_json(a.lengths));
      j.add("threads", m.threads).add("p50_ms", t.p50_ms).add("p95_ms", t.p95_ms).add("host_ms", t.mean_ms);
      j.add("cpu_ms", t.cpu_ms).add("iters", t.iters);
      if (t.device_p50_ms >= 0) j.add("device_p50_ms", t.device_p50_ms).add("device_p95_ms", t.device_p95_ms);
      if (t.energy_mj >= 0) j.add("energy_mj", t.energy_mj);
      j.add("tokens_per_s", static_cast<double>(w.T) / (t.p50_ms * 1e-3));
      if (w.flops > 0) j.add("gflops", gflops).add("gbps", gbps).add("pct_of_peak", pct);
      j.add("T_max", w.T_max).add("N_max", w.N_max).add("token_util", r.token_util).add("chunk_util", r.chunk_util);
      j.add("warmup_ms", r.warmup_ms).add("capture_ms", r.capture_ms).add("instantiate_ms", r.instantiate_ms);
      j.add("update_ms", r.update_ms).add("replay_ms", mode_stats(r, "graph-replay").p50_ms);
      j.add("launches_per_call", launches).add("graph_nodes", r.graph_nodes).add("update_nodes", r.update_nodes);
      j.add("rss_mib", r.rss_mib).add("peak_rss_mib", r.peak_rss_mib).add("graph_mem_mib", r.graph_mem_mib);
      if (r.device_used_mib >= 0) j.add("device_used_mib", r.device_used_mib);
      j.add("graph_vs_eager_max", r.graph_vs_eager_max).add("graph_vs_eager_rms", r.graph_vs_eager_rms);
      j.add("replay_bitwise_fixed", r.replay_bitwise_fixed).add("padding_cost_ms", r.padding_cost_ms);
      if (ms.mode != "eager-live") j.add("check", graph ? "eager_fixed_bitwise" : "eager_live");
      if (graph) j.add("max_abs_err", r.graph_vs_eager_max).add("rel_rms_err", r.graph_vs_eager_rms);
      if (!w.plan.empty()) j.add("plan", w.plan);
      std::string s = j.str();
      if (!extra.empty()) s.insert(s.size() - 1, "," + extra);
      std::printf("%s\n", s.c_str());
    } else if (csv) {
      std::printf("%s,%s,%s,%s,%lld,%lld,%lld,%lld,%lld,%lld,%d,%.2f,%.2f,%.5f,%.2f,%.4f,%s,%lld,%lld,%.3f,%.3f,%.2f,"
                  "%.2f,%.3f,%.3f,%.3f,%.2f,%lld,%lld,%.1f,%.1f,%.2f,%.3g,%.3g,%.2f\n",
                  a.op.c_str(), a.backend.c_str(), ms.mode.c_str(), a.dtype.c_str(), static_cast<long long>(w.N),
                  static_cast<long long>(w.T), static_cast<long long>(a.hqk), static_cast<long long>(a.hv),
                  static_cast<long long>(a.k), static_cast<long long>(a.v), a.bt, t.p50_ms * 1e3, t.p95_ms * 1e3,
                  gflops * 1e-3, gbps, pct, check.c_str(), static_cast<long long>(w.T_max),
                  static_cast<long long>(w.N_max), r.token_util, r.chunk_util, t.mean_ms * 1e3, t.cpu_ms * 1e3,
                  r.warmup_ms, r.capture_ms, r.instantiate_ms, r.update_ms * 1e3, static_cast<long long>(launches),
                  static_cast<long long>(r.graph_nodes), r.rss_mib, r.peak_rss_mib, r.graph_mem_mib,
                  r.graph_vs_eager_max, r.graph_vs_eager_rms, r.padding_cost_ms * 1e3);
    } else {
      std::printf("  %-20s %10.3f %10.3f %10.3f %10.3f %9.1f %6.1f%% %9lld %9.3f\n", ms.mode.c_str(), t.p50_ms, t.p95_ms,
                  t.cpu_ms, t.device_p50_ms, gflops, 100 * pct, static_cast<long long>(launches), t.energy_mj);
    }
  }
  if (format == "table") {
    std::printf("  warm-up %.2f ms, capture %.3f ms, instantiate %.3f ms, update %.3f ms; graph nodes %lld (update %lld)\n",
                r.warmup_ms, r.capture_ms, r.instantiate_ms, r.update_ms, static_cast<long long>(r.graph_nodes),
                static_cast<long long>(r.update_nodes));
    std::printf("  host RSS %.1f MiB (peak %.1f), graph overhead %.2f MiB%s\n", r.rss_mib, r.peak_rss_mib,
                r.graph_mem_mib, r.device_used_mib >= 0 ? (", device used " + std::to_string(r.device_used_mib) + " MiB").c_str() : "");
    std::printf("  graph vs eager-live: max %.3g, RMS %.3g; replay %s eager-fixed; padding cost %.3f ms (%.1f%%)\n",
                r.graph_vs_eager_max, r.graph_vs_eager_rms, r.replay_bitwise_fixed ? "bitwise equals" : "DIFFERS from",
                r.padding_cost_ms, 100 * r.padding_cost_ms / std::max(1e-9, r.modes[0].t.p50_ms));
  }
  std::fflush(stdout);
}

}  // namespace linattn::bench
