// CUDA GDN backward against the fp64 reference gradients (src/ref), on seeded inputs, for both
// CUDA paths (token-by-token backward and chunked prep + sweeps + chunk kernel) and every sweep
// V-slice: GVA (G = 1, 2, 3), scale, h0 / d_final_state in both state layouts, varlen with edge
// lengths 0, 1, BT-1, BT, BT+1, 2BT+3 and padding rows, in-kernel l2norm / gate / beta sigmoid
// (dA_log, ddt_bias), neg eigenvalues, strong, mixed and no decay, gates at -1000, bf16 and fp16
// inputs, fp32 / bf16 gradients and cotangents, BT 64 and 32. Gradients are NaN-prefilled:
// unwritten elements fail; padding rows must be exactly 0; zero-length sequences pass
// d_final_state to dh0 exactly; two runs are bitwise equal. Bars: tests/common/tolerances.h.
// The chunk-kernel variant wg3 (the default at V = 128 before wg4; forced here; wg9d is the default since session 14)
// runs every case again: fp64
// reference, padding, zero-length dh0, bitwise equal to wg2 (same math, only the
// stores / prefetches / live ranges differ), determinism and the graph sequence (cuda_graph_seq.h).
// The opt-in wg4 (=wg3 with two independent products in flight at a time) and wg5 (three: Y too)
// the same, bitwise vs wg3. wg6 (wg4's per-item code in persistent CTAs that load the next item
// under the current one's tail) the same, bitwise vs wg4, also with the CTA count capped ("wg6:3",
// "wg6:1": every CTA walks many items, G = 1 / 2 / 3, sentinel rows and short chunks in between).
// wg7 (wg4 with split head loads) the same, bitwise vs wg4, plus the long GVA varlen case.
// wg8d (wg7 with each M decay computed once per head for both halves) the same, bitwise vs wg7, also on the
// long GVA varlen case (wg8, wg8d plus head 0's S / dS' loaded before the index loads, was removed in session 12).
// wg9 / wg9d (wg7 / wg8d with the row scalars split over 8 warps, head 1's loaded at head 0's start) the same,
// bitwise vs wg7 (the GVA 3 case takes the G > 2 path: head 2 loads its own at its start). wg9p (wg6 with the
// same row scalars) as wg6's tests, bitwise vs wg4, also capped at 3 / 1 CTAs; wg9ps (wg9 in persistent CTAs) the
// same, bitwise vs wg7. wg11 (wg9d with the finishing passes' shared loads ahead of the wgmma waits) the same,
// bitwise vs wg9d. wg12 (wg11 with full chunks' tiles by TMA, partial ones / converted d_o by cp.async, and the last
// finish under the staged stores) the same, bitwise vs wg11.
// The wgmma sweeps (LINATTN_CUDA_GDN_BWD_SWEEP=wg; BT 64, other chunk sizes keep the mma.sync
// sweeps) run every case again: fp64 reference, padding, zero-length dh0, and every gradient within
// half of its reference bar of the mma.sync sweeps' run (same inputs, only the sweeps' accumulation
// order and bf16 rounding points differ); determinism and the graph sequence. With the switch
// exported as another wg value ("wglate", "wgsync") these tests take that variant instead.
// The sweep wg3 (wg with the store warpgroup's dv stores vectorized; the default), forced here, runs
// every case and a long GVA varlen case again: fp64 reference, padding, zero-length dh0, and bitwise equal
// to wg (the same products on the same operands, the same values stored); determinism and the graph
// sequence.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "cuda_bwd_util.h"
#include "cuda_fwd_util.h"
#include "common/compare.h"
#include "cuda_graph_seq.h"
#include "cuda/gdn/gdn_bwd_chunk_wg.h"
#include "cuda/gdn/gdn_bwd_sweep_wg.h"

