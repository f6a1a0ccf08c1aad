// CUDA GDN forward against the fp64 reference (src/ref), on seeded inputs, for both CUDA paths
// (token-by-token kernel and chunked prep + fused kernels) and every V-slice of the fused kernel:
// every option (GVA, scale, h0 / ht in both layouts, varlen with edge lengths 0, 1, BT-1, BT,
// BT+1, 2BT+3, in-kernel l2norm / gate / beta sigmoid, neg eigenvalues), strong, mixed and no
// decay, gates at -1000, bf16 and fp16 (fp32 on the token kernel), BT 64 and 32. Outputs are
// NaN-prefilled: unwritten elements fail; padding rows of o must stay untouched (NaN).
// The prep's v5 instance (LINATTN_CUDA_GDN_PREP=v5: P written first, 3 CTAs per SM) gives the same
// bits as the default prep on every case.
// State-chain modes of the pipelined fused kernel (LINATTN_CUDA_GDN_CHAIN = tma | il | tma2 (the default) | tma2+il, with
// LINATTN_CUDA_WGMMA=1 so even the short cases take the pipelined kernel): every case above at BT 64
// plus 1-, 2-, 3- and 7-chunk sequences and a varlen batch of partial chunks (the TMA ring's tail
// zeroing) against the fp64 reference, and the same bits as the step-3 chain (=v3); the TMA instance
// must really run. tma: WG0's ring by TMA; tma2: WG1's q / P ring as well; il: interleaved passes;
// tma3: tma2 with the per-token scales from the prep's records (gdn_chain_scales.cuh): also the same bits as
// the default, its instance must run, and the workspace grows by the records only with the switch.
// tma3+split (the state update issued as two key halves at the top of the next chunk), tma3+ost (WG1's full output chunks
// by one TMA store) and tma4 (both): the same bits as v3 and the default (tma3), and their instances must run.
// V-slice 32 of the pipelined kernel (LINATTN_CUDA_WGP_VS=32, where the plan's V-slice is 32): the chain-mode
// cases against the fp64 reference and against the V-slice 64 kernel on the same inputs (rel RMS: other
// wgmma shapes, so other fp32 summation orders), under every chain-mode value; its instance must run only
// where it applies (planned V-slice 32, P in the workspace), and the workspace does not change with it.
// PDL (LINATTN_CUDA_PDL=1, CudaGdnFwdPdl): the short forward's chain (chunk tables, prep, chain) launched with
// programmatic dependencies: the same bits as the plain launches on the short varlen shape (16/32 over 128, 96,
// 200, 88 tokens) and every case above at BT 64, at the planned V-slice and 64; it must launch with PDL.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "common/compare.h"
#include "cuda/gdn/gdn_fused_wg.h"
#include "cuda/common/device_info.h"
#include "cuda/common/launch.h"
#include "cuda/common/pdl_policy.h"
#include "cuda/gdn/gdn_fwd.h"
#include "cuda/gdn/gdn_prep_v7.h"
#include "cuda_fwd_util.h"
#include "linattn/error.h"

namespace linattn::test {
namespace {

using Case = FwdCase;

ChunkAttnSpec base(DType dt, int bt) { return fwd_base_spec(dt, bt); }

std::vector<Case> cases(DType dt, int bt) { return gdn_fwd_cases(dt, bt); }

void run_case(const Case& c, api::CudaGdnPath path, int vs) { run_fwd_case(c, path, vs); }

class CudaGdnFwd : public ::testing::TestWithParam<std::tuple<DType, int>> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  }
};

TEST_P(CudaGdnFwd, TokenKernelMatchesReference) {
  const auto [dt, bt] = GetParam();
  for (const Case& c : cases(dt, bt)) run_case(c, api::CudaGdnPath::kRecurrent, 0);
}

TEST_P(CudaGdnFwd, ChunkedKernelsMatchReference) {
  const auto [dt, bt] = GetParam();
  for (const Case& c : cases(dt, bt)) run_case(c, api::CudaGdnPath::kChunked, 0);
}

TEST_P(CudaGdnFwd, ChunkedEveryVSlice) {
  const auto [dt, bt] = GetParam();
  const Case c = cases(dt, bt)[1];
  for (int vs : {32, 64, 128}) run_case(c, api::CudaGdnPath::kChunked, vs);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  return !a.defined() || (a.view().nbytes() == b.view().nbytes() &&
                          std::memcmp(a.view().data, b.view().data, a.view().nbytes()) == 0);
}

