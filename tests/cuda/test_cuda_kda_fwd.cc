// CUDA KDA forward against the fp64 reference (src/ref), on seeded inputs, for both CUDA paths
// (token-by-token kernel and chunked KDA prep + the shared fused kernel) and every KDA V-slice:
// every option (GVA 1/2/3, scale, h0 / ht in both layouts, varlen with edge lengths 0, 1, BT-1,
// BT, BT+1, 2BT+3 and padding rows, in-kernel l2norm / beta sigmoid / neg eigenvalues, the three
// in-kernel gate forms: A_log softplus, lower_bound sigmoid with and without A_log, dt_bias flat
// and [HV, K], safe_gate with and without the gate in kernel), strong, mixed and no decay, gates
// at -1000 (5%, 30%, all), lower_bound = -5 (the strongest safe decay: every step -5), bf16 and
// fp16 (fp32 on the token kernel), BT 64 and 32. Outputs are NaN-prefilled: unwritten or
// non-finite elements fail; padding rows of o must stay untouched (NaN). The chunked cases also
// run through the pipelined wgmma kernel's KDA gate policy (the BT 64 default) and the mma.sync fused
// kernel (LINATTN_CUDA_KDA_WGMMA=0, every V-slice). Prep v6 (the BT 64 default, forced with
// LINATTN_KDA_PREP=v6) runs every case against the reference and against prep v3 (LINATTN_KDA_PREP=v3,
// fp32 per-element sums: an independent formulation) on the same inputs (BT 32 keeps v3), and
// through every mma.sync V-slice; prep v7 (opt-in, LINATTN_KDA_PREP=v7) the same, also against v6,
// and its three CTAs per SM; prep v8 / v8p (LINATTN_KDA_PREP=v8 / v8p) the same, also against
// v6, a long varlen case that reaches v8p's prefetch, and its two CTAs per SM; prep v9 (opt-in,
// LINATTN_KDA_PREP=v9: v8's body with a shorter gate phase) the same, against v8 instead of v6.
// The pipelined kernel's V-slice 32 instance (LINATTN_CUDA_WGP_VS=32, planned V-slice 32): every case against
// the reference (BT 64 runs it, BT 32 keeps mma.sync) and against V-slice 64 on the same inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>

#include "common/compare.h"
#include "cuda/gdn/gdn_fused_wg.h"
#include "cuda/kda/kda_fwd_prep_v6.cuh"
#include "cuda/kda/kda_fwd_prep_v7.cuh"
#include "cuda/kda/kda_fwd_prep_v8.cuh"
#include "cuda_fwd_util.h"
#include "linattn/error.h"

