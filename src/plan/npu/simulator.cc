// Task replay on the device model (see simulator.h).
#include "plan/npu/simulator.h"

#include <algorithm>
#include <limits>
#include <list>

#include "core/check.h"

namespace linattn::plan::npu {
namespace {

// LRU set of tensor ids with a byte capacity (L1 and L0A/L0B operand staging).
class Lru {
 public:
  explicit Lru(int64_t cap) : cap_(cap) {}
  bool touch(int id) {
    for (auto it = items_.begin(); it != items_.end(); ++it)
      if (it->first == id) {
        items_.splice(items_.begin(), items_, it);
        return true;
      }
    return false;
  }
  void insert(int id, int64_t bytes) {
    while (!items_.empty() && used_ + bytes > cap_) {
      used_ -= items_.back().second;
      items_.pop_back();
    }
    items_.emplace_front(id, bytes);
    used_ += bytes;
  }

 private:
  int64_t cap_;
  int64_t used_ = 0;
  std::list<std::pair<int, int64_t>> items_;
};

}  // namespace

// The additive fields: summed by +=, scaled by scaled() (peaks and evictions apart).
constexpr double TaskStats::*kAdditive[] = {
    &TaskStats::time_us,           &TaskStats::matrix_us,        &TaskStats::vector_us,
    &TaskStats::transform_us,      &TaskStats::dma_us,           &TaskStats::move_us,
    &TaskStats::overhead_us,       &TaskStats::gm_load_bytes,    &TaskStats::gm_store_bytes,
    &TaskStats::spill_store_bytes, &TaskStats::spill_load_bytes, &TaskStats::layout_gm_bytes,
    &TaskStats::l1_l0_bytes,       &TaskStats::matrix_flops,     &TaskStats::vector_flops};

TaskStats& TaskStats::operator+=(const TaskStats& o) {
  for (double TaskStats::*field : kAdditive) this->*field += o.*field;
  if (o.peak_bytes > peak_bytes) peak_at = o.peak_at;
  peak_bytes = std::max(peak_bytes, o.peak_bytes);
  peak_state_bytes = std::max(peak_state_bytes, o.peak_state_bytes);
  evictions += o.evictions;
  return *this;
}

TaskStats TaskStats::scaled(double f) const {
  TaskStats s = *this;
  for (double TaskStats::*field : kAdditive) s.*field *= f;
  s.evictions = static_cast<int64_t>(static_cast<double>(evictions) * f);
  return s;
}

TaskStats simulate_task(const Dataflow& df, const std::vector<int>& order, const std::vector<Layout>& L,
                        const LayoutCostModel& m, int64_t capacity_bytes, Eviction ev) {
  LINATTN_CHECK(L.size() == df.ops.size(), "simulate: ", L.size(), " layouts for ", df.ops.size(), " ops");
  const NpuDevice& d = m.dev;
  const int nt = static_cast<int>(df.tensors.size());
  const int64_t cap = capacity_bytes > 0 ? capacity_bytes : std::numeric_limits<int64_t>::max() / 4;
  std::vector<char> in_task(df.ops.size(), 0);
  for (int id : order) in_task[id] = 1;
  auto in_gm_only = [&](int t) { return df.producer[t] < 0 || !in_task[df.producer[t]]; };
  // Positions at which each tensor must sit in the UB.
  std::vector<std::vector<int>> uses(nt);
  for (int i = 0; i < static_cast<int>(order.size()); ++i) {
    const OpNode& o = df.ops[order[i]];
    for (int t : o.inputs) {
      if (o.unit == Unit::kMatrix && in_gm_only(t)) continue;  // GM -> L1 directly
      if (uses[t].empty() || uses[t].back() != i) uses[t].push_back(i);
    }
  }
  auto next_use = [&](int t, int i) {  // first use at or after i
    auto it = std::lower_bound(uses[t].begin(), uses[t].end(), i);
    return it == uses[t].end() ? std::numeric_limits<int>::max() : *it;
  };
  std::vector<char> leaves(nt, 0);
  for (int t = 0; t < nt; ++t) {
    leaves[t] = df.tensors[t].output;
    for (int u : df.consumers[t]) leaves[t] |= !in_task[u];
  }
  std::vector<char> res(nt, 0), dirty(nt, 0), seen(nt, 0);
  std::vector<int> last_touch(nt, -1);
  int64_t cur = 0, cur_state = 0;
  TaskStats s;
  Lru l1(d.l1_bytes), l0(d.l0ab_bytes);
  auto gm_us = [&](double bytes) { return bytes / d.gm_ub_gbps * 1e-3; };
  auto drop = [&](int t) {
    res[t] = 0;
    cur -= df.tensors[t].bytes;
    if (df.tensors[t].state) cur_state -= df.tensors[t].bytes;
  };
  auto alloc = [&](int t, int i, const std::vector<int>& pinned) {
    const int64_t b = df.tensors[t].bytes;
    while (cur + b > cap) {
      int victim = -1, far = -1;
      for (int r = 0; r < nt; ++r) {
        if (!res[r] || std::find(pinned.begin(), pinned.end(), r) != pinned.end()) continue;
        const int nu = ev == Eviction::kBelady ? next_use(r, i) : std::numeric_limits<int>::max() - 1 - last_touch[r];
        if (nu > far || (nu == far && df.tensors[r].bytes > df.tensors[victim].bytes)) {
          far = nu;
          victim = r;
        }
      }
      if (victim < 0) break;  // the op's own working set exceeds the buffer: overcommit
      if (dirty[victim]) {
        s.spill_store_bytes += static_cast<double>(df.tensors[victim].bytes);
        s.dma_us += gm_us(static_cast<double>(df.tensors[victim].bytes));
        dirty[victim] = 0;
      }
      drop(victim);
      ++s.evictions;
    }
    res[t] = 1;
    seen[t] = 1;
    cur += b;
    if (df.tensors[t].state) cur_state += b;
    if (cur > s.peak_bytes) {
      s.peak_bytes = cur;
      s.peak_at = df.ops[order[i]].name + ":";
      for (int r = 0; r < nt; ++r)
        if (res[r]) s.peak_at += " " + df.tensors[r].name + "(" + std::to_string(df.tensors[r].bytes / 1024) + "K)";
    }
    s.peak_state_bytes = std::max(s.peak_state_bytes, cur_state);
  };
  auto bring_in = [&](int t, int i, const std::vector<int>& pinned) {  // load or reload into the UB
    if (res[t]) return;
    const double b = static_cast<double>(df.tensors[t].bytes);
    (seen[t] ? s.spill_load_bytes : s.gm_load_bytes) += b;
    s.dma_us += gm_us(b);
    alloc(t, i, pinned);
  };
  for (int i = 0; i < static_cast<int>(order.size()); ++i) {
    const int id = order[i];
    const OpNode& o = df.ops[id];
    std::vector<int> pinned = o.inputs;
    for (int t : o.inputs) last_touch[t] = i;
    for (int t : o.outputs) last_touch[t] = i;
    if (o.unit == Unit::kLoad) {
      for (int t : o.inputs)
        if (next_use(t, i + 1) != std::numeric_limits<int>::max()) bring_in(t, i, pinned);
    } else {
      for (int t : o.inputs)
        if (!(o.unit == Unit::kMatrix && in_gm_only(t))) bring_in(t, i, pinned);
      if (o.unit == Unit::kMatrix) {
        s.matrix_us += o.flops / d.matrix_flops * 1e6;
        s.matrix_flops += o.flops;
        std::vector<int> seen_ops;
        for (int t : o.inputs) {
          if (std::find(seen_ops.begin(), seen_ops.end(), t) != seen_ops.end()) continue;
          seen_ops.push_back(t);
          const TensorNode& tn = df.tensors[t];
          const double ob = static_cast<double>(tn.rows * tn.cols * d.operand_bytes);
          if (l0.touch(t)) continue;
          l0.insert(t, static_cast<int64_t>(ob));
          s.l1_l0_bytes += ob;
          s.move_us += ob / d.l1_l0_gbps * 1e-3;
          if (l1.touch(t)) continue;
          l1.insert(t, static_cast<int64_t>(ob));
          if (in_gm_only(t)) {
            s.gm_load_bytes += static_cast<double>(tn.bytes);
            s.dma_us += static_cast<double>(tn.bytes) / d.gm_l1_gbps * 1e-3;
            continue;
          }
          const Handoff h = tensor_handoff(df, t, L, m);
          if (h.via_gm) {
            s.layout_gm_bytes += h.gm_bytes;
            s.dma_us += h.feed_us;
          } else if (h.layout == Layout::kBlocked) {
            s.move_us += h.feed_us;
          } else {
            s.transform_us += h.feed_us;
          }
        }
        for (int t : o.outputs) s.move_us += static_cast<double>(df.tensors[t].bytes) / d.l0c_ub_gbps * 1e-3;
      } else {
        s.vector_us += vector_op_us(o, id, L[id], m);
        s.vector_flops += o.flops;
      }
      for (int t : o.outputs) {
        const int src = o.in_place;
        if (src >= 0 && res[src] && next_use(src, i + 1) == std::numeric_limits<int>::max() && !leaves[src] &&
            df.tensors[src].bytes >= df.tensors[t].bytes)
          drop(src);  // the update overwrites the old state's buffer
        alloc(t, i, pinned);
        dirty[t] = 1;
        s.transform_us += tensor_handoff(df, t, L, m).reformat_us;
        if (leaves[t]) {
          s.gm_store_bytes += static_cast<double>(df.tensors[t].bytes);
          s.dma_us += gm_us(static_cast<double>(df.tensors[t].bytes));
          dirty[t] = 0;
        }
      }
    }
    for (int t : o.inputs)
      if (res[t] && next_use(t, i + 1) == std::numeric_limits<int>::max()) drop(t);
    for (int t : o.outputs)
      if (res[t] && next_use(t, i + 1) == std::numeric_limits<int>::max()) drop(t);
  }
  s.overhead_us = d.task_us;
  s.time_us = s.matrix_us + s.vector_us + s.transform_us + s.dma_us + s.move_us + s.overhead_us;
  return s;
}

}  // namespace linattn::plan::npu
