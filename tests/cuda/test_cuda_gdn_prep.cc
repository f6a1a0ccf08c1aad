// Prep v7 (LINATTN_CUDA_GDN_PREP=v7, gdn_prep_v7.cu): the same cases against the fp64 reference and bitwise v6's
// o / final state / gradients (its Ab, Ai, rq, rk, gam and records are v6's bits; P differs only in the sign of
// upper-triangle zeros), the V-slices, P in the fused kernel, tma3 records, backward, training cache; 4 CTAs per SM.
// Prep v8 (LINATTN_CUDA_GDN_PREP=v8, opt-in; gdn_prep_v7.cu, perf-notes "Prep v8"): v7's values on another shared
// layout, so every check bitwise against v7 (short varlen cases with sentinel rows first), also split (v8/s2 vs v7).
// Prep v10 (LINATTN_CUDA_GDN_PREP=v10, default; BT 64 unsplit, perf-notes "Prep v10"): v8 on an instruction diet, so
// every check bitwise against v8 (its exp2f fast path on items whose exponents are all >= -126: the strong-decay and
// -1000-gate cases take both paths; its direct Ab zeros when every beta is non-negative: a case with negative betas
// takes the other), the fp64 bars, P fused, tma3 records, backward, training cache, 4 CTAs per SM.
// Prep v7 split (LINATTN_CUDA_GDN_PREP_SPLIT=2 / 4 / auto, gdn_prep_v7.cu): every check below against unsplit v7
// bitwise (o, final state, gradients, training cache, P in the fused kernel, tma3 records), on short varlen shapes
// first (4 sequences 128 / 96 / 200 / 88 at GVA 2, edge lengths at GVA 4 and 1: sentinel chunk rows at BT 64 and 32),
// then the forward cases; the split instance must run wherever G is even; the switch, the pick and the occupancy.
// GDN prep v6 (LINATTN_CUDA_GDN_PREP=v6, src/cuda/gdn/gdn_prep.cu): the default prep's arithmetic with fewer CTA
// barriers, so with the switch every GDN forward case (the layer options with GVA 2, varlen with edge lengths 0,
// 1, BT-1, BT, BT+1, 2BT+3, padding and int64 cu_seqlens, strong decays with -1000 gates, a zero-length sequence
// and GVA 3, negative eigenvalues with bf16 gates and V 64, V 256) in bf16 and fp16, BT 64 and 32, must
//  - match the fp64 reference (the forward tests' bars), with the v6 instance really launched;
//  - give bitwise the default prep's o and final state (also with P formed in the fused kernel: the no-P
//    instance, and with chain mode tma3: the prep's scale records, on the chain tests' partial chunks);
//  - give bitwise the default's gradients in the backward (whose prep writes Ai too), and through the training
//    cache (the forward's prep saved, the backward reading it) bitwise the recomputing backward's, close to fp64.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/compare.h"
#include "cuda/gdn/gdn_fused_wg.h"
#include "cuda/gdn/gdn_prep_v6.h"
#include "cuda/gdn/gdn_prep_v7.h"
#include "cuda_bwd_util.h"
#include "cuda_fwd_util.h"

