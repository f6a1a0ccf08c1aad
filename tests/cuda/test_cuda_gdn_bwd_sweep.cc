// The GDN backward's default wgmma sweeps on long sequences (moved out of test_cuda_gdn_bwd.cc in session 18 for the
// file-size limit; that file holds every variant's short cases): the default is wg7 where sequences average
// >= cuda::kWgMinTokens tokens, bitwise wg3 and within the fp64 bars; the opt-in wg7m (wg7 with the fragment hand-off on
// mbarriers) is wg7 bit for bit on two 2048-token sequences. gpu-final memchecks / racechecks both (wg7m alone: 0 hazards).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "cuda/gdn/gdn_bwd_sweep_wg.h"
#include "cuda_bwd_util.h"
#include "cuda_fwd_util.h"

namespace linattn::test {
namespace {

constexpr const char* kSweepEnv = "LINATTN_CUDA_GDN_BWD_SWEEP";

// Unset, the wgmma sweeps are wg7 (the default since session 17) where the sequences average >= cuda::kWgMinTokens
// tokens (shorter batches take the mma.sync sweeps: DefaultFollowsSequenceLength): its launch counter moves, wg3's does
// not, and the gradients are bitwise wg3's (forced) and within the fp64 reference's bars, dense 2 x 2048 with the
// in-kernel options and varlen 2300 + 1900 with padding.
TEST(CudaGdnBwdSweepWg5, DefaultIsWg7) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  for (const auto& [lens, pad] : {std::pair{std::vector<int64_t>{2048, 2048}, int64_t{0}},
                                  std::pair{std::vector<int64_t>{2300, 1900}, int64_t{5}}}) {
    if (pad != 0 && std::getenv("LINATTN_SANITIZED")) continue;  // compute-sanitizer runs: the dense case
    ChunkAttnSpec s = fwd_base_spec(DType::kBF16, 64);
    s.seqlens = lens;
    s.pad_tokens = pad;
    s.opt.use_qk_l2norm_in_kernel = pad == 0;
    s.opt.use_gate_in_kernel = true;
    s.opt.use_beta_sigmoid_in_kernel = true;
    SCOPED_TRACE(std::to_string(lens[0]) + " + " + std::to_string(lens[1]) + " tokens, default sweep vs wg3");
    const BwdInputs in = bwd_inputs({"default_sweep_long", s, DType::kF32, DType::kBF16});
    const ChunkAttnGradTensors wg3 = bwd_with_env(in, kSweepEnv, "wg3");
    const int64_t wg7_before = cuda::gdn_bwd_sweep_wg7_launches(), wg3_before = cuda::gdn_bwd_sweep_wg3_launches();
    const ChunkAttnGradTensors got = bwd_with_env(in, kSweepEnv, nullptr);
    EXPECT_GT(cuda::gdn_bwd_sweep_wg7_launches(), wg7_before) << "the default did not run wg7";
    EXPECT_EQ(cuda::gdn_bwd_sweep_wg3_launches(), wg3_before) << "the default ran wg3";
    check_bwd_grads(in, ref_backward(in.d, in.cot), got);
    EXPECT_TRUE(grads_bitwise(got, wg3)) << "the default differs from wg3";
  }
}

// wg7m (session 18: wg7 with the fragment hand-off on mbarriers, which racecheck models) on two 2048-token sequences
// (32 chunks each: both buffers' mbarriers turn 16 phases) with every in-kernel option: its launch counter moves and
// its gradients are wg7's bit for bit and within the fp64 reference's bars. gpu-final racechecks it (wg7m alone: 0 hazards).
TEST(CudaGdnBwdSweepWg5, Wg7mMatchesWg7OnLongSequences) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ChunkAttnSpec s = fwd_base_spec(DType::kBF16, 64);
  s.seqlens = {2048, 2048};
  s.opt.use_qk_l2norm_in_kernel = true;
  s.opt.use_gate_in_kernel = true;
  s.opt.use_beta_sigmoid_in_kernel = true;
  const BwdInputs in = bwd_inputs({"wg7m_long", s, DType::kF32, DType::kBF16});
  const int64_t before = cuda::gdn_bwd_sweep_wg7m_launches();
  const ChunkAttnGradTensors got = bwd_with_env(in, kSweepEnv, "wg7m");
  EXPECT_GT(cuda::gdn_bwd_sweep_wg7m_launches(), before) << "wg7m did not run";
  check_bwd_grads(in, ref_backward(in.d, in.cot), got);
  // (under compute-sanitizer wg7m alone runs, so racecheck's report is wg7m's: wg7's bar.arrive hand-off is reported)
  if (!std::getenv("LINATTN_SANITIZED")) {
    EXPECT_TRUE(grads_bitwise(got, bwd_with_env(in, kSweepEnv, "wg7"))) << "wg7m differs from wg7";
  }
}

}  // namespace
}  // namespace linattn::test
