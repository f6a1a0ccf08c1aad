// CUDA tier 3 backward (cuda/seg/tier3.h): every gradient (dq, dk, dv, dg, dbeta, dA_log,
// ddt_bias, dh0) against the fp64 reference and against tier 1 (segments = 1) at segments 2, 3
// and 8, on uneven varlen layouts with zero-length sequences and padding, GVA, no h0, V-first
// states, in-kernel gates, strong / extreme decays, d_final_state present and absent, GDN (chunked
// backward, every sweep V-slice) and KDA (token backward inside tier 3), BT 64 and 32, bf16 / fp16.
// Also: padding rows of per-token gradients are zero, zero-length sequences pass d_final_state to
// dh0 exactly, and two runs give the same bits (the parameter-gradient reductions stay ordered).
// The tma3 state pass: every gradient bitwise the cp.async one's; the opt-in tensor-core combines (tc / tc8):
// the reference bars and the default tier 3's at the same bars.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cuda/gdn/gdn_fused_wg.h"
#include "cuda/seg/seg_pass.h"
#include "cuda_bwd_util.h"
#include "cuda_fwd_util.h"

namespace linattn::test {
namespace {

bool sanitized() { return std::getenv("LINATTN_SANITIZED") != nullptr; }

struct BwdCase {
  std::string name;
  ChunkAttnSpec spec;
  bool dht = true;
};

std::vector<BwdCase> cases(DType dt, int bt, ChunkOp op) {
  std::vector<BwdCase> r;
  {
    ChunkAttnSpec s = layer_options_spec(dt, bt, op);
    s.seqlens = {520, 0, 1, 130, 250};
    s.pad_tokens = 5;
    if (op == ChunkOp::kKda) s.seqlens = {300, 0, 1, 130};  // the token backward is slower
    r.push_back({"layer_options_uneven_varlen", s, true});
  }
  {
    ChunkAttnSpec s = varlen_strong_spec(dt, bt, op);  // GVA 3, no h0, -1000 gates, a zero-length sequence
    s.opt.output_final_state = false;
    r.push_back({"strong_extreme_no_h0_no_dht_gva3", s, false});
  }
  if (sanitized()) r.resize(1);
  return r;
}

// Tier 1 and the reference once per case, then tier 3 at every (segments, vs).
void run_bwd_case(BwdCase c, const std::vector<int>& segment_counts, const std::vector<int>& slices) {
  SCOPED_TRACE(c.name);
  c.spec.opt.segments = 1;
  const ChunkAttnData d1 = make_chunk_attn(c.spec);
  Rng rng1(77);
  const ChunkAttnCotangents cot = random_cotangents(d1, rng1, c.spec.dtype, c.dht);
  const ChunkAttnGradTensors tier1 = run_cuda_bwd(d1, cot, DType::kF32, api::CudaGdnPath::kAuto, 0);
  const ChunkAttnGradTensors ref = ref_backward(d1, cot);
  for (int segments : segment_counts)
    for (int vs : slices) {
      SCOPED_TRACE("segments=" + std::to_string(segments) + " vs=" + std::to_string(vs));
      ChunkAttnData d = d1;  // the same inputs, tier 3 requested
      d.spec.opt.segments = segments;
      const ChunkAttnGradTensors got = run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kAuto, vs);
      EXPECT_TRUE(bwd_close(d, ref, got, c.spec.dtype)) << "tier 3 vs the fp64 reference";
      EXPECT_TRUE(bwd_close(d, tier1, got, c.spec.dtype)) << "tier 3 vs tier 1";
      EXPECT_TRUE(grads_padding_zero(d, got));
      EXPECT_TRUE(grads_finite(got));
      check_zero_length_dh0(d, cot, got);
      const ChunkAttnGradTensors again = run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kAuto, vs);
      EXPECT_TRUE(grads_bitwise(got, again)) << "tier 3 backward is not deterministic";
    }
}

class CudaTier3Bwd : public ::testing::TestWithParam<std::tuple<DType, int>> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  }
};