namespace linattn::test {
namespace {

std::vector<FwdCase> gdn_cases(DType dt, int bt) {
  std::vector<FwdCase> r = gdn_fwd_cases(dt, bt);
  if (std::getenv("LINATTN_SANITIZED")) r.resize(2);  // compute-sanitizer runs: the layer options and varlen edges
  return r;
}

// Short varlen shapes (the split's target: grids under one wave), K = V = 128, layer options: GVA 2 (4 sequences of
// 128, 96, 200, 88 tokens: nt_cap 11 rows, 10 used at BT 64; 19 / 17 at BT 32), GVA 4 with edge lengths and a zero-
// length sequence, GVA 1 (the split never runs: G 1).
std::vector<FwdCase> short_cases(DType dt, int bt) {
  std::vector<FwdCase> r;
  ChunkAttnSpec s = layer_options_spec(dt, bt, ChunkOp::kGdn);
  s.seqlens = {128, 96, 200, 88};
  s.pad_tokens = 5;
  r.push_back({"short_varlen_gva2", s});
  ChunkAttnSpec e = varlen_edges_spec(dt, bt, ChunkOp::kGdn);
  e.seqlens = {1, 63, 65, 0, 130, 31};
  e.H = 1;
  e.HV = 4;
  e.opt.use_qk_l2norm_in_kernel = true;
  r.push_back({"short_varlen_edges_gva4", e});
  ChunkAttnSpec o = s;
  o.H = o.HV = 2;
  o.seqlens = {33, 200, 17};
  r.push_back({"short_varlen_gva1", o});
  return r;
}

// The comparison baseline for nullptr: the previous default "v5" (v6 is the default since accc55a). "v7/sN": v7 with
// LINATTN_CUDA_GDN_PREP_SPLIT=N (any other value unsets the split switch).
void set_prep(const char* v) {
  const std::string s = v ? v : "v5";
  const size_t k = s.find("/s");
  setenv("LINATTN_CUDA_GDN_PREP", s.substr(0, k).c_str(), 1);
  if (k == std::string::npos) unsetenv("LINATTN_CUDA_GDN_PREP_SPLIT");
  else setenv("LINATTN_CUDA_GDN_PREP_SPLIT", s.substr(k + 2).c_str(), 1);
}

// o and final state of d with the prep switch at v (nullptr: "v5", the previous default).
ChunkAttnOutTensors fwd_with(const ChunkAttnData& d, const char* v, int vs = 0) {
  set_prep(v);
  ChunkAttnOutTensors o = run_cuda_fwd(d, api::CudaGdnPath::kChunked, vs);
  set_prep(nullptr);
  return o;
}

void expect_same_fwd(const ChunkAttnOutTensors& a, const ChunkAttnOutTensors& b) {
  EXPECT_TRUE(same_bits(a.o, b.o)) << "o differs from the default prep's";
  EXPECT_TRUE(same_bits(a.final_state, b.final_state)) << "final_state differs from the default prep's";
}

class CudaGdnPrepV6 : public ::testing::TestWithParam<std::tuple<DType, int>> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  }
  void TearDown() override {
    unsetenv("LINATTN_CUDA_GDN_PREP");
    unsetenv("LINATTN_CUDA_GDN_PREP_SPLIT");
    unsetenv("LINATTN_CUDA_GDN_P");
    unsetenv("LINATTN_CUDA_GDN_CHAIN");
    unsetenv("LINATTN_CUDA_WGMMA");
  }
  DType dt() const { return std::get<0>(GetParam()); }
  int bt() const { return std::get<1>(GetParam()); }
};

TEST_P(CudaGdnPrepV6, SwitchIsRead) {
  set_prep("v6");
  EXPECT_TRUE(cuda::gdn_prep_v6_env());
  set_prep("v5");
  EXPECT_FALSE(cuda::gdn_prep_v6_env());
  unsetenv("LINATTN_CUDA_GDN_PREP");
  EXPECT_TRUE(cuda::gdn_prep_v6_env()) << "v6 is the default";
  set_prep("v2");
  EXPECT_FALSE(cuda::gdn_prep_v6_env());
  unsetenv("LINATTN_CUDA_GDN_PREP");
}

TEST(CudaGdnPrepV6Occupancy, FourCtasPerSmAtBt64) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  for (int G : {1, 4, 8}) EXPECT_EQ(cuda::gdn_prep_v6_ctas_per_sm(G), 4) << "G = " << G;
  std::printf("gdn prep v6: %d CTAs per SM at G 4\n", cuda::gdn_prep_v6_ctas_per_sm(4));
}

// A prep version under test: its switch value, the baseline it must equal bitwise (nullptr: "v5", the previous
// default), its launch counter and (split) whether it runs on a spec (nullptr: always) and the short cases first.
struct Variant {
  const char* name;
  const char* base;
  int64_t (*launches)();
  bool (*runs)(const ChunkAttnSpec&) = nullptr;
  bool short_first = false;
};
bool even_g(const ChunkAttnSpec& s) { return (s.HV / s.H) % 2 == 0; }  // the split runs (S 2, 4 or auto)
const Variant kV6{"v6", nullptr, cuda::gdn_prep_v6_launches};
const Variant kV7{"v7", "v6", cuda::gdn_prep_v7_launches};
const Variant kS2{"v7/s2", "v7", cuda::gdn_prep_split_launches, even_g, true};
const Variant kS4{"v7/s4", "v7", cuda::gdn_prep_split_launches, even_g, true};
const Variant kSAuto{"v7/sauto", "v7", cuda::gdn_prep_split_launches, even_g, true};
const Variant kV8{"v8", "v7", cuda::gdn_prep_v8_launches, nullptr, true};
const Variant kV8S2{"v8/s2", "v7", cuda::gdn_prep_split_launches, even_g, true};
const Variant kV10{"v10", "v8", cuda::gdn_prep_v10_launches, nullptr, true};

