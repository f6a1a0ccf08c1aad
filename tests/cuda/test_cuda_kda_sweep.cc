// The wgmma KDA backward sweeps (kda/kda_bwd_sweep_wg.cu, LINATTN_CUDA_KDA_SWEEP=wg) in the chunked
// CUDA KDA backward (default chunk kernel): for every case of kda_bwd_cases (in-kernel softplus gate
// with GVA 2; lower_bound -5 + safe_gate on varlen edges; lower_bound without A_log, GVA 3, a
// zero-length sequence; -1000 gates with strong decays; clamped -5 safe gates) plus one long
// sequence (many turns of the input ring and of the single hand-off buffer of role 1), bf16 and fp16,
// BT 64 and 32: each gradient within its fp64-reference bar and within half of that bar of the
// mma.sync sweeps' gradients (LINATTN_CUDA_KDA_SWEEP=mma), padding rows zero, finite, d_final_state
// passed to dh0 for zero-length sequences; the wg kernel runs at BT 64 only (BT 32 keeps mma.sync);
// two runs bitwise equal; forward + backward captured in one CUDA graph, replay == eager.
// The mbarrier hand-off (LINATTN_CUDA_KDA_SWEEP=wgm): every case above against the fp64 reference and
// bitwise equal to wg (same products, only the protocol differs), its graph replay == eager. With the
// switch exported as wgm, the wg tests above run wgm in place of wg (the sanitizer runs use that: their
// filter then runs no wg kernel).
// wg2 (LINATTN_CUDA_KDA_SWEEP=wg2: role 1's store warpgroup on two barriers a chunk, 16-byte dv stores when dv
// has the io type; else wg's store warpgroup): every case against the fp64 reference and bitwise equal to wg (cases
// with fp32 and with io-typed gradients: both store paths), determinism, graph replay == eager (fp32 / fp16 dv).
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/compare.h"
#include "cuda/kda/kda_bwd_sweep_wg.h"
#include "cuda_bwd_util.h"
#include "cuda_fwd_util.h"
#include "cuda_graph_seq.h"

namespace linattn::test {
namespace {

constexpr const char* kEnv = "LINATTN_CUDA_KDA_SWEEP";

bool sanitized() { return std::getenv("LINATTN_SANITIZED") != nullptr; }

// The wgmma mode the wg tests force: "wgm" when exported so, else "wg".
const char* wg_mode() {
  const char* e = std::getenv(kEnv);
  return e && std::string(e) == "wgm" ? "wgm" : "wg";
}
bool wgm() { return std::string(wg_mode()) == "wgm"; }

// One sequence of 1000 tokens (16 chunks at BT 64), GVA 2, in-kernel gate and l2norm.
BwdCase long_case(DType dt, int bt) {
  ChunkAttnSpec s = fwd_base_spec(dt, bt, ChunkOp::kKda);
  s.B = 1;
  s.T = 1000;
  s.opt.use_qk_l2norm_in_kernel = true;
  s.opt.use_gate_in_kernel = true;
  s.opt.use_beta_sigmoid_in_kernel = true;
  return {"long_1000_gva2", s, dt, dt};
}

void run_case(const BwdCase& c) {
  SCOPED_TRACE(c.name);
  const BwdInputs in = bwd_inputs(c);
  const ChunkAttnData& d = in.d;
  // explicit "mma", so the baseline stays mma.sync if the default flips to wg
  const ChunkAttnGradTensors mma = bwd_with_env(in, kEnv, "mma");
  const int64_t before = cuda::kda_bwd_sweep_wg_launches(), before_m = cuda::kda_bwd_sweep_wgm_launches();
  const ChunkAttnGradTensors got = bwd_with_env(in, kEnv, wg_mode());
  EXPECT_EQ(cuda::kda_bwd_sweep_wg_launches() > before, c.spec.opt.chunk_size == 64) << "wg sweeps run at BT 64 only";
  EXPECT_EQ(cuda::kda_bwd_sweep_wgm_launches() > before_m, wgm() && c.spec.opt.chunk_size == 64) << wg_mode();
  const ChunkAttnGradTensors ref = ref_backward(d, in.cot);
  check_bwd_grads(in, ref, got, "wg sweeps vs fp64 reference");
  EXPECT_TRUE(bwd_close(d, ref, mma, c.spec.dtype)) << "mma.sync sweeps vs fp64 reference";
  EXPECT_TRUE(grads_agree(d, mma, got, c.spec.dtype, Qty::kDdt_bias)) << "wg sweeps vs mma.sync sweeps (half bars)";
  std::cout << "[kdasweep] " << c.name << " bt" << c.spec.opt.chunk_size << ": " << wg_mode() << " "
            << (grads_bitwise(mma, got) ? "==" : "!=") << " mma.sync bitwise\n";
}

class CudaKdaSweep : public ::testing::TestWithParam<std::tuple<DType, int>> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  }
};