namespace linattn::test {
namespace {

using Case = BwdCase;

ChunkAttnSpec base(DType dt, int bt) { return fwd_base_spec(dt, bt); }

std::vector<Case> cases(DType dt, int bt) {
  std::vector<Case> r;
  {
    ChunkAttnSpec s = base(dt, bt);
    s.opt.use_qk_l2norm_in_kernel = true;
    s.opt.use_gate_in_kernel = true;
    s.opt.use_beta_sigmoid_in_kernel = true;
    s.opt.state_v_first = true;
    r.push_back({"layer_options_dense_gva2", s, DType::kF32, dt});
  }
  {
    ChunkAttnSpec s = base(dt, bt);
    s.seqlens = edge_seqlens(bt);
    s.pad_tokens = 7;
    s.cu_dtype = DType::kI64;
    s.gate = GateDist::kMixedHeads;
    s.opt.scale = 0.37;
    r.push_back({"varlen_edges_mixed_decay_fp32_cot", s, dt, DType::kF32});
  }
  {
    ChunkAttnSpec s = base(dt, bt);
    s.seqlens = {300, 0, 5, 64, 129};
    s.pad_tokens = 3;
    s.has_h0 = false;
    s.gate = GateDist::kStrong;
    s.extreme_gate_frac = 0.05;
    s.H = 1;
    s.HV = 3;
    r.push_back({"varlen_strong_decay_no_h0_gva3", s, DType::kF32, dt});
  }
  {
    ChunkAttnSpec s = neg_eigval_no_decay_v64_spec(dt, bt);
    s.opt.use_gate_in_kernel = true;
    r.push_back({"neg_eigval_v64_bf16_gates", s, DType::kBF16, dt});
  }
  {
    ChunkAttnSpec s = base(dt, bt);
    s.H = s.HV = 2;
    s.T = 200;
    s.gate = GateDist::kNoDecay;
    s.opt.output_final_state = false;
    r.push_back({"no_decay_g1_no_dht", s, DType::kF32, dt, false});
  }
  return r;
}

void run_case(const Case& c, api::CudaGdnPath path, int vs) {
  SCOPED_TRACE(c.name + " vs=" + std::to_string(vs));
  const ChunkAttnData d = make_chunk_attn(c.spec);
  Rng rng(c.spec.seed * 31 + 7);
  const ChunkAttnCotangents cot = random_cotangents(d, rng, c.cot_dtype, c.dht && c.spec.opt.output_final_state);
  const ChunkAttnGradTensors ref = ref_backward(d, cot);
  const ChunkAttnGradTensors got = run_cuda_bwd(d, cot, c.grad_dtype, path, vs);
  EXPECT_TRUE(bwd_close(d, ref, got, c.spec.dtype));
  EXPECT_TRUE(grads_padding_zero(d, got));
  check_zero_length_dh0(d, cot, got);
}

constexpr const char* kChunkEnv = "LINATTN_CUDA_GDN_BWD_CHUNK";

// A chunk-kernel variant against the reference and bitwise against its base version (wg3 vs
// wg2, wg4 vs wg3: same products and per-element operation order).
void run_case_chunk_variant(const Case& c, const char* variant, const char* base_variant) {
  SCOPED_TRACE(c.name + " " + variant);
  const BwdInputs in = bwd_inputs(c);
  const ChunkAttnGradTensors base_run = bwd_with_env(in, kChunkEnv, base_variant);
  const ChunkAttnGradTensors got = bwd_with_env(in, kChunkEnv, variant);
  check_bwd_grads(in, ref_backward(in.d, in.cot), got);
  EXPECT_TRUE(grads_bitwise(got, base_run)) << variant << " differs from " << base_variant;
}

constexpr const char* kSweepEnv = "LINATTN_CUDA_GDN_BWD_SWEEP";

// The wg switch value under test: "wg", or the exported one when it names a wg variant ("wglate").
std::string sweep_wg_value() {
  const char* v = std::getenv(kSweepEnv);
  return v && std::string(v).rfind("wg", 0) == 0 ? std::string(v) : std::string("wg");
}

// The wgmma sweeps against the reference and against the mma.sync sweeps.
void run_case_sweep_wg(const Case& c) {
  const std::string wg = sweep_wg_value();
  SCOPED_TRACE(c.name + " sweep " + wg);
  const BwdInputs in = bwd_inputs(c);
  const ChunkAttnGradTensors base_run = bwd_with_env(in, kSweepEnv, "mma");
  const ChunkAttnGradTensors got = bwd_with_env(in, kSweepEnv, wg.c_str());
  check_bwd_grads(in, ref_backward(in.d, in.cot), got);
  EXPECT_TRUE(grads_agree(in.d, base_run, got, c.spec.dtype, Qty::kDdt_bias_head)) << "wgmma sweeps vs mma.sync sweeps";
}

// A sweep variant (wg3; once also wg2, wg3p, wg3pf, removed in session 12) against the reference and bitwise against wg; at BT 64 its
// kernel must have run (launches: the variant's launch counter).
void run_case_sweep_variant(const Case& c, const char* variant, int64_t (*launches)(), const char* base = "wg") {
  SCOPED_TRACE(c.name + " sweep " + variant + " vs " + base);
  const BwdInputs in = bwd_inputs(c);
  const ChunkAttnGradTensors base_run = bwd_with_env(in, kSweepEnv, base);
  const int64_t before = launches();
  const ChunkAttnGradTensors got = bwd_with_env(in, kSweepEnv, variant);
  EXPECT_EQ(launches() > before, c.spec.opt.chunk_size == 64) << variant << " runs at BT 64 only";
  check_bwd_grads(in, ref_backward(in.d, in.cot), got);
  EXPECT_TRUE(grads_bitwise(got, base_run)) << variant << " differs from " << base;
}

// Long sequences (many turns of the 2-stage input ring and of the hand-off buffer's mbarrier
// phases), GVA 2, in-kernel options, bf16 gradients and cotangents.
Case long_case(DType dt, int bt) {
  ChunkAttnSpec s = base(dt, bt);
  s.seqlens = {900, 0, 300};
  s.pad_tokens = 5;
  s.opt.use_qk_l2norm_in_kernel = true;
  s.opt.use_gate_in_kernel = true;
  s.opt.use_beta_sigmoid_in_kernel = true;
  return {"long_varlen_gva2", s, dt, dt};
}

// A chunk-kernel variant against the fp64 reference and bitwise against `ref` on every case (under
// compute-sanitizer: the varlen case with io-type dq / dk).
void variant_matches(DType dt, int bt, const char* variant, const char* ref) {
  const auto all = cases(dt, bt);
  if (std::getenv("LINATTN_SANITIZED")) {
    run_case_chunk_variant(all[1], variant, ref);
    return;
  }
  for (const Case& c : all) run_case_chunk_variant(c, variant, ref);
}

// Two runs of a chunk-kernel variant are bitwise equal on every case (fp32 and io-type (staged) dq / dk).
void variant_deterministic(DType dt, int bt, const char* variant) {
  ScopedEnv e(kChunkEnv, variant);
  for (const Case& c : cases(dt, bt)) {
    SCOPED_TRACE(c.name);
    expect_bwd_deterministic(c, 9);
  }
}

// The GRAPH_CONTRACT.md section 8 sequence (forward + backward in one graph, seven layouts) with a
// chunk-kernel variant: io-type gradients (dq / dk staged through shared memory) and fp32 ones.
void variant_graph_sequence(const char* variant) {
  ScopedEnv e(kChunkEnv, variant);
  std::vector<GraphCase> gcs = {{ChunkOp::kGdn, DType::kBF16, 64, true, true, DType::kBF16},
                                {ChunkOp::kGdn, DType::kF16, 64, false, false, DType::kF32}};
  if (std::getenv("LINATTN_SANITIZED")) gcs.resize(1);
  for (const GraphCase& gc : gcs) run_cuda_graph_case(gc, 7);
}

class CudaGdnBwd : public ::testing::TestWithParam<std::tuple<DType, int>> {
 protected:
  void SetUp() override {
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  }
};

TEST_P(CudaGdnBwd, ChunkedMatchesReference) {
  const auto [dt, bt] = GetParam();
  for (const Case& c : cases(dt, bt)) run_case(c, api::CudaGdnPath::kChunked, 0);
}

TEST_P(CudaGdnBwd, TokenBackwardMatchesReference) {
  const auto [dt, bt] = GetParam();
  auto all = cases(dt, bt);
  if (std::getenv("LINATTN_SANITIZED")) all.resize(1);
  for (const Case& c : all) run_case(c, api::CudaGdnPath::kRecurrent, 0);
}

TEST_P(CudaGdnBwd, ChunkedEveryVSlice) {
  const auto [dt, bt] = GetParam();
  const Case c = cases(dt, bt)[1];
  for (int vs : {32, 64, 128}) run_case(c, api::CudaGdnPath::kChunked, vs);
}

TEST_P(CudaGdnBwd, ChunkedIsDeterministic) {
  const auto [dt, bt] = GetParam();
  const Case c = cases(dt, bt)[0];
  expect_bwd_deterministic(c, 5);
}

TEST_P(CudaGdnBwd, Wg3MatchesReferenceAndWg2) {
  const auto [dt, bt] = GetParam();
  variant_matches(dt, bt, "wg3", "wg2");
}

TEST_P(CudaGdnBwd, Wg3IsDeterministic) {
  const auto [dt, bt] = GetParam();
  variant_deterministic(dt, bt, "wg3");
}

// wg4 (two products in flight at a time; V = 128, V = 64 cases take V2 as under wg3).
TEST_P(CudaGdnBwd, Wg4MatchesReferenceAndWg3) {
  const auto [dt, bt] = GetParam();
  variant_matches(dt, bt, "wg4", "wg3");
}

TEST_P(CudaGdnBwd, Wg4IsDeterministic) {
  const auto [dt, bt] = GetParam();
  variant_deterministic(dt, bt, "wg4");
}

// wg5 (wg4 with Y issued ahead: three products in flight), bitwise vs wg3 as well.
TEST_P(CudaGdnBwd, Wg5MatchesReferenceAndWg3) {
  const auto [dt, bt] = GetParam();
  variant_matches(dt, bt, "wg5", "wg3");
}

TEST_P(CudaGdnBwd, Wg5IsDeterministic) {
  const auto [dt, bt] = GetParam();
  variant_deterministic(dt, bt, "wg5");
}

// wg6 (persistent CTAs, V = 128; V = 64 cases take V2 as under wg4), bitwise vs wg4; at BT 64 the
// wg6 kernel must have run.
TEST_P(CudaGdnBwd, Wg6MatchesReferenceAndWg4) {
  const auto [dt, bt] = GetParam();
  const int64_t before = cuda::gdn_bwd_chunk_wg6_launches();
  for (const char* v : {"wg6", "wg6:3"}) variant_matches(dt, bt, v, "wg4");
  if (!std::getenv("LINATTN_SANITIZED"))
    for (const char* v : {"wg6:3", "wg6:1"}) run_case_chunk_variant(long_case(dt, bt), v, "wg4");
  EXPECT_EQ(cuda::gdn_bwd_chunk_wg6_launches() > before, bt == 64) << "wg6 runs at BT 64 (V = 128) only";
}

TEST_P(CudaGdnBwd, Wg6IsDeterministic) {
  const auto [dt, bt] = GetParam();
  variant_deterministic(dt, bt, "wg6:3");
}

// wg7 (wg4 with each head's tiles in two cp.async groups, the v loads of Y.v under Y; V = 128, V = 64
// cases take V2 as under wg4), bitwise vs wg4; at BT 64 the wg7 kernel must have run.
TEST_P(CudaGdnBwd, Wg7MatchesReferenceAndWg4) {
  const auto [dt, bt] = GetParam();
  const int64_t before = cuda::gdn_bwd_chunk_wg7_launches();
  variant_matches(dt, bt, "wg7", "wg4");
  if (!std::getenv("LINATTN_SANITIZED")) run_case_chunk_variant(long_case(dt, bt), "wg7", "wg4");
  EXPECT_EQ(cuda::gdn_bwd_chunk_wg7_launches() > before, bt == 64) << "wg7 runs at BT 64 (V = 128) only";
}

TEST_P(CudaGdnBwd, Wg7IsDeterministic) {
  const auto [dt, bt] = GetParam();
  variant_deterministic(dt, bt, "wg7");
}

// wg8d (wg7 with each M element's decay computed once per head for both halves; V = 128, V = 64 cases
// take V2), bitwise vs wg7, also on the long GVA varlen case (sentinel rows, G = 2); at BT 64 the wg8d
// kernel must have run.
TEST_P(CudaGdnBwd, Wg8dMatchesReferenceAndWg7) {
  const auto [dt, bt] = GetParam();
  const int64_t before = cuda::gdn_bwd_chunk_wg8d_launches();
  variant_matches(dt, bt, "wg8d", "wg7");
  if (!std::getenv("LINATTN_SANITIZED")) run_case_chunk_variant(long_case(dt, bt), "wg8d", "wg7");
  EXPECT_EQ(cuda::gdn_bwd_chunk_wg8d_launches() > before, bt == 64) << "wg8d runs at BT 64 (V = 128) only";
}

TEST_P(CudaGdnBwd, Wg8dIsDeterministic) {
  const auto [dt, bt] = GetParam();
  variant_deterministic(dt, bt, "wg8d");
}

// wg9 / wg9d (wg7 / wg8d with each head's row scalars one global round trip deep, over 8 warps, and head 1's
// loaded at head 0's start; V = 128, V = 64 cases take V2), bitwise vs wg7, also on the long GVA varlen case;
// at BT 64 the wg9 kernels must have run.
void wg9_matches(DType dt, int bt, const char* v) {
  const int64_t before = cuda::gdn_bwd_chunk_wg9_launches();
  variant_matches(dt, bt, v, "wg7");
  if (!std::getenv("LINATTN_SANITIZED")) run_case_chunk_variant(long_case(dt, bt), v, "wg7");
  EXPECT_EQ(cuda::gdn_bwd_chunk_wg9_launches() > before, bt == 64) << v << " runs at BT 64 (V = 128) only";
}

TEST_P(CudaGdnBwd, Wg9MatchesReferenceAndWg7) {
  const auto [dt, bt] = GetParam();
  wg9_matches(dt, bt, "wg9");
}

TEST_P(CudaGdnBwd, Wg9dMatchesReferenceAndWg7) {
  const auto [dt, bt] = GetParam();
  wg9_matches(dt, bt, "wg9d");
}

// The default chunk kernel (switch unset) is wg12 since session 16 (wg11 in session 15, wg9d in session 14): its launch
// counter moves, wg11's does not, and the gradients are wg11's and wg7's bit for bit (BT 64, where the wgmma chunk
// kernel runs; this case's fp32 d_o keeps wg12's cp.async path: Wg12MatchesReferenceAndWg11 covers its TMA path).
TEST(CudaGdnBwdChunkSwitch, DefaultIsWg12) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  const BwdInputs in = bwd_inputs(cases(DType::kBF16, 64)[1]);
  const ChunkAttnGradTensors w7 = bwd_with_env(in, kChunkEnv, "wg7");
  const ChunkAttnGradTensors w11 = bwd_with_env(in, kChunkEnv, "wg11");
  const int64_t e0 = cuda::gdn_bwd_chunk_wg12_launches(), d0 = cuda::gdn_bwd_chunk_wg11_launches();
  const ChunkAttnGradTensors got = bwd_with_env(in, kChunkEnv, nullptr);
  EXPECT_GT(cuda::gdn_bwd_chunk_wg12_launches(), e0) << "the default did not run wg12";
  EXPECT_EQ(cuda::gdn_bwd_chunk_wg11_launches(), d0) << "the default ran wg11";
  EXPECT_TRUE(grads_bitwise(got, w11)) << "the default (wg12) differs from wg11";
  EXPECT_TRUE(grads_bitwise(got, w7)) << "the default (wg12) differs from wg7";
}

TEST_P(CudaGdnBwd, Wg9IsDeterministic) {
  const auto [dt, bt] = GetParam();
  for (const char* v : {"wg9", "wg9d"}) variant_deterministic(dt, bt, v);
}

// wg11 (wg9d with the finishing passes' shared-memory reads ahead of the wgmma waits; V = 128, V = 64 cases take V2),
// bitwise vs wg9d, also on the long GVA varlen case; at BT 64 the wg11 kernel must have run.
TEST_P(CudaGdnBwd, Wg11MatchesReferenceAndWg9d) {
  const auto [dt, bt] = GetParam();
  const int64_t before = cuda::gdn_bwd_chunk_wg11_launches();
  variant_matches(dt, bt, "wg11", "wg9d");
  if (!std::getenv("LINATTN_SANITIZED")) run_case_chunk_variant(long_case(dt, bt), "wg11", "wg9d");
  EXPECT_EQ(cuda::gdn_bwd_chunk_wg11_launches() > before, bt == 64) << "wg11 runs at BT 64 (V = 128) only";
}

TEST_P(CudaGdnBwd, Wg11IsDeterministic) {
  const auto [dt, bt] = GetParam();
  variant_deterministic(dt, bt, "wg11");
}

// wg12 (wg11 with a full chunk's tiles by TMA and the last finish under the staged stores; V = 128, V = 64 cases take
// V2), bitwise vs wg11 (the cases mix full and partial chunks, io-type and fp32 cotangents, so both load paths run),
// also on the long GVA varlen case and (BT 64) three fixed-length cases on the TMA path at G = 1 / 3 / 4; at BT 64
// the wg12 kernel must have run.
TEST_P(CudaGdnBwd, Wg12MatchesReferenceAndWg11) {
  const auto [dt, bt] = GetParam();
  const int64_t before = cuda::gdn_bwd_chunk_wg12_launches();
  variant_matches(dt, bt, "wg12", "wg11");
  if (!std::getenv("LINATTN_SANITIZED")) run_case_chunk_variant(long_case(dt, bt), "wg12", "wg11");
  else run_case_chunk_variant(cases(dt, bt)[0], "wg12", "wg11");  // io-type d_o: the TMA path under the sanitizers
  if (bt == 64 && !std::getenv("LINATTN_SANITIZED")) {
    // The TMA path (io-type d_o, full chunks, staged io-type dq / dk) at G = 1 (no next head's groups), 3 (the
    // mbarrier parities wrap to 0; the G > 2 row scalars) and 4 (16/64's GVA); the cases above reach it at G = 2 only
    for (int G : {1, 3, 4}) {
      ChunkAttnSpec s = base(dt, bt);
      s.H = 1;
      s.HV = G;
      s.B = 1;
      s.T = 3 * 64;
      run_case_chunk_variant({"tma_gva" + std::to_string(G), s, dt, dt}, "wg12", "wg11");
    }
  }
  EXPECT_EQ(cuda::gdn_bwd_chunk_wg12_launches() > before, bt == 64) << "wg12 runs at BT 64 (V = 128) only";
}

TEST_P(CudaGdnBwd, Wg12IsDeterministic) {
  const auto [dt, bt] = GetParam();
  variant_deterministic(dt, bt, "wg12");
}

// wg9p (wg6 with wg9's row scalars; persistent CTAs walking items with G = 1 / 2 / 3, sentinel rows and short chunks
// in between when capped), bitwise vs wg4 (as wg6); at BT 64 the kernel must have run.
TEST_P(CudaGdnBwd, Wg9pMatchesReferenceAndWg4) {
  const auto [dt, bt] = GetParam();
  const int64_t before = cuda::gdn_bwd_chunk_wg9_launches();
  for (const char* v : {"wg9p", "wg9p:3"}) variant_matches(dt, bt, v, "wg4");
  if (!std::getenv("LINATTN_SANITIZED"))
    for (const char* v : {"wg9p:3", "wg9p:1"}) run_case_chunk_variant(long_case(dt, bt), v, "wg4");
  EXPECT_EQ(cuda::gdn_bwd_chunk_wg9_launches() > before, bt == 64) << "wg9p runs at BT 64 (V = 128) only";
}

TEST_P(CudaGdnBwd, Wg9pIsDeterministic) {
  const auto [dt, bt] = GetParam();
  variant_deterministic(dt, bt, "wg9p:3");
}

// wg9ps (wg9 in persistent CTAs: split loads for the next item too), bitwise vs wg7, also capped at 3 / 1 CTAs.
TEST_P(CudaGdnBwd, Wg9psMatchesReferenceAndWg7) {
  const auto [dt, bt] = GetParam();
  const int64_t before = cuda::gdn_bwd_chunk_wg9_launches();
  for (const char* v : {"wg9ps", "wg9ps:3"}) variant_matches(dt, bt, v, "wg7");
  if (!std::getenv("LINATTN_SANITIZED"))
    for (const char* v : {"wg9ps:3", "wg9ps:1"}) run_case_chunk_variant(long_case(dt, bt), v, "wg7");
  EXPECT_EQ(cuda::gdn_bwd_chunk_wg9_launches() > before, bt == 64) << "wg9ps runs at BT 64 (V = 128) only";
}

TEST_P(CudaGdnBwd, Wg9psIsDeterministic) {
  const auto [dt, bt] = GetParam();
  variant_deterministic(dt, bt, "wg9ps:3");
}

TEST_P(CudaGdnBwd, SweepWgMatchesReferenceAndMmaSweeps) {
  const auto [dt, bt] = GetParam();
  const auto all = cases(dt, bt);
  if (std::getenv("LINATTN_SANITIZED")) {  // compute-sanitizer: the varlen case (fp32 cotangents)
    run_case_sweep_wg(all[1]);
    return;
  }
  for (const Case& c : all) run_case_sweep_wg(c);
}

TEST_P(CudaGdnBwd, SweepWgIsDeterministic) {
  const auto [dt, bt] = GetParam();
  const std::string wg = sweep_wg_value();
  ScopedEnv e(kSweepEnv, wg.c_str());
  const Case c = cases(dt, bt)[2];  // varlen, GVA 3, no h0
  expect_bwd_deterministic(c, 13);
}

// Every case (under compute-sanitizer: the varlen case, up to 3 chunks) and the long case through a
// sweep variant, bitwise vs wg.
void sweep_variant_matches(DType dt, int bt, const char* variant, int64_t (*launches)(), const char* base = "wg") {
  const auto all = cases(dt, bt);
  if (std::getenv("LINATTN_SANITIZED")) {
    run_case_sweep_variant(all[1], variant, launches, base);
    return;
  }
  for (const Case& c : all) run_case_sweep_variant(c, variant, launches, base);
  run_case_sweep_variant(long_case(dt, bt), variant, launches, base);
}

void sweep_variant_deterministic(DType dt, int bt, const char* variant) {
  ScopedEnv e(kSweepEnv, variant);
  for (const Case& c : {cases(dt, bt)[2], long_case(dt, bt)}) {
    SCOPED_TRACE(c.name + " " + variant);
    expect_bwd_deterministic(c, 17);
  }
}

// wg3 (the default: wg with the store warpgroup's dv stores vectorized: io-type dv through the vh staging
// pass, fp32 dv as float4): bitwise vs wg (same products, same values stored); the fast-store kernel must
// have run at BT 64. The cases hold fp32, io-type and (fp16 runs) bf16 gradients: all three dv store paths.
TEST_P(CudaGdnBwd, SweepWg3MatchesReferenceAndWgBitwise) {
  const auto [dt, bt] = GetParam();
  sweep_variant_matches(dt, bt, "wg3", cuda::gdn_bwd_sweep_wg3_launches);
}

TEST_P(CudaGdnBwd, SweepWg3IsDeterministic) {
  const auto [dt, bt] = GetParam();
  sweep_variant_deterministic(dt, bt, "wg3");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGdnBwd,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16),
                                            ::testing::Values(64, 32)),
                         dtype_bt_name);

