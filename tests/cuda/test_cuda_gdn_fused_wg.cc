// The wgmma fused GDN forwards, both behind LINATTN_CUDA_WGMMA (the pipelined one is also the
// default, "0" = mma.sync): "1" the pipelined kernel (src/cuda/gdn/gdn_fused_wgp.cu), "v1" the
// first one (gdn_fused_wg.cu); each against the fp64 reference on the GDN forward cases (layer
// options with [V, K] states, varlen edge lengths with padding rows, strong decay with -1000 gates
// and GVA 3, a long V = 256 sequence, 1- and 2-chunk sequences for the pipelined hand-off's start /
// end, 3 chunks: every buffer of the 3-stage ring used once), bf16 and fp16, planned V-slices 64
// and 128; and against the mma.sync fused kernel on the
// same inputs (two fp32-accumulating orders of the same products: close, not bitwise).
// "1p": the pipelined kernel with P formed in its output warpgroup (LINATTN_CUDA_GDN_P=fused; the prep
// skips P): the same reference and mma.sync comparisons, and against the pipelined kernel reading the
// prep's P; the workspace loses exactly P's bytes and the choice follows the switch. Every case sets
// LINATTN_CUDA_GDN_P explicitly (fused / prep), so the tests hold whichever one is the default.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <tuple>

#include "common/compare.h"
#include "cuda/gdn/gdn_fused_wg.h"
#include "cuda/gdn/gdn_fwd.h"
#include "cuda/gdn/gdn_p_fused.h"
#include "cuda_fwd_util.h"

namespace linattn::test {
namespace {

std::vector<FwdCase> cases(DType dt) {
  std::vector<FwdCase> r;
  r.push_back({"layer_options_dense", layer_options_spec(dt, 64, ChunkOp::kGdn)});
  r.push_back({"varlen_edges_mixed_decay", varlen_edges_spec(dt, 64, ChunkOp::kGdn)});
  r.push_back({"varlen_strong_decay_no_h0_gva3", varlen_strong_spec(dt, 64, ChunkOp::kGdn)});
  ChunkAttnSpec s = fwd_base_spec(dt, 64);
  s.V = 256;
  s.H = 1;
  s.HV = 2;
  s.B = 1;
  s.T = 1000;
  r.push_back({"long_v256", s});
  for (int64_t T : {64, 128, 192}) {  // exactly 1, 2 and 3 full chunks: hand-offs that never reuse a buffer
    ChunkAttnSpec u = fwd_base_spec(dt, 64);
    u.B = 2;
    u.T = T;
    r.push_back({"two_seqs_T" + std::to_string(T), u});
  }
  return r;
}

// (dtype, kernel): "1" pipelined, "1p" pipelined with P formed in the kernel, "v1" the first version.
using Param = std::tuple<DType, std::string>;

class CudaGdnFusedWg : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
    set_switches();
  }
  DType dt() const { return std::get<0>(GetParam()); }
  bool pfused() const { return std::get<1>(GetParam()) == "1p"; }
  std::string sw() const { return pfused() ? "1" : std::get<1>(GetParam()); }
  void set_switches() const {
    setenv("LINATTN_CUDA_WGMMA", sw().c_str(), 1);
    setenv("LINATTN_CUDA_GDN_P", pfused() ? "fused" : "prep", 1);  // explicit: either may be the default
  }
  void TearDown() override {
    unsetenv("LINATTN_CUDA_WGMMA");
    unsetenv("LINATTN_CUDA_GDN_P");
  }
};

TEST_P(CudaGdnFusedWg, SwitchIsRead) {
  EXPECT_TRUE(cuda::gdn_fused_wg_enabled());
  EXPECT_TRUE(cuda::gdn_fused_wg_forced());
  EXPECT_EQ(cuda::gdn_fused_wg_pipelined(), sw() == "1");
  unsetenv("LINATTN_CUDA_WGMMA");  // the default: pipelined where the planner chose V-slices >= 64
  EXPECT_TRUE(cuda::gdn_fused_wg_enabled());
  EXPECT_TRUE(cuda::gdn_fused_wg_pipelined());
  EXPECT_FALSE(cuda::gdn_fused_wg_forced());
  setenv("LINATTN_CUDA_WGMMA", "0", 1);
  EXPECT_FALSE(cuda::gdn_fused_wg_enabled());
  set_switches();
  EXPECT_EQ(cuda::gdn_p_fused_env(), pfused());
}

TEST_P(CudaGdnFusedWg, MatchesReference) {
  for (const FwdCase& c : cases(dt()))
    for (int vs : {64, 128}) {
      const int64_t before = cuda::gdn_fused_wg_launches(), pf_before = cuda::gdn_fused_wgp_pf_launches();
      run_fwd_case(c, api::CudaGdnPath::kChunked, vs);
      EXPECT_GT(cuda::gdn_fused_wg_launches(), before) << c.name << " vs=" << vs << ": the wgmma kernel did not run";
      EXPECT_EQ(cuda::gdn_fused_wgp_pf_launches() > pf_before, pfused())
          << c.name << " vs=" << vs << ": P formed in the kernel iff LINATTN_CUDA_GDN_P=fused";
    }
}

