// Tier 3 under the fixed-capacity graph contract (GRAPH_CONTRACT.md section 8) on the CPU:
// one Graph captures chunk_attn_fwd + chunk_attn_bwd with use_graph = true and segments = 3
// (the segment table is built inside the recorded work from cu_seqlens, never at capture);
// five layouts are copied into the static buffers with NaN garbage in the padding rows and
// replayed twice. Checks: replay equals the eager fixed-capacity tier-3 call bitwise; the fp64
// reference and tier 1 (segments = 1) within tolerance.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../cpu_bwd/bwd_test_util.h"
#include "linattn/graph.h"

namespace linattn::test {
namespace {

constexpr int64_t kTmax = 170, kNmax = 3;

ChunkAttnSpec spec_for(ChunkOp op, const std::vector<int64_t>& lens, uint64_t seed) {
  ChunkAttnSpec s;
  s.opt.op = op;
  s.opt.chunk_size = 16;
  s.opt.use_qk_l2norm_in_kernel = s.opt.use_beta_sigmoid_in_kernel = true;
  s.opt.output_final_state = true;
  s.opt.use_graph = true;
  s.opt.max_num_seqs = kNmax;
  s.opt.segments = 3;
  s.H = 1;
  s.HV = 3;
  s.K = 16;
  s.V = 20;
  s.seqlens = lens;
  int64_t used = 0;
  for (int64_t x : lens) used += x;
  s.pad_tokens = kTmax - used;
  s.gate = GateDist::kMixedHeads;
  s.seed = seed;
  return s;
}

class Tier3Graph : public ::testing::TestWithParam<ChunkOp> {};

TEST_P(Tier3Graph, ReplayNewLayouts) {
  const ChunkOp op = GetParam();
  const std::vector<std::vector<int64_t>> layouts = {
      {57, 57, 56}, {kTmax, 0, 0}, {100, 1, 33}, {0, 17, 0}, {5, 140, 16}};
  ChunkAttnData stat = make_chunk_attn(spec_for(op, layouts[0], 1));
  Rng crng(3);
  ChunkAttnCotangents scot = random_cotangents(stat, crng, DType::kF32, true);
  OpRun sres = alloc_run(stat);
  fwd_bwd(stat, scot, stat.opt(), sres);
  Graph graph;
  graph.capture([&] { fwd_bwd(stat, scot, stat.opt(), sres); });
  uint64_t seed = 20;
  for (const auto& lens : layouts) {
    SCOPED_TRACE("layout " + std::to_string(seed));
    ChunkAttnData d = make_chunk_attn(spec_for(op, lens, ++seed));
    Rng rng(seed * 7);
    ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kF32, true);
    const ChunkAttnGradTensors ref = ref_backward(d, cot);
    const ChunkAttnOutTensors ref_o = ref_forward(d);
    for (Tensor* t : {&d.q, &d.k, &d.v, &d.g, &d.beta, &cot.d_o}) poison_rows(*t, d.valid_tokens);
    for (auto [dst, src] : {std::pair{&stat.q, &d.q}, {&stat.k, &d.k}, {&stat.v, &d.v}, {&stat.g, &d.g},
                            {&stat.beta, &d.beta}, {&stat.initial_state, &d.initial_state},
                            {&stat.cu_seqlens, &d.cu_seqlens}, {&scot.d_o, &cot.d_o},
                            {&scot.d_final_state, &cot.d_final_state}})
      copy_into(*dst, *src);
    OpRun fixed = alloc_run(d), tier1 = alloc_run(d);
    fwd_bwd(d, cot, d.opt(), fixed);
    ChunkAttnOptions o1 = d.opt();
    o1.segments = 1;
    fwd_bwd(d, cot, o1, tier1);
    for (int rep = 0; rep < 2; ++rep) {
      graph.replay();
      EXPECT_TRUE(grads_bitwise_equal(fixed.grads, sres.grads));
      EXPECT_TRUE(same_bits(fixed.out.final_state, sres.out.final_state));
      const TensorView a = narrow(fixed.out.o.view(), 1, 0, d.valid_tokens);
      const TensorView b = narrow(sres.out.o.view(), 1, 0, d.valid_tokens);
      EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes()), 0) << "o differs bitwise";
    }
    EXPECT_TRUE(fwd_close(d, ref_o, fixed.out, DType::kF32));
    EXPECT_TRUE(bwd_close(d, ref, fixed.grads, DType::kF32));
    EXPECT_TRUE(fwd_close(d, tier1.out, fixed.out, DType::kF32));
    EXPECT_TRUE(bwd_close(d, tier1.grads, fixed.grads, DType::kF32));
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, Tier3Graph, ::testing::Values(ChunkOp::kGdn, ChunkOp::kKda),
                         [](const auto& i) { return std::string(i.param == ChunkOp::kGdn ? "gdn" : "kda"); });

}  // namespace
}  // namespace linattn::test
