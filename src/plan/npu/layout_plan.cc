// Layout planner: cost model, chains, dynamic program, brute-force checks (see layout_plan.h).
#include "plan/npu/layout_plan.h"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <sstream>

#include "core/check.h"

namespace linattn::plan::npu {
namespace {

constexpr int kMaxBruteBits = 24;

// Tensors whose handoff a chunk group pays: chunk-local tensors of chunk c and the state S_c
// entering it (group num_chunks holds the final state only).
int tensor_group(const TensorNode& t) { return t.state ? t.chunk + 1 : t.chunk; }

// A vector (one row or one column: GDN's gates and beta) looks the same in both layouts.
bool layout_free(const TensorNode& t) { return t.rows == 1 || t.cols == 1; }

struct Groups {
  std::vector<std::vector<int>> ops, tensors;
};

Groups make_groups(const Dataflow& df) {
  Groups g;
  g.ops.resize(df.num_chunks + 1);
  g.tensors.resize(df.num_chunks + 1);
  for (int i = 0; i < static_cast<int>(df.ops.size()); ++i)
    if (df.ops[i].unit == Unit::kVector) g.ops[df.ops[i].chunk].push_back(i);
  for (int t = 0; t < static_cast<int>(df.tensors.size()); ++t) g.tensors[tensor_group(df.tensors[t])].push_back(t);
  return g;
}

double group_cost(const Dataflow& df, const Groups& g, int c, const std::vector<Layout>& L, const LayoutCostModel& m) {
  double us = 0.0;
  for (int id : g.ops[c]) us += vector_op_us(df.ops[id], id, L[id], m);
  for (int t : g.tensors[c]) us += tensor_handoff(df, t, L, m).us;
  return us;
}

void describe(const Dataflow& df, LayoutPlan& p, const LayoutCostModel& m) {
  p.cost_us = layout_cost_us(df, p.op_layout, m);
  if (df.num_chunks == 0) return;
  for (const auto& ch : vector_chains(df, 0)) {
    std::ostringstream os;
    for (size_t i = 0; i < ch.size(); ++i) os << (i ? "," : "") << df.ops[ch[i]].base;
    os << " -> " << layout_name(p.op_layout[ch[0]]);
    p.chain_summary.push_back(os.str());
  }
  for (int t = 0; t < static_cast<int>(df.tensors.size()); ++t) {
    if (tensor_group(df.tensors[t]) > 1 || (tensor_group(df.tensors[t]) == 1 && !df.tensors[t].state)) continue;
    const Handoff h = tensor_handoff(df, t, p.op_layout, m);
    if (h.reformats == 0 && !h.via_gm) continue;
    std::ostringstream os;
    os << df.tensors[t].name << " (" << layout_name(h.layout) << "): " << h.reformats << " reformat(s) on the Vector unit"
       << (h.via_gm ? ", UB->GM->L1 round trip to the Matrix unit" : "");
    p.sites.push_back(os.str());
  }
}

}  // namespace

const char* layout_name(Layout l) { return l == Layout::kBlocked ? "blocked" : "dense"; }

LayoutCostModel default_cost_model(const NpuDevice& dev) {
  LayoutCostModel m;
  m.dev = dev;
  return m;
}

Layout tensor_layout(const Dataflow& df, int t, const std::vector<Layout>& op_layout) {
  const int p = df.producer[t];
  if (p < 0) return Layout::kDense;
  const OpNode& o = df.ops[p];
  if (o.unit == Unit::kMatrix) return Layout::kBlocked;
  return o.unit == Unit::kVector ? op_layout[p] : Layout::kDense;
}

double vector_op_us(const OpNode& o, int op_id, Layout l, const LayoutCostModel& m) {
  if (o.unit != Unit::kVector) return 0.0;
  double us = o.flops / m.dev.vector_flops * 1e6;
  if (l == Layout::kBlocked) us *= m.blocked_penalty[static_cast<int>(o.kind)];
  if (!m.op_scale.empty()) us *= m.op_scale[op_id];
  return us;
}

Handoff tensor_handoff(const Dataflow& df, int t, const std::vector<Layout>& op_layout, const LayoutCostModel& m) {
  const TensorNode& tn = df.tensors[t];
  Handoff h;
  h.layout = tensor_layout(df, t, op_layout);
  bool need[2] = {false, false};
  bool matrix = false;
  for (int u : df.consumers[t]) {
    if (df.ops[u].unit == Unit::kVector) need[static_cast<int>(op_layout[u])] = true;
    if (df.ops[u].unit == Unit::kMatrix) matrix = true;
  }
  if (tn.output) need[static_cast<int>(Layout::kDense)] = true;
  const double bytes = static_cast<double>(tn.bytes);
  for (Layout l : {Layout::kBlocked, Layout::kDense}) {
    if (layout_free(tn)) break;
    if (need[static_cast<int>(l)] && l != h.layout) {
      h.reformat_us += bytes / m.dev.reformat_gbps * 1e-3;
      ++h.reformats;
    }
  }
  if (matrix) {
    const double ob = static_cast<double>(tn.rows * tn.cols * m.dev.operand_bytes);
    if (tn.external) {  // GM -> L1 converts on the fly
      h.feed_us += bytes / m.dev.gm_l1_gbps * 1e-3;
      h.gm_bytes += bytes;
    } else if (h.layout == Layout::kBlocked || need[static_cast<int>(Layout::kBlocked)]) {
      h.feed_us += ob / m.dev.ub_l1_gbps * 1e-3;
    } else {
      const double via_gm = ob / m.dev.ub_gm_l1_gbps * 1e-3;
      const double reformat = bytes / m.dev.reformat_gbps * 1e-3 + ob / m.dev.ub_l1_gbps * 1e-3;
      if (via_gm < reformat) {
        h.feed_us += via_gm;
        h.gm_bytes += 2 * ob;
        h.via_gm = true;
      } else {
        h.feed_us += reformat;
        ++h.reformats;
      }
    }
  }
  h.us = h.reformat_us + h.feed_us;
  return h;
}

double layout_cost_us(const Dataflow& df, const std::vector<Layout>& op_layout, const LayoutCostModel& m) {
  LINATTN_CHECK(op_layout.size() == df.ops.size(), "layout: ", op_layout.size(), " entries for ", df.ops.size(),
                " ops");
  double us = 0.0;
  for (int i = 0; i < static_cast<int>(df.ops.size()); ++i) us += vector_op_us(df.ops[i], i, op_layout[i], m);
  for (int t = 0; t < static_cast<int>(df.tensors.size()); ++t) us += tensor_handoff(df, t, op_layout, m).us;
  return us;
}

std::vector<std::vector<int>> vector_chains(const Dataflow& df, int chunk) {
  std::vector<int> ids;
  for (int i = 0; i < static_cast<int>(df.ops.size()); ++i)
    if (df.ops[i].chunk == chunk && df.ops[i].unit == Unit::kVector) ids.push_back(i);
  std::vector<int> root(df.ops.size());
  std::iota(root.begin(), root.end(), 0);
  auto find = [&](int x) {
    while (root[x] != x) x = root[x] = root[root[x]];
    return x;
  };
  for (int p : ids)
    for (int t : df.ops[p].outputs) {
      if (df.tensors[t].state || layout_free(df.tensors[t])) continue;  // S_{c+1}: next chunk's group
      for (int u : df.consumers[t])
        if (df.ops[u].unit == Unit::kVector && df.ops[u].chunk == chunk) root[find(u)] = find(p);
    }
  std::vector<std::vector<int>> chains;
  std::vector<int> slot(df.ops.size(), -1);
  for (int id : ids) {
    const int r = find(id);
    if (slot[r] < 0) {
      slot[r] = static_cast<int>(chains.size());
      chains.emplace_back();
    }
    chains[slot[r]].push_back(id);
  }
  const int up = chunk < static_cast<int>(df.state_update.size()) ? df.state_update[chunk] : -1;
  std::stable_partition(chains.begin(), chains.end(), [&](const std::vector<int>& ch) {
    return std::find(ch.begin(), ch.end(), up) != ch.end();
  });
  return chains;
}

LayoutPlan plan_layouts_dp(const Dataflow& df, const LayoutCostModel& m) {
  const int nc = df.num_chunks;
  const Groups g = make_groups(df);
  std::vector<std::vector<std::vector<int>>> chains(nc);
  for (int c = 0; c < nc; ++c) {
    chains[c] = vector_chains(df, c);
    LINATTN_CHECK(chains[c].size() < 20, "layout dp: ", chains[c].size(), " chains in chunk ", c);
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  struct Back {
    int prev = 0;
    uint32_t mask = 0;
  };
  std::vector<std::array<Back, 2>> back(nc);
  std::array<double, 2> best = {0.0, 0.0};
  std::vector<Layout> L(df.ops.size(), Layout::kDense);
  LayoutPlan p;
  p.how = "dp";
  for (int c = 0; c < nc; ++c) {
    std::array<double, 2> next = {kInf, kInf};
    const uint32_t masks = 1u << chains[c].size();
    for (int xp = 0; xp < (c == 0 ? 1 : 2); ++xp) {
      if (c > 0) L[df.state_update[c - 1]] = static_cast<Layout>(xp);
      for (uint32_t mask = 0; mask < masks; ++mask) {
        for (size_t j = 0; j < chains[c].size(); ++j)
          for (int id : chains[c][j]) L[id] = (mask >> j) & 1u ? Layout::kDense : Layout::kBlocked;
        const int x = static_cast<int>(L[df.state_update[c]]);
        const double cost = best[xp] + group_cost(df, g, c, L, m);
        ++p.states_evaluated;
        if (cost < next[x]) {
          next[x] = cost;
          back[c][x] = {xp, mask};
        }
      }
    }
    best = next;
  }
  int x = 0;
  double total = kInf;
  for (int xl = 0; xl < 2; ++xl) {
    if (nc == 0) break;
    L[df.state_update[nc - 1]] = static_cast<Layout>(xl);
    const double cost = best[xl] + group_cost(df, g, nc, L, m);
    if (cost < total) {
      total = cost;
      x = xl;
    }
  }
  for (int c = nc - 1; c >= 0; --c) {  // backtrack the recorded predecessors
    const Back b = back[c][x];
    for (size_t j = 0; j < chains[c].size(); ++j)
      for (int id : chains[c][j]) L[id] = (b.mask >> j) & 1u ? Layout::kDense : Layout::kBlocked;
    x = b.prev;
  }
  p.op_layout = L;
  describe(df, p, m);
  return p;
}

namespace {

// Every dense / blocked assignment of the groups (bit j of the mask: group j dense), the
// cheapest kept (the first of equal costs); ops outside every group stay dense.
LayoutPlan brute_force(const Dataflow& df, const LayoutCostModel& m, const char* how,
                       const std::vector<std::vector<int>>& groups) {
  LayoutPlan p;
  p.how = how;
  std::vector<Layout> L(df.ops.size(), Layout::kDense);
  double best = std::numeric_limits<double>::infinity();
  for (uint32_t mask = 0; mask < (1u << groups.size()); ++mask) {
    for (size_t j = 0; j < groups.size(); ++j)
      for (int id : groups[j]) L[id] = (mask >> j) & 1u ? Layout::kDense : Layout::kBlocked;
    const double cost = layout_cost_us(df, L, m);
    ++p.states_evaluated;
    if (cost < best) {
      best = cost;
      p.op_layout = L;
    }
  }
  describe(df, p, m);
  return p;
}

}  // namespace

LayoutPlan plan_layouts_brute_chains(const Dataflow& df, const LayoutCostModel& m) {
  std::vector<std::vector<int>> all;
  for (int c = 0; c < df.num_chunks; ++c)
    for (auto& ch : vector_chains(df, c)) all.push_back(ch);
  LINATTN_CHECK(all.size() <= kMaxBruteBits, "brute force over chains: ", all.size(), " chains (limit ", kMaxBruteBits,
                ")");
  return brute_force(df, m, "brute-chains", all);
}

LayoutPlan plan_layouts_brute_ops(const Dataflow& df, const LayoutCostModel& m) {
  std::vector<std::vector<int>> ids;  // one op per group
  for (int i = 0; i < static_cast<int>(df.ops.size()); ++i)
    if (df.ops[i].unit == Unit::kVector) ids.push_back({i});
  LINATTN_CHECK(ids.size() <= kMaxBruteBits, "brute force over ops: ", ids.size(), " vector ops (limit ",
                kMaxBruteBits, ")");
  return brute_force(df, m, "brute-ops", ids);
}

LayoutPlan uniform_layouts(const Dataflow& df, Layout l, const LayoutCostModel& m) {
  LayoutPlan p;
  p.how = l == Layout::kDense ? "all-dense" : "all-blocked";
  p.op_layout.assign(df.ops.size(), l);
  describe(df, p, m);
  return p;
}

}  // namespace linattn::plan::npu
