// Determinism and layout independence of the CPU chunked forward: 1 thread and N threads give
// bitwise equal results; every V split (tier 2) gives the same bits as no split; the
// fixed-capacity path (use_graph = true, no capture) equals the eager path bitwise, never reads
// the padding (NaN / Inf there) and never writes padding rows; zero-length sequences copy h0.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "api/chunk_params_build.h"
#include "common/compare.h"
#include "cpu/chunk_fwd.h"
#include "meta/chunk_attn_desc.h"
#include "test_chunk_fwd_util.h"

namespace linattn::test {
namespace {

const int kPoolInit = (use_four_pool_threads(), 0);

ChunkAttnSpec det_spec(ChunkOp op, uint64_t seed) {
  ChunkAttnSpec s;
  s.opt.op = op;
  s.opt.output_final_state = true;
  s.H = 1;
  s.HV = 3;
  s.K = 48;
  s.V = 80;
  s.seqlens = {130, 0, 1, 64, 200, 17};
  s.seed = seed;
  return s;
}

class CpuFwdDet : public ::testing::TestWithParam<ChunkOp> {};

TEST_P(CpuFwdDet, ThreadsBitwiseEqual) {
  (void)kPoolInit;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    ChunkAttnSpec s = det_spec(GetParam(), 3);
    s.dtype = dt;
    const ChunkAttnData d = make_chunk_attn(s);
    const ChunkAttnOutTensors one = run_cpu_fwd(d, 1);
    for (int threads : {2, 3, 4}) {
      const ChunkAttnOutTensors many = run_cpu_fwd(d, threads);
      EXPECT_TRUE(bitwise_equal("o", one.o, many.o)) << threads << " threads";
      EXPECT_TRUE(bitwise_equal("final_state", one.final_state, many.final_state)) << threads << " threads";
    }
  }
}

TEST_P(CpuFwdDet, VSplitsBitwiseEqual) {
  for (bool bf16 : {false, true}) {
  ChunkAttnSpec spec = det_spec(GetParam(), 4);
  if (bf16) spec.dtype = DType::kBF16;
  const ChunkAttnData d = make_chunk_attn(spec);
  const meta::ChunkAttnDesc desc = meta::describe_chunk_attn(d.inputs(), d.opt());
  ChunkAttnOutTensors base = alloc_outputs(d, d.spec.dtype, DType::kF32);
  auto run = [&](const cpu::ChunkSchedule& sc, ChunkAttnOutTensors& out) {
    const ChunkAttnOutputs ov = out.views();
    const cpu::ChunkParams p = api::build_chunk_params(desc, d.inputs(), &ov);
    std::vector<std::byte> ws(cpu::chunk_fwd_workspace_bytes(p, sc));
    cpu::chunk_fwd(p, sc, ws.data(), ws.size());
  };
  run({2, 1, 0, bf16}, base);
  for (auto [splits, tile] : {std::pair{2, 48}, {3, 32}, {5, 16}}) {
    ChunkAttnOutTensors got = alloc_outputs(d, d.spec.dtype, DType::kF32);
    run({2, splits, tile, bf16}, got);
    EXPECT_TRUE(bitwise_equal("o", base.o, got.o)) << splits << " splits, bf16 dot " << bf16;
    EXPECT_TRUE(bitwise_equal("final_state", base.final_state, got.final_state)) << splits << " splits";
  }
  }
}

// use_graph = true without a capture is the eager fixed-capacity path.
TEST_P(CpuFwdDet, FixedCapacityEqualsEagerAndIgnoresPadding) {
  ChunkAttnSpec s = det_spec(GetParam(), 5);
  s.seqlens = {70, 0, 33, 0, 0};  // zero-length tail sequences
  s.pad_tokens = 40;
  ChunkAttnData d = make_chunk_attn(s);
  const ChunkAttnOutTensors eager = run_cpu_fwd(d, 0);
  // Garbage in every padding row of every input.
  const int64_t first_pad = d.valid_tokens;
  auto poison = [&](Tensor& t) {
    const int64_t row = t.numel() / d.spec.T;
    for (int64_t i = first_pad * row; i < t.numel(); ++i) t.set(i, (i % 3 == 0) ? NAN : (i % 3 == 1 ? INFINITY : -1e30));
  };
  poison(d.q);
  poison(d.k);
  poison(d.v);
  poison(d.g);
  poison(d.beta);
  ChunkAttnOptions opt = d.opt();
  opt.use_graph = true;
  opt.max_num_seqs = d.N;
  for (int threads : {1, 4}) {
    const ChunkAttnOutTensors fixed = run_cpu_fwd_opt(d, opt, threads);
    EXPECT_TRUE(bitwise_equal("o", eager.o, fixed.o)) << threads << " threads";  // padding rows: NaN in both
    EXPECT_TRUE(bitwise_equal("final_state", eager.final_state, fixed.final_state));
  }
  // Zero-length sequences: final state = initial state.
  const ChunkAttnOutTensors fixed = run_cpu_fwd_opt(d, opt, 2);
  const int64_t per = d.spec.HV * d.spec.K * d.spec.V;
  for (int64_t n : {1, 3, 4})
    for (int64_t i = 0; i < per; ++i)
      ASSERT_EQ(fixed.final_state.get(n * per + i), d.initial_state.get(n * per + i)) << "sequence " << n;
}

INSTANTIATE_TEST_SUITE_P(Ops, CpuFwdDet, ::testing::Values(ChunkOp::kGdn, ChunkOp::kKda),
                         [](const auto& info) { return std::string(info.param == ChunkOp::kGdn ? "gdn" : "kda"); });

}  // namespace
}  // namespace linattn::test