TEST_P(CudaGdnFwd, PrepV5SameBitsAsDefault) {
  const auto [dt, bt] = GetParam();
  for (const Case& c : cases(dt, bt)) {
    SCOPED_TRACE(c.name);
    const ChunkAttnData d = make_chunk_attn(c.spec);
    setenv("LINATTN_CUDA_GDN_PREP", "v2", 1);
    const ChunkAttnOutTensors base = run_cuda_fwd(d, api::CudaGdnPath::kChunked);
    setenv("LINATTN_CUDA_GDN_PREP", "v5", 1);
    const ChunkAttnOutTensors v5 = run_cuda_fwd(d, api::CudaGdnPath::kChunked);
    unsetenv("LINATTN_CUDA_GDN_PREP");
    EXPECT_TRUE(same_bits(base.o, v5.o)) << "o differs";
    EXPECT_TRUE(same_bits(base.final_state, v5.final_state)) << "final_state differs";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGdnFwd,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16),
                                            ::testing::Values(64, 32)),
                         dtype_bt_name);

// (dtype, LINATTN_CUDA_GDN_CHAIN value)
class CudaGdnFwdChain : public ::testing::TestWithParam<std::tuple<DType, std::string>> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
    setenv("LINATTN_CUDA_WGMMA", "1", 1);  // the pipelined kernel wherever eligible (also < 2 chunks)
    setenv("LINATTN_CUDA_GDN_P", "prep", 1);
    setenv("LINATTN_CUDA_WGP_VS", "64", 1);  // the chain modes of V-slice 64 (V-slice 32 where planned is the default)
    set_mode();
  }
  void TearDown() override {
    unsetenv("LINATTN_CUDA_WGMMA");
    unsetenv("LINATTN_CUDA_GDN_P");
    unsetenv("LINATTN_CUDA_GDN_CHAIN");
    unsetenv("LINATTN_CUDA_WGP_VS");
  }
  DType dt() const { return std::get<0>(GetParam()); }
  const std::string& mode() const { return std::get<1>(GetParam()); }
  void set_mode() const { setenv("LINATTN_CUDA_GDN_CHAIN", mode().c_str(), 1); }
  bool tma() const { return mode().find("tma") != std::string::npos; }
  bool tma4() const { return mode().find("tma4") != std::string::npos; }
  bool sc() const { return mode().find("tma3") != std::string::npos || tma4(); }
  bool split() const { return tma4() || mode().find("split") != std::string::npos; }
  bool ost() const { return tma4() || mode().find("ost") != std::string::npos; }
  std::vector<Case> chain_cases() const {
    std::vector<Case> r = cases(dt(), 64);
    for (int64_t T : {64, 128, 192, 448}) {  // 1, 2, 3 (every ring stage once), 7 full chunks
      ChunkAttnSpec u = base(dt(), 64);
      u.T = T;
      r.push_back({"two_seqs_T" + std::to_string(T), u});
    }
    ChunkAttnSpec v = varlen_edges_spec(dt(), 64, ChunkOp::kGdn);  // partial chunks at every ring stage
    v.seqlens = {200, 63, 1, 130, 321, 65, 0, 255};
    v.pad_tokens = 5;
    v.opt.use_qk_l2norm_in_kernel = true;
    v.opt.state_v_first = true;
    r.push_back({"varlen_partial_chunks_v_first", v});
    return r;
  }
};

TEST_P(CudaGdnFwdChain, SwitchIsRead) {
  const bool il = mode().find("il") != std::string::npos, tma2 = mode().find("tma2") != std::string::npos || sc();
  EXPECT_EQ(cuda::gdn_chain_mode_env(),
            (il ? 1 : 0) | (tma() ? 2 : 0) | (tma2 ? 4 : 0) | (sc() ? 8 : 0) | (split() ? 16 : 0) | (ost() ? 32 : 0));
  setenv("LINATTN_CUDA_GDN_CHAIN", "v3", 1);
  EXPECT_EQ(cuda::gdn_chain_mode_env(), 0);
  setenv("LINATTN_CUDA_GDN_CHAIN", "tma+bogus", 1);  // names no mode: an error (see CudaGdnFwdChainSwitch)
  EXPECT_THROW(cuda::gdn_chain_mode_env(), linattn::Error);
  unsetenv("LINATTN_CUDA_GDN_CHAIN");
  EXPECT_EQ(cuda::gdn_chain_mode_env(), 2 | 4 | 8);
}