namespace linattn::test {
namespace {

ChunkAttnSpec base(DType dt, int bt) { return fwd_base_spec(dt, bt, ChunkOp::kKda); }

std::vector<FwdCase> cases(DType dt, int bt) {
  std::vector<FwdCase> r;
  r.push_back({"layer_options_dense_gva2", layer_options_spec(dt, bt, ChunkOp::kKda)});
  r.push_back({"varlen_edges_mixed_decay", varlen_edges_spec(dt, bt, ChunkOp::kKda)});
  r.push_back({"varlen_strong_extreme5_no_h0_gva3", varlen_strong_spec(dt, bt, ChunkOp::kKda)});
  {  // lower_bound = -5 gate form without A_log, [HV, K] dt_bias, safe_gate
    ChunkAttnSpec s = layer_options_spec(dt, bt, ChunkOp::kKda);
    s.opt.has_lower_bound = true;
    s.opt.lower_bound = -5.0;
    s.opt.safe_gate = true;
    s.has_A_log = false;
    s.dt_bias_2d = true;
    s.opt.state_v_first = false;
    s.seqlens = {1, 200, 63};
    r.push_back({"lower_bound_m5_sigmoid_safe_gate_dtbias2d", s});
  }
  {  // lower_bound with A_log, not safe_gate, neg eigenvalues, no dt_bias, bf16 raw gates
    ChunkAttnSpec s = base(dt, bt);
    s.opt.use_gate_in_kernel = true;
    s.opt.has_lower_bound = true;
    s.opt.lower_bound = -3.0;
    s.opt.use_beta_sigmoid_in_kernel = true;
    s.opt.allow_neg_eigval = true;
    s.has_dt_bias = false;
    s.gate_dtype = DType::kBF16;
    s.T = 97;
    r.push_back({"lower_bound_alog_neg_eigval_bf16_gates", s});
  }
  {  // safe_gate with precomputed gates clamped to [-5, 0]: strong decays become -5 every step
    ChunkAttnSpec s = base(dt, bt);
    s.opt.safe_gate = true;
    s.opt.has_lower_bound = true;
    s.opt.lower_bound = -5.0;
    s.gate = GateDist::kStrong;
    s.H = s.HV = 2;
    s.T = 260;
    r.push_back({"safe_gate_precomputed_all_minus5", s});
  }
  {  // 30% of the gates at -1000: most diagonal sub-chunks take the exact per-element form
    ChunkAttnSpec s = base(dt, bt);
    s.extreme_gate_frac = 0.3;
    s.seqlens = {bt + 1, 3 * bt - 1, 17};
    s.pad_tokens = 5;
    r.push_back({"extreme30_varlen", s});
  }
  {  // every gate at -1000: the state is forgotten at every token
    ChunkAttnSpec s = base(dt, bt);
    s.extreme_gate_frac = 1.0;
    s.T = 70;
    s.B = 1;
    r.push_back({"all_gates_minus1000", s});
  }
  {
    ChunkAttnSpec s = base(dt, bt);
    s.gate = GateDist::kNoDecay;
    s.opt.use_qk_l2norm_in_kernel = true;
    s.V = 64;
    s.T = 257;
    s.B = 1;
    r.push_back({"no_decay_v64", s});
  }
  {
    ChunkAttnSpec s = base(dt, bt);
    s.V = 256;
    s.H = 1;
    s.HV = 1;
    s.B = 1;
    s.T = 1000;
    s.opt.output_final_state = false;
    r.push_back({"long_v256_no_ht", s});
  }
  return r;
}

// The variant switches are set per scope with ScopedEnv (cuda_test_util.h): an A/B run may set
// LINATTN_CUDA_KDA_WGMMA for the whole binary.
class CudaKdaFwd : public ::testing::TestWithParam<std::tuple<DType, int>> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  }
};

TEST_P(CudaKdaFwd, TokenKernelMatchesReference) {
  const auto [dt, bt] = GetParam();
  for (const FwdCase& c : cases(dt, bt)) run_fwd_case(c, api::CudaGdnPath::kRecurrent, 0);
}

TEST_P(CudaKdaFwd, ChunkedKernelsMatchReference) {
  const auto [dt, bt] = GetParam();
  for (const FwdCase& c : cases(dt, bt)) run_fwd_case(c, api::CudaGdnPath::kChunked, 0);
}

// The mma.sync fused kernel's V-slices (the pipelined kernel, the BT 64 default, takes 64 always).
TEST_P(CudaKdaFwd, ChunkedEveryVSlice) {
  const auto [dt, bt] = GetParam();
  ScopedEnv mma("LINATTN_CUDA_KDA_WGMMA", "0");
  const FwdCase c = cases(dt, bt)[1];
  for (int vs : {32, 64}) run_fwd_case(c, api::CudaGdnPath::kChunked, vs);
}

