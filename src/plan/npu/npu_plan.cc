// NPU layer planner: order, layouts, mapping and whole-layer simulation (see npu_plan.h).
#include "plan/npu/npu_plan.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "core/check.h"

namespace linattn::plan::npu {
namespace {

DataflowSpec spec_of(const LayerPlanOptions& o, int64_t len, int cols, bool factored) {
  DataflowSpec s;
  s.family = o.family;
  s.T = len;
  s.C = o.C;
  s.K = o.K;
  s.V = cols;
  s.in_bytes = o.in_bytes;
  s.factored = factored;
  s.narrow_operands = o.narrow_operands;
  return s;
}

LayoutPlan layouts_of(const LayerPlanOptions& o, const Dataflow& df) {
  const LayoutCostModel m = default_cost_model(o.dev);
  if (o.layouts == "dp") return plan_layouts_dp(df, m);
  if (o.layouts == "dense") return uniform_layouts(df, Layout::kDense, m);
  LINATTN_CHECK(o.layouts == "blocked", "layouts: expected dp, dense or blocked, got '", o.layouts, "'");
  return uniform_layouts(df, Layout::kBlocked, m);
}

double lpt(std::vector<double> costs, int cores) {
  std::sort(costs.begin(), costs.end(), std::greater<>());
  std::vector<double> load(static_cast<size_t>(std::max(1, cores)), 0.0);
  for (double c : costs) *std::min_element(load.begin(), load.end()) += c;
  return *std::max_element(load.begin(), load.end());
}

std::string kib(double b) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << b / 1024.0 << " KiB";
  return os.str();
}

}  // namespace

TaskStats simulate_fused_task(const LayerPlanOptions& opt, OrderKind order, int64_t len, int cols) {
  const Dataflow df = build_dataflow(spec_of(opt, len, cols, order_factored(order)));
  const auto ord = make_order(df, order, opt.prefetch);
  return simulate_task(df, ord, layouts_of(opt, df).op_layout, default_cost_model(opt.dev), opt.dev.ub_bytes,
                       opt.eviction);
}

TaskStats simulate_chc(const LayerPlanOptions& opt, int64_t len, int heads, int cores, double* time_us) {
  const Dataflow df = build_dataflow(spec_of(opt, len, opt.V, false));
  const auto L = layouts_of(opt, df).op_layout;
  const LayoutCostModel m = default_cost_model(opt.dev);
  TaskStats all;
  double t = 0.0;
  for (int ph = 0; ph < 3; ++ph) {
    std::vector<double> costs;
    double stage_bytes = 0.0;
    auto run = [&](const std::vector<int>& ops) {
      if (ops.empty()) return;
      const TaskStats s = simulate_task(df, ops, L, m, opt.dev.ub_bytes, opt.eviction);
      for (int h = 0; h < heads; ++h) costs.push_back(s.time_us);
      all += s.scaled(heads);
      stage_bytes += s.gm_bytes() * heads;
    };
    if (ph == 1) {  // the state pass: one task per head over all chunks
      std::vector<int> ops;
      for (int i = 0; i < static_cast<int>(df.ops.size()); ++i)
        if (df.ops[i].phase == 1) ops.push_back(i);
      run(ops);
    } else {
      for (int c = 0; c < df.num_chunks; ++c) {
        std::vector<int> ops;
        for (int i = 0; i < static_cast<int>(df.ops.size()); ++i)
          if (df.ops[i].phase == ph && df.ops[i].chunk == c) ops.push_back(i);
        run(ops);
      }
    }
    // Each kernel is bound by its busiest core or by the device's DRAM bandwidth.
    if (!costs.empty()) t += std::max(lpt(costs, cores), stage_bytes / opt.dev.dram_gbps * 1e-3) + opt.dev.launch_us;
  }
  if (time_us) *time_us = t;
  return all;
}

