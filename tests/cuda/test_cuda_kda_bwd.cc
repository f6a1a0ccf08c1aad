// CUDA KDA backward against the fp64 reference gradients (src/ref), seeded inputs: dq, dk, dv,
// dg (per key channel), dbeta, dA_log, ddt_bias ([HV * K] and [HV, K]), dh0 for every option of
// the reference: gate in kernel (default -exp(A_log) softplus, lower_bound with and without
// A_log, safe_gate), gates outside the kernel with -1000 entries and strong decay, lower_bound =
// -5 clamps, in-kernel l2norm / beta sigmoid / neg eigenvalues, both state layouts (fp32 h0),
// GVA (G = 1, 2, 3), varlen with lengths 0, 1, BT-1, BT, BT+1, 2BT+3 and padding rows, odd head
// dims, bf16 / fp16 / fp32 inputs, fp32 and input-dtype gradients and cotangents, BT 64 and 32.
// Gradients are NaN-prefilled (unwritten elements fail), padding rows must be exactly 0, zero-
// length sequences pass d_final_state to dh0 exactly, no gradient may be NaN / Inf, two runs are
// bitwise equal. Bars: tests/common/tolerances.h. This binary tests the token-by-token path
// (LINATTN_CUDA_KDA_BWD=token for the whole binary); test_cuda_kda_bwd_chunked.cc the chunked one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cuda_bwd_util.h"
#include "cuda_fwd_util.h"

namespace linattn::test {
namespace {

const bool kTokenPath = setenv("LINATTN_CUDA_KDA_BWD", "token", 1) == 0;

using Case = BwdCase;

ChunkAttnSpec base(DType dt, int bt) { return fwd_base_spec(dt, bt, ChunkOp::kKda); }

std::vector<Case> cases(DType dt, int bt) {
  std::vector<Case> r = kda_bwd_cases(dt, bt);
  {
    ChunkAttnSpec s = base(dt, bt);
    s.K = 64;
    s.V = 100;
    s.B = 1;
    s.T = 133;
    s.H = s.HV = 2;
    s.opt.use_gate_in_kernel = true;
    s.opt.use_beta_sigmoid_in_kernel = true;
    s.opt.allow_neg_eigval = true;
    if (dt != DType::kF32) s.gate_dtype = DType::kBF16;
    s.opt.output_final_state = false;
    r.push_back({"neg_eigval_k64_v100_bf16_gates_no_dht", s, DType::kF32, dt, false});
  }
  return r;
}

void run_case(const Case& c) {
  SCOPED_TRACE(c.name);
  const ChunkAttnData d = make_chunk_attn(c.spec);
  Rng rng(c.spec.seed * 31 + 7);
  const ChunkAttnCotangents cot = random_cotangents(d, rng, c.cot_dtype, c.dht && c.spec.opt.output_final_state);
  const ChunkAttnGradTensors ref = ref_backward(d, cot);
  const ChunkAttnGradTensors got = run_cuda_bwd(d, cot, c.grad_dtype, api::CudaGdnPath::kAuto);
  EXPECT_TRUE(bwd_close(d, ref, got, c.spec.dtype));
  EXPECT_TRUE(grads_padding_zero(d, got));
  EXPECT_TRUE(grads_finite(got));
  check_zero_length_dh0(d, cot, got);
}

class CudaKdaBwd : public ::testing::TestWithParam<std::tuple<DType, int>> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kTokenPath);
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  }
};

TEST_P(CudaKdaBwd, MatchesReferenceForEveryOption) {
  const auto [dt, bt] = GetParam();
  auto all = cases(dt, bt);
  if (std::getenv("LINATTN_SANITIZED")) all.resize(2);
  for (const Case& c : all) run_case(c);
}

TEST_P(CudaKdaBwd, IsDeterministic) {
  const auto [dt, bt] = GetParam();
  const Case c = cases(dt, bt)[1];
  expect_bwd_deterministic(c, 5, api::CudaGdnPath::kAuto);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaKdaBwd,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16, DType::kF32),
                                            ::testing::Values(64, 32)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_bt" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Every gate entry at -1000 (no memory at all) or every gate at the lower bound -5 (strongest
// allowed decay): gradients finite and equal to the reference.
TEST(CudaKdaBwdExtreme, AllGatesAtTheLimits) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  for (const double x : {-1000.0, -5.0}) {
    SCOPED_TRACE("gate " + std::to_string(x));
    ChunkAttnSpec s = base(DType::kBF16, 64);
    s.seqlens = {129, 64, 3};
    s.pad_tokens = 4;
    ChunkAttnData d = make_chunk_attn(s);
    for (int64_t i = 0; i < d.g.numel(); ++i) d.g.set(i, x);
    Rng rng(21);
    const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kBF16, true);
    const ChunkAttnGradTensors got = run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kAuto);
    EXPECT_TRUE(grads_finite(got));
    EXPECT_TRUE(bwd_close(d, ref_backward(d, cot), got, DType::kBF16));
  }
}

// With LINATTN_CUDA_KDA_BWD=token the forced chunked path refuses KDA.
TEST(CudaKdaBwdApi, ChunkedPathRefusesPerChannelGates) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  expect_chunked_refused(base(DType::kBF16, 64));
}

// The public op and its workspace query on CUDA tensors (see check_public_op_workspace).
TEST(CudaKdaBwdApi, PublicOpWithAndWithoutWorkspace) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ChunkAttnSpec s = base(DType::kBF16, 64);
  s.opt.use_gate_in_kernel = true;
  check_public_op_varlen(s);
}

}  // namespace
}  // namespace linattn::test