// Every case (the -1000 and lower_bound = -5 gates included) through the pipelined wgmma kernel's
// KDA policy when it is switched on; BT 32 is not eligible and keeps the mma.sync kernel.
TEST_P(CudaKdaFwd, ChunkedPipelinedWgmmaPolicy) {
  const auto [dt, bt] = GetParam();
  ScopedEnv on("LINATTN_CUDA_KDA_WGMMA", "1");
  EXPECT_TRUE(cuda::gdn_fused_wg_kda_enabled());
  for (const FwdCase& c : cases(dt, bt)) {
    const int64_t before = cuda::gdn_fused_wg_launches();
    run_fwd_case(c, api::CudaGdnPath::kChunked, 0);
    if (bt == 64) EXPECT_GT(cuda::gdn_fused_wg_launches(), before) << c.name << ": the pipelined kernel did not run";
    else EXPECT_EQ(cuda::gdn_fused_wg_launches(), before) << c.name << ": BT 32 must keep the mma.sync kernel";
  }
  const FwdCase c = cases(dt, bt)[1];
  for (int vs : {32, 64}) run_fwd_case(c, api::CudaGdnPath::kChunked, vs);  // the planned V-slice is ignored
}

// For bf16 and fp16, every case at BT 64: the chunked forward (V-slice `vs`) with `env` at `on`, whose run must
// launch the instance `launches` counts (else `not_run`), within rel RMS 1e-2 of the one with `env` at `off`.
void expect_on_close_to_off(const char* env, const char* on, const char* off, int vs, int64_t (*launches)(),
                            const char* not_run) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  for (DType dt : {DType::kBF16, DType::kF16})
    for (const FwdCase& c : cases(dt, 64)) {
      SCOPED_TRACE(c.name + " " + dtype_name(dt));
      const ChunkAttnData d = make_chunk_attn(c.spec);
      const int64_t before = launches();
      const ChunkAttnOutTensors got = fwd_with_env(d, env, on, vs);
      EXPECT_GT(launches(), before) << not_run;
      expect_outputs_close(d, fwd_with_env(d, env, off, vs), got, Tolerance{1e-2, 0.0});
    }
}

// The pipelined kernel's KDA policy against the mma.sync kernel on the same inputs (BT 64, the
// policy's only chunk size): same operands and bf16 / fp16 rounding points, so only the summation
// order differs; a layout or indexing slip shows as O(1) errors, far above this bar.
TEST(CudaKdaFwdWgmma, PipelinedCloseToTheMmaKernel) {
  expect_on_close_to_off("LINATTN_CUDA_KDA_WGMMA", "1", "0", 0, cuda::gdn_fused_wg_launches,
                         "the pipelined kernel did not run");
}

// V-slice 32 against V-slice 64 on the same inputs: the same bf16 / fp16 operands and roundings per
// element, other wgmma shapes (fp32 summation order); a layout slip shows as O(1) errors.
TEST(CudaKdaFwdWgmma, VSlice32CloseToVSlice64) {
  ScopedEnv on("LINATTN_CUDA_KDA_WGMMA", "1");
  expect_on_close_to_off("LINATTN_CUDA_WGP_VS", "32", "64", 32, cuda::gdn_fused_wgp_vs32_launches,
                         "the V-slice 32 instance did not run");
}

// The V-slice 32 instance on every case (the -1000 and lower_bound = -5 gates included) where the plan's
// V-slice is 32; planned 64 keeps V-slice 64.
TEST_P(CudaKdaFwd, PipelinedVSlice32) {
  const auto [dt, bt] = GetParam();
  ScopedEnv on("LINATTN_CUDA_KDA_WGMMA", "1");
  ScopedEnv vs32("LINATTN_CUDA_WGP_VS", "32");
  for (const FwdCase& c : cases(dt, bt)) {
    const int64_t before = cuda::gdn_fused_wgp_vs32_launches();
    run_fwd_case(c, api::CudaGdnPath::kChunked, 32);
    if (bt == 64) EXPECT_GT(cuda::gdn_fused_wgp_vs32_launches(), before) << c.name << ": V-slice 32 did not run";
    else EXPECT_EQ(cuda::gdn_fused_wgp_vs32_launches(), before) << c.name << ": BT 32 must keep the mma.sync kernel";
  }
  const int64_t before = cuda::gdn_fused_wgp_vs32_launches();
  run_fwd_case(cases(dt, bt)[1], api::CudaGdnPath::kChunked, 64);
  EXPECT_EQ(cuda::gdn_fused_wgp_vs32_launches(), before) << "planned V-slice 64 took the V-slice 32 instance";
}

