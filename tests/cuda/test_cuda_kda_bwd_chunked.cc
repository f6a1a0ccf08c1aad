// The chunked CUDA KDA backward (KDA prep + sweeps with the KDA policy + kda_bwd_chunk5.cu), forced
// with LINATTN_CUDA_KDA_BWD=chunked for this whole binary, against the fp64 reference gradients
// (dq, dk, dv, dg [T, HV, K], dbeta, dA_log, ddt_bias, dh0) for bf16 / fp16 x BT 64 / 32 and every
// gate option: in-kernel softplus form, lower_bound -5 with safe_gate, lower_bound without A_log,
// gates outside the kernel with -1000 entries and strong decay, clamped -5 gates; GVA 1 / 2 / 3,
// varlen with lengths 0, 1, BT-1, BT, BT+1, 2BT+3 and padding rows, V = 64 and 128. Each case also
// agrees with the token-by-token path (the independent check), keeps padding rows exactly 0, is
// finite, passes d_final_state to dh0 for zero-length sequences; two runs are bitwise equal; every
// gate at -1000 or -5 stays finite; LINATTN_CUDA_KDA_BWD=token refuses the forced chunked path;
// forward + backward captured in one CUDA graph (GRAPH_CONTRACT.md section 8, cuda_graph_seq.h).
// The chunk kernel is chunked15 since session 14 (=chunked runs it: checked bitwise against =chunked15); chunked11
// (kdadiag: the diagonal blocks as walked triangles + an mma square) was the default of session 12; a removed
// mode (chunked2 .. chunked6, chunked8, chunked9) is an invalid-argument error naming the variable, the value and
// the accepted values, thrown by the workspace query and the plan (no kernel runs). The previous default
// LINATTN_CUDA_KDA_BWD=chunked7 stays covered: every case against chunked11 and the fp64 reference (the
// *Chunked11* test forces both), at the extreme gates and captured in a graph (the *Chunked7* tests). The opt-in
// LINATTN_CUDA_KDA_BWD=chunked12 (kdagate) likewise (*Chunked12*: bitwise chunked11, the reference, -1000 / -5, graph),
// and chunked13 (kdabwd13: fp32 gates as a cp.async tile, bf16 gates through chunked12's loads; *Chunked13*:
// bitwise chunked12, the reference, -1000 / -5, graph). chunked14 (kdabwd14: chunked13 with the split-TF32
// lo parts truncated, not bitwise; *Chunked14*: the reference and chunked13's bars, a "[kdabwd14]" line per case with
// both kernels' rel RMS against the fp64 reference, -1000 / -5, graph). chunked15 (kdabwd15, the default: chunked14
// with the head's scalar / v loads as a cp.async group ahead of its tiles; *Chunked15*: bitwise chunked14, the
// reference, a "[kdabwd15]" line per case, -1000 / -5, graph; an odd 16-bit beta's edge row). chunked17 (kdabwd17,
// opt-in: chunked15 with batched row scales, shift / mask bf16 unpacks, eg / egl steps without divergent branches;
// *Chunked17*: bitwise chunked15, the reference, a "[kdabwd17]" line per case, -1000 / -5, graph).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_bwd_util.h"
#include "cuda_fwd_util.h"
#include "cuda_graph_seq.h"

