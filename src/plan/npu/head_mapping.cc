// Three-tier head mapping (see head_mapping.h).
#include "plan/npu/head_mapping.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"
#include "core/util.h"

namespace linattn::plan::npu {
namespace {

struct Unit {
  int seq, head;
  int64_t len;
};

// LPT assignment of `tasks` onto `load` (per core); fills core ids; returns the busiest core.
double assign(std::vector<MappedTask>& tasks, std::vector<double>& load) {
  std::stable_sort(tasks.begin(), tasks.end(),
                   [](const MappedTask& a, const MappedTask& b) { return a.time_us > b.time_us; });
  for (auto& t : tasks) {
    const auto it = std::min_element(load.begin(), load.end());
    t.core = static_cast<int>(it - load.begin());
    *it += t.time_us;
  }
  return *std::max_element(load.begin(), load.end());
}

}  // namespace

MappingPlan plan_head_mapping(const std::vector<int64_t>& lengths, int heads, int V, int cores,
                              const FusedCostFn& fused, const ChcCostFn& chc, const MappingOptions& opt) {
  LINATTN_CHECK(cores >= 1 && heads >= 1 && V >= 1, "head mapping: cores, heads, V must be >= 1, got ", cores, ", ",
                heads, ", ", V);
  MappingPlan p;
  p.num_cores = cores;
  std::vector<Unit> units;
  for (int s = 0; s < static_cast<int>(lengths.size()); ++s)
    for (int h = 0; h < heads && lengths[s] > 0; ++h) units.push_back({s, h, lengths[s]});
  std::stable_sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) { return a.len > b.len; });
  p.units = static_cast<int64_t>(units.size());
  std::ostringstream why;
  if (units.empty()) {
    p.reason = "no tokens";
    return p;
  }
  if (opt.force_chc) {  // group equal lengths into one chunk-head-chunk stage each
    p.tail_tier = 3;
    p.residual = p.units;
    for (size_t i = 0; i < units.size();) {
      size_t j = i;
      while (j < units.size() && units[j].len == units[i].len) ++j;
      p.chc_us += chc(units[i].len, static_cast<int>(j - i), cores);
      i = j;
    }
    for (const auto& u : units) p.tasks.push_back({u.seq, u.head, 0, V, 3, -1, 0.0});
    p.makespan_us = p.chc_us;
    p.reason = "chunk-head-chunk for every unit (forced: the FLA mapping)";
    return p;
  }
  const int64_t full = (p.units / cores) * cores;
  p.residual = p.units - full;
  std::vector<MappedTask> head;
  for (int64_t i = 0; i < full; ++i)
    head.push_back({units[i].seq, units[i].head, 0, V, 1, -1, fused(units[i].len, V)});
  std::vector<double> load(static_cast<size_t>(cores), 0.0);
  const double base = head.empty() ? 0.0 : assign(head, load);
  (void)base;
  // Tail options.
  std::vector<Unit> tail(units.begin() + full, units.end());
  struct Option {
    double ms = 0.0, chc = 0.0;
    int tier = 1, splits = 1;
    std::vector<MappedTask> tasks;
  };
  auto run_fused = [&](int s) {
    Option o;
    o.tier = s == 1 ? 1 : 2;
    o.splits = s;
    const int w = s == 1 ? V : static_cast<int>(round_up(ceil_div(V, s), opt.min_cols));
    for (const auto& u : tail)
      for (int v0 = 0; v0 < V; v0 += w) {
        const int v1 = std::min(V, v0 + w);
        o.tasks.push_back({u.seq, u.head, v0, v1, o.tier, -1, fused(u.len, v1 - v0)});
      }
    std::vector<double> l = load;
    o.ms = o.tasks.empty() ? *std::max_element(l.begin(), l.end()) : assign(o.tasks, l);
    return o;
  };
  Option best = run_fused(1);
  p.tail_options_us.push_back(best.ms);
  double best_split = -1.0;
  if (opt.allow_split && !tail.empty()) {
    for (int s = 2; V / s >= opt.min_cols && static_cast<int64_t>(tail.size()) * s <= 4LL * cores; s *= 2) {
      Option o = run_fused(s);
      if (best_split < 0 || o.ms < best_split) best_split = o.ms;
      if (o.ms < best.ms * 0.999) best = std::move(o);
    }
  }
  p.tail_options_us.push_back(best_split);
  // Unequal lengths can leave the full rounds unbalanced: also try splitting every unit.
  bool split_all = false;
  if (opt.allow_split && full > 0 && units.front().len != units.back().len) {
    for (int s = 2; V / s >= opt.min_cols && p.units * s <= 4LL * cores; s *= 2) {
      Option o;
      o.tier = 2;
      o.splits = s;
      const int w = static_cast<int>(round_up(ceil_div(V, s), opt.min_cols));
      for (const auto& u : units)
        for (int v0 = 0; v0 < V; v0 += w)
          o.tasks.push_back({u.seq, u.head, v0, std::min(V, v0 + w), 2, -1, fused(u.len, std::min(V, v0 + w) - v0)});
      std::vector<double> l(static_cast<size_t>(cores), 0.0);
      o.ms = assign(o.tasks, l);
      if (o.ms < best.ms * 0.98) {  // worth its redone K-side work only when clearly shorter
        best = std::move(o);
        split_all = true;
      }
    }
  }
  if (opt.allow_chc && !tail.empty()) {
    Option o;
    o.tier = 3;
    for (size_t i = 0; i < tail.size();) {
      size_t j = i;
      while (j < tail.size() && tail[j].len == tail[i].len) ++j;
      o.chc += chc(tail[i].len, static_cast<int>(j - i), cores);
      i = j;
    }
    for (const auto& u : tail) o.tasks.push_back({u.seq, u.head, 0, V, 3, -1, 0.0});
    o.ms = *std::max_element(load.begin(), load.end()) + o.chc;
    p.tail_options_us.push_back(o.ms);
    if (o.ms < best.ms * 0.999) {
      best = std::move(o);
      split_all = false;
    }
  } else {
    p.tail_options_us.push_back(-1.0);
  }
  if (split_all) head.clear();
  p.tail_tier = best.tier;
  p.v_splits = best.splits;
  p.chc_us = best.chc;
  for (auto& t : best.tasks) head.push_back(t);
  p.tasks = std::move(head);
  p.makespan_us = best.ms;
  p.fused_makespan_us = best.ms - best.chc;
  why << p.units << " (sequence, head) unit(s) on " << cores << " cores: " << full / cores << " full round(s) of tier 1";
  if (split_all) {
    why << "; unequal lengths: every unit split into " << best.splits << " column slices (" << best.tasks.size()
        << " tasks), makespan " << best.ms << " us";
  } else if (p.residual == 0) {
    why << ", no tail";
  } else {
    why << ", tail of " << p.residual << " unit(s) -> ";
    if (best.tier == 1) why << "tier 1 (whole heads; splitting does not shorten the makespan)";
    if (best.tier == 2) why << "tier 2, " << best.splits << " column slices each (" << best.tasks.size() << " tasks)";
    if (best.tier == 3) why << "tier 3, chunk-head-chunk over all cores";
    why << "; tail options (makespan us): whole " << p.tail_options_us[0] << ", best split " << p.tail_options_us[1]
        << ", chunk-head-chunk " << p.tail_options_us[2];
  }
  p.reason = why.str();
  return p;
}

}  // namespace linattn::plan::npu