TEST_P(CudaGdnFwdChain, MatchesReference) {
  for (const Case& c : chain_cases()) {
    const int64_t before = cuda::gdn_fused_wg_launches(), tma_before = cuda::gdn_fused_wgp_tma_launches(),
                  sc_before = cuda::gdn_fused_wgp_sc_launches(), sp_before = cuda::gdn_fused_wgp_split_launches(),
                  os_before = cuda::gdn_fused_wgp_ost_launches();
    run_case(c, api::CudaGdnPath::kChunked, 64);
    EXPECT_GT(cuda::gdn_fused_wg_launches(), before) << c.name << ": the pipelined kernel did not run";
    EXPECT_EQ(cuda::gdn_fused_wgp_tma_launches() > tma_before, tma()) << c.name << ": TMA instance ran iff the mode says tma";
    EXPECT_EQ(cuda::gdn_fused_wgp_sc_launches() > sc_before, sc()) << c.name << ": tma3 instance ran iff the mode says tma3";
    EXPECT_EQ(cuda::gdn_fused_wgp_split_launches() > sp_before, split())
        << c.name << ": the split-update instance ran iff the mode says split / tma4";
    EXPECT_EQ(cuda::gdn_fused_wgp_ost_launches() > os_before, ost())
        << c.name << ": the TMA-store output instance ran iff the mode says ost / tma4";
  }
}

TEST_P(CudaGdnFwdChain, SameBitsAsStep3Chain) {
  for (const Case& c : chain_cases()) {
    SCOPED_TRACE(c.name);
    const ChunkAttnData d = make_chunk_attn(c.spec);
    const ChunkAttnOutTensors got = run_cuda_fwd(d, api::CudaGdnPath::kChunked, 64);
    setenv("LINATTN_CUDA_GDN_CHAIN", "v3", 1);
    const ChunkAttnOutTensors v3 = run_cuda_fwd(d, api::CudaGdnPath::kChunked, 64);
    set_mode();
    EXPECT_TRUE(same_bits(v3.o, got.o)) << "o differs from the step-3 chain's";
    EXPECT_TRUE(same_bits(v3.final_state, got.final_state)) << "final_state differs from the step-3 chain's";
    if (sc()) {  // and the default's (unset switch)
      unsetenv("LINATTN_CUDA_GDN_CHAIN");
      const ChunkAttnOutTensors def = run_cuda_fwd(d, api::CudaGdnPath::kChunked, 64);
      set_mode();
      EXPECT_TRUE(same_bits(def.o, got.o)) << "o differs from the default chain's";
      EXPECT_TRUE(same_bits(def.final_state, got.final_state)) << "final_state differs from the default chain's";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DtypesAndModes, CudaGdnFwdChain,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16),
                                            ::testing::Values(std::string("tma"), std::string("il"),
                                                              std::string("tma2"), std::string("tma2+il"),
                                                              std::string("tma3"), std::string("tma4"),
                                                              std::string("tma3+split"), std::string("tma3+ost"))),
                         [](const auto& info) {
                           std::string m = std::get<1>(info.param);
                           for (char& ch : m)
                             if (ch == '+') ch = '_';
                           return std::string(dtype_name(std::get<0>(info.param))) + "_" + m;
                         });

// (dtype, LINATTN_CUDA_GDN_CHAIN value): the V-slice 32 instance runs its cp.async rings whatever the mode.
class CudaGdnFwdVs32 : public CudaGdnFwdChain {
 protected:
  void SetUp() override {
    CudaGdnFwdChain::SetUp();
    setenv("LINATTN_CUDA_WGP_VS", "32", 1);
  }
  void TearDown() override {
    unsetenv("LINATTN_CUDA_WGP_VS");
    CudaGdnFwdChain::TearDown();
  }
};