namespace linattn::test {
namespace {

const bool kChunkedOn = setenv("LINATTN_CUDA_KDA_BWD", "chunked", 1) == 0;

bool sanitized() { return std::getenv("LINATTN_SANITIZED") != nullptr; }

// Sets LINATTN_CUDA_KDA_BWD for a scope, back to "chunked" at its end.
struct KdaBwdMode {
  explicit KdaBwdMode(const char* m) { EXPECT_EQ(setenv("LINATTN_CUDA_KDA_BWD", m, 1), 0); }
  ~KdaBwdMode() { setenv("LINATTN_CUDA_KDA_BWD", "chunked", 1); }
  KdaBwdMode(const KdaBwdMode&) = delete;
  KdaBwdMode& operator=(const KdaBwdMode&) = delete;
};

using Case = BwdCase;

ChunkAttnSpec base(DType dt, int bt) { return fwd_base_spec(dt, bt, ChunkOp::kKda); }

std::vector<Case> cases(DType dt, int bt) {
  std::vector<Case> r = kda_bwd_cases(dt, bt);
  {
    ChunkAttnSpec s = base(dt, bt);
    s.V = 64;
    s.B = 1;
    s.T = 133;
    s.H = s.HV = 2;
    s.opt.use_gate_in_kernel = true;
    s.opt.use_beta_sigmoid_in_kernel = true;
    s.opt.allow_neg_eigval = true;
    s.gate_dtype = DType::kBF16;
    s.opt.output_final_state = false;
    r.push_back({"neg_eigval_v64_bf16_gates_no_dht", s, DType::kF32, dt, false});
  }
  return r;
}

void run_case(const Case& c, bool with_token, bool with_chunked7) {
  SCOPED_TRACE(c.name);
  const ChunkAttnData d = make_chunk_attn(c.spec);
  Rng rng(c.spec.seed * 31 + 7);
  const ChunkAttnCotangents cot = random_cotangents(d, rng, c.cot_dtype, c.dht && c.spec.opt.output_final_state);
  const ChunkAttnGradTensors ref = ref_backward(d, cot);
  const ChunkAttnGradTensors got = run_cuda_bwd(d, cot, c.grad_dtype, api::CudaGdnPath::kChunked);
  EXPECT_TRUE(bwd_close(d, ref, got, c.spec.dtype)) << "chunked vs fp64 reference";
  EXPECT_TRUE(grads_padding_zero(d, got));
  EXPECT_TRUE(grads_finite(got));
  check_zero_length_dh0(d, cot, got);
  if (with_token) {
    const ChunkAttnGradTensors tok = run_cuda_bwd(d, cot, c.grad_dtype, api::CudaGdnPath::kRecurrent);
    EXPECT_TRUE(bwd_close(d, tok, got, c.spec.dtype)) << "chunked vs token-by-token path";
  }
  if (!with_chunked7) return;
  KdaBwdMode mode("chunked15");  // the default kernel's own name (since session 14): the same path
  EXPECT_TRUE(grads_bitwise(got, run_cuda_bwd(d, cot, c.grad_dtype, api::CudaGdnPath::kChunked)))
      << "chunked15 vs chunked";
}

class CudaKdaBwdChunked : public ::testing::TestWithParam<std::tuple<DType, int>> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kChunkedOn);
    if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device: gpu-labelled tests run only on a GPU machine";
  }
};

TEST_P(CudaKdaBwdChunked, MatchesReferenceAndTokenPath) {
  const auto [dt, bt] = GetParam();
  auto all = cases(dt, bt);
  if (sanitized()) all.resize(2);
  for (size_t i = 0; i < all.size(); ++i) run_case(all[i], !sanitized(), i == 0);
}

// rel RMS against the fp64 reference of the gradients the split-TF32 products feed (valid rows), for a log line.
std::string rel_rms_line(const ChunkAttnData& d, const ChunkAttnGradTensors& ref, const ChunkAttnGradTensors& got,
                         DType dt) {
  const auto rows = [&](const Tensor& t) {
    return d.cu_seqlens.defined() ? narrow(t.view(), 1, 0, d.valid_tokens) : t.view();
  };
  std::string line;
  char buf[64];
  const auto one = [&](const char* name, const TensorView& r, const TensorView& g, Qty q) {
    if (!g.defined() || !r.defined()) return;
    std::snprintf(buf, sizeof(buf), " %s %.3g", name, compare(r, g, tolerance(dt, q)).rel_rms);
    line += buf;
  };
  one("dq", rows(ref.dq), rows(got.dq), Qty::kDq);
  one("dk", rows(ref.dk), rows(got.dk), Qty::kDk);
  one("dg", rows(ref.dg), rows(got.dg), Qty::kDg);
  one("dbeta", rows(ref.dbeta), rows(got.dbeta), Qty::kDbeta);
  one("dA_log", ref.dA_log, got.dA_log, Qty::kDA_log);
  one("ddt_bias", ref.ddt_bias, got.ddt_bias, Qty::kDdt_bias);
  return line;
}