// fp32 inputs, odd head dims, BT = 16 and V = 256 take the token-by-token backward (auto plan).
TEST(CudaGdnBwdFallback, OtherShapesTakeTheTokenBackward) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  std::vector<std::pair<ChunkAttnSpec, DType>> specs;
  {
    ChunkAttnSpec s = base(DType::kF32, 64);
    s.K = 60;
    s.V = 100;
    s.seqlens = {17, 0, 90};
    s.pad_tokens = 5;
    s.opt.use_qk_l2norm_in_kernel = true;
    s.opt.use_gate_in_kernel = true;
    s.opt.use_beta_sigmoid_in_kernel = true;
    specs.push_back({s, DType::kF32});
  }
  {
    ChunkAttnSpec s = base(DType::kBF16, 16);
    s.T = 70;
    s.H = 1;
    s.HV = 2;
    specs.push_back({s, DType::kBF16});
  }
  {
    ChunkAttnSpec s = base(DType::kBF16, 64);
    s.V = 256;
    s.H = s.HV = 1;
    s.B = 1;
    s.T = 130;
    s.opt.state_v_first = true;
    specs.push_back({s, DType::kBF16});
  }
  int idx = 0;
  for (const auto& [s, dt] : specs) {
    SCOPED_TRACE("spec " + std::to_string(idx++));
    const ChunkAttnData d = make_chunk_attn(s);
    Rng rng(11);
    const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kF32, true);
    const ChunkAttnGradTensors got = run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kAuto);
    EXPECT_TRUE(bwd_close(d, ref_backward(d, cot), got, dt));
    EXPECT_TRUE(grads_padding_zero(d, got));
  }
}

