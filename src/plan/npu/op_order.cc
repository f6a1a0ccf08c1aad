// Operator orders (see op_order.h).
#include "plan/npu/op_order.h"

#include "core/check.h"

namespace linattn::plan::npu {
namespace {

// Per-chunk op lists (ops a family or form lacks are skipped).
const std::vector<std::string> kChunkFirstList = {"ld", "gcum", "kbeta", "vbeta", "kgate", "qgate", "kkt", "lmask",
                                                  "solve", "wmat", "umat", "ws", "qs", "vnew", "qkt", "pmask",
                                                  "ointra", "out", "kdec", "kv", "supd"};
const std::vector<std::string> kLifetimeList = {"ld", "gcum", "kbeta", "kgate", "qgate", "ks", "qs", "kkt", "qkt",
                                                "lmask", "pmask", "solve", "vbeta", "diff", "vnm", "ointra", "out",
                                                "kdec", "kv", "supd"};

// Moves ld[c + 1] right after ld[c] (issued one chunk early).
std::vector<int> with_prefetch(const Dataflow& df, const std::vector<int>& order) {
  std::vector<int> out;
  for (int id : order) {
    const OpNode& o = df.ops[id];
    if (o.unit != Unit::kLoad || o.chunk == 0) out.push_back(id);
    if (o.unit == Unit::kLoad) {  // chunk c's slot issues chunk c + 1's load
      const int next = df.find_op("ld", o.chunk + 1);
      if (next >= 0) out.push_back(next);
    }
  }
  return out;
}

}  // namespace

const char* order_name(OrderKind k) {
  switch (k) {
    case OrderKind::kFlaPhase: return "fla-phase";
    case OrderKind::kFla: return "fla";
    case OrderKind::kChunkFirst: return "chunk-first";
    case OrderKind::kLifetime: return "lifetime";
  }
  return "?";
}

OrderKind order_by_name(const std::string& name) {
  for (OrderKind k : {OrderKind::kFlaPhase, OrderKind::kFla, OrderKind::kChunkFirst, OrderKind::kLifetime})
    if (name == order_name(k)) return k;
  LINATTN_CHECK(false, "order: expected fla-phase, fla, chunk-first or lifetime, got '", name, "'");
  return OrderKind::kFla;
}

bool order_factored(OrderKind k) { return k == OrderKind::kLifetime; }

std::vector<int> make_order(const Dataflow& df, OrderKind k, bool prefetch) {
  LINATTN_CHECK(df.spec.factored == order_factored(k), "order ", order_name(k), ": needs the ",
                order_factored(k) ? "factored" : "FLA", " form of the dataflow");
  std::vector<int> order;
  if (k == OrderKind::kFla) {
    for (int i = 0; i < static_cast<int>(df.ops.size()); ++i) order.push_back(i);
  } else if (k == OrderKind::kFlaPhase) {
    for (int ph = 0; ph < 3; ++ph)
      for (int i = 0; i < static_cast<int>(df.ops.size()); ++i)
        if (df.ops[i].phase == ph) order.push_back(i);
    prefetch = false;  // the loads already sit in the first phase
  } else {
    const auto& list = k == OrderKind::kChunkFirst ? kChunkFirstList : kLifetimeList;
    for (int c = 0; c < df.num_chunks; ++c)
      for (const auto& base : list) {
        const int id = df.find_op(base, c);
        if (id >= 0) order.push_back(id);
      }
  }
  if (prefetch) order = with_prefetch(df, order);
  check_order(df, order);
  return order;
}

void check_order(const Dataflow& df, const std::vector<int>& order) {
  std::vector<int> pos(df.ops.size(), -1);
  for (int i = 0; i < static_cast<int>(order.size()); ++i) {
    const int id = order[i];
    LINATTN_CHECK(id >= 0 && id < static_cast<int>(df.ops.size()), "order: op id ", id, " out of range");
    LINATTN_CHECK(pos[id] < 0, "order: op ", df.ops[id].name, " listed twice");
    pos[id] = i;
  }
  LINATTN_CHECK(order.size() == df.ops.size(), "order: lists ", order.size(), " of ", df.ops.size(), " ops");
  for (int id : order)
    for (int t : df.ops[id].inputs) {
      const int p = df.producer[t];
      LINATTN_CHECK(p < 0 || pos[p] < pos[id], "order: ", df.ops[id].name, " runs before the producer of ",
                    df.tensors[t].name);
    }
}

}  // namespace linattn::plan::npu