// One chunk kernel (`mode`) against another (`base`), both forced, on every case of (dt, bt): the fp64 reference,
// close to `base` (bitwise too when `bitwise`, printing one "[kdagate] ... ==|!=" line per case), padding,
// finiteness, dh0; two runs bitwise equal. `report`: a "[tag]" line per case with both kernels' rel RMS against the
// reference (a variant that is not bitwise: how much of the bars it uses against `base`).
void variant_vs(DType dt, int bt, const char* mode, const char* base, bool bitwise, const char* tag = "kdagate",
                bool report = false) {
  auto all = cases(dt, bt);
  if (sanitized()) all.resize(2);
  for (const Case& c : all) {
    SCOPED_TRACE(c.name);
    const ChunkAttnData d = make_chunk_attn(c.spec);
    Rng rng(c.spec.seed * 31 + 7);
    const ChunkAttnCotangents cot = random_cotangents(d, rng, c.cot_dtype, c.dht && c.spec.opt.output_final_state);
    ChunkAttnGradTensors b;
    {
      KdaBwdMode mb(base);
      b = run_cuda_bwd(d, cot, c.grad_dtype, api::CudaGdnPath::kChunked);
    }
    KdaBwdMode mm(mode);
    const ChunkAttnGradTensors got = run_cuda_bwd(d, cot, c.grad_dtype, api::CudaGdnPath::kChunked);
    const ChunkAttnGradTensors ref = ref_backward(d, cot);
    EXPECT_TRUE(bwd_close(d, ref, got, c.spec.dtype)) << mode << " vs fp64 reference";
    if (report) {
      std::printf("[%s] %s %s bt%d rel_rms vs fp64: %s%s | %s%s\n", tag, c.name.c_str(), dtype_name(dt), bt, base,
                  rel_rms_line(d, ref, b, dt).c_str(), mode, rel_rms_line(d, ref, got, dt).c_str());
    }
    if (bitwise) {
      const bool same = grads_bitwise(got, b);
      std::printf("[%s] %s %s bt%d: %s %s %s bitwise\n", tag, c.name.c_str(), dtype_name(dt), bt, mode,
                  same ? "==" : "!=", base);
      EXPECT_TRUE(same) << mode << " vs " << base << " (the same expressions: bitwise)";
    }
    EXPECT_TRUE(bwd_close(d, b, got, c.spec.dtype)) << mode << " vs " << base;
    EXPECT_TRUE(grads_padding_zero(d, got));
    EXPECT_TRUE(grads_finite(got));
    check_zero_length_dh0(d, cot, got);
    EXPECT_TRUE(grads_bitwise(got, run_cuda_bwd(d, cot, c.grad_dtype, api::CudaGdnPath::kChunked)))
        << mode << " deterministic";
  }
}

// chunked11 (session 12's default) against chunked7 (the previous one; not bitwise: the square is a product).
TEST_P(CudaKdaBwdChunked, Chunked11MatchesReferenceAndChunked7) {
  const auto [dt, bt] = GetParam();
  variant_vs(dt, bt, "chunked11", "chunked7", false);
}

// chunked12 (kdagate, selectable): chunked11 with the gate staging / chain per gate form and dg stored in 8-channel
// pieces, the same expressions in the same order: bitwise equal to chunked11.
TEST_P(CudaKdaBwdChunked, Chunked12MatchesReferenceAndChunked11) {
  const auto [dt, bt] = GetParam();
  variant_vs(dt, bt, "chunked12", "chunked11", true);
}