std::vector<FwdCase> cases_for(const Variant& v, DType dt, int bt) {
  std::vector<FwdCase> r = v.short_first ? short_cases(dt, bt) : std::vector<FwdCase>{};
  for (FwdCase& c : gdn_cases(dt, bt)) r.push_back(std::move(c));
  if (std::getenv("LINATTN_SANITIZED")) r.resize(2);
  return r;
}
// The variant's launch counter moved since `before` (where it runs on c).
void expect_ran(const Variant& v, const FwdCase& c, int64_t before, const char* where) {
  if (!v.runs || v.runs(c.spec)) {
    EXPECT_GT(v.launches(), before) << c.name << ": the " << v.name << " prep did not run" << where;
  }
}

// Forward then backward through the public ops; with `cache`, the forward's prep fills the training cache and
// the backward reads it.
struct FwdBwd {
  ChunkAttnOutTensors out;
  ChunkAttnGradTensors grads;
};
FwdBwd fwd_bwd(const ChunkAttnData& d, const ChunkAttnCotangents& cot, bool cache) {
  auto dev = to_device(d);
  ChunkAttnOutputs out = dev->out;
  ChunkAttnInputs in = dev->in;
  DevArena a;
  if (cache) {
    const size_t bytes = chunk_attn_saved_bytes(dev->in, d.opt());
    EXPECT_GT(bytes, 0u) << "the chunked CUDA path should take a training cache";
    const TensorView buf = a.alloc(DType::kI32, {static_cast<int64_t>(bytes / 4 + 1)});
    out.saved = buf.data;
    in.saved = buf.data;
    out.saved_bytes = in.saved_bytes = bytes;
  }
  chunk_attn_fwd(dev->in, out, d.opt());
  auto g = grads_to_device(alloc_grads(d, DType::kF32, DType::kF32), cot);
  const size_t wb = chunk_attn_bwd_workspace_bytes(in, d.opt());
  const TensorView w = a.alloc(DType::kI32, {static_cast<int64_t>(wb / 4 + 1)});
  chunk_attn_bwd(in, g->d_o, g->dht, g->g, d.opt(), ExecContext{nullptr, w.data, wb});
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return {outputs_to_host(*dev), grads_to_host(g->g)};
}

// The checks, each run for v6 (against v5) and v7 (against v6).
void matches_reference(const Variant& v, DType dt, int bt) {
  for (const FwdCase& c : cases_for(v, dt, bt)) {
    const int64_t before = v.launches();
    set_prep(v.name);
    run_fwd_case(c, api::CudaGdnPath::kChunked, 0);
    set_prep(nullptr);
    expect_ran(v, c, before, "");
  }
}

void same_bits_as_base(const Variant& v, DType dt, int bt) {
  for (const FwdCase& c : cases_for(v, dt, bt)) {
    SCOPED_TRACE(c.name);
    const ChunkAttnData d = make_chunk_attn(c.spec);
    const int64_t before = v.launches();
    const ChunkAttnOutTensors got = fwd_with(d, v.name);
    expect_ran(v, c, before, "");
    expect_same_fwd(fwd_with(d, v.base), got);
    if (c.name == "varlen_edges_mixed_decay")
      for (int vs : {32, 64, 128}) expect_same_fwd(fwd_with(d, v.base, vs), fwd_with(d, v.name, vs));
  }
}

// P formed in the pipelined fused kernel: the prep's no-P instance (BT 64 only; elsewhere the prep writes P).
void same_bits_p_fused(const Variant& v, DType dt, int bt) {
  setenv("LINATTN_CUDA_WGMMA", "1", 1);
  setenv("LINATTN_CUDA_GDN_P", "fused", 1);
  for (const FwdCase& c : cases_for(v, dt, bt)) {
    SCOPED_TRACE(c.name);
    const ChunkAttnData d = make_chunk_attn(c.spec);
    expect_same_fwd(fwd_with(d, v.base, 64), fwd_with(d, v.name, 64));
  }
}

