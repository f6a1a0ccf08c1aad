// Context-parallel GDN / KDA over 2, 4 and 8 simulated ranks (threads, ThreadCommunicator) on the
// CPU: forward and backward equal the single-device op (fp32 tolerances; bf16 cases against the
// fp64 reference only) and the fp64 reference, for varlen layouts whose sequences cross several ranks (cuts inside chunks, an
// empty rank, 1- and 2-row ranks), GVA, in-kernel options, initial states, state_v_first, bf16,
// tier 3 inside a rank, and per-rank parameter-grad partials. Also: the ThreadCommunicator all-gather and the shard metadata.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/chunk_attn_check.h"
#include "common/chunk_attn_gen.h"
#include "common/compare.h"
#include "cp_test_util.h"
#include "linattn/error.h"
#include "parallel/cp_ops.h"
#include "parallel/cp_shard.h"

namespace linattn::test {
namespace {

TEST(ThreadComm, AllGatherInRankOrder) {
  for (int world : {1, 3, 8})
    run_ranks(world, [&](int rank, parallel::Communicator& c) {
      for (int round = 0; round < 3; ++round) {
        const int mine[2] = {rank * 10 + round, -rank};
        std::vector<int> all(2 * static_cast<size_t>(world));
        c.all_gather(mine, all.data(), sizeof(mine), nullptr);
        for (int r = 0; r < world; ++r) {
          ASSERT_EQ(all[2 * r], r * 10 + round);
          ASSERT_EQ(all[2 * r + 1], -r);
        }
      }
    });
}

TEST(CpShard, HeadsTailsAndEmptySequences) {
  const Tensor cu = cu_seqlens_tensor({10, 0, 25, 5}, DType::kI32);  // rows 0..40
  const Tensor off = offsets_tensor({0, 10, 10, 30, 40});
  const parallel::CpShard r0 = parallel::make_shard(cu, off, 0, 4);
  ASSERT_EQ(r0.seqs.size(), 1u);  // sequence 0; the empty one at row 10 belongs to rank 2
  EXPECT_TRUE(r0.seqs[0].ends_here);
  const parallel::CpShard r1 = parallel::make_shard(cu, off, 1, 4);
  EXPECT_TRUE(r1.seqs.empty());
  const parallel::CpShard r2 = parallel::make_shard(cu, off, 2, 4);
  ASSERT_EQ(r2.seqs.size(), 2u);
  EXPECT_EQ(r2.seqs[0].n, 1);
  EXPECT_EQ(r2.seqs[0].bos, r2.seqs[0].eos);
  EXPECT_TRUE(r2.has_tail());
  const parallel::CpShard r3 = parallel::make_shard(cu, off, 3, 4);
  EXPECT_TRUE(r3.has_head());
  EXPECT_EQ(r3.seqs.size(), 2u);
  EXPECT_THROW(parallel::make_shard(cu, offsets_tensor({0, 20, 10, 30, 40}), 0, 4), Error);
}

struct Case {
  std::string name;
  ChunkOp op;
  bool vfirst = false;
  int segments = 1;     // tier 3 inside each rank
  bool reduce = true;   // CpContext::reduce_param_grads (false: the test sums the partials)
  DType dtype = DType::kF32;
  bool one_seq = false;  // one long sequence (every middle rank crossed whole) instead of varlen
};

ChunkAttnData make(const Case& c) {
  ChunkAttnSpec s;
  s.opt.op = c.op;
  s.opt.chunk_size = 16;
  s.opt.use_qk_l2norm_in_kernel = s.opt.use_gate_in_kernel = s.opt.use_beta_sigmoid_in_kernel = true;
  s.opt.output_final_state = true;
  s.opt.state_v_first = c.vfirst;
  s.opt.segments = c.segments;
  s.H = 1;
  s.HV = 2;
  s.K = 16;
  s.V = 20;
  s.seqlens = c.one_seq ? std::vector<int64_t>{203} : std::vector<int64_t>{37, 0, 5, 100, 1, 60};
  s.pad_tokens = 3;
  s.dtype = c.dtype;
  s.seed = 17;
  ChunkAttnData d = make_chunk_attn(s);
  // fp32: weak decay, so states cross ranks visibly. bf16 keeps the generator's gates: with weak
  // decay the single-device bf16 backward's ddt_bias ([HV] scalars) already sits at FLA's bar.
  if (c.dtype == DType::kF32)
    for (int64_t j = 0; j < s.HV; ++j) d.A_log.set(j, -6.0);
  return d;
}

class CpChunk : public ::testing::TestWithParam<Case> {};

TEST_P(CpChunk, EqualsSingleDevice) {
  const Case c = GetParam();
  const ChunkAttnData d = make(c);
  Rng rng(4);
  const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kF32, true);
  ChunkAttnOptions single_opt = d.opt();
  single_opt.segments = 1;
  const DType dt = c.dtype;
  ChunkAttnOutTensors one = alloc_outputs(d, dt, DType::kF32);
  chunk_attn_fwd(d.inputs(), one.views(), single_opt);
  ChunkAttnGradTensors gone = alloc_grads(d, dt, DType::kF32);
  chunk_attn_bwd(d.inputs(), cot.d_o.view(), cot.d_final_state.view(), gone.views(), single_opt);
  const ChunkAttnOutTensors ref = ref_forward(d);
  const ChunkAttnGradTensors gref = ref_backward(d, cot);
  // bf16: the single-device result carries its own bf16 product rounding of the same size, so
  // CP is held to the fp64 reference only (two rounded results differ by up to twice the bar).
  const bool vs_single = dt == DType::kF32;
  const int64_t T = d.T();
  // Cuts: inside chunks and sequences (2, 4, 8 ranks; 8 with an empty rank and 1-2 row ranks), an
  // empty first / last rank, on sequence boundaries (varlen: 37, 42, 142), and ranks that a
  // sequence crosses whole (80..110, 110..140 inside the 100-row sequence 42..142).
  for (const std::vector<int64_t>& off :
       {rank_layout(2, T), rank_layout(4, T), rank_layout(8, T), std::vector<int64_t>{0, 0, 120, T},
        std::vector<int64_t>{0, 90, T, T}, std::vector<int64_t>{0, 37, 42, 142, T},
        std::vector<int64_t>{0, 50, 80, 110, 140, T}})
  for (const char* chain : {"1", "0"}) {
    setenv("LINATTN_CP_CHAIN", chain, 1);  // read by every CP call; the rank threads start after this
    const int world = static_cast<int>(off.size()) - 1;
    SCOPED_TRACE("world " + std::to_string(world) + ", rank 1 starts at row " + std::to_string(off[1]) +
                 ", rank 2 at " + std::to_string(off[2 % (world + 1)]) + ", LINATTN_CP_CHAIN=" + chain);
    const Tensor offs = offsets_tensor(off);
    ChunkAttnOutTensors got = alloc_outputs(d, dt, DType::kF32);
    ChunkAttnGradTensors g = alloc_grads(d, dt, DType::kF32);
    std::vector<Tensor> dh0(static_cast<size_t>(world));
    std::vector<std::pair<Tensor, Tensor>> parts(static_cast<size_t>(world));
    run_ranks(world, [&](int r, parallel::Communicator& comm) {
      const int64_t r0 = off[r], n = off[r + 1] - off[r];
      ChunkAttnData loc = d;
      for (Tensor* t : {&loc.q, &loc.k, &loc.v, &loc.g, &loc.beta}) *t = take_rows(*t, r0, n);
      Tensor o = take_rows(got.o, r0, n), d_o = take_rows(cot.d_o, r0, n);
      Tensor dq = take_rows(g.dq, r0, n), dk = take_rows(g.dk, r0, n), dv = take_rows(g.dv, r0, n);
      Tensor dg = take_rows(g.dg, r0, n), db = take_rows(g.dbeta, r0, n);
      Tensor dA(DType::kF32, g.dA_log.shape()), ddt(DType::kF32, g.ddt_bias.shape());
      dh0[r] = Tensor(DType::kF32, g.dinitial_state.shape());
      parallel::CpContext cp{&comm, offs.view(), c.reduce};
      parallel::cp_chunk_attn_fwd(cp, loc.inputs(), ChunkAttnOutputs{o, got.final_state}, d.opt());
      ChunkAttnGrads lg{dq, dk, dv, dg, db, dA, ddt, dh0[r]};
      parallel::cp_chunk_attn_bwd(cp, loc.inputs(), d_o, cot.d_final_state, lg, d.opt());
      put_rows(got.o, o, r0);
      for (auto [dst, src] : {std::pair{&g.dq, &dq}, {&g.dk, &dk}, {&g.dv, &dv}, {&g.dg, &dg}, {&g.dbeta, &db}})
        put_rows(*dst, *src, r0);
      parts[r] = {dA, ddt};
    });
    for (auto [dst, k] : {std::pair{&g.dA_log, 0}, {&g.ddt_bias, 1}})
      for (int64_t i = 0; i < dst->numel(); ++i) {
        double s = 0.0;
        for (int r = 0; r < (c.reduce ? 1 : world); ++r) s += (k == 0 ? parts[r].first : parts[r].second).get(i);
        dst->set(i, s);
      }
    for (int64_t i = 0; i < g.dinitial_state.numel(); ++i) {
      double s = 0.0;
      for (const Tensor& t : dh0) s += t.get(i);
      g.dinitial_state.set(i, s);
    }
    if (vs_single) {
      EXPECT_TRUE(fwd_close(d, one, got, dt));
      EXPECT_TRUE(bwd_close(d, gone, g, dt));
    }
    EXPECT_TRUE(fwd_close(d, ref, got, dt));
    EXPECT_TRUE(bwd_close(d, gref, g, dt));
  }
  unsetenv("LINATTN_CP_CHAIN");
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpChunk,
                         ::testing::Values(Case{"gdn", ChunkOp::kGdn}, Case{"kda", ChunkOp::kKda},
                                           Case{"gdn_vfirst_tier3", ChunkOp::kGdn, true, 3},
                                           Case{"kda_tier3", ChunkOp::kKda, false, 2},
                                           Case{"kda_partial_param_grads", ChunkOp::kKda, false, 1, false},
                                           Case{"gdn_bf16_tier3", ChunkOp::kGdn, false, 2, true, DType::kBF16},
                                           Case{"gdn_bf16", ChunkOp::kGdn, false, 1, true, DType::kBF16},
                                           Case{"kda_bf16", ChunkOp::kKda, true, 1, true, DType::kBF16},
                                           Case{"gdn_one_sequence", ChunkOp::kGdn, false, 1, true, DType::kF32, true},
                                           Case{"kda_one_sequence_vfirst", ChunkOp::kKda, true, 1, true, DType::kF32,
                                                true}),
                         [](const auto& i) { return i.param.name; });

}  // namespace
}  // namespace linattn::test