// chunked13 (kdabwd13, session 13's default): chunked12 with the fp32 gates as a cp.async tile (16-bit gates:
// chunked12's loads) and the split-TF32 hi parts without cvt's non-finite test,
// the same values: bitwise equal to chunked12.
TEST_P(CudaKdaBwdChunked, Chunked13MatchesReferenceAndChunked12) {
  const auto [dt, bt] = GetParam();
  variant_vs(dt, bt, "chunked13", "chunked12", true, "kdabwd13");
}

// chunked14 (kdabwd14, selectable): chunked13 with the split-TF32 lo parts truncated by the mask (cvt.rna's emulation
// dropped): not bitwise; the fp64 reference's bars and chunked13's, a "[kdabwd14]" rel RMS line per case.
TEST_P(CudaKdaBwdChunked, Chunked14MatchesReferenceAndChunked13) {
  const auto [dt, bt] = GetParam();
  variant_vs(dt, bt, "chunked14", "chunked13", false, "kdabwd14", true);
}

// chunked15 (kdabwd15, the default since session 14): chunked14 with beta, dt_bias / A_log and the Y.v rows of v
// loaded as one cp.async group ahead of the head's tiles, the dbeta draw formed at the head start: the same values,
// bitwise chunked14.
TEST_P(CudaKdaBwdChunked, Chunked15MatchesReferenceAndChunked14) {
  const auto [dt, bt] = GetParam();
  variant_vs(dt, bt, "chunked15", "chunked14", true, "kdabwd15", true);
}

// chunked17 (kdabwd17, default): chunked15 with the row scales batched, bf16 pairs unpacked by shift / mask in the
// diagonal walks and row dots, eg / egl steps with selects instead of divergent branches: the same values, bitwise
// chunked15.
TEST_P(CudaKdaBwdChunked, Chunked17MatchesReferenceAndChunked15) {
  const auto [dt, bt] = GetParam();
  variant_vs(dt, bt, "chunked17", "chunked15", true, "kdabwd17", true);
}

// chunked15 reads a 16-bit beta as the aligned 4-byte word holding it; where that word would reach past the tensor
// (an odd element count: here 133 x 3, the last element at byte 796) the row loads its 2 bytes alone. The default
// (chunked15) on such a tensor: the fp64 reference and bitwise chunked14 (which loads beta element by element).
TEST(CudaKdaBwdChunkedEdge, Chunked15Bf16BetaOddElementCount) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ChunkAttnSpec s = base(DType::kBF16, 64);
  s.V = 64;
  s.B = 1;
  s.T = 133;
  s.H = 1;
  s.HV = 3;
  s.opt.use_gate_in_kernel = true;
  s.opt.use_beta_sigmoid_in_kernel = true;
  s.gate_dtype = DType::kBF16;
  const ChunkAttnData d = make_chunk_attn(s);
  ASSERT_EQ(d.beta.numel() % 2, 1) << "the case needs an odd beta element count";
  Rng rng(11);
  const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kBF16, true);
  ChunkAttnGradTensors b14;
  {
    KdaBwdMode m("chunked14");
    b14 = run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kChunked);
  }
  const ChunkAttnGradTensors got = run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kChunked);
  EXPECT_TRUE(bwd_close(d, ref_backward(d, cot), got, s.dtype)) << "chunked15 vs fp64 reference";
  EXPECT_TRUE(grads_bitwise(got, b14)) << "chunked15 vs chunked14 on an odd bf16 beta";
  EXPECT_TRUE(grads_finite(got));
}

TEST_P(CudaKdaBwdChunked, IsDeterministic) {
  const auto [dt, bt] = GetParam();
  const Case c = cases(dt, bt)[2];
  expect_bwd_deterministic(c, 5);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaKdaBwdChunked,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16), ::testing::Values(64, 32)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_bt" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Every gate entry at -1000 (no memory) or at -5 (strongest lower-bound decay; 64 x 5 = 320 nats
