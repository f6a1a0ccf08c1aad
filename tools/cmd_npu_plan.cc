// `linattn npu-plan [--op gdn|kda] [--T 2048 | --lengths a,b,..] [--heads 10] [--K 128] [--V 128]
//   [--C 64] [--device 310p|h200|cpu:N] [--cores N] [--reformat-gbps G] [--vector-tflops F]
//   [--task-us U] [--ablation-base dense|blocked] [--order auto|fla-phase|fla|chunk-first|lifetime]
//   [--layouts dp|dense|blocked] [--mapping auto|head|chc] [--no-prefetch] [--narrow] [--eviction belady|lru] [--json]
//   [--ablation] [--orders] [--cpu-threads N]`: plans one GDN / KDA layer for an NPU-like device
// (src/plan/npu) and prints the plan and its simulated cost. --ablation prints the HA-NPU ablation
// ladder (FLA mapping -> head mapping -> reordering -> layout planning), --orders every operator
// order's footprint and spill traffic, --cpu-threads the CPU planner's plan (plan/chunk_plan.h)
// for the same shape next to the NPU planner's mapping on a CPU-like device of that many cores.
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "core/check.h"
#include "linattn/error.h"
#include "plan/chunk_plan.h"
#include "plan/npu/npu_plan.h"

namespace linattn::cli {
namespace {

using namespace linattn::plan::npu;

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoll(item));
  return v;
}

LayerPlanOptions options_from(const Args& a) {
  LayerPlanOptions o;
  const std::string op = flag(a, "op", "gdn");
  LINATTN_CHECK(op == "gdn" || op == "kda", "--op: expected gdn or kda, got '", op, "'");
  o.family = op == "kda" ? Family::kKda : Family::kGdn;
  const std::string lens = flag(a, "lengths", "");
  o.lengths = lens.empty() ? std::vector<int64_t>{std::stoll(flag(a, "T", "2048"))} : parse_list(lens);
  o.heads = std::stoi(flag(a, "heads", "10"));
  o.K = std::stoi(flag(a, "K", "128"));
  o.V = std::stoi(flag(a, "V", "128"));
  o.C = std::stoi(flag(a, "C", "64"));
  o.dev = device_by_name(flag(a, "device", "310p"));
  const std::string cores = flag(a, "cores", "");
  if (!cores.empty()) o.dev.num_cores = std::stoi(cores);
  const std::string reformat = flag(a, "reformat-gbps", ""), vec = flag(a, "vector-tflops", "");
  if (!reformat.empty()) o.dev.reformat_gbps = std::stod(reformat);
  if (!vec.empty()) o.dev.vector_flops = std::stod(vec) * 1e12;
  const std::string task = flag(a, "task-us", "");
  if (!task.empty()) o.dev.task_us = std::stod(task);
  o.order = flag(a, "order", "auto");
  o.layouts = flag(a, "layouts", "dp");
  o.mapping = flag(a, "mapping", "auto");
  o.prefetch = !has_flag(a, "no-prefetch");
  o.narrow_operands = has_flag(a, "narrow");
  const std::string ev = flag(a, "eviction", "belady");
  LINATTN_CHECK(ev == "belady" || ev == "lru", "--eviction: expected belady or lru, got '", ev, "'");
  o.eviction = ev == "lru" ? Eviction::kLru : Eviction::kBelady;
  return o;
}

void print_orders(const LayerPlanOptions& base) {
  std::printf("order        UB peak   state   GM ideal    GM sim   spill+%%  task us\n");
  for (OrderKind k : {OrderKind::kFlaPhase, OrderKind::kFla, OrderKind::kChunkFirst, OrderKind::kLifetime}) {
    LayerPlanOptions o = base;
    o.order = order_name(k);
    const LayerPlan p = plan_layer(o);
    const double ideal = p.task_ideal.gm_bytes();
    std::printf("%-11s %7.1fK %6.1fK %9.1fK %9.1fK %7.1f%% %8.1f\n", order_name(k), p.task_ideal.peak_bytes / 1024.0,
                p.task_ideal.peak_state_bytes / 1024.0, ideal / 1024, p.task.gm_bytes() / 1024,
                100.0 * (p.task.gm_bytes() / ideal - 1.0), p.task.time_us);
  }
}

void print_ablation(const LayerPlanOptions& base, const std::string& base_layouts) {
  struct Step {
    const char* name;
    const char* mapping;
    const char* order;
    const char* layouts;
  };
  // The layouts before planning: every vector op dense (the Vector unit's natural layout) or
  // every one blocked (the Matrix unit's), each handoff through its cheaper transformation site.
  const char* b = base_layouts == "blocked" ? "blocked" : "dense";
  const Step steps[] = {{"FLA (chunk-head-chunk, FLA order)", "chc", "fla", b},
                        {"+ head-level mapping (fused, FLA order)", "auto", "fla", b},
                        {"+ lifetime-aware reordering", "auto", "auto", b},
                        {"+ layout planning (DP)", "auto", "auto", "dp"}};
  double prev = 0.0, first = 0.0;
  std::printf("step                                         time us  vs prev   vs FLA   GM KiB  L1->L0 KiB  matrix%%  "
              "transf%%  GM-time%%\n");
  for (const Step& s : steps) {
    LayerPlanOptions o = base;
    o.mapping = s.mapping;
    o.order = s.order;
    o.layouts = s.layouts;
    const LayerPlan p = plan_layer(o);
    const double t = p.totals.time_us;
    if (first == 0.0) first = t;
    std::printf("%-42s %9.1f %7.1f%% %7.2fx %8.0f %11.0f %8.2f %8.1f %9.1f\n", s.name, t,
                prev > 0 ? 100.0 * (t / prev - 1.0) : 0.0, first / t, p.totals.gm_bytes / 1024,
                p.totals.l1_l0_bytes / 1024, 100.0 * p.totals.matrix_util, 100.0 * p.totals.transform_share,
                100.0 * p.totals.gm_time_share);
    prev = t;
  }
}

int cmd_npu_plan(const Args& a) {
  try {
    const LayerPlanOptions o = options_from(a);
    if (has_flag(a, "ablation")) {
      print_ablation(o, flag(a, "ablation-base", "dense"));
      return 0;
    }
    if (has_flag(a, "orders")) {
      print_orders(o);
      return 0;
    }
    const LayerPlan p = plan_layer(o);
    if (has_flag(a, "json")) {
      std::printf("%s\n", p.to_json().c_str());
    } else {
      std::printf("%s", p.to_string().c_str());
    }
    const std::string threads = flag(a, "cpu-threads", "");
    if (!threads.empty()) {
      meta::ChunkAttnDesc d;
      d.op = o.family == Family::kKda ? ChunkOp::kKda : ChunkOp::kGdn;
      d.N = static_cast<int64_t>(o.lengths.size());
      d.B = 1;
      d.varlen = true;
      for (int64_t l : o.lengths) d.T += l;
      d.H = d.HV = o.heads;
      d.K = o.K;
      d.V = o.V;
      d.BT = o.C;
      const plan::ChunkPlan cp = plan::plan_chunk_fwd(d, o.lengths, std::stoi(threads));
      std::printf("cpu plan (plan/chunk_plan.h): %s\n", cp.to_string().c_str());
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "npu-plan: %s\n", e.what());
    return 2;
  }
}

}  // namespace

LINATTN_SUBCOMMAND("npu-plan", "plan a GDN/KDA layer for an NPU-like device and simulate it (src/plan/npu)",
                   cmd_npu_plan);

}  // namespace linattn::cli