// Chain mode tma3: the prep also writes the fused kernel's scale records (BT 64); partial chunks at every ring stage
// as in the chain tests.
void same_bits_tma3(const Variant& v, DType dt) {
  setenv("LINATTN_CUDA_WGMMA", "1", 1);
  setenv("LINATTN_CUDA_GDN_P", "prep", 1);
  setenv("LINATTN_CUDA_GDN_CHAIN", "tma3", 1);
  std::vector<FwdCase> cs = cases_for(v, dt, 64);
  ChunkAttnSpec sp = varlen_edges_spec(dt, 64, ChunkOp::kGdn);
  sp.seqlens = {200, 63, 1, 130, 321, 65, 0, 255, 17, 48};
  sp.pad_tokens = 5;
  sp.opt.use_qk_l2norm_in_kernel = true;
  sp.opt.state_v_first = true;
  cs.push_back({"varlen_partial_chunks_v_first", sp});
  for (const FwdCase& c : cs) {
    SCOPED_TRACE(c.name);
    const ChunkAttnData d = make_chunk_attn(c.spec);
    const int64_t sc_before = cuda::gdn_fused_wgp_sc_launches(), before = v.launches();
    const ChunkAttnOutTensors got = fwd_with(d, v.name, 64);
    EXPECT_GT(cuda::gdn_fused_wgp_sc_launches(), sc_before) << "the tma3 instance did not run";
    expect_ran(v, c, before, "");
    expect_same_fwd(fwd_with(d, v.base, 64), got);
    set_prep(v.name);
    run_fwd_case(c, api::CudaGdnPath::kChunked, 64);
    set_prep(nullptr);
  }
}

// The backward's own prep (Ab, Ai, P, gam, rq, rk): bitwise the baseline's gradients, close to fp64.
void backward_same_bits(const Variant& v, DType dt, int bt) {
  std::vector<FwdCase> cs = cases_for(v, dt, bt);
  cs.resize(3);  // the backward tests' GDN shapes (K = V = 128; split: the short cases)
  for (const FwdCase& c : cs) {
    SCOPED_TRACE(c.name);
    const ChunkAttnData d = make_chunk_attn(c.spec);
    Rng rng(5);
    const ChunkAttnCotangents cot = random_cotangents(d, rng, dt, true);
    set_prep(v.base);
    const ChunkAttnGradTensors base = run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kChunked);
    set_prep(v.name);
    const int64_t before = v.launches();
    const ChunkAttnGradTensors got = run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kChunked);
    expect_ran(v, c, before, " in the backward");
    set_prep(nullptr);
    EXPECT_TRUE(grads_bitwise(base, got));
    EXPECT_TRUE(bwd_close(d, ref_backward(d, cot), got, dt));
    EXPECT_TRUE(grads_padding_zero(d, got));
  }
}

// The training cache: the variant's forward prep outputs, read by the backward, give bitwise the baseline's
// gradients without the cache, and the forward's outputs are the baseline's.
void training_cache_same_bits(const Variant& v, DType dt, int bt) {
  std::vector<FwdCase> cs = cases_for(v, dt, bt);
  cs.resize(3);
  for (const FwdCase& c : cs) {
    SCOPED_TRACE(c.name);
    const ChunkAttnData d = make_chunk_attn(c.spec);
    Rng rng(17);
    const ChunkAttnCotangents cot = random_cotangents(d, rng, dt, true);
    set_prep(v.base);
    const FwdBwd plain = fwd_bwd(d, cot, false);
    set_prep(v.name);
    const int64_t before = v.launches();
    const FwdBwd cached = fwd_bwd(d, cot, true);
    expect_ran(v, c, before, " in the training-cache forward");
    set_prep(nullptr);
    EXPECT_TRUE(same_bits(plain.out.o, cached.out.o)) << "o differs";
    EXPECT_TRUE(same_bits(plain.out.final_state, cached.out.final_state)) << "final_state differs";
    EXPECT_TRUE(grads_bitwise(plain.grads, cached.grads));
    EXPECT_TRUE(bwd_close(d, ref_backward(d, cot), cached.grads, dt));
  }
}

TEST_P(CudaGdnPrepV6, MatchesReference) { matches_reference(kV6, dt(), bt()); }
TEST_P(CudaGdnPrepV6, SameBitsAsDefault) { same_bits_as_base(kV6, dt(), bt()); }
TEST_P(CudaGdnPrepV6, SameBitsWithPInTheFusedKernel) { same_bits_p_fused(kV6, dt(), bt()); }
TEST_P(CudaGdnPrepV6, BackwardSameBitsAsDefault) { backward_same_bits(kV6, dt(), bt()); }
TEST_P(CudaGdnPrepV6, TrainingCacheSameBitsAsDefault) { training_cache_same_bits(kV6, dt(), bt()); }