TEST(CudaGdnBwdFallback, ChunkedPathRejectsUnsupportedShapes) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ChunkAttnSpec s = base(DType::kBF16, 64);
  s.K = 64;
  expect_chunked_refused(s);
}

TEST(CudaGdnBwdWg3, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  variant_graph_sequence("wg3");
}

TEST(CudaGdnBwdWg4, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  variant_graph_sequence("wg4");
}

TEST(CudaGdnBwdWg5, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  variant_graph_sequence("wg5");
}

// wg6's grid comes from capacity too (items past the layout's chunks are skipped on the device).
TEST(CudaGdnBwdWg6, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  variant_graph_sequence("wg6");
  if (!std::getenv("LINATTN_SANITIZED")) variant_graph_sequence("wg6:5");
}

TEST(CudaGdnBwdWg7, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  variant_graph_sequence("wg7");
}

TEST(CudaGdnBwdWg8d, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  variant_graph_sequence("wg8d");
}

TEST(CudaGdnBwdWg9, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  variant_graph_sequence("wg9");
}

TEST(CudaGdnBwdWg9d, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  variant_graph_sequence("wg9d");
}

TEST(CudaGdnBwdWg11, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  variant_graph_sequence("wg11");
}

// wg12's tensor maps are kernel arguments built per launch: a captured graph keeps the capture's.
TEST(CudaGdnBwdWg12, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  variant_graph_sequence("wg12");
}

