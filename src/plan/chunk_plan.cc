// CPU chunk forward planner (see chunk_plan.h).
#include "plan/chunk_plan.h"

#include <algorithm>
#include <functional>
#include <sstream>
#include <utility>

#include "core/check.h"
#include "core/env.h"
#include "core/util.h"
#include "meta/cost.h"

namespace linattn::plan {
namespace {

constexpr int64_t kMinTile = 16;  // columns: one AVX-512 vector
constexpr int kMaxSegments = 4096;  // per sequence (scratch is N x segments states)

// Longest-first greedy makespan of `costs` on `threads` workers.
double lpt_makespan(std::vector<double> costs, int threads) {
  std::sort(costs.begin(), costs.end(), std::greater<>());
  std::vector<double> load(static_cast<size_t>(std::max(1, threads)), 0.0);
  for (double c : costs) *std::min_element(load.begin(), load.end()) += c;
  return *std::max_element(load.begin(), load.end());
}

// Modeled makespan of tier 3 with `s` segments per sequence and a V split of pass 2 into
// `vs` tiles of `tile` columns (see chunk_plan.h). Pass 1 runs K S, the solve and the update on
// V + K columns (no Q S, no P V^).
double tier3_makespan(const meta::ChunkAttnDesc& d, const std::vector<int64_t>& lens, int s, int64_t min_seg,
                      int BT, int threads, int64_t vs, int64_t tile) {
  std::vector<double> pass1, combine, pass2;
  for (int64_t l : lens) {
    if (l == 0) continue;
    const int64_t len = std::max(round_up(ceil_div(l, static_cast<int64_t>(s)), static_cast<int64_t>(BT)), min_seg);
    const int64_t nseg = ceil_div(l, len);
    for (int64_t i = 0; i < nseg; ++i) {
      const int64_t sl = std::min(len, l - i * len);
      const double kside = meta::chunk_fwd_task_kside_flops(sl, d.K, BT);
      const double p1 = kside + (meta::chunk_fwd_task_flops(sl, d.K, d.V + d.K, BT) - kside) * 2.0 / 3.0;
      for (int64_t j = 0; j < d.HV; ++j) {
        for (int64_t sp = 0; sp < vs; ++sp)
          pass2.push_back(meta::chunk_fwd_task_flops(sl, d.K, std::min(tile, d.V - sp * tile), BT));
        if (i + 1 < nseg) pass1.push_back(p1);
      }
    }
    for (int64_t j = 0; j < d.HV; ++j) combine.push_back(2.0 * static_cast<double>((nseg - 1) * d.K * d.K * d.V));
  }
  auto ms = [&](const std::vector<double>& c) { return c.empty() ? 0.0 : lpt_makespan(c, threads); };
  return ms(pass1) + ms(combine) + ms(pass2);
}

}  // namespace

std::string ChunkPlan::to_string() const {
  std::ostringstream os;
  os << "tier " << tier << ", v_splits " << v_splits << " x " << v_tile << " cols, " << num_tasks
     << " tasks on " << num_threads << " threads, compute chunk " << BT << " (BT " << caller_BT << ")"
     << (bf16_dot ? ", bf16 dot products" : "")
     << (tier == 3 ? ", " + std::to_string(segments) + " segments" : std::string())
     << ", modeled balance "
     << (makespan_flops > 0 ? ideal_flops / makespan_flops : 1.0) << ": " << reason;
  return os.str();
}

ChunkPlan plan_chunk_fwd(const meta::ChunkAttnDesc& d, const std::vector<int64_t>& lengths,
                         int num_threads, int segments_request) {
  LINATTN_CHECK(segments_request >= 0 && segments_request <= kMaxSegments, "segments: expected in [0, ",
                kMaxSegments, "] (0 = planner, 1 = off), got ", segments_request);
  ChunkPlan p;
  p.caller_BT = d.BT;
  p.BT = d.BT > 32 ? 32 : d.BT;
  constexpr int kForcedBT[] = {16, 32, 64};
  const int forced = env_choice("LINATTN_CPU_CHUNK", {"16", "32", "64"}, -1, "unset: the planner's chunk");
  if (forced >= 0) p.BT = kForcedBT[forced];
  p.bf16_dot = d.dtype == DType::kBF16 && env_flag("LINATTN_CPU_BF16_DOT", true);
  p.num_threads = std::max(1, num_threads);
  p.lengths_known = !lengths.empty() || d.N == 0;
  std::vector<int64_t> lens = lengths;
  if (!p.lengths_known) lens.assign(static_cast<size_t>(d.N), d.N > 0 ? d.B * d.T / d.N : 0);
  int64_t busy_seqs = 0;
  for (int64_t l : lens) busy_seqs += l > 0 ? 1 : 0;
  const int64_t work_tasks = busy_seqs * d.HV;

  double best = -1.0;
  std::vector<std::pair<int64_t, int64_t>> tiles;  // (V splits, tile) the loop found valid
  for (int64_t s = 1; s <= d.V; s *= 2) {
    const int64_t tile = s == 1 ? d.V : round_up(ceil_div(d.V, s), kMinTile);
    if (s > 1 && (tile < kMinTile || ceil_div(d.V, tile) != s)) break;
    tiles.emplace_back(s, tile);
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
  // Tier 3: forced by the caller, or when it beats the best head-level mapping by > 10%.
  int best_s = 1;
  double best3 = -1.0;
  std::pair<int64_t, int64_t> best_tile{1, d.V};
  auto consider = [&](int s, double bar) {
    for (const auto& [vs, tile] : tiles) {
      const double ms = tier3_makespan(d, lens, s, p.min_segment, p.BT, p.num_threads, vs, tile);
      if (ms < bar && (best3 < 0.0 || ms < best3 * 0.98)) {
        best3 = ms;
        best_s = s;
        best_tile = {vs, tile};
      }
    }
  };
  if (segments_request > 1) {
    p.min_segment = p.BT;
    consider(segments_request, 1e300);
  } else if (segments_request == 0 && work_tasks > 0 && work_tasks < p.num_threads) {
    p.min_segment = 4LL * p.BT;
    for (int s = 2; s <= 256; s *= 2) {
      consider(s, best * 0.9);
      if (work_tasks * s >= 4LL * p.num_threads) break;
    }
  }
  if (best_s > 1) {
    p.tier = 3;
    p.segments = best_s;
    p.v_splits = static_cast<int>(best_tile.first);
    p.v_tile = static_cast<int>(best_tile.second);
    p.makespan_flops = best3;
  }
  p.num_tasks = d.N * d.HV * p.v_splits * p.segments;
  p.num_threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(p.num_threads, p.num_tasks)));
  std::ostringstream why;
  why << busy_seqs << " non-empty sequence(s) x " << d.HV << " value heads = " << work_tasks << " task(s) for "
      << num_threads << " thread(s)" << (p.lengths_known ? "" : " (lengths unknown: capacity / N each)");
  if (p.tier == 3) {
    why << "; tier 3: up to " << p.segments << " segments per sequence (min " << p.min_segment
        << " tokens), modeled makespan " << p.makespan_flops << " FLOP vs head-level " << best
        << (segments_request > 1 ? " (requested by the caller)" : "");
  } else if (p.tier == 1) {
    why << "; tier 1 (no V split shortens the modeled makespan by > 2%)";
  } else {
    why << "; tier 2: V split " << p.v_splits << " x " << p.v_tile << " columns, K-side work "
        << "recomputed per split, modeled makespan " << best << " FLOP vs ideal " << p.ideal_flops;
  }
  p.reason = why.str();
  return p;
}

}  // namespace linattn::plan