// Switched off ("0"), KDA keeps the mma.sync kernel whatever LINATTN_CUDA_WGMMA says.
TEST_P(CudaKdaFwd, PipelinedWgmmaPolicySwitchesOff) {
  const auto [dt, bt] = GetParam();
  ScopedEnv off("LINATTN_CUDA_KDA_WGMMA", "0");
  ScopedEnv gdn_on("LINATTN_CUDA_WGMMA", "1");
  EXPECT_FALSE(cuda::gdn_fused_wg_kda_enabled());
  const FwdCase c = cases(dt, bt)[0];
  const int64_t before = cuda::gdn_fused_wg_launches();
  run_fwd_case(c, api::CudaGdnPath::kChunked, 0);
  EXPECT_EQ(cuda::gdn_fused_wg_launches(), before) << c.name << ": KDA took the wgmma kernel without its switch";
}

// o of a and b hold the same values (NaN where the other has NaN: the padding rows).
bool o_same_values(const ChunkAttnOutTensors& a, const ChunkAttnOutTensors& b) {
  bool same = a.o.numel() == b.o.numel();
  for (int64_t e = 0; same && e < a.o.numel(); ++e) {
    const double x = a.o.get(e), y = b.o.get(e);
    same = x == y || (std::isnan(x) && std::isnan(y));
  }
  return same;
}

// The mma.sync fused kernel's V-slices 32 and 64 with prep `prep` forced, on the varlen edge lengths and the
// strong-decay / -1000-gate GVA case.
void prep_every_vslice(const std::tuple<DType, int>& param, const char* prep) {
  const auto [dt, bt] = param;
  ScopedEnv on("LINATTN_KDA_PREP", prep);
  ScopedEnv mma("LINATTN_CUDA_KDA_WGMMA", "0");
  const std::vector<FwdCase> cs = cases(dt, bt);
  for (int ci : {1, 2})
    for (int vs : {32, 64}) run_fwd_case(cs[ci], api::CudaGdnPath::kChunked, vs);
}

// A prep's resident CTAs per SM, bf16 and fp16.
void expect_ctas_per_sm(int (*ctas_per_sm)(bool bf16), int want) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  EXPECT_EQ(ctas_per_sm(true), want) << "bf16";
  EXPECT_EQ(ctas_per_sm(false), want) << "fp16";
}

// Prep v6 forced on every case: against the fp64 reference, and at BT 64 against prep v3 on the same
// inputs (v3 sums the near-diagonal terms per element in fp32, v6 forms every Gram term on fp16 tensor
// cores through reference rows: rounding-level differences; an indexing or masking slip shows as O(1)
// errors, far above this bar).
TEST_P(CudaKdaFwd, PrepV6MatchesReferenceAndV3) {
  const auto [dt, bt] = GetParam();
  for (const FwdCase& c : cases(dt, bt)) {
    SCOPED_TRACE(c.name);
    const ChunkAttnData d = make_chunk_attn(c.spec);
    ChunkAttnOutTensors v6, v3;
    {
      ScopedEnv on("LINATTN_KDA_PREP", "v6");
      const int64_t before = cuda::kda_prep_v6_launches();
      run_fwd_case(c, api::CudaGdnPath::kChunked, 0);
      v6 = run_cuda_fwd(d, api::CudaGdnPath::kChunked, 0);
      if (bt == 64) EXPECT_GT(cuda::kda_prep_v6_launches(), before) << "prep v6 did not run";
      else EXPECT_EQ(cuda::kda_prep_v6_launches(), before) << "BT 32 must keep prep v3";
    }
    if (bt != 64) continue;
    v3 = fwd_with_env(d, "LINATTN_KDA_PREP", "v3", 0);
    expect_outputs_close(d, v3, v6, Tolerance{1e-2, 0.0});
  }
}