TEST_P(CudaKdaSweep, WgMatchesReferenceAndMmaSweeps) {
  const auto [dt, bt] = GetParam();
  std::vector<BwdCase> all = kda_bwd_cases(dt, bt);
  if (sanitized()) {  // compute-sanitizer: the varlen edge case (lengths 0 .. 2BT+3, padding)
    run_case(all[1]);
    return;
  }
  all.push_back(long_case(dt, bt));
  for (const BwdCase& c : all) run_case(c);
}

TEST_P(CudaKdaSweep, WgIsDeterministic) {
  const auto [dt, bt] = GetParam();
  ScopedEnv e(kEnv, wg_mode());
  std::vector<BwdCase> cs = {kda_bwd_cases(dt, bt)[2]};  // varlen, GVA 3, a zero-length sequence
  if (!sanitized()) cs.push_back(long_case(dt, bt));
  for (const BwdCase& c : cs) {
    SCOPED_TRACE(c.name);
    expect_bwd_deterministic(c, 13);
  }
}

// A wgmma sweep variant vs wg on every case (+ the 16-chunk case): the fp64 reference, bitwise equal, padding zero,
// finite, dh0 of zero-length sequences; the variant runs at BT 64 only (its launch counter moves there).
void variant_vs_wg(DType dt, int bt, const char* variant, int64_t (*launches)()) {
  std::vector<BwdCase> all = kda_bwd_cases(dt, bt);
  if (sanitized()) all = {all[1]};
  else all.push_back(long_case(dt, bt));
  for (const BwdCase& c : all) {
    SCOPED_TRACE(c.name);
    const BwdInputs in = bwd_inputs(c);
    const ChunkAttnGradTensors wg = bwd_with_env(in, kEnv, "wg");
    const int64_t before = launches();
    const ChunkAttnGradTensors got = bwd_with_env(in, kEnv, variant);
    EXPECT_EQ(launches() > before, bt == 64) << variant << " runs at BT 64 only";
    check_bwd_grads(in, ref_backward(in.d, in.cot), got, (std::string(variant) + " sweeps vs fp64 reference").c_str());
    EXPECT_TRUE(grads_bitwise(wg, got)) << variant << " vs wg sweeps";
  }
}

// wgm (mbarrier hand-off) vs wg (named barriers). Runs wg: not for racecheck.
TEST_P(CudaKdaSweep, WgmMatchesReferenceAndWgBitwise) {
  const auto [dt, bt] = GetParam();
  variant_vs_wg(dt, bt, "wgm", cuda::kda_bwd_sweep_wgm_launches);
}

// wg2 (role 1's one-pass stores) vs wg: fp32 and io-typed dv (both store paths).
TEST_P(CudaKdaSweep, Wg2MatchesReferenceAndWgBitwise) {
  const auto [dt, bt] = GetParam();
  variant_vs_wg(dt, bt, "wg2", cuda::kda_bwd_sweep_wg2_launches);
}

