// CPU chunk forward planner (see chunk_plan.h).
#include "plan/chunk_plan.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "core/util.h"
#include "meta/cost.h"

namespace linattn::plan {
namespace {

constexpr int64_t kMinTile = 16;  // columns: one AVX-512 vector

// Longest-first greedy makespan of `costs` on `threads` workers.
double lpt_makespan(std::vector<double> costs, int threads) {
  std::sort(costs.begin(), costs.end(), std::greater<>());
  std::vector<double> load(static_cast<size_t>(std::max(1, threads)), 0.0);
  for (double c : costs) *std::min_element(load.begin(), load.end()) += c;
  return *std::max_element(load.begin(), load.end());
}

}  // namespace

std::string ChunkPlan::to_string() const {
  std::ostringstream os;
  os << "tier " << tier << ", v_splits " << v_splits << " x " << v_tile << " cols, " << num_tasks
     << " tasks on " << num_threads << " threads, compute chunk " << BT << " (BT " << caller_BT << ")"
     << (bf16_dot ? ", bf16 dot products" : "")
     << ", modeled balance "
     << (makespan_flops > 0 ? ideal_flops / makespan_flops : 1.0) << ": " << reason;
  return os.str();
}

ChunkPlan plan_chunk_fwd(const meta::ChunkAttnDesc& d, const std::vector<int64_t>& lengths,
                         int num_threads) {
  ChunkPlan p;
  p.caller_BT = d.BT;
  p.BT = d.BT > 32 ? 32 : d.BT;
  const std::string forced = env_or("LINATTN_CPU_CHUNK", "");
  if (forced == "16" || forced == "32" || forced == "64") p.BT = std::stoi(forced);
  p.bf16_dot = d.dtype == DType::kBF16 && env_or("LINATTN_CPU_BF16_DOT", "1") != "0";
  p.num_threads = std::max(1, num_threads);
  p.lengths_known = !lengths.empty() || d.N == 0;
  std::vector<int64_t> lens = lengths;
  if (!p.lengths_known) lens.assign(static_cast<size_t>(d.N), d.N > 0 ? d.B * d.T / d.N : 0);
  int64_t busy_seqs = 0;
  for (int64_t l : lens) busy_seqs += l > 0 ? 1 : 0;
  const int64_t work_tasks = busy_seqs * d.HV;

  double best = -1.0;
  for (int64_t s = 1; s <= d.V; s *= 2) {
    const int64_t tile = s == 1 ? d.V : round_up(ceil_div(d.V, s), kMinTile);
    if (s > 1 && (tile < kMinTile || ceil_div(d.V, tile) != s)) break;
    std::vector<double> costs;
    double total = 0.0;
    for (int64_t l : lens) {
      if (l == 0) continue;
      for (int64_t sp = 0; sp < s; ++sp) {
        const int64_t vt = std::min(tile, d.V - sp * tile);
        const double c = meta::chunk_fwd_task_flops(l, d.K, vt, p.BT);
        for (int64_t j = 0; j < d.HV; ++j) costs.push_back(c);
        total += c * static_cast<double>(d.HV);
      }
    }
    const double ms = costs.empty() ? 0.0 : lpt_makespan(costs, p.num_threads);
    if (s == 1) p.ideal_flops = total / p.num_threads;
    // A split must shorten the modeled makespan by more than 2% to be worth its extra work.
    if (best < 0.0 || ms < best * 0.98) {
      best = ms;
      p.v_splits = static_cast<int>(s);
      p.v_tile = static_cast<int>(tile);
    }
    if (work_tasks * s >= 4LL * p.num_threads) break;  // enough tasks: larger splits cannot help
  }
  p.makespan_flops = best;
  p.tier = p.v_splits > 1 ? 2 : 1;
  p.num_tasks = d.N * d.HV * p.v_splits;
  p.num_threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(p.num_threads, p.num_tasks)));
  std::ostringstream why;
  why << busy_seqs << " non-empty sequence(s) x " << d.HV << " value heads = " << work_tasks << " task(s) for "
      << num_threads << " thread(s)" << (p.lengths_known ? "" : " (lengths unknown: capacity / N each)");
  if (p.tier == 1) {
    why << "; tier 1 (no V split shortens the modeled makespan by > 2%)";
  } else {
    why << "; tier 2: V split " << p.v_splits << " x " << p.v_tile << " columns, K-side work "
        << "recomputed per split, modeled makespan " << best << " FLOP vs ideal " << p.ideal_flops;
  }
  p.reason = why.str();
  return p;
}

}  // namespace linattn::plan
