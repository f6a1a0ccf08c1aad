// Dataflow graph structure, FLOP counts of both forms, and the operator orders (topological,
// chunk-first property, the FLA order's late state read).
#include <gtest/gtest.h>

#include <algorithm>

#include "linattn/error.h"
#include "plan/npu/dataflow.h"
#include "plan/npu/op_order.h"

namespace linattn::plan::npu {
namespace {

DataflowSpec small_spec(Family f, bool factored, int64_t T = 37) {
  DataflowSpec s;
  s.family = f;
  s.T = T;
  s.C = 16;
  s.K = 32;
  s.V = 24;
  s.factored = factored;
  return s;
}

TEST(NpuDataflow, StructureAndStateChain) {
  for (Family f : {Family::kGdn, Family::kKda})
    for (bool fac : {false, true}) {
      const Dataflow df = build_dataflow(small_spec(f, fac));
      ASSERT_EQ(df.num_chunks, 3);
      ASSERT_EQ(static_cast<int>(df.state_update.size()), 3);
      for (int i = 0; i < static_cast<int>(df.ops.size()); ++i)
        for (int t : df.ops[i].inputs) {
          const int p = df.producer[t];
          EXPECT_TRUE(df.tensors[t].external ? p < 0 : (p >= 0 && p < i))
              << df.ops[i].name << " reads " << df.tensors[t].name << " produced by op " << p;
        }
      for (int c = 0; c < 3; ++c) {
        const OpNode& up = df.ops[df.state_update[c]];
        EXPECT_TRUE(df.tensors[up.in_place].state) << up.name;
        EXPECT_EQ(df.tensors[up.outputs[0]].bytes, 32 * 24 * 4);
      }
      int outputs = 0;
      for (const auto& t : df.tensors) outputs += t.output ? 1 : 0;
      EXPECT_EQ(outputs, 3 + 1);  // o per chunk and the final state
      const int q2 = df.producer[df.ops[df.find_op("ld", 2)].inputs[0]];
      EXPECT_EQ(q2, -1);
      EXPECT_EQ(df.tensors[df.ops[df.find_op("ld", 2)].inputs[0]].rows, 37 - 32);  // partial last chunk
    }
}

TEST(NpuDataflow, FactoredFormDropsOneGemmPerChunk) {
  for (Family f : {Family::kGdn, Family::kKda}) {
    const Dataflow a = build_dataflow(small_spec(f, false)), b = build_dataflow(small_spec(f, true));
    double expect_fla = 0.0, saved = 0.0;
    for (int64_t n : {16, 16, 5}) {
      expect_fla += 6.0 * n * n * 32 + 4.0 * n * n * 24 + 6.0 * n * 32 * 24;
      saved += 2.0 * n * n * 32;
    }
    EXPECT_DOUBLE_EQ(a.flops(Unit::kMatrix), expect_fla) << family_name(f);
    EXPECT_DOUBLE_EQ(a.flops(Unit::kMatrix) - b.flops(Unit::kMatrix), saved) << family_name(f);
  }
}

TEST(NpuOrder, EveryOrderIsTopologicalAndChunkFirstReadsStateBeforeUpdate) {
  for (Family f : {Family::kGdn, Family::kKda})
    for (OrderKind k : {OrderKind::kFlaPhase, OrderKind::kFla, OrderKind::kChunkFirst, OrderKind::kLifetime})
      for (bool pf : {false, true}) {
        const Dataflow df = build_dataflow(small_spec(f, order_factored(k)));
        const auto ord = make_order(df, k, pf);  // check_order inside
        std::vector<int> pos(df.ops.size());
        for (int i = 0; i < static_cast<int>(ord.size()); ++i) pos[ord[i]] = i;
        for (int c = 0; c < df.num_chunks; ++c) {
          const int up = df.state_update[c];
          const int state_in = df.ops[up].in_place;
          int last_reader = -1;
          for (int u : df.consumers[state_in])
            if (u != up) last_reader = std::max(last_reader, pos[u]);
          if (k == OrderKind::kChunkFirst || k == OrderKind::kLifetime) {
            EXPECT_LT(last_reader, pos[up]) << order_name(k) << " chunk " << c;
          } else {
            EXPECT_GT(last_reader, pos[up]) << order_name(k) << " chunk " << c << ": Q S_c after the update";
          }
          if (pf && k != OrderKind::kFlaPhase && c + 1 < df.num_chunks) {
            EXPECT_LT(pos[df.find_op("ld", c + 1)], pos[df.find_op("gcum", c)]) << "prefetch of chunk " << c + 1;
          }
        }
      }
}

TEST(NpuOrder, RejectsWrongFormAndBrokenOrders) {
  const Dataflow fla = build_dataflow(small_spec(Family::kGdn, false));
  EXPECT_THROW(make_order(fla, OrderKind::kLifetime), Error);
  auto ord = make_order(fla, OrderKind::kFla);
  const auto kkt = std::find(ord.begin(), ord.end(), fla.find_op("kkt", 0));
  const auto lmask = std::find(ord.begin(), ord.end(), fla.find_op("lmask", 0));
  std::iter_swap(kkt, lmask);
  EXPECT_THROW(check_order(fla, ord), Error);
  ord.pop_back();
  EXPECT_THROW(check_order(fla, ord), Error);
  EXPECT_THROW(order_by_name("nope"), Error);
}

}  // namespace
}  // namespace linattn::plan::npu