// Unset, the sweeps are wg2 (the default since session 15): its launch counter moves and the gradients are wg's
// (forced) bit for bit, on the varlen case with io-typed dv (wg2's one-pass store path).
TEST(CudaKdaSweepDefault, IsWg2) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  const BwdCase c = kda_bwd_cases(DType::kBF16, 64)[1];
  const BwdInputs in = bwd_inputs(c);
  const ChunkAttnGradTensors wg = bwd_with_env(in, kEnv, "wg");
  const int64_t before = cuda::kda_bwd_sweep_wg2_launches();
  const ChunkAttnGradTensors got = bwd_with_env(in, kEnv, nullptr);
  EXPECT_GT(cuda::kda_bwd_sweep_wg2_launches(), before) << "the default did not run wg2";
  EXPECT_TRUE(grads_bitwise(wg, got)) << "the default sweeps vs wg";
}

TEST_P(CudaKdaSweep, Wg2IsDeterministic) {
  const auto [dt, bt] = GetParam();
  ScopedEnv e(kEnv, "wg2");
  const BwdCase c = long_case(dt, bt);
  expect_bwd_deterministic(c, 17);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaKdaSweep,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16), ::testing::Values(64, 32)),
                         dtype_bt_name);

// Every gate entry at -1000 (no memory) or at -5 (strongest lower-bound decay): finite, within the bars.
TEST(CudaKdaSweepExtreme, AllGatesAtTheLimits) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ScopedEnv e(kEnv, wg_mode());
  for (const double x : {-1000.0, -5.0}) {
    SCOPED_TRACE("gate " + std::to_string(x));
    ChunkAttnSpec s = fwd_base_spec(DType::kBF16, 64, ChunkOp::kKda);
    s.seqlens = {129, 64, 3};
    s.pad_tokens = 4;
    ChunkAttnData d = make_chunk_attn(s);
    for (int64_t i = 0; i < d.g.numel(); ++i) d.g.set(i, x);
    Rng rng(21);
    const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kBF16, true);
    const ChunkAttnGradTensors got = run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kChunked);
    EXPECT_TRUE(grads_finite(got));
    EXPECT_TRUE(grads_padding_zero(d, got));
    EXPECT_TRUE(bwd_close(d, ref_backward(d, cot), got, DType::kBF16));
  }
}

// GRAPH_CONTRACT.md section 8 with the wg sweeps: forward + backward in one CUDA graph, replay ==
// eager fixed bitwise (the switch is read at capture; the captured kernel is the wg / wgm one).
void graph_cases(const char* mode) {
  ScopedEnv e(kEnv, mode);
  std::vector<GraphCase> gcs = {{ChunkOp::kKda, DType::kBF16, 64, true, true, DType::kF32, true},
                                {ChunkOp::kKda, DType::kF16, 64, false, false, DType::kF16}};
  if (sanitized()) gcs.resize(1);
  const int64_t before = cuda::kda_bwd_sweep_wg_launches(), before_m = cuda::kda_bwd_sweep_wgm_launches();
  const int64_t before_2 = cuda::kda_bwd_sweep_wg2_launches();
  for (const GraphCase& gc : gcs) run_cuda_graph_case(gc, 7);
  EXPECT_GT(cuda::kda_bwd_sweep_wg_launches(), before);
  EXPECT_EQ(cuda::kda_bwd_sweep_wgm_launches() > before_m, std::string(mode) == "wgm") << mode;
  EXPECT_EQ(cuda::kda_bwd_sweep_wg2_launches() > before_2, std::string(mode) == "wg2") << mode;
}

TEST(CudaKdaSweepGraph, ReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  graph_cases(wg_mode());
}

TEST(CudaKdaSweepGraph, WgmReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  graph_cases("wgm");
}

TEST(CudaKdaSweepGraph, Wg2ReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  graph_cases("wg2");
}

}  // namespace
}  // namespace linattn::test