TEST_P(CudaGdnFwdVs32, MatchesReference) {
  for (const Case& c : chain_cases()) {
    const int64_t before = cuda::gdn_fused_wgp_vs32_launches();
    run_case(c, api::CudaGdnPath::kChunked, 32);
    EXPECT_GT(cuda::gdn_fused_wgp_vs32_launches(), before) << c.name << ": the V-slice 32 instance did not run";
  }
}

// Same bf16 operands and roundings per element as V-slice 64; only the wgmmas' fp32 summation order differs.
TEST_P(CudaGdnFwdVs32, CloseToVSlice64) {
  expect_cases_close_with_env(chain_cases(), 32, "LINATTN_CUDA_WGP_VS", "64", cuda::gdn_fused_wgp_vs32_launches,
                              "the V-slice 32 instance ran without its switch", Tolerance{1e-2, 0.0});
}

// Planned V-slices of 64 / 128, and GDN with P formed in WG1 (no P in the workspace), keep V-slice 64.
TEST_P(CudaGdnFwdVs32, OnlyWherePlannedAndPInWorkspace) {
  const Case c = chain_cases()[1];
  for (int vs : {64, 128}) {
    const int64_t before = cuda::gdn_fused_wgp_vs32_launches();
    run_case(c, api::CudaGdnPath::kChunked, vs);
    EXPECT_EQ(cuda::gdn_fused_wgp_vs32_launches(), before) << "planned V-slice " << vs << " took the V-slice 32 instance";
  }
  setenv("LINATTN_CUDA_GDN_P", "fused", 1);
  const int64_t before = cuda::gdn_fused_wgp_vs32_launches();
  run_case(c, api::CudaGdnPath::kChunked, 32);
  EXPECT_EQ(cuda::gdn_fused_wgp_vs32_launches(), before) << "P formed in WG1 took the V-slice 32 instance";
}

INSTANTIATE_TEST_SUITE_P(DtypesAndModes, CudaGdnFwdVs32,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16),
                                            ::testing::Values(std::string("v3"), std::string("tma2"),
                                                              std::string("tma3"), std::string("tma4"))),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_" + std::get<1>(info.param);
                         });

// tma3's records: [nt_cap, HV] x 196 floats, carved only with the switch, only for GDN (no device needed).
TEST(CudaGdnFwdChainTma3, WorkspaceGrowsOnlyWithTheSwitch) {
  cuda::GdnFwdParams p;
  p.T_total = 1000;
  p.N = 3;
  p.H = 2;
  p.HV = 6;
  p.K = 128;
  p.V = 128;
  p.cu_seqlens = reinterpret_cast<const void*>(uintptr_t(1));  // sizing only: varlen tables
  const cuda::GdnFwdPlan plan = cuda::plan_gdn_fwd(p, 132, true);
  ASSERT_TRUE(plan.chunked) << plan.reason;
  setenv("LINATTN_CUDA_GDN_CHAIN", "tma2", 1);  // the chain without records (tma3 is the default since accc55a)
  const size_t def = cuda::gdn_fwd_workspace_bytes(p, plan, false);
  EXPECT_EQ(cuda::gdn_chain_scales_floats(p, plan.nt_cap), 0u);
  setenv("LINATTN_CUDA_GDN_CHAIN", "tma3", 1);
  const size_t rec = size_t(plan.nt_cap) * p.HV * 196 * sizeof(float);
  EXPECT_EQ(cuda::gdn_chain_scales_floats(p, plan.nt_cap) * sizeof(float), rec);
  EXPECT_EQ(cuda::gdn_fwd_workspace_bytes(p, plan, false), def + (rec + 255) / 256 * 256);
  setenv("LINATTN_CUDA_GDN_CHAIN", "tma4", 1);  // the split chain reads the same records
  EXPECT_EQ(cuda::gdn_fwd_workspace_bytes(p, plan, false), def + (rec + 255) / 256 * 256);
  setenv("LINATTN_CUDA_GDN_CHAIN", "tma3", 1);
  cuda::GdnFwdParams kda = p;
  kda.kda = true;
  const cuda::GdnFwdPlan kplan = cuda::plan_gdn_fwd(kda, 132, true);
  EXPECT_EQ(cuda::gdn_chain_scales_floats(kda, kplan.nt_cap), 0u);
  setenv("LINATTN_CUDA_GDN_CHAIN", "tma2", 1);
  setenv("LINATTN_CUDA_WGP_VS", "32", 1);  // the V-slice 32 instance reads the same workspace
  EXPECT_EQ(cuda::gdn_fwd_workspace_bytes(p, plan, false), def);
  unsetenv("LINATTN_CUDA_WGP_VS");
}

