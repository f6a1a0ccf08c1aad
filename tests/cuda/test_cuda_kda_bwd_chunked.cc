// The chunked CUDA KDA backward (KDA prep + sweeps with the KDA policy + kda_bwd_chunk.cu), forced
// with LINATTN_CUDA_KDA_BWD=chunked for this whole binary, against the fp64 reference gradients
// (dq, dk, dv, dg [T, HV, K], dbeta, dA_log, ddt_bias, dh0) for bf16 / fp16 x BT 64 / 32 and every
// gate option: in-kernel softplus form, lower_bound -5 with safe_gate, lower_bound without A_log,
// gates outside the kernel with -1000 entries and strong decay, clamped -5 gates; GVA 1 / 2 / 3,
// varlen with lengths 0, 1, BT-1, BT, BT+1, 2BT+3 and padding rows, V = 64 and 128. Each case also
// agrees with the token-by-token path (the independent check), keeps padding rows exactly 0, is
// finite, passes d_final_state to dh0 for zero-length sequences; two runs are bitwise equal; every
// gate at -1000 or -5 stays finite; LINATTN_CUDA_KDA_BWD=token refuses the forced chunked path;
// forward + backward captured in one CUDA graph (GRAPH_CONTRACT.md section 8, cuda_graph_seq.h).
// Every case also runs the other chunk kernels LINATTN_CUDA_KDA_BWD=chunked2 (parallel gate chain),
// =chunked3 (+ tensor-core off-diagonal intra blocks) and =chunked4 (+ overlapped first tile loads,
// batched gate loads, decay tables), kda/kda_bwd_chunk2.cu: against the fp64 reference and against the
// first chunked kernel (same bars), padding, finiteness, determinism, extreme gates, the public op and
// the graph sequence (under LINATTN_SANITIZED: chunked2 .. chunked4 on the first case, chunked, chunked3,
// chunked4 and chunked5 in the other tests). =chunked5 (chunked4's arithmetic in less code,
// kda/kda_bwd_chunk5.cu) is also held to chunked4's values (the bf16 bars) and says whether it is bitwise
// equal to it; =chunked6 (chunked5 with the split-TF32 operands by truncation) runs like chunked2 .. 4
// (its memory accesses are chunked5's, so the sanitized runs leave it out); =chunked7 (chunked5 with
// rolled mma k-steps) runs in every test too, held to chunked5's values (the bf16 bars) with a log line
// saying whether it is bitwise equal to chunked5; =chunked8 (chunked7 with the diagonal blocks' lower-left
// quadrants on split-TF32 at V = 128) likewise against chunked7 (not expected bitwise), sanitized too;
// =chunked9 (chunked8 with the fp32 raw gates as one cp.async tile) against chunked8 (expected bitwise).
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "cuda_bwd_util.h"
#include "cuda_fwd_util.h"
#include "cuda_graph_seq.h"