// ---- prep v7: the same checks against v6 ----
TEST(CudaGdnPrepV7Occupancy, FourCtasPerSmAtBt64) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  for (int G : {1, 4, 8}) EXPECT_EQ(cuda::gdn_prep_v7_ctas_per_sm(G), 4) << "G = " << G;
}

TEST_P(CudaGdnPrepV6, V7SwitchIsRead) {
  set_prep("v7");
  EXPECT_TRUE(cuda::gdn_prep_v7_env());
  EXPECT_FALSE(cuda::gdn_prep_v6_env());
  set_prep("v6");
  EXPECT_FALSE(cuda::gdn_prep_v7_env());
  set_prep("v5");
  EXPECT_FALSE(cuda::gdn_prep_v7_env());
  unsetenv("LINATTN_CUDA_GDN_PREP");
  EXPECT_TRUE(cuda::gdn_prep_v7_env()) << "v8 (launched through v7's launcher) is the default";
  EXPECT_TRUE(cuda::gdn_prep_v8_env()) << "v8: the default at BT 32 and with the split (v10 at BT 64 since session 15)";
  set_prep("v7");
  EXPECT_FALSE(cuda::gdn_prep_v8_env()) << "v7 names the previous prep";
  set_prep("v8");  // v8 launches through v7's launcher
  EXPECT_TRUE(cuda::gdn_prep_v7_env());
  EXPECT_TRUE(cuda::gdn_prep_v8_env());
  EXPECT_FALSE(cuda::gdn_prep_v6_env());
  set_prep("v9");  // names no prep: an error naming the variable and the value, not a silent older prep
  try {
    cuda::gdn_prep_v7_env();
    ADD_FAILURE() << "LINATTN_CUDA_GDN_PREP=v9 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LINATTN_CUDA_GDN_PREP=v9"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected v8"), std::string::npos) << e.what();
  }
  EXPECT_ANY_THROW(cuda::gdn_prep_v6_env());
  unsetenv("LINATTN_CUDA_GDN_PREP");
}

TEST_P(CudaGdnPrepV6, V7MatchesReference) { matches_reference(kV7, dt(), bt()); }
TEST_P(CudaGdnPrepV6, V7SameBitsAsV6) { same_bits_as_base(kV7, dt(), bt()); }
TEST_P(CudaGdnPrepV6, V7SameBitsWithPInTheFusedKernel) { same_bits_p_fused(kV7, dt(), bt()); }
TEST_P(CudaGdnPrepV6, V7BackwardSameBitsAsV6) { backward_same_bits(kV7, dt(), bt()); }
TEST_P(CudaGdnPrepV6, V7TrainingCacheSameBitsAsV6) { training_cache_same_bits(kV7, dt(), bt()); }

// ---- prep v8: the same checks against v7 (short varlen cases first) ----
TEST(CudaGdnPrepV8Occupancy, FourCtasPerSmAtBt64) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  for (int G : {1, 4, 8}) EXPECT_EQ(cuda::gdn_prep_v8_ctas_per_sm(G), 4) << "G = " << G;
}
TEST_P(CudaGdnPrepV6, V8MatchesReference) { matches_reference(kV8, dt(), bt()); }
TEST_P(CudaGdnPrepV6, V8SameBitsAsV7) {
  same_bits_as_base(kV8, dt(), bt());
  same_bits_as_base(kV8S2, dt(), bt());
}
TEST_P(CudaGdnPrepV6, V8SameBitsWithPInTheFusedKernel) { same_bits_p_fused(kV8, dt(), bt()); }
TEST_P(CudaGdnPrepV6, V8BackwardSameBitsAsV7) { backward_same_bits(kV8, dt(), bt()); }
TEST_P(CudaGdnPrepV6, V8TrainingCacheSameBitsAsV7) { training_cache_same_bits(kV8, dt(), bt()); }