TEST_P(CudaGdnFusedWg, CloseToTheMmaKernel) {
  for (const FwdCase& c : cases(dt()))
    for (int vs : {64, 128}) {
      SCOPED_TRACE(c.name + " vs=" + std::to_string(vs));
      const ChunkAttnData d = make_chunk_attn(c.spec);
      const ChunkAttnOutTensors wg = run_cuda_fwd(d, api::CudaGdnPath::kChunked, vs);
      setenv("LINATTN_CUDA_WGMMA", "0", 1);
      const ChunkAttnOutTensors mma = run_cuda_fwd(d, api::CudaGdnPath::kChunked, vs);
      set_switches();
      expect_outputs_close(d, mma, wg, Tolerance{5e-3, 0.0});  // varlen: the valid rows only
    }
}

// P formed in the kernel vs read from the prep, same pipelined kernel otherwise (the products in
// other fp32 orders and one more bf16 rounding of P's factors: close, not bitwise).
class CudaGdnPFused : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
    setenv("LINATTN_CUDA_WGMMA", "1", 1);
    setenv("LINATTN_CUDA_GDN_P", "fused", 1);
  }
  void TearDown() override {
    unsetenv("LINATTN_CUDA_WGMMA");
    unsetenv("LINATTN_CUDA_GDN_P");
  }
};

TEST_P(CudaGdnPFused, CloseToPrepP) {
  expect_cases_close_with_env(cases(GetParam()), 64, "LINATTN_CUDA_GDN_P", "prep", cuda::gdn_fused_wgp_pf_launches,
                              "the prep's P path ran the P-forming kernel", Tolerance{5e-3, 0.0});
}

INSTANTIATE_TEST_SUITE_P(DtypesAndKernels, CudaGdnFusedWg,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16),
                                            ::testing::Values(std::string("1"), std::string("1p"), std::string("v1"))),
                         [](const auto& info) {
                           const std::string k = std::get<1>(info.param);
                           return std::string(dtype_name(std::get<0>(info.param))) +
                                  (k == "1" ? "_pipelined" : k == "1p" ? "_pipelined_pfused" : "_v1");
                         });
INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGdnPFused, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Host side of the switch: who forms P, and the workspace without P (exactly P's HV x T x 64 bf16).
TEST(CudaGdnPFusedHost, ChoiceAndWorkspace) {
  cuda::GdnFwdParams p;
  p.T_total = p.T_seq = 4096;
  p.N = 1;
  p.H = 2;
  p.HV = 8;
  p.K = p.V = 128;
  p.BT = 64;
  const cuda::GdnFwdPlan plan = cuda::plan_gdn_fwd(p, 132, true);
  ASSERT_TRUE(plan.chunked) << plan.str();
  unsetenv("LINATTN_CUDA_WGMMA");
  unsetenv("LINATTN_CUDA_GDN_P");  // the default (kGdnPFusedDefault in gdn_fwd.cc)
  EXPECT_EQ(cuda::gdn_p_in_fused(p, plan.vs), cuda::gdn_p_fused_env());
  setenv("LINATTN_CUDA_GDN_P", "prep", 1);
  EXPECT_FALSE(cuda::gdn_p_fused_env());
  EXPECT_FALSE(cuda::gdn_p_in_fused(p, plan.vs));
  const size_t with_p = cuda::gdn_fwd_workspace_bytes(p, plan, false);
  setenv("LINATTN_CUDA_GDN_P", "fused", 1);
  EXPECT_TRUE(cuda::gdn_p_in_fused(p, plan.vs));
  EXPECT_EQ(with_p - cuda::gdn_fwd_workspace_bytes(p, plan, false), size_t(p.HV) * p.T_total * 64 * 2);
  cuda::GdnFwdParams kda = p;
  kda.kda = true;
  EXPECT_FALSE(cuda::gdn_p_in_fused(kda, plan.vs));
  cuda::GdnFwdParams bt32 = p;
  bt32.BT = 32;
  EXPECT_FALSE(cuda::gdn_p_in_fused(bt32, plan.vs));
  cuda::GdnFwdParams seg = p;  // the tier-3 fields do not change the choice (the state pass and its prep agree)
  seg.seg_M = seg.seg_S = reinterpret_cast<float*>(uintptr_t(256));
  EXPECT_TRUE(cuda::gdn_p_in_fused(seg, plan.vs));
  setenv("LINATTN_CUDA_WGMMA", "0", 1);  // the mma.sync kernel reads P
  EXPECT_FALSE(cuda::gdn_p_in_fused(p, plan.vs));
  setenv("LINATTN_CUDA_WGMMA", "1", 1);
  setenv("LINATTN_CUDA_SEG_WGMMA", "0", 1);  // a state pass on gdn_fused.cu would read P
  EXPECT_FALSE(cuda::gdn_p_in_fused(p, plan.vs));
  unsetenv("LINATTN_CUDA_SEG_WGMMA");
  unsetenv("LINATTN_CUDA_WGMMA");
  unsetenv("LINATTN_CUDA_GDN_P");
}

}  // namespace
}  // namespace linattn::test