namespace linattn::test {
namespace {

const bool kChunkedOn = setenv("LINATTN_CUDA_KDA_BWD", "chunked", 1) == 0;

// The chunk-kernel variants every case runs ("chunked" = the first kernel, the cross-check; "chunked4" /
// "chunked5" = the previous defaults; "chunked7" = the default since 95f8975; "chunked6" / 8 / 9 = opt-in).
const char* const kVariants[] = {"chunked",  "chunked2", "chunked3", "chunked4", "chunked5",
                                 "chunked6", "chunked7", "chunked8", "chunked9"};

bool sanitized() { return std::getenv("LINATTN_SANITIZED") != nullptr; }

// The variants the determinism, graph, public-op and extreme-gate tests run: the first kernel (cross-check),
// chunked5, the default chunked7, chunked8 and chunked9 (new code); chunked2 / 3 / 4 / 6 (older opt-in
// kernels) run in every case of the reference test only (run_case), which bounds the binary's time (all nine
// in every test ran past gpu-final's 150 s cap at 3d4b025). Under compute-sanitizer: the same.
std::vector<const char*> variants() {
  return {kVariants[0], kVariants[4], kVariants[6], kVariants[7], kVariants[8]};
}

// Sets LINATTN_CUDA_KDA_BWD for a scope, back to "chunked" at its end.
struct KdaBwdMode {
  explicit KdaBwdMode(const char* m) { EXPECT_EQ(setenv("LINATTN_CUDA_KDA_BWD", m, 1), 0); }
  ~KdaBwdMode() { setenv("LINATTN_CUDA_KDA_BWD", "chunked", 1); }
  KdaBwdMode(const KdaBwdMode&) = delete;
  KdaBwdMode& operator=(const KdaBwdMode&) = delete;
};

using Case = BwdCase;

// chunked5 keeps chunked4's operations in the same order (chunked7 chunked5's), so it should be bitwise
// equal; held to the bf16 bars (a compiler may contract differently), and the log (tag) says which.
void check_same_arithmetic(const ChunkAttnData& d, const ChunkAttnGradTensors& old_g, const ChunkAttnGradTensors& new_g,
                           const std::string& name, const char* tag, const char* old_v, const char* new_v) {
  EXPECT_TRUE(bwd_close(d, old_g, new_g, DType::kBF16)) << new_v << " vs " << old_v;
  const ::testing::AssertionResult same = grads_bitwise(old_g, new_g);
  std::cout << "[" << tag << "] " << name << ": " << new_v << " " << (same ? "==" : "!=") << " " << old_v
            << " bitwise " << same.message() << "\n";
}
void check_same_arithmetic(const ChunkAttnData& d, const ChunkAttnGradTensors& old_g, const ChunkAttnGradTensors& new_g,
                           const std::string& name) {
  check_same_arithmetic(d, old_g, new_g, name, "kdabwd8", "chunked5", "chunked7");
}

// Each variant's gradients of one case by name; chunked7 against chunked5, chunked8 against 7, 9 against 8.
struct ByVariant {
  std::vector<std::pair<std::string, ChunkAttnGradTensors>> got;
  void add(const char* v, const ChunkAttnGradTensors& g) { got.emplace_back(v, g); }
  const ChunkAttnGradTensors* find(const std::string& v) const {
    for (const auto& e : got)
      if (e.first == v) return &e.second;
    return nullptr;
  }
  void check_chunked7(const ChunkAttnData& d, const std::string& name) const {
    const ChunkAttnGradTensors *c5 = find("chunked5"), *c7 = find("chunked7"), *c8 = find("chunked8"),
                               *c9 = find("chunked9");
    ASSERT_TRUE(c5 != nullptr && c7 != nullptr && c8 != nullptr && c9 != nullptr) << "chunked5, 7, 8 and 9 all run";
    check_same_arithmetic(d, *c5, *c7, name);
    check_same_arithmetic(d, *c7, *c8, name, "kdabwd9", "chunked7", "chunked8");
    check_same_arithmetic(d, *c8, *c9, name, "kdabwd9", "chunked8", "chunked9");
  }
};

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

void run_case(const Case& c, bool with_token, bool with_variants) {
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
  if (!with_variants) return;
  // Under compute-sanitizer without chunked5 .. 9 (the other tests run chunked5, 7, 8 and 9 sanitized).
  std::vector<const char*> vs = {kVariants[1], kVariants[2], kVariants[3]};
  if (!sanitized()) vs.insert(vs.end(), {kVariants[4], kVariants[5], kVariants[6], kVariants[7], kVariants[8]});
  std::vector<ChunkAttnGradTensors> vars;
  for (const char* v : vs) {
    SCOPED_TRACE(v);
    KdaBwdMode mode(v);
    const ChunkAttnGradTensors var = run_cuda_bwd(d, cot, c.grad_dtype, api::CudaGdnPath::kChunked);
    EXPECT_TRUE(bwd_close(d, ref, var, c.spec.dtype)) << v << " vs fp64 reference";
    EXPECT_TRUE(bwd_close(d, got, var, c.spec.dtype)) << v << " vs the first chunked kernel";
    EXPECT_TRUE(grads_padding_zero(d, var));
    EXPECT_TRUE(grads_finite(var));
    check_zero_length_dh0(d, cot, var);
    vars.push_back(var);
  }
  if (vars.size() == 8) {
    check_same_arithmetic(d, vars[2], vars[3], c.name, "kdabwd7", "chunked4", "chunked5");
    check_same_arithmetic(d, vars[3], vars[5], c.name);
    check_same_arithmetic(d, vars[5], vars[6], c.name, "kdabwd9", "chunked7", "chunked8");
    check_same_arithmetic(d, vars[6], vars[7], c.name, "kdabwd9", "chunked8", "chunked9");
  }
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
  for (size_t i = 0; i < all.size(); ++i) run_case(all[i], !sanitized(), !sanitized() || i == 0);
}

TEST_P(CudaKdaBwdChunked, IsDeterministic) {
  const auto [dt, bt] = GetParam();
  const Case c = cases(dt, bt)[2];
  const ChunkAttnData d = make_chunk_attn(c.spec);
  Rng rng(5);
  const ChunkAttnCotangents cot = random_cotangents(d, rng, c.cot_dtype, true);
  ByVariant by;
  for (const char* v : variants()) {
    SCOPED_TRACE(v);
    KdaBwdMode mode(v);
    const ChunkAttnGradTensors a = run_cuda_bwd(d, cot, c.grad_dtype, api::CudaGdnPath::kChunked);
    const ChunkAttnGradTensors b = run_cuda_bwd(d, cot, c.grad_dtype, api::CudaGdnPath::kChunked);
    EXPECT_TRUE(grads_bitwise(a, b));
    by.add(v, a);
  }
  by.check_chunked7(d, "deterministic_" + c.name);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaKdaBwdChunked,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16), ::testing::Values(64, 32)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_bt" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Every gate entry at -1000 (no memory) or at -5 (strongest lower-bound decay; 64 x 5 = 320 nats
// over a chunk): finite and equal to the reference.
TEST(CudaKdaBwdChunkedExtreme, AllGatesAtTheLimits) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
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
      ByVariant by;
      for (const char* v : variants()) {
        SCOPED_TRACE(v);
        KdaBwdMode mode(v);
        const ChunkAttnGradTensors got = run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kChunked);
        EXPECT_TRUE(grads_finite(got));
        EXPECT_TRUE(grads_padding_zero(d, got));
        EXPECT_TRUE(bwd_close(d, ref, got, DType::kBF16));
        by.add(v, got);
      }
      by.check_chunked7(d, "extreme_gate_" + std::to_string(x) + "_bt" + std::to_string(bt));
    }
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
  for (const char* v : variants()) {
    SCOPED_TRACE(v);
    KdaBwdMode mode(v);
    check_public_op_varlen(s);
  }
}

// GRAPH_CONTRACT.md section 8: forward + backward in one CUDA graph, replay == eager fixed bitwise.
TEST(CudaKdaBwdChunkedGraph, SevenLayoutsReplayEqualsEagerFixed) {
  if (!have_cuda_device()) GTEST_FAIL() << "no CUDA device";
  std::vector<GraphCase> gcs = {{ChunkOp::kKda, DType::kBF16, 64, true, true, DType::kF32, true},
                                {ChunkOp::kKda, DType::kF16, 32, false, false, DType::kF16},
                                {ChunkOp::kKda, DType::kBF16, 32, true, true, DType::kBF16}};
  if (sanitized()) gcs.resize(1);
  for (const char* v : variants()) {
    SCOPED_TRACE(v);
    KdaBwdMode mode(v);
    for (const GraphCase& gc : gcs) run_cuda_graph_case(gc, 7);
  }
}

}  // namespace
}  // namespace linattn::test