TEST_P(CudaTier3Bwd, GdnMatchesReferenceAndTier1) {
  const auto [dt, bt] = GetParam();
  for (const BwdCase& c : cases(dt, bt, ChunkOp::kGdn)) run_bwd_case(c, {2, 3, 8}, {0});
}

TEST_P(CudaTier3Bwd, KdaMatchesReferenceAndTier1) {
  const auto [dt, bt] = GetParam();
  const std::vector<int> counts = sanitized() ? std::vector<int>{3} : std::vector<int>{2, 8};
  for (const BwdCase& c : cases(dt, bt, ChunkOp::kKda)) run_bwd_case(c, counts, {0});
}

TEST_P(CudaTier3Bwd, GdnEverySweepSlice) {
  const auto [dt, bt] = GetParam();
  run_bwd_case(cases(dt, bt, ChunkOp::kGdn)[0], {3}, {32, 64, 128});
}

// The tma3 state pass (the default since d3f84ad; LINATTN_CUDA_SEG_CHAIN=tma3, runs once for GDN at BT 64) with the
// default combine: every gradient bitwise the cp.async state pass's. With the tensor-core combines
// (LINATTN_CUDA_SEG_COMBINE=tc / tc8: both combines, checked to run; another summation order, ~fp32 rounding): every
// gradient within the bars of the fp64 reference and of the default tier 3, deterministic.
TEST_P(CudaTier3Bwd, SegVariantsMatchDefault) {
  const auto [dt, bt] = GetParam();
  for (ChunkOp op : {ChunkOp::kGdn, ChunkOp::kKda})
    for (const BwdCase& c : cases(dt, bt, op)) {
      SCOPED_TRACE(c.name);
      ChunkAttnSpec spec1 = c.spec;
      spec1.opt.segments = 1;
      const ChunkAttnData d1 = make_chunk_attn(spec1);
      Rng rng1(78);
      const ChunkAttnCotangents cot = random_cotangents(d1, rng1, c.spec.dtype, c.dht);
      const ChunkAttnGradTensors ref = ref_backward(d1, cot);
      for (int segments : {3, 8}) {
        SCOPED_TRACE("segments=" + std::to_string(segments));
        ChunkAttnData d = d1;
        d.spec.opt.segments = segments;
        ChunkAttnGradTensors def;
        {
          ScopedEnv a("LINATTN_CUDA_SEG_CHAIN", "v3"), b("LINATTN_CUDA_SEG_COMBINE", "ring2");
          def = run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kAuto, 0);
        }
        for (const char* combine : {"ring2", "tc", "tc8"}) {
          SCOPED_TRACE(combine);
          const bool tc = std::string(combine) != "ring2";
          ScopedEnv a("LINATTN_CUDA_SEG_CHAIN", "tma3"), b("LINATTN_CUDA_SEG_COMBINE", combine);
          const int64_t tma0 = cuda::gdn_fused_wgp_seg_tma_launches(), tc0 = cuda::seg::seg_combine_tc_launches();
          const ChunkAttnGradTensors got = run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kAuto, 0);
          EXPECT_EQ(cuda::gdn_fused_wgp_seg_tma_launches() - tma0, op == ChunkOp::kGdn && bt == 64 ? 1 : 0);
          EXPECT_EQ(cuda::seg::seg_combine_tc_launches() - tc0, tc ? 2 : 0);
          if (!tc) {
            EXPECT_TRUE(grads_bitwise(got, def)) << "tma3 state pass vs the default tier 3";
            continue;
          }
          EXPECT_TRUE(bwd_close(d, ref, got, c.spec.dtype)) << "tc combine vs the fp64 reference";
          EXPECT_TRUE(bwd_close(d, def, got, c.spec.dtype)) << "tc combine vs the default tier 3";
          EXPECT_TRUE(grads_padding_zero(d, got));
          EXPECT_TRUE(grads_finite(got));
          check_zero_length_dh0(d, cot, got);
          const ChunkAttnGradTensors again = run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kAuto, 0);
          EXPECT_TRUE(grads_bitwise(got, again)) << "tc combine backward is not deterministic";
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaTier3Bwd,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16), ::testing::Values(64, 32)),
                         dtype_bt_name);

}  // namespace
}  // namespace linattn::test