TEST(CudaGdnBwdWg9p, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  variant_graph_sequence("wg9p");
  if (!std::getenv("LINATTN_SANITIZED")) variant_graph_sequence("wg9p:5");
}

TEST(CudaGdnBwdWg9ps, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  variant_graph_sequence("wg9ps");
  if (!std::getenv("LINATTN_SANITIZED")) variant_graph_sequence("wg9ps:5");
}

// A value that names no chunk kernel (the removed wg8, a typo) is an error naming the variable, the value
// and the accepted values, never a silent V4 (checked before any device query).
TEST(CudaGdnBwdChunkSwitch, RemovedOrUnknownSwitchValueIsAnError) {
  for (const char* v : {"wg8", "wg10", "wg6:x", "wg9p:", "wg9ps:0x", "wg7d"}) {
    ScopedEnv set(kChunkEnv, v);  // restores an exported value afterwards
    cuda::GdnFwdParams f{};
    try {
      cuda::gdn_bwd_chunk_wg_eligible(f);
      ADD_FAILURE() << kChunkEnv << "=" << v << " accepted";
    } catch (const linattn::Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string(kChunkEnv) + "=" + v), std::string::npos) << m;
      EXPECT_NE(m.find("expected wg7"), std::string::npos) << m;
    }
  }
}