// ---- prep v7 split: the same checks against unsplit v7 (short varlen cases first) ----
TEST(CudaGdnPrepSplit, SwitchAndPick) {
  using cuda::gdn_prep_split_pick;
  {
    ScopedEnv e("LINATTN_CUDA_GDN_PREP_SPLIT", nullptr);
    EXPECT_EQ(cuda::gdn_prep_split_env().value, 1) << "unsplit is the default";
  }
  const std::pair<const char*, int> ok[] = {{"1", 1}, {"2", 2}, {"4", 4}, {"8", 8}, {"auto", 0}};
  for (const auto& [v, want] : ok) {
    ScopedEnv e("LINATTN_CUDA_GDN_PREP_SPLIT", v);
    EXPECT_EQ(cuda::gdn_prep_split_env().value, want) << v;
  }
  for (const char* bad : {"3", "0", "on", "16"}) {
    ScopedEnv e("LINATTN_CUDA_GDN_PREP_SPLIT", bad);
    try {
      cuda::gdn_prep_split_env();
      ADD_FAILURE() << "LINATTN_CUDA_GDN_PREP_SPLIT=" << bad << " accepted";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(std::string("LINATTN_CUDA_GDN_PREP_SPLIT=") + bad), std::string::npos)
          << err.what();
    }
  }
  auto four = [](int) { return 4; };  // 4 CTAs per SM, 132 SMs: one wave is 528 CTAs
  const cuda::GdnPrepSplit autos{0}, s2{2}, s4{4}, s8{8}, off{1};
  EXPECT_EQ(gdn_prep_split_pick(autos, 2, 11 * 16, four, 132), 2);   // 16/32, 512 tokens: 352 CTAs
  EXPECT_EQ(gdn_prep_split_pick(autos, 4, 11 * 16, four, 132), 2);   // 16/64: 704 > 528 at S 4
  EXPECT_EQ(gdn_prep_split_pick(autos, 4, 32 * 16, four, 132), 1);   // 16/64 1x2048: 512 CTAs already
  EXPECT_EQ(gdn_prep_split_pick(autos, 2, 31 * 16, four, 132), 1);   // 16/32 64x16: nt_cap 31, 992 > 528 at S 2
  EXPECT_EQ(gdn_prep_split_pick(autos, 8, 4, four, 132), 8);
  EXPECT_EQ(gdn_prep_split_pick(autos, 3, 4, four, 132), 1);         // no even split of 3 value heads
  EXPECT_EQ(gdn_prep_split_pick(autos, 6, 4, four, 132), 2);
  EXPECT_EQ(gdn_prep_split_pick(s4, 2, 1 << 20, four, 132), 2);      // forced: the largest divisor of G not above
  EXPECT_EQ(gdn_prep_split_pick(s4, 4, 1 << 20, four, 132), 4);
  EXPECT_EQ(gdn_prep_split_pick(s8, 4, 1, four, 132), 4);
  EXPECT_EQ(gdn_prep_split_pick(s2, 3, 1, four, 132), 1);
  EXPECT_EQ(gdn_prep_split_pick(s2, 1, 1, four, 132), 1);
  EXPECT_EQ(gdn_prep_split_pick(off, 4, 1, four, 132), 1);
}

TEST(CudaGdnPrepSplit, FourCtasPerSmAtBt64) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  for (int Gs : {1, 2, 4}) EXPECT_EQ(cuda::gdn_prep_v7_split_ctas_per_sm(Gs), 4) << "G / S = " << Gs;
}

TEST_P(CudaGdnPrepV6, SplitSameBitsAsV7) {
  for (const Variant* v : {&kS2, &kS4, &kSAuto}) {
    SCOPED_TRACE(v->name);
    same_bits_as_base(*v, dt(), bt());
  }
}
TEST_P(CudaGdnPrepV6, SplitMatchesReference) { matches_reference(kS2, dt(), bt()); }
TEST_P(CudaGdnPrepV6, SplitSameBitsWithPInTheFusedKernel) {
  same_bits_p_fused(kS2, dt(), bt());
  same_bits_p_fused(kSAuto, dt(), bt());
}
TEST_P(CudaGdnPrepV6, SplitBackwardSameBitsAsV7) {
  backward_same_bits(kS2, dt(), bt());
  backward_same_bits(kS4, dt(), bt());
}
TEST_P(CudaGdnPrepV6, SplitTrainingCacheSameBitsAsV7) { training_cache_same_bits(kSAuto, dt(), bt()); }

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGdnPrepV6,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16), ::testing::Values(64, 32)),
                         dtype_bt_name);