// over a chunk): finite and equal to the reference.
void all_gates_at_the_limits() {
  for (const int bt : {64, 32})
    for (const double x : {-1000.0, -5.0}) {
      SCOPED_TRACE("gate " + std::to_string(x) + " bt " + std::to_string(bt));
      ChunkAttnSpec s = base(DType::kBF16, bt);
      s.seqlens = {129, 64, 3};
      s.pad_tokens = 4;
      ChunkAttnData d = make_chunk_attn(s);
      for (int64_t i = 0; i < d.g.numel(); ++i) d.g.set(i, x);
      Rng rng(21);
      const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kBF16, true);
      const ChunkAttnGradTensors ref = ref_backward(d, cot);
      const ChunkAttnGradTensors got = run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kChunked);
      EXPECT_TRUE(grads_finite(got));
      EXPECT_TRUE(grads_padding_zero(d, got));
      EXPECT_TRUE(bwd_close(d, ref, got, DType::kBF16));
    }
}
TEST(CudaKdaBwdChunkedExtreme, AllGatesAtTheLimits) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  all_gates_at_the_limits();
}
TEST(CudaKdaBwdChunkedExtreme, Chunked7AllGatesAtTheLimits) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  KdaBwdMode mode("chunked7");
  all_gates_at_the_limits();
}
TEST(CudaKdaBwdChunkedExtreme, Chunked12AllGatesAtTheLimits) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  KdaBwdMode mode("chunked12");
  all_gates_at_the_limits();
}
TEST(CudaKdaBwdChunkedExtreme, Chunked13AllGatesAtTheLimits) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  KdaBwdMode mode("chunked13");
  all_gates_at_the_limits();
}
TEST(CudaKdaBwdChunkedExtreme, Chunked14AllGatesAtTheLimits) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  KdaBwdMode mode("chunked14");
  all_gates_at_the_limits();
}
TEST(CudaKdaBwdChunkedExtreme, Chunked15AllGatesAtTheLimits) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  KdaBwdMode mode("chunked15");
  all_gates_at_the_limits();
}
TEST(CudaKdaBwdChunkedExtreme, Chunked17AllGatesAtTheLimits) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  KdaBwdMode mode("chunked17");
  all_gates_at_the_limits();
}

// LINATTN_CUDA_KDA_BWD=token keeps every KDA call on the token path (the forced chunked path throws).
TEST(CudaKdaBwdChunkedApi, TokenSwitchRefusesChunked) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ASSERT_EQ(setenv("LINATTN_CUDA_KDA_BWD", "token", 1), 0);
  expect_chunked_refused(base(DType::kBF16, 64));
  ASSERT_EQ(setenv("LINATTN_CUDA_KDA_BWD", "chunked", 1), 0);
}

// The public op on the chunked path, with and without a caller workspace (bitwise equal).
TEST(CudaKdaBwdChunkedApi, PublicOpWithAndWithoutWorkspace) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  ChunkAttnSpec s = base(DType::kBF16, 64);
  s.opt.use_gate_in_kernel = true;
  check_public_op_varlen(s);
}