// A chain mode with the removed token "pers" (the persistent chain CTAs, removed in session 12) or a token naming no
// mode is an error naming the variable, the value and the accepted values, never a silent default (no device needed).
TEST(CudaGdnFwdChainSwitch, RemovedPersIsAnError) {
  for (const char* v : {"tma3+pers", "pers", "tma2+pers+il", "bogus+pers", "tma+bogus", "TMA3", "tma3+"}) {
    ScopedEnv set("LINATTN_CUDA_GDN_CHAIN", v);  // restores an exported value afterwards
    try {
      cuda::gdn_chain_mode_env();
      ADD_FAILURE() << "LINATTN_CUDA_GDN_CHAIN=" << v << " accepted";
    } catch (const linattn::Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string("LINATTN_CUDA_GDN_CHAIN=") + v), std::string::npos) << m;
      EXPECT_NE(m.find("expected '+'-joined il, tma, tma2, tma3, tma4, split or ost; or v3 alone"), std::string::npos)
          << m;
    }
  }
  ScopedEnv unset("LINATTN_CUDA_GDN_CHAIN", nullptr);
  EXPECT_EQ(cuda::gdn_chain_mode_env(), 2 | 4 | 8);  // the default (tma3)
}

class CudaGdnFwdPdl : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  }
};