namespace {

// The hybrid's prep kernel: the products and the solve that do not depend on V (and, for KDA,
// the gated copies they read). Cheap elementwise K-side ops (beta e^g K, the decayed K for GDN)
// stay in the fused task, which recomputes them from k rather than reading fp32 copies per slice.
bool is_prep_op(const OpNode& o, Family f) {
  static const char* kPrep[] = {"gcum", "kkt", "lmask", "solve", "qkt", "pmask", "wmat"};
  for (const char* b : kPrep)
    if (o.base == b) return true;
  return f == Family::kKda && (o.base == "kbeta" || o.base == "kgate" || o.base == "qgate");
}

TaskStats simulate_hybrid_task(const LayerPlanOptions& opt, OrderKind order, int64_t len, int cols) {
  const Dataflow df = build_dataflow(spec_of(opt, len, cols, order_factored(order)));
  std::vector<int> ops;
  for (int id : make_order(df, order, opt.prefetch))
    if (!is_prep_op(df.ops[id], opt.family)) ops.push_back(id);
  return simulate_task(df, ops, layouts_of(opt, df).op_layout, default_cost_model(opt.dev), opt.dev.ub_bytes,
                       opt.eviction);
}

TaskStats simulate_prep(const LayerPlanOptions& opt, OrderKind order, int64_t len, int heads, int cores,
                        double* time_us) {
  const Dataflow df = build_dataflow(spec_of(opt, len, opt.V, order_factored(order)));
  const auto L = layouts_of(opt, df).op_layout;
  const LayoutCostModel m = default_cost_model(opt.dev);
  TaskStats all;
  std::vector<double> costs;
  for (int c = 0; c < df.num_chunks; ++c) {
    std::vector<int> ops;
    for (int i = 0; i < static_cast<int>(df.ops.size()); ++i)
      if (df.ops[i].chunk == c && (is_prep_op(df.ops[i], opt.family) || df.ops[i].unit == Unit::kLoad))
        ops.push_back(i);
    const TaskStats s = simulate_task(df, ops, L, m, opt.dev.ub_bytes, opt.eviction);
    for (int h = 0; h < heads; ++h) costs.push_back(s.time_us);
    all += s.scaled(heads);
  }
  if (time_us) *time_us = std::max(lpt(costs, cores), all.gm_bytes() / opt.dev.dram_gbps * 1e-3) + opt.dev.launch_us;
  return all;
}

}  // namespace