// The graph sequence with the wgmma sweeps (fixed grids from capacity, seven layouts).
// With the switch unset the sweeps follow the average sequence length (cuda::kWgMinTokens): the
// wgmma sweeps for 2 x 2048 tokens, the mma.sync sweeps for 4 x 512; "mma" forces mma.sync. Each
// run is also checked against the fp64 reference.
TEST(CudaGdnBwdSweepWg, DefaultFollowsSequenceLength) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ScopedEnv unset(kSweepEnv, nullptr);
  for (const auto& [lens, want_wg] : {std::pair{std::vector<int64_t>{2048, 2048}, true},
                                      std::pair{std::vector<int64_t>{512, 512, 512, 512}, false}}) {
    ChunkAttnSpec s = base(DType::kBF16, 64);
    s.seqlens = lens;
    s.opt.use_qk_l2norm_in_kernel = true;
    s.opt.use_gate_in_kernel = true;
    s.opt.use_beta_sigmoid_in_kernel = true;
    const ChunkAttnData d = make_chunk_attn(s);
    Rng rng(29);
    const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kF32, true);
    const int64_t before = cuda::gdn_bwd_sweep_wg_launches();
    const ChunkAttnGradTensors got = run_cuda_bwd(d, cot, DType::kBF16, api::CudaGdnPath::kChunked);
    EXPECT_EQ(cuda::gdn_bwd_sweep_wg_launches() > before, want_wg) << lens.size() << " sequences";
    EXPECT_TRUE(bwd_close(d, ref_backward(d, cot), got, DType::kBF16));
    {
      ScopedEnv mma(kSweepEnv, "mma");
      const int64_t b2 = cuda::gdn_bwd_sweep_wg_launches();
      run_cuda_bwd(d, cot, DType::kBF16, api::CudaGdnPath::kChunked);
      EXPECT_EQ(cuda::gdn_bwd_sweep_wg_launches(), b2) << "mma must keep the mma.sync sweeps";
    }
  }
}

