// `linattn bench` in all four modes of GRAPH_CONTRACT.md section 9 at once (--mode all, --capacity,
// --sweep, --csv): one Workload per op (chunked GDN / KDA, conv, GDN / KDA layers) on one backend
// holds exact-size tensors (eager-live) and a bucket's static buffers at a capacity
// (T_max, N_max) >= the layout (eager-fixed, graph-replay, graph-update-replay). measure_case
// times every mode in one run (so they compare as ratios) and records warm-up, capture,
// instantiate, update and replay times, launches per call (recorded ops) and graph nodes, the
// bucket's token and chunk utilization, host RSS / peak RSS (and device memory on CUDA), the
// graph's memory overhead, graph-vs-eager max / RMS difference, whether the replay equals the
// eager fixed call bitwise, and the padding cost (eager-fixed minus eager-live p50).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "bench.h"
#include "linattn/tensor.h"

namespace linattn::bench {

double process_cpu_ms();  // bench_common.cc: CPU time of the process, all threads

class Workload {
 public:
  virtual ~Workload() = default;
  virtual void eager_live() = 0;      // the op on the exact-size tensors (use_graph = false)
  virtual void fixed_step() = 0;      // the op on the static buffers (use_graph = true); captured
  virtual void update() = 0;          // copy the exact-size inputs + cu_seqlens into the static buffers
  virtual void sync() = 0;            // wait for the backend (CUDA stream)
  // Outputs of the last eager_live / static call on the host, real rows only, same order.
  virtual std::vector<Tensor> live_outputs() = 0;
  virtual std::vector<Tensor> static_outputs() = 0;
  virtual void* stream() = 0;
  virtual Device device() = 0;
  double flops = 0, bytes = 0;        // per call, from the planner's cost model (0: not modelled)
  int64_t T = 0, N = 0, T_max = 0, N_max = 0;
  int BT = 64;
  std::string plan;                   // what the op's planner chose, when it says
};

// The workload of a.op on a.backend for the layout a.lengths in a bucket (T_max, N_max).
std::unique_ptr<Workload> make_workload(const BenchArgs& a, int64_t T_max, int64_t N_max);

struct ModeStats {
  std::string mode;
  TimeStats t;
};

struct CaseResult {
  std::vector<ModeStats> modes;  // eager-live, eager-fixed, graph-replay, graph-update-replay
  double warmup_ms = 0, capture_ms = 0, instantiate_ms = 0, update_ms = 0;
  int64_t graph_nodes = 0, update_nodes = 0;  // recorded ops of one step / of the update copies
  double token_util = 0, chunk_util = 0;
  double rss_mib = 0, peak_rss_mib = 0, graph_mem_mib = 0, device_used_mib = -1;
  double graph_vs_eager_max = 0, graph_vs_eager_rms = 0;
  bool replay_bitwise_fixed = false;
  double padding_cost_ms = 0;
};

CaseResult measure_case(const BenchArgs& a, Workload& w);
// One line per mode: JSON (PERFORMANCE.md section 6 fields + the ones above), CSV (ARCHITECTURE.md
// convention 10 columns, then the added ones), or the console table. `extra` is raw JSON fields
// appended to every JSON line (sweep tags).
void print_case(const BenchArgs& a, const Machine& m, const Workload& w, const CaseResult& r,
                const std::string& format, const std::string& extra = "");
void print_csv_header();

// The runner behind --mode all / --capacity / --sweep length|utilization / --csv (bench_sweep.cc).
int run_modes(const BenchArgs& a, const Machine& m);

// A case file (bench_cases.cc): one case per line, the flags of `linattn bench` separated by
// blanks; '#' starts a comment; blank lines are skipped. Returns the flags of each case.
std::vector<std::vector<std::string>> read_case_file(const std::string& path);

}  // namespace linattn::bench