LayerPlan plan_layer(const LayerPlanOptions& opt) {
  LINATTN_CHECK(!opt.lengths.empty(), "plan_layer: lengths: expected at least one sequence");
  LayerPlan p;
  p.opt = opt;
  const int64_t longest = *std::max_element(opt.lengths.begin(), opt.lengths.end());
  LINATTN_CHECK(longest > 0, "plan_layer: every sequence is empty");
  // Order: the fastest simulated fused task among the candidates.
  if (opt.order == "auto") {
    double best = -1.0;
    for (OrderKind k : {OrderKind::kFla, OrderKind::kChunkFirst, OrderKind::kLifetime}) {
      const double t = simulate_fused_task(opt, k, longest, opt.V).time_us;
      if (best < 0 || t < best * 0.999) {
        best = t;
        p.order = k;
      }
    }
  } else {
    p.order = order_by_name(opt.order);
  }
  const Dataflow df = build_dataflow(spec_of(opt, longest, opt.V, order_factored(p.order)));
  const auto ord = make_order(df, p.order, opt.prefetch);
  for (int id : ord)
    if (df.ops[id].chunk == 0 || (df.ops[id].unit == Unit::kLoad && df.ops[id].chunk == 1))
      p.order_ops.push_back(df.ops[id].name);
  p.layout = layouts_of(opt, df);
  const LayoutCostModel m = default_cost_model(opt.dev);
  p.task = simulate_task(df, ord, p.layout.op_layout, m, opt.dev.ub_bytes, opt.eviction);
  p.task_ideal = simulate_task(df, ord, p.layout.op_layout, m, 0);
  // Mapping: the three tiers on fused tasks; or the hybrid: the V-independent prep as one
  // chunk-parallel kernel, then fused tasks (tiers 1-2) that no longer redo it per column slice.
  LINATTN_CHECK(opt.mapping == "auto" || opt.mapping == "head" || opt.mapping == "chc" || opt.mapping == "hybrid",
                "mapping: expected auto, head, chc or hybrid, got '", opt.mapping, "'");
  auto evaluate = [&](bool hybrid, LayerPlan& q) {
    std::map<std::pair<int64_t, int>, TaskStats> cache;
    auto fused_stats = [&](int64_t len, int cols) -> const TaskStats& {
      auto it = cache.find({len, cols});
      if (it == cache.end()) {
        const TaskStats st = hybrid ? simulate_hybrid_task(opt, q.order, len, cols)
                                    : simulate_fused_task(opt, q.order, len, cols);
        it = cache.emplace(std::make_pair(len, cols), st).first;
      }
      return it->second;
    };
    MappingOptions mo;
    mo.force_chc = opt.mapping == "chc";
    mo.allow_chc = !hybrid && opt.mapping != "head";
    q.mapping = plan_head_mapping(
        opt.lengths, opt.heads, opt.V, opt.dev.num_cores,
        [&](int64_t len, int cols) { return fused_stats(len, cols).time_us; },
        [&](int64_t len, int heads, int cores) {
          double t = 0.0;
          simulate_chc(opt, len, heads, cores, &t);
          return t;
        },
        mo);
    q.hybrid = hybrid;
    // Totals: every task's counts; the multi-kernel stages re-simulated for their counts.
    TaskStats sum, fused_sum;
    bool any_fused = false;
    std::map<int64_t, int> chc_heads, units;
    for (const auto& t : q.mapping.tasks) {
      if (t.tier == 3) {
        ++chc_heads[opt.lengths[t.seq]];
        continue;
      }
      if (t.v0 == 0) ++units[opt.lengths[t.seq]];
      fused_sum += fused_stats(opt.lengths[t.seq], t.v1 - t.v0);
      any_fused = true;
    }
    LayerTotals& T = q.totals;
    T = LayerTotals{};
    for (const auto& [len, h] : chc_heads) {
      sum += simulate_chc(opt, len, h, opt.dev.num_cores, nullptr);
      T.launches += 3;
    }
    q.prep_us = 0.0;
    if (hybrid) {
      for (const auto& [len, h] : units) {
        double t = 0.0;
        sum += simulate_prep(opt, q.order, len, h, opt.dev.num_cores, &t);
        q.prep_us += t;
      }
      T.launches += 1;
    }
    sum += fused_sum;
    T.launches += any_fused ? 1 : 0;
    T.gm_bytes = sum.gm_bytes();
    T.spill_bytes = sum.spill_bytes();
    T.layout_gm_bytes = sum.layout_gm_bytes;
    T.l1_l0_bytes = sum.l1_l0_bytes;
    // The fused kernel is bound by its busiest core or by DRAM; the multi-kernel stages (their
    // own DRAM bound included) run before (prep) or after (chunk-head-chunk) it.
    const double dram_us = fused_sum.gm_bytes() / opt.dev.dram_gbps * 1e-3;
    T.time_us = (any_fused ? std::max(q.mapping.fused_makespan_us, dram_us) + opt.dev.launch_us : 0.0) +
                q.mapping.chc_us + q.prep_us;
    const double cap = T.time_us * opt.dev.num_cores;
    T.matrix_util = cap > 0 ? sum.matrix_us / cap : 0.0;
    T.vector_util = cap > 0 ? (sum.vector_us + sum.transform_us) / cap : 0.0;
    const double busy = sum.matrix_us + sum.vector_us + sum.transform_us;
    T.transform_share = busy > 0 ? sum.transform_us / busy : 0.0;
    T.gm_time_share = sum.time_us > 0 ? sum.dma_us / sum.time_us : 0.0;
  };
  evaluate(opt.mapping == "hybrid", p);
  if (opt.mapping == "auto") {
    LayerPlan h = p;
    evaluate(true, h);
    if (h.totals.time_us < p.totals.time_us * 0.98) {
      h.mapping.reason += "; hybrid chosen: the prep kernel once per chunk instead of per column slice";
      p = std::move(h);
    }
  }
  return p;
}