TEST(CudaGdnBwdSweepWg, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  const std::string wg = sweep_wg_value();
  ScopedEnv e(kSweepEnv, wg.c_str());
  std::vector<GraphCase> gcs = {{ChunkOp::kGdn, DType::kBF16, 64, true, true, DType::kBF16},
                                {ChunkOp::kGdn, DType::kF16, 64, false, false, DType::kF32}};
  if (std::getenv("LINATTN_SANITIZED")) gcs.resize(1);
  for (const GraphCase& gc : gcs) run_cuda_graph_case(gc, 7);
}

// The graph sequence (graph replay == eager bitwise, seven layouts) with a sweep variant.
void sweep_variant_graph_sequence(const char* variant, int64_t (*launches)()) {
  SCOPED_TRACE(variant);
  ScopedEnv e(kSweepEnv, variant);
  std::vector<GraphCase> gcs = {{ChunkOp::kGdn, DType::kBF16, 64, true, true, DType::kBF16},
                                {ChunkOp::kGdn, DType::kF16, 64, false, false, DType::kF32}};
  if (std::getenv("LINATTN_SANITIZED")) gcs.resize(1);
  const int64_t before = launches();
  for (const GraphCase& gc : gcs) run_cuda_graph_case(gc, 7);
  EXPECT_GT(launches(), before);
}

TEST(CudaGdnBwdSweepWg, Wg3GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  sweep_variant_graph_sequence("wg3", cuda::gdn_bwd_sweep_wg3_launches);
}

// wgr / wgrl (gdn_bwd_sweep_wgr.cu, sweepsplit, session 12: wg3 with role 1's products reordered so that
// dS^T += dO^T diag(osc) Q runs off the dv^T path; wgrl also issues the input ring after the first products):
// dS^T keeps its accumulation order, so every case is bitwise wg's (= wg3's) and within the fp64 bars; the
// wgr kernel must have run. BT 64 only (BT 32 takes mma.sync; the binary is long): wgr bf16 / fp16, wgrl bf16.
TEST(CudaGdnBwdSweepWgr, MatchesReferenceAndWgBitwise) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  sweep_variant_matches(DType::kBF16, 64, "wgr", cuda::gdn_bwd_sweep_wgr_launches);
  sweep_variant_matches(DType::kF16, 64, "wgr", cuda::gdn_bwd_sweep_wgr_launches);
  sweep_variant_matches(DType::kBF16, 64, "wgrl", cuda::gdn_bwd_sweep_wgr_launches);
}

