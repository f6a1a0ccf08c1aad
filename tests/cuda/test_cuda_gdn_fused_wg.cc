// The wgmma fused GDN forwards, both behind LINATTN_CUDA_WGMMA (the pipelined one is also the
// default, "0" = mma.sync): "1" the pipelined kernel (src/cuda/gdn/gdn_fused_wgp.cu), "v1" the
// first one (gdn_fused_wg.cu); each against the fp64 reference on the GDN forward cases (layer
// options with [V, K] states, varlen edge lengths with padding rows, strong decay with -1000 gates
// and GVA 3, a long V = 256 sequence, 1- and 2-chunk sequences for the pipelined hand-off's start /
// end, 3 chunks: every buffer of the 3-stage ring used once), bf16 and fp16, planned V-slices 64
// and 128; and against the mma.sync fused kernel on the
// same inputs (two fp32-accumulating orders of the same products: close, not bitwise).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>

#include "common/compare.h"
#include "cuda/gdn/gdn_fused_wg.h"
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

// (dtype, switch value): "1" pipelined, "v1" the first version.
using Param = std::tuple<DType, std::string>;

class CudaGdnFusedWg : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
    setenv("LINATTN_CUDA_WGMMA", sw().c_str(), 1);
  }
  DType dt() const { return std::get<0>(GetParam()); }
  std::string sw() const { return std::get<1>(GetParam()); }
  void TearDown() override { unsetenv("LINATTN_CUDA_WGMMA"); }
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
}

TEST_P(CudaGdnFusedWg, MatchesReference) {
  for (const FwdCase& c : cases(dt()))
    for (int vs : {64, 128}) {
      const int64_t before = cuda::gdn_fused_wg_launches();
      run_fwd_case(c, api::CudaGdnPath::kChunked, vs);
      EXPECT_GT(cuda::gdn_fused_wg_launches(), before) << c.name << " vs=" << vs << ": the wgmma kernel did not run";
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
      setenv("LINATTN_CUDA_WGMMA", sw().c_str(), 1);
      const Tolerance tol{5e-3, 0.0};
      // Varlen: the padding rows stay NaN in both, compare the valid rows only.
      const bool var = d.cu_seqlens.defined();
      const TensorView o_mma = var ? narrow(mma.o, 1, 0, d.valid_tokens) : TensorView(mma.o);
      const TensorView o_wg = var ? narrow(wg.o, 1, 0, d.valid_tokens) : TensorView(wg.o);
      EXPECT_TRUE(tensors_close("o", o_mma, o_wg, tol));
      if (mma.final_state.defined()) {
        EXPECT_TRUE(tensors_close("final_state", mma.final_state, wg.final_state, tol));
      }
    }
}

INSTANTIATE_TEST_SUITE_P(DtypesAndKernels, CudaGdnFusedWg,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16), ::testing::Values(std::string("1"), std::string("v1"))),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) == "1" ? "_pipelined" : "_v1");
                         });

}  // namespace
}  // namespace linattn::test
