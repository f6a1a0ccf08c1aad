// CPU chunked forward against the fp64 reference: every op (GDN, KDA), chunk size (16, 32, 64),
// input dtype (fp32, bf16, fp16) and option set (GVA, scale, h0 / ht, state_v_first, varlen with
// lengths 0, 1, BT-1, BT, BT+1, 2BT+3, L2 norm, gate in kernel incl. KDA lower_bound, beta
// sigmoid, negative eigenvalues, strong / no decay), plus a long sequence, gates of -1000, and
// the token-by-token fp32 path (the bench baseline). Bars: tests/common/tolerances.h.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>

#include "common/compare.h"
#include "test_chunk_fwd_util.h"

namespace linattn::test {
namespace {

struct Config {
  const char* name;
  void (*apply)(ChunkAttnSpec& s);
};

void base(ChunkAttnSpec& s) {
  s.H = 2;
  s.HV = 4;
  s.K = 32;
  s.V = 24;
}
void layer(ChunkAttnSpec& s) {  // what the FLA layers pass
  base(s);
  s.opt.use_qk_l2norm_in_kernel = s.opt.use_gate_in_kernel = s.opt.use_beta_sigmoid_in_kernel = true;
  s.opt.state_v_first = true;
  s.has_h0 = false;
  s.cu_dtype = DType::kI64;
}
void odd_dims(ChunkAttnSpec& s) {
  s.H = 1;
  s.HV = 3;
  s.K = 20;
  s.V = 40;
  s.opt.scale = 0.3;
  s.opt.use_beta_sigmoid_in_kernel = s.opt.allow_neg_eigval = true;
  s.gate = GateDist::kMixedHeads;
}
void strong(ChunkAttnSpec& s) {
  base(s);
  s.gate = GateDist::kStrong;
  s.opt.state_v_first = true;
  s.q_dist = s.k_dist = QkDist::kUniform;
  if (s.opt.op == ChunkOp::kGdn) s.state_dtype = DType::kBF16;  // GDN reads any float h0
}
void gate_variant(ChunkAttnSpec& s) {  // KDA: lower_bound form without A_log; GDN: no dt_bias
  base(s);
  s.opt.use_gate_in_kernel = true;
  if (s.opt.op == ChunkOp::kKda) {
    s.opt.has_lower_bound = true;
    s.opt.lower_bound = -5.0;
    s.has_A_log = false;
    s.dt_bias_2d = true;
    s.gate_dtype = DType::kBF16;
  } else {
    s.has_dt_bias = false;
  }
}
void safe_bound(ChunkAttnSpec& s) {  // KDA: lower_bound with A_log, safe_gate; GDN: plain, no h0
  base(s);
  s.HV = 2;
  if (s.opt.op == ChunkOp::kKda) {
    s.opt.use_gate_in_kernel = true;
    s.opt.has_lower_bound = true;
    s.opt.lower_bound = -2.0;
    s.opt.safe_gate = true;
  }
  s.has_h0 = false;
}

const Config kConfigs[] = {{"base", base},         {"layer", layer},           {"odd_dims", odd_dims},
                           {"strong", strong},     {"gate_variant", gate_variant}, {"safe_bound", safe_bound}};

using Param = std::tuple<ChunkOp, int, DType, int>;

class CpuChunkFwd : public ::testing::TestWithParam<Param> {};

TEST_P(CpuChunkFwd, MatchesReference) {
  const auto [op, bt, dtype, ci] = GetParam();
  ChunkAttnSpec s;
  s.opt.op = op;
  s.opt.chunk_size = bt;
  s.opt.output_final_state = true;
  s.dtype = dtype;
  s.seqlens = edge_seqlens(bt);
  s.pad_tokens = 3;
  s.seed = 100 + 7 * ci + bt;
  kConfigs[ci].apply(s);
  const ChunkAttnData d = make_chunk_attn(s);
  const ChunkAttnOutTensors ref = ref_forward(d);
  // The planner runs BT 64 as a 32-row compute chunk; force the caller's BT so every chunk size
  // is exercised here (and the default plan once more below).
  setenv("LINATTN_CPU_CHUNK", std::to_string(bt).c_str(), 1);
  const ChunkAttnOutTensors got = run_cpu_fwd(d, 0);
  unsetenv("LINATTN_CPU_CHUNK");
  EXPECT_TRUE(fwd_close(d, ref, got, dtype)) << kConfigs[ci].name;
  if (bt == 64) {
    EXPECT_TRUE(fwd_close(d, ref, run_cpu_fwd(d, 0), dtype)) << kConfigs[ci].name << " (default plan)";
  }
  // Padding rows of o are never written (they stay NaN from alloc_outputs).
  const TensorView pad = narrow(got.o.view(), 1, d.valid_tokens, s.pad_tokens);
  for (int64_t i = 0; i < pad.numel(); ++i) ASSERT_TRUE(std::isnan(element(pad, i))) << "padding row written";
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto [op, bt, dtype, ci] = info.param;
  return std::string(op == ChunkOp::kGdn ? "gdn" : "kda") + "_bt" + std::to_string(bt) + "_" +
         dtype_name(dtype) + "_" + kConfigs[ci].name;
}

INSTANTIATE_TEST_SUITE_P(Sweep, CpuChunkFwd,
                         ::testing::Combine(::testing::Values(ChunkOp::kGdn, ChunkOp::kKda),
                                            ::testing::Values(16, 32, 64),
                                            ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                                            ::testing::Range(0, 6)),
                         param_name);

class CpuChunkFwdOp : public ::testing::TestWithParam<ChunkOp> {};

// A long sequence and a fixed-length batch (no cu_seqlens), fp32 and bf16.
TEST_P(CpuChunkFwdOp, LongSequenceAndBatch) {
  const bool sanitized = std::getenv("LINATTN_SANITIZED") != nullptr;
  ChunkAttnSpec s;
  s.opt.op = GetParam();
  s.opt.output_final_state = true;
  s.B = 2;
  s.T = sanitized ? 300 : 1500;
  s.H = 1;
  s.HV = 2;
  s.K = 64;
  s.V = 64;
  s.seed = 5;
  for (DType dt : {DType::kF32, DType::kBF16}) {  // bf16: the bf16 dot-product path over many chunks
    s.dtype = dt;
    const ChunkAttnData d = make_chunk_attn(s);
    EXPECT_TRUE(fwd_close(d, ref_forward(d), run_cpu_fwd(d, 0), dt)) << dtype_name(dt);
  }
}

// Gates of -1000 (KDA per channel, GDN per token) stay finite and match the reference.
TEST_P(CpuChunkFwdOp, ExtremeGatesFinite) {
  for (int bt : {16, 64}) {
    ChunkAttnSpec s;
    s.opt.op = GetParam();
    s.opt.chunk_size = bt;
    s.opt.output_final_state = true;
    base(s);
    s.seqlens = {100, 0, 130, 7};
    s.extreme_gate_frac = 0.1;
    s.seed = 9 + bt;
    const ChunkAttnData d = make_chunk_attn(s);
    const ChunkAttnOutTensors got = run_cpu_fwd(d, 0);
    EXPECT_TRUE(all_finite(narrow(got.o.view(), 1, 0, d.valid_tokens))) << "BT " << bt;
    EXPECT_TRUE(all_finite(got.final_state.view())) << "BT " << bt;
    EXPECT_TRUE(fwd_close(d, ref_forward(d), got, DType::kF32)) << "BT " << bt;
  }
}

// The token-by-token fp32 path (bench baseline) matches the reference, with every option.
TEST_P(CpuChunkFwdOp, TokenRecurrentMatchesReference) {
  for (int ci = 0; ci < 6; ++ci) {
    ChunkAttnSpec s;
    s.opt.op = GetParam();
    s.opt.output_final_state = true;
    s.seqlens = {0, 1, 70, 33};
    s.seed = 40 + ci;
    kConfigs[ci].apply(s);
    const ChunkAttnData d = make_chunk_attn(s);
    EXPECT_TRUE(fwd_close(d, ref_forward(d), run_cpu_fwd(d, 0, true), DType::kF32)) << kConfigs[ci].name;
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CpuChunkFwdOp, ::testing::Values(ChunkOp::kGdn, ChunkOp::kKda),
                         [](const auto& info) { return std::string(info.param == ChunkOp::kGdn ? "gdn" : "kda"); });

}  // namespace
}  // namespace linattn::test