// The removed chunk kernels (session 10) and any other unknown value: an invalid-argument error that names
// LINATTN_CUDA_KDA_BWD, the value and the accepted values, from the workspace query and from the call (its
// plan), for the forced chunked path and the default one; "chunked7" and "" are accepted.
TEST(CudaKdaBwdChunkedApi, RemovedModeIsRejectedAtPlanTime) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  const ChunkAttnData d = make_chunk_attn(base(DType::kBF16, 64));
  Rng rng(4);
  const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kBF16, true);
  const auto expect_rejected = [&](const char* v, const char* what, const auto& call) {
    try {
      call();
      ADD_FAILURE() << v << ": " << what << " accepted a removed mode";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << msg;
      for (const std::string& part : {std::string("LINATTN_CUDA_KDA_BWD=") + v, std::string("expected chunked"),
                                     std::string("chunked7"), std::string("token")})
        EXPECT_NE(msg.find(part), std::string::npos) << what << ": no '" << part << "' in: " << msg;
    }
  };
  for (const char* v : {"chunked2", "chunked3", "chunked4", "chunked5", "chunked6", "chunked8", "chunked9", "wg"}) {
    SCOPED_TRACE(v);
    KdaBwdMode mode(v);
    auto dev = to_device(d);
    expect_rejected(v, "workspace query", [&] { (void)chunk_attn_bwd_workspace_bytes(dev->in, d.opt()); });
    expect_rejected(v, "forced chunked", [&] { (void)run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kChunked); });
    expect_rejected(v, "default path", [&] { (void)run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kAuto); });
  }
  for (const char* v : {"chunked7", "chunked11", "chunked12", "chunked13", "chunked14", "chunked15", "chunked17", ""}) {
    SCOPED_TRACE(v);
    KdaBwdMode mode(v);
    auto dev = to_device(d);
    EXPECT_NO_THROW((void)chunk_attn_bwd_workspace_bytes(dev->in, d.opt()));
    EXPECT_TRUE(bwd_close(d, ref_backward(d, cot), run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kChunked),
                          DType::kBF16));
  }
}

// GRAPH_CONTRACT.md section 8: forward + backward in one CUDA graph, replay == eager fixed bitwise.
TEST(CudaKdaBwdChunkedGraph, SevenLayoutsReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  std::vector<GraphCase> gcs = {{ChunkOp::kKda, DType::kBF16, 64, true, true, DType::kF32, true},
                                {ChunkOp::kKda, DType::kF16, 32, false, false, DType::kF16},
                                {ChunkOp::kKda, DType::kBF16, 32, true, true, DType::kBF16}};
  if (sanitized()) gcs.resize(1);
  for (const GraphCase& gc : gcs) run_cuda_graph_case(gc, 7);
}
TEST(CudaKdaBwdChunkedGraph, Chunked7ReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  KdaBwdMode mode("chunked7");
  run_cuda_graph_case({ChunkOp::kKda, DType::kBF16, 64, true, true, DType::kF32, true}, 7);
}
TEST(CudaKdaBwdChunkedGraph, Chunked12ReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  KdaBwdMode mode("chunked12");
  run_cuda_graph_case({ChunkOp::kKda, DType::kBF16, 64, true, true, DType::kF32, true}, 7);
  run_cuda_graph_case({ChunkOp::kKda, DType::kBF16, 32, true, true, DType::kBF16}, 7);
}
TEST(CudaKdaBwdChunkedGraph, Chunked13ReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  KdaBwdMode mode("chunked13");
  run_cuda_graph_case({ChunkOp::kKda, DType::kBF16, 64, true, true, DType::kF32, true}, 7);
  run_cuda_graph_case({ChunkOp::kKda, DType::kBF16, 32, true, true, DType::kBF16}, 7);
}
TEST(CudaKdaBwdChunkedGraph, Chunked14ReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  KdaBwdMode mode("chunked14");
  run_cuda_graph_case({ChunkOp::kKda, DType::kBF16, 64, true, true, DType::kF32, true}, 7);
  run_cuda_graph_case({ChunkOp::kKda, DType::kBF16, 32, true, true, DType::kBF16}, 7);
}

TEST(CudaKdaBwdChunkedGraph, Chunked15ReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  KdaBwdMode mode("chunked15");
  run_cuda_graph_case({ChunkOp::kKda, DType::kBF16, 64, true, true, DType::kF32, true}, 7);
  run_cuda_graph_case({ChunkOp::kKda, DType::kBF16, 32, true, true, DType::kBF16}, 7);
}

TEST(CudaKdaBwdChunkedGraph, Chunked17ReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  KdaBwdMode mode("chunked17");
  run_cuda_graph_case({ChunkOp::kKda, DType::kBF16, 64, true, true, DType::kF32, true}, 7);
  run_cuda_graph_case({ChunkOp::kKda, DType::kBF16, 32, true, true, DType::kBF16}, 7);
}

}  // namespace
}  // namespace linattn::test