TEST(CudaGdnBwdSweepWgr, IsDeterministic) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  for (const char* v : {"wgr", "wgrl"}) sweep_variant_deterministic(DType::kBF16, 64, v);
}

TEST(CudaGdnBwdSweepWgr, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  for (const char* v : {"wgr", "wgrl"}) sweep_variant_graph_sequence(v, cuda::gdn_bwd_sweep_wgr_launches);
}

// wg4 (sweep12: wg3 with role 1's inputs of chunk cc + 2 prefetched to L2 under step cc's first products; a hint
// only, so every case is bitwise wg3's and within the fp64 bars; the wg4 kernel must have run). The long case
// (15 chunks) takes the prefetch on 13 steps, the short ones on up to one. BT 64 only (BT 32 takes mma.sync).
TEST(CudaGdnBwdSweepWg4, MatchesReferenceAndWg3Bitwise) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  sweep_variant_matches(DType::kBF16, 64, "wg4", cuda::gdn_bwd_sweep_wg4_launches, "wg3");
  sweep_variant_matches(DType::kF16, 64, "wg4", cuda::gdn_bwd_sweep_wg4_launches, "wg3");
}

TEST(CudaGdnBwdSweepWg4, IsDeterministic) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  sweep_variant_deterministic(DType::kBF16, 64, "wg4");
}

TEST(CudaGdnBwdSweepWg4, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  sweep_variant_graph_sequence("wg4", cuda::gdn_bwd_sweep_wg4_launches);
}

// wg5 / wg5p (sweep12: wg3 / wg4 with role 1's q / k / Ab / P refills by TMA boxes on an mbarrier; the last
// chunk, the first processed and the only partial one, keeps cp.async): the boxes land as cp.async lays the tiles
// out, so every case is bitwise wg3's; the long case turns both stages' mbarrier phases 7 times. wg7 (session 17: wg5
// with chunk cc + 2's dO / scalars issued in step cc) and wg7m (session 18: wg7 with the fragment hand-off on
// mbarriers) too: sequences of 0, 1, 3, 5 and 15 chunks.
TEST(CudaGdnBwdSweepWg5, MatchesReferenceAndWg3Bitwise) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  for (DType dt : {DType::kBF16, DType::kF16}) {
    sweep_variant_matches(dt, 64, "wg5", cuda::gdn_bwd_sweep_wg5_launches, "wg3");
    sweep_variant_matches(dt, 64, "wg7", cuda::gdn_bwd_sweep_wg7_launches, "wg3");
    sweep_variant_matches(dt, 64, "wg7m", cuda::gdn_bwd_sweep_wg7m_launches, "wg3");
  }
  sweep_variant_matches(DType::kBF16, 64, "wg5p", cuda::gdn_bwd_sweep_wg5_launches, "wg3");
}

TEST(CudaGdnBwdSweepWg5, IsDeterministic) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  for (const char* v : {"wg5", "wg5p", "wg7", "wg7m"}) sweep_variant_deterministic(DType::kBF16, 64, v);
}

TEST(CudaGdnBwdSweepWg5, GraphSequence) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  for (const char* v : {"wg5", "wg5p"}) sweep_variant_graph_sequence(v, cuda::gdn_bwd_sweep_wg5_launches);
  sweep_variant_graph_sequence("wg7", cuda::gdn_bwd_sweep_wg7_launches);
  sweep_variant_graph_sequence("wg7m", cuda::gdn_bwd_sweep_wg7m_launches);
}

// A value that names no sweep (the removed wg2 / wg3p / wg3pf, a typo) is an error naming the variable,
// the value and the accepted values, never a silent mma.sync sweep.
TEST(CudaGdnBwdSweepWg, RemovedOrUnknownSwitchValueIsAnError) {
  for (const char* v : {"wg2", "wg3p", "wg3pf", "wg9"}) {
    setenv("LINATTN_CUDA_GDN_BWD_SWEEP", v, 1);
    cuda::GdnFwdParams f{};
    f.N = 1, f.T_total = 4096;
    try {
      cuda::gdn_bwd_sweep_wg_enabled(f);
      ADD_FAILURE() << "LINATTN_CUDA_GDN_BWD_SWEEP=" << v << " accepted";
    } catch (const linattn::Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string("LINATTN_CUDA_GDN_BWD_SWEEP=") + v), std::string::npos) << m;
      EXPECT_NE(m.find("expected wg3"), std::string::npos) << m;
    }
  }
  setenv("LINATTN_CUDA_GDN_BWD_SWEEP", "mma", 1);
  cuda::GdnFwdParams f{};
  f.N = 1, f.T_total = 4096;
  EXPECT_FALSE(cuda::gdn_bwd_sweep_wg_enabled(f));
  unsetenv("LINATTN_CUDA_GDN_BWD_SWEEP");
  EXPECT_TRUE(cuda::gdn_bwd_sweep_wg_enabled(f)) << "the wgmma sweeps at 4096 tokens per sequence";
}

// The public op and its workspace query on CUDA tensors (see check_public_op_workspace).
TEST(CudaGdnBwdApi, PublicOpWithAndWithoutWorkspace) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  check_public_op_varlen(base(DType::kBF16, 64));
}

}  // namespace
}  // namespace linattn::test