// With the switch unset, BT 64 runs prep v9 (the default since the H200 A/B at accc55a).
TEST(CudaKdaFwdDefault, PrepIsV9AtBt64) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ScopedEnv unset("LINATTN_KDA_PREP", nullptr);
  const int64_t before = cuda::kda_prep_v9_launches(), before6 = cuda::kda_prep_v6_launches();
  run_fwd_case(cases(DType::kBF16, 64)[0], api::CudaGdnPath::kChunked, 0);
  EXPECT_GT(cuda::kda_prep_v9_launches(), before) << "the default prep at BT 64 is not v9";
  EXPECT_EQ(cuda::kda_prep_v6_launches(), before6) << "v6 ran by default";
}

// v6 through the mma.sync fused kernel's V-slices (the same workspace contract), on the varlen edge
// lengths and on the strong-decay / -1000-gate GVA case.
TEST_P(CudaKdaFwd, PrepV6EveryVSlice) {
  prep_every_vslice(GetParam(), "v6");
}

// Prep v7 (opt-in, LINATTN_KDA_PREP=v7: v6's code with q / k read from global memory, three CTAs per
// SM) forced on every case: against the fp64 reference, and at BT 64 against v6 and v3 on the same
// inputs. v7 forms the same products in the same order as v6 (the same kernel body): expected equal to
// v6 up to compiler contraction differences, so it is held to v6 at a 10x tighter bar than to v3; the
// output says whether o was bitwise equal. A row, channel or masking slip in the global q / k reads
// shows as O(1) errors.
TEST_P(CudaKdaFwd, PrepV7MatchesReferenceAndV6AndV3) {
  const auto [dt, bt] = GetParam();
  for (const FwdCase& c : cases(dt, bt)) {
    SCOPED_TRACE(c.name);
    const ChunkAttnData d = make_chunk_attn(c.spec);
    ChunkAttnOutTensors v7, v6, v3;
    {
      ScopedEnv on("LINATTN_KDA_PREP", "v7");
      const int64_t before = cuda::kda_prep_v7_launches();
      run_fwd_case(c, api::CudaGdnPath::kChunked, 0);
      v7 = run_cuda_fwd(d, api::CudaGdnPath::kChunked, 0);
      if (bt == 64) EXPECT_GT(cuda::kda_prep_v7_launches(), before) << "prep v7 did not run";
      else EXPECT_EQ(cuda::kda_prep_v7_launches(), before) << "BT 32 must keep prep v3";
    }
    if (bt != 64) continue;
    v6 = fwd_with_env(d, "LINATTN_KDA_PREP", "v6", 0);
    v3 = fwd_with_env(d, "LINATTN_KDA_PREP", "v3", 0);
    expect_outputs_close(d, v3, v7, Tolerance{1e-2, 0.0}, " v3 / v7");  // padding rows stay NaN: valid rows only
    expect_outputs_close(d, v6, v7, Tolerance{1e-3, 0.0}, " v6 / v7");
    std::printf("[ v7 ] %s %s: o %s v6\n", dtype_name(dt), c.name.c_str(),
                o_same_values(v6, v7) ? "bitwise equal to" : "differs from");
  }
}

// v7 through the mma.sync fused kernel's V-slices, on the varlen edge lengths and the strong-decay /
// -1000-gate GVA case.
TEST_P(CudaKdaFwd, PrepV7EveryVSlice) {
  prep_every_vslice(GetParam(), "v7");
}

// v7's design point: three resident CTAs per SM (<= 80 registers, 75,264 B of shared memory each).
TEST(CudaKdaFwdPrepV7, ThreeCtasPerSm) { expect_ctas_per_sm(cuda::kda_prep_v7_ctas_per_sm, 3); }