std::string LayerPlan::to_string() const {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(2);
  os << "device  " << opt.dev.to_string() << "\n";
  os << "layer   " << family_name(opt.family) << ", " << opt.lengths.size() << " sequence(s) (longest "
     << *std::max_element(opt.lengths.begin(), opt.lengths.end()) << "), " << opt.heads << " heads, K " << opt.K
     << ", V " << opt.V << ", chunk " << opt.C << "\n";
  os << "order   " << order_name(order) << (opt.order == "auto" ? " (auto: fastest simulated task)" : "") << ":";
  for (const auto& n : order_ops) os << " " << n;
  os << "\nlayouts " << layout.how << ", layout cost " << layout.cost_us << " us per task, "
     << layout.states_evaluated << " assignments evaluated";
  for (const auto& c : layout.chain_summary) os << "\n  chain " << c;
  for (const auto& s : layout.sites) os << "\n  site  " << s;
  const double ideal = task_ideal.gm_bytes();
  os << "\ntask    one head, full V: UB peak " << kib(static_cast<double>(task_ideal.peak_bytes)) << " (buffer "
     << kib(static_cast<double>(opt.dev.ub_bytes)) << "), state buffers " << kib(static_cast<double>(task_ideal.peak_state_bytes))
     << "; GM ideal " << kib(ideal) << ", simulated " << kib(task.gm_bytes()) << " (+"
     << (ideal > 0 ? 100.0 * (task.gm_bytes() / ideal - 1.0) : 0.0) << "% from spills: " << kib(task.spill_bytes())
     << ", " << task.evictions << " evictions); " << task.time_us << " us (matrix " << task.matrix_us << ", vector "
     << task.vector_us << ", transforms " << task.transform_us << ", GM DMA " << task.dma_us << ", on-core moves "
     << task.move_us << ")\n        UB peak at " << task_ideal.peak_at << "\n";
  os << "mapping " << (hybrid ? "hybrid: chunk-parallel prep kernel (" : "") ;
  if (hybrid) os << prep_us << " us), then fused tasks: ";
  os << mapping.reason << "\n";
  os << "total   " << totals.time_us << " us, GM " << kib(totals.gm_bytes) << " (spills " << kib(totals.spill_bytes)
     << ", layout round trips " << kib(totals.layout_gm_bytes) << "), L1->L0 " << kib(totals.l1_l0_bytes)
     << ", matrix util " << 100.0 * totals.matrix_util << "%, vector util " << 100.0 * totals.vector_util
     << "%, transforms " << 100.0 * totals.transform_share << "% of unit time, GM DMA "
     << 100.0 * totals.gm_time_share << "% of task time, " << totals.launches << " launch(es)\n";
  return os.str();
}

std::string LayerPlan::to_json() const {
  std::ostringstream os;
  os << "{\"device\":\"" << opt.dev.name << "\",\"cores\":" << opt.dev.num_cores << ",\"family\":\""
     << family_name(opt.family) << "\",\"lengths\":[";
  for (size_t i = 0; i < opt.lengths.size(); ++i) os << (i ? "," : "") << opt.lengths[i];
  os << "],\"heads\":" << opt.heads << ",\"K\":" << opt.K << ",\"V\":" << opt.V << ",\"C\":" << opt.C
     << ",\"order\":\"" << order_name(order) << "\",\"layouts\":\"" << layout.how << "\",\"layout_cost_us\":"
     << layout.cost_us << ",\"layout_states\":" << layout.states_evaluated << ",\"chains\":[";
  for (size_t i = 0; i < layout.chain_summary.size(); ++i) os << (i ? "," : "") << "\"" << layout.chain_summary[i] << "\"";
  os << "],\"task\":{\"ub_peak_bytes\":" << task_ideal.peak_bytes << ",\"state_bytes\":" << task_ideal.peak_state_bytes
     << ",\"gm_ideal_bytes\":" << task_ideal.gm_bytes() << ",\"gm_bytes\":" << task.gm_bytes()
     << ",\"spill_bytes\":" << task.spill_bytes() << ",\"evictions\":" << task.evictions << ",\"time_us\":" << task.time_us
     << ",\"matrix_us\":" << task.matrix_us << ",\"vector_us\":" << task.vector_us << ",\"transform_us\":"
     << task.transform_us << ",\"dma_us\":" << task.dma_us << ",\"move_us\":" << task.move_us
     << "},\"mapping\":{\"units\":" << mapping.units << ",\"residual\":" << mapping.residual << ",\"tail_tier\":"
     << mapping.tail_tier << ",\"v_splits\":" << mapping.v_splits << ",\"tasks\":" << mapping.tasks.size()
     << ",\"makespan_us\":" << mapping.makespan_us << ",\"hybrid\":" << (hybrid ? "true" : "false")
     << ",\"prep_us\":" << prep_us << "},\"total\":{\"time_us\":" << totals.time_us
     << ",\"gm_bytes\":" << totals.gm_bytes << ",\"spill_bytes\":" << totals.spill_bytes << ",\"layout_gm_bytes\":"
     << totals.layout_gm_bytes << ",\"l1_l0_bytes\":" << totals.l1_l0_bytes << ",\"matrix_util\":" << totals.matrix_util
     << ",\"vector_util\":" << totals.vector_util << ",\"transform_share\":" << totals.transform_share
     << ",\"gm_time_share\":" << totals.gm_time_share << ",\"launches\":" << totals.launches << "}}";
  return os.str();
}

}  // namespace linattn::plan::npu