TEST_P(CudaGdnFwdPdl, SameBitsAsPlainLaunches) {
  std::vector<Case> all = cases(GetParam(), 64);
  ChunkAttnSpec s = base(GetParam(), 64);  // the short varlen forward of the benches
  s.H = 16;
  s.HV = 32;
  s.seqlens = {128, 96, 200, 88};
  s.pad_tokens = 3;
  all.insert(all.begin(), {"short_varlen_16_32", s});
  for (const Case& c : all)
    for (int vs : {0, 64}) {
      SCOPED_TRACE(c.name + " vs=" + std::to_string(vs));
      const ChunkAttnData d = make_chunk_attn(c.spec);
      ChunkAttnOutTensors off, on;
      {
        ScopedEnv e("LINATTN_CUDA_PDL", "0");
        const int64_t n0 = cuda::pdl_launches();
        off = run_cuda_fwd(d, api::CudaGdnPath::kChunked, vs);
        EXPECT_EQ(cuda::pdl_launches(), n0) << "PDL launches while switched off";
      }
      {
        ScopedEnv e("LINATTN_CUDA_PDL", "1");
        const int64_t n0 = cuda::pdl_launches();
        on = run_cuda_fwd(d, api::CudaGdnPath::kChunked, vs);
        if (c.name == "short_varlen_16_32") {
          EXPECT_GE(cuda::pdl_launches() - n0, 1) << "no PDL launch while switched on";
        }
      }
      EXPECT_TRUE(same_bits(on.o, off.o)) << "o with PDL differs from the plain launches";
      EXPECT_TRUE(same_bits(on.final_state, off.final_state)) << "final state with PDL differs";
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGdnFwdPdl, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// LINATTN_CUDA_PDL=auto (the default since session 14): the short forward keeps PDL, a forward whose prep runs more than two waves launches
// plainly; both the same bits as the plain launches.
TEST(CudaGdnFwdPdlSwitch, AutoSkipsLongChainsOnly) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  EXPECT_FALSE(cuda::pdl_long_chain(1056, 4, 132));
  EXPECT_TRUE(cuda::pdl_long_chain(1057, 4, 132));
  const int sms = cuda::current_device_info().sm_count;
  ChunkAttnSpec s = base(DType::kBF16, 64);
  s.H = 16;
  s.HV = 16;
  s.seqlens = {128, 96, 200, 88};
  ChunkAttnSpec l = s;
  l.opt.segments = 1;  // tiers 1 / 2: one sequence of 16 heads would take tier 3, whose stages keep PDL
  const int per_sm = cuda::gdn_prep_v8_ctas_per_sm(1);
  l.seqlens = {static_cast<int>(64 * (2 * per_sm * sms / 16 + 2))};  // chunk rows x 16 heads > two prep waves
  ASSERT_TRUE(cuda::pdl_long_chain((2 * per_sm * sms / 16 + 2) * 16, per_sm, sms));
  for (const auto& [spec, long_chain] : {std::pair{s, false}, std::pair{l, true}}) {
    SCOPED_TRACE(long_chain ? "long chain" : "short chain");
    const ChunkAttnData d = make_chunk_attn(spec);
    ChunkAttnOutTensors plain, autod;
    {
      ScopedEnv e("LINATTN_CUDA_PDL", "0");
      plain = run_cuda_fwd(d, api::CudaGdnPath::kChunked);
    }
    {
      ScopedEnv e("LINATTN_CUDA_PDL", "auto");
      EXPECT_TRUE(cuda::pdl_auto());
      const int64_t n0 = cuda::pdl_launches();
      autod = run_cuda_fwd(d, api::CudaGdnPath::kChunked);
      if (long_chain) EXPECT_EQ(cuda::pdl_launches(), n0) << "auto launched a long chain with PDL";
      else EXPECT_GE(cuda::pdl_launches() - n0, 1) << "auto launched the short chain without PDL";
      EXPECT_TRUE(cuda::pdl_enabled()) << "the scope ended with the call";
    }
    EXPECT_TRUE(same_bits(plain.o, autod.o));
    EXPECT_TRUE(same_bits(plain.final_state, autod.final_state));
  }
}

// PDL is on by default (session 13; "auto" since session 14): unset launches the short forward with PDL, the same
// bits as "1"; an unknown value is an error
// naming the variable, the value and the accepted values, raised before any launch of the forward.
TEST(CudaGdnFwdPdlSwitch, DefaultOnAndUnknownValueIsAnError) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ChunkAttnSpec s = base(DType::kBF16, 64);
  s.H = 16;
  s.HV = 32;
  s.seqlens = {128, 96, 200, 88};
  const ChunkAttnData d = make_chunk_attn(s);
  ChunkAttnOutTensors unset, on;
  {
    ScopedEnv e("LINATTN_CUDA_PDL", nullptr);
    EXPECT_TRUE(cuda::pdl_enabled());
    EXPECT_TRUE(cuda::pdl_auto()) << "unset is auto since session 14";
    const int64_t n0 = cuda::pdl_launches();
    unset = run_cuda_fwd(d, api::CudaGdnPath::kChunked);
    EXPECT_GE(cuda::pdl_launches() - n0, 1) << "the default launched nothing with PDL";
  }
  {
    ScopedEnv e("LINATTN_CUDA_PDL", "1");
    on = run_cuda_fwd(d, api::CudaGdnPath::kChunked);
  }
  EXPECT_TRUE(same_bits(unset.o, on.o));
  for (const char* bad : {"2", "on", "true"}) {
    ScopedEnv e("LINATTN_CUDA_PDL", bad);
    try {
      (void)cuda::pdl_enabled();
      ADD_FAILURE() << "LINATTN_CUDA_PDL=" << bad << " was accepted";
    } catch (const Error& err) {
      const std::string m = err.what();
      EXPECT_NE(m.find("LINATTN_CUDA_PDL=" + std::string(bad)), std::string::npos) << m;
      EXPECT_NE(m.find("expected"), std::string::npos) << m;
    }
  }
}

TEST(CudaGdnFwdFallback, Fp32AndOddDimsTakeTheTokenKernel) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ChunkAttnSpec s = base(DType::kF32, 64);
  s.K = 60;
  s.V = 100;
  s.seqlens = {17, 0, 90};
  s.opt.use_qk_l2norm_in_kernel = true;
  const ChunkAttnData d = make_chunk_attn(s);
  const ChunkAttnOutTensors got = run_cuda_fwd(d, api::CudaGdnPath::kAuto);
  EXPECT_TRUE(fwd_close(d, ref_forward(d), got, DType::kF32));
}

TEST(CudaGdnFwdFallback, ChunkedPathRejectsUnsupportedShapes) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ChunkAttnSpec s = base(DType::kBF16, 64);
  s.K = 64;
  const ChunkAttnData d = make_chunk_attn(s);
  EXPECT_THROW(run_cuda_fwd(d, api::CudaGdnPath::kChunked), Error);
}

}  // namespace
}  // namespace linattn::test