// Prep v8 / v8p / v9 forced (LINATTN_KDA_PREP=v8 / v8p: v6's products with fewer shared-memory passes
// per element; v8p adds an L2 prefetch of a later chunk's inputs; v9: v8's body with a shorter gate
// phase, the gate formed in log2 units) against the fp64 reference on the inputs `d`, and at BT 64
// against `base` (v6 for v8 / v8p: the same products in the same order; v8 for v9: the same except
// the gate's rounding; held to a 10x tighter bar than to v3; the output says whether o was bitwise
// equal) and v3. An item, row or segment slip in the restructured staging / L, P / Ab passes, or a
// barrier / row slip in v9's merged gate and norm phases, shows as O(1) errors.
void check_prep_variants(const ChunkAttnData& d, const std::string& name, DType dt, int bt,
                         std::initializer_list<const char*> variants, const char* base,
                         int64_t (*launches)()) {
  const ChunkAttnOutTensors ref = ref_forward(d);
  ChunkAttnOutTensors vb, v3;
  if (bt == 64) {
    vb = fwd_with_env(d, "LINATTN_KDA_PREP", base, 0);
    v3 = fwd_with_env(d, "LINATTN_KDA_PREP", "v3", 0);
  }
  const std::string vs_base = std::string(" ") + base + " / ";
  for (const char* variant : variants) {
    SCOPED_TRACE(variant);
    ChunkAttnOutTensors vx;
    {
      ScopedEnv on("LINATTN_KDA_PREP", variant);
      const int64_t before = launches();
      vx = run_cuda_fwd(d, api::CudaGdnPath::kChunked, 0);
      if (bt == 64) EXPECT_GT(launches(), before) << "prep " << variant << " did not run";
      else EXPECT_EQ(launches(), before) << "BT 32 must keep prep v3";
    }
    EXPECT_TRUE(fwd_close(d, ref, vx, dt));
    EXPECT_TRUE(all_finite(d, vx));
    check_padding_untouched(d, vx);
    if (bt != 64) continue;
    expect_outputs_close(d, v3, vx, Tolerance{1e-2, 0.0}, " v3 / variant");  // padding rows NaN: valid rows only
    expect_outputs_close(d, vb, vx, Tolerance{1e-3, 0.0}, vs_base + "variant");
    std::printf("[ %s ] %s %s: o %s %s\n", variant, dtype_name(dt), name.c_str(),
                o_same_values(vb, vx) ? "bitwise equal to" : "differs from", base);
  }
}

void check_prep_v8(const ChunkAttnData& d, const std::string& name, DType dt, int bt) {
  check_prep_variants(d, name, dt, bt, {"v8", "v8p"}, "v6", cuda::kda_prep_v8_launches);
}

void check_prep_v9(const ChunkAttnData& d, const std::string& name, DType dt, int bt) {
  check_prep_variants(d, name, dt, bt, {"v9"}, "v8", cuda::kda_prep_v9_launches);
}

using PrepCheck = void (*)(const ChunkAttnData&, const std::string&, DType, int);

// `check` (check_prep_v8 / v9) on every case.
void check_prep_every_case(const std::tuple<DType, int>& param, PrepCheck check) {
  const auto [dt, bt] = param;
  for (const FwdCase& c : cases(dt, bt)) {
    SCOPED_TRACE(c.name);
    check(make_chunk_attn(c.spec), c.name, dt, bt);
  }
}

// The layer options over a long varlen layout, GVA 2: a sequence of 150 chunks and 17 tokens, a 3-token and a
// zero-length one, 40 chunks; 9 padding rows, 2% of the gates at -1000.
ChunkAttnSpec long_varlen_spec(DType dt, int bt) {
  ChunkAttnSpec s = layer_options_spec(dt, bt, ChunkOp::kKda);
  s.H = 1;
  s.HV = 2;
  s.seqlens = {150 * bt + 17, 3, 0, 40 * bt};
  s.pad_tokens = 9;
  s.extreme_gate_frac = 0.02;
  return s;
}

// `check` on long_varlen_spec, named `name`.
void check_prep_long_varlen(const std::tuple<DType, int>& param, PrepCheck check, const char* name) {
  const auto [dt, bt] = param;
  check(make_chunk_attn(long_varlen_spec(dt, bt)), name, dt, bt);
}

// Every case: -1000 gates, lower_bound -5, GVA, varlen with zero / short lengths, every gate form.
TEST_P(CudaKdaFwd, PrepV8MatchesReferenceAndV6AndV3) { check_prep_every_case(GetParam(), check_prep_v8); }