// The chain's tma3 scale records exist at BT 64 only: these run there (no skipped BT 32 instances).
class CudaGdnPrepTma3 : public CudaGdnPrepV6 {};
TEST_P(CudaGdnPrepTma3, V6SameBitsWithTma3Records) { same_bits_tma3(kV6, dt()); }
TEST_P(CudaGdnPrepTma3, V7SameBitsWithTma3Records) { same_bits_tma3(kV7, dt()); }
TEST_P(CudaGdnPrepTma3, V8SameBitsWithTma3Records) {
  same_bits_tma3(kV8, dt());
  same_bits_tma3(kV8S2, dt());
}
TEST_P(CudaGdnPrepTma3, SplitSameBitsWithTma3Records) {
  same_bits_tma3(kS2, dt());
  same_bits_tma3(kS4, dt());
}
// ---- prep v10: the same checks against v8 (BT 64; at BT 32 the switch runs v8) ----
class CudaGdnPrepV10 : public CudaGdnPrepV6 {};
TEST(CudaGdnPrepV10Occupancy, FourCtasPerSmAtBt64) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  for (int G : {1, 4, 8}) EXPECT_EQ(cuda::gdn_prep_v10_ctas_per_sm(G), 4) << "G = " << G;
}
TEST_P(CudaGdnPrepV10, SwitchIsRead) {
  set_prep("v10");  // launches through v7's launcher
  EXPECT_TRUE(cuda::gdn_prep_v10_env());
  EXPECT_TRUE(cuda::gdn_prep_v7_env());
  EXPECT_FALSE(cuda::gdn_prep_v8_env());
  EXPECT_FALSE(cuda::gdn_prep_v6_env());
  unsetenv("LINATTN_CUDA_GDN_PREP");
  EXPECT_TRUE(cuda::gdn_prep_v10_env()) << "v10 is the default since session 15";
  set_prep("v8");
  EXPECT_FALSE(cuda::gdn_prep_v10_env()) << "v8 names the previous prep";
}
// Unset, the prep is v10 at BT 64 (the default since session 15): its launch counter moves on every case and the
// outputs are v8's (forced) bit for bit.
const Variant kDefaultV10{"", "v8", cuda::gdn_prep_v10_launches, nullptr, true};
TEST_P(CudaGdnPrepV10, DefaultIsV10) { same_bits_as_base(kDefaultV10, dt(), bt()); }
TEST_P(CudaGdnPrepV10, MatchesReference) { matches_reference(kV10, dt(), bt()); }
TEST_P(CudaGdnPrepV10, SameBitsAsV8) { same_bits_as_base(kV10, dt(), bt()); }
TEST_P(CudaGdnPrepV10, SameBitsAsV8WithNegativeBetas) {  // zero_item's v8 path (0 beta = -0 for beta < 0)
  for (ChunkAttnSpec sp : {varlen_edges_spec(dt(), 64, ChunkOp::kGdn), varlen_strong_spec(dt(), 64, ChunkOp::kGdn)}) {
    sp.opt.use_beta_sigmoid_in_kernel = false;
    ChunkAttnData d = make_chunk_attn(sp);
    for (int64_t i = 0; i < d.beta.numel(); i += 3) d.beta.set(i, -d.beta.get(i));
    const int64_t before = cuda::gdn_prep_v10_launches();
    const ChunkAttnOutTensors got = fwd_with(d, "v10");
    EXPECT_GT(cuda::gdn_prep_v10_launches(), before) << "the v10 prep did not run";
    expect_same_fwd(fwd_with(d, "v8"), got);
  }
}
TEST_P(CudaGdnPrepV10, SameBitsWithPInTheFusedKernel) { same_bits_p_fused(kV10, dt(), bt()); }
TEST_P(CudaGdnPrepV10, BackwardSameBitsAsV8) { backward_same_bits(kV10, dt(), bt()); }
TEST_P(CudaGdnPrepV10, TrainingCacheSameBitsAsV8) { training_cache_same_bits(kV10, dt(), bt()); }
TEST_P(CudaGdnPrepV10, SameBitsWithTma3Records) { same_bits_tma3(kV10, dt()); }
INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGdnPrepV10,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16), ::testing::Values(64)),
                         dtype_bt_name);

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGdnPrepTma3,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16), ::testing::Values(64)),
                         dtype_bt_name);

}  // namespace
}  // namespace linattn::test