// More CTAs than the SM count, so v8p's prefetch of the CTA one SM count ahead in dispatch order runs,
// across value heads too (varlen: through the chunk table and cu_seqlens; CTAs past the grid and
// sentinel rows are skipped).
TEST_P(CudaKdaFwd, PrepV8LongVarlenReachesThePrefetch) {
  check_prep_long_varlen(GetParam(), check_prep_v8, "long_varlen_prefetch");
}

// v8 / v8p through the mma.sync fused kernel's V-slices, on the varlen edge lengths and the
// strong-decay / -1000-gate GVA case.
TEST_P(CudaKdaFwd, PrepV8EveryVSlice) {
  for (const char* variant : {"v8", "v8p"}) prep_every_vslice(GetParam(), variant);
}

// v8's design point: two resident CTAs per SM (<= 128 registers, v6's 109,056 B of shared memory).
TEST(CudaKdaFwdPrepV8, TwoCtasPerSm) { expect_ctas_per_sm(cuda::kda_prep_v8_ctas_per_sm, 2); }

// Prep v9 forced (opt-in, LINATTN_KDA_PREP=v9) on every case: -1000 gates (raw and through the
// in-kernel forms), lower_bound -5 / -3 sigmoid forms, GVA, varlen with zero / short lengths and
// padding, bf16 raw gates, no decay; vs the fp64 reference, v8 (rel RMS 1e-3) and v3; finite, padding
// untouched.
TEST_P(CudaKdaFwd, PrepV9MatchesReferenceAndV8AndV3) { check_prep_every_case(GetParam(), check_prep_v9); }

// Many CTAs per SM slot over a long varlen layout (a zero and a 3-token sequence, padding, 2% of the
// gates at -1000), so the two resident CTAs of an SM run v9's merged gate / norm phase side by side.
TEST_P(CudaKdaFwd, PrepV9LongVarlen) { check_prep_long_varlen(GetParam(), check_prep_v9, "long_varlen"); }

// v9 through the mma.sync fused kernel's V-slices, on the varlen edge lengths and the strong-decay /
// -1000-gate GVA case.
TEST_P(CudaKdaFwd, PrepV9EveryVSlice) {
  prep_every_vslice(GetParam(), "v9");
}

// v9 keeps v8's design point: two resident CTAs per SM.
TEST(CudaKdaFwdPrepV9, TwoCtasPerSm) { expect_ctas_per_sm(cuda::kda_prep_v9_ctas_per_sm, 2); }

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaKdaFwd,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16),
                                            ::testing::Values(64, 32)),
                         dtype_bt_name);

TEST(CudaKdaFwdFallback, Fp32AndOddDimsTakeTheTokenKernel) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ChunkAttnSpec s = base(DType::kF32, 64);
  s.K = 60;
  s.V = 100;
  s.seqlens = {17, 0, 90};
  s.extreme_gate_frac = 0.1;
  s.opt.use_qk_l2norm_in_kernel = true;
  const ChunkAttnData d = make_chunk_attn(s);
  const ChunkAttnOutTensors got = run_cuda_fwd(d, api::CudaGdnPath::kAuto);
  EXPECT_TRUE(fwd_close(d, ref_forward(d), got, DType::kF32));
  EXPECT_TRUE(all_finite(d, got));
}

TEST(CudaKdaFwdFallback, ChunkedPathRejectsUnsupportedShapes) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ChunkAttnSpec s = base(DType::kBF16, 64);
  s.K = 64;
  EXPECT_THROW(run_cuda_fwd(make_chunk_attn(s), api::CudaGdnPath::kChunked), Error);
  s.K = 128;  // KDA's mma.sync fused kernel takes V-slices of 32 and 64 only
  ScopedEnv mma("LINATTN_CUDA_KDA_WGMMA", "0");
  EXPECT_THROW(run_cuda_fwd(make_chunk_attn(s), api::CudaGdnPath::kChunked, 128), Error);
}

}  // namespace
}  // namespace linattn::test
