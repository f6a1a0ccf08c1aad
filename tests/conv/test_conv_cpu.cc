// CPU short conv against the fp64 reference: every W (fast 2-4 and the runtime-W path), dtype,
// option, awkward lengths (0, 1, W-1, W, W+1, long), dense and varlen, strided rows, channel
// counts that are not a multiple of the vector width and that span several blocks; bitwise
// thread-count independence; validation errors that name the argument.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>

#include "conv_case.h"
#include "linattn/error.h"

namespace linattn::testing {
namespace {

bool sanitized() { return std::getenv("LINATTN_SANITIZED") != nullptr; }

void run_cpu(const ConvData& d, const ConvResults& r, int threads = 0) {
  ExecContext ctx;
  ctx.num_threads = threads;
  conv_fwd(d.inputs(), r.outputs(), d.options(), ctx);
  conv_bwd(d.inputs(), d.dy.view, d.c.dht ? TensorView(d.dht) : TensorView(), r.grads(), d.options(), ctx);
}

void check_case(const ConvCase& c) {
  ConvData d = make_data(c);
  ConvResults r = make_results(d, c.seed + 99);
  ConvResults before = clone(r);
  run_cpu(d, r);
  expect_matches_ref(d, r, before);
}

TEST(ConvCpu, EveryWidthDtypeAndOptionOnAwkwardLengths) {
  std::mt19937_64 rng(2024);
  int seed = 0;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (int W : {1, 2, 3, 4, 5, 8})
      for (int variant = 0; variant < 4; ++variant) {
        ConvCase c;
        c.dtype = dt, c.W = W, c.seed = ++seed;
        c.D = variant % 2 ? 37 : 16;
        c.act = variant < 2 ? Activation::kSilu : Activation::kNone;
        c.bias = rng() % 2, c.residual = rng() % 2, c.h0 = rng() % 2, c.ht = rng() % 2;
        c.dht = c.ht && rng() % 2;
        if (variant == 3) {
          c.B = 3, c.T = W + 3;
        } else {
          c.lens = {0, 1, std::max(W - 1, 0), W, W + 1, 70, 0, 2};
        }
        SCOPED_TRACE(c.str());
        check_case(c);
      }
}

TEST(ConvCpu, AllOptionsOnLongSequencesSeveralBlocks) {
  const bool small = sanitized();
  int seed = 100;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (int W : {4, 3}) {
      ConvCase c;
      c.dtype = dt, c.W = W, c.seed = ++seed;
      c.D = small ? 1040 : 2100;  // fp32 blocks are 1024 channels, bf16 2048
      c.bias = c.residual = c.h0 = c.ht = c.dht = true;
      c.lens = small ? std::vector<int64_t>{130, 1, 200} : std::vector<int64_t>{300, 1, 399, 64};
      SCOPED_TRACE(c.str());
      check_case(c);
      ConvCase dense = c;
      dense.lens.clear();
      dense.B = 2, dense.T = small ? 150 : 333, dense.act = Activation::kNone, dense.residual = false;
      SCOPED_TRACE(dense.str());
      check_case(dense);
    }
}

TEST(ConvCpu, StridedRowsInt64OffsetsAndSmallTensorDtypes) {
  int seed = 200;
  for (DType small : {DType::kF32, DType::kBF16, DType::kF16})
    for (bool varlen : {false, true}) {
      ConvCase c;
      c.dtype = DType::kBF16, c.small_dtype = small, c.seed = ++seed;
      c.D = 40, c.W = 4, c.strided = true, c.cu_dtype = DType::kI64;
      c.bias = c.residual = c.h0 = c.ht = c.dht = true;
      if (varlen) c.lens = {5, 0, 90, 3};
      else c.B = 2, c.T = 77;
      SCOPED_TRACE(c.str());
      check_case(c);
    }
}

// Outputs above the streaming threshold are written with non-temporal stores (aligned rows) or
// plain ones (unaligned rows); the threshold is lowered to 0 so small cases take that path.
TEST(ConvCpu, StreamingStoresGiveTheSameResults) {
  setenv("LINATTN_CONV_STREAM_MIN_BYTES", "0", 1);
  int seed = 300;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (bool strided : {false, true}) {
      ConvCase c;
      c.dtype = dt, c.W = 4, c.seed = ++seed, c.D = 1040, c.strided = strided;
      c.bias = c.residual = c.h0 = c.ht = c.dht = true;
      c.lens = {70, 3, 40};
      SCOPED_TRACE(c.str());
      check_case(c);
    }
  unsetenv("LINATTN_CONV_STREAM_MIN_BYTES");
}

TEST(ConvCpu, ZeroTokensPassInitialStateThrough) {
  ConvCase c;
  c.B = 2, c.T = 0, c.D = 20, c.W = 4, c.h0 = c.dht = c.ht = true;
  check_case(c);
  ConvCase v;
  v.lens = {0, 0}, v.D = 20, v.W = 3, v.h0 = v.dht = true;
  check_case(v);
}

TEST(ConvCpu, ResultsDoNotDependOnTheThreadCount) {
  ConvCase c;
  c.lens = {1000, 3, 0, 1500, 700}, c.D = 48, c.W = 4, c.seed = 5;
  c.bias = c.residual = c.h0 = c.ht = c.dht = true;
  ConvData d = make_data(c);
  ConvResults one = make_results(d, 1), two = make_results(d, 1);
  run_cpu(d, one, 1);
  run_cpu(d, two, 2);
  EXPECT_TRUE(same_rows("y", d, one.y.view, two.y.view));
  EXPECT_TRUE(same_rows("dx", d, one.dx.view, two.dx.view));
  EXPECT_TRUE(same_flat("final_state", one.ht, two.ht));
  EXPECT_TRUE(same_flat("dweight", one.dw, two.dw));
  EXPECT_TRUE(same_flat("dbias", one.db, two.db));
  EXPECT_TRUE(same_flat("dinitial_state", one.dh0, two.dh0));
}

TEST(ConvCpu, EagerWorkspaceOrNotGivesTheSameBits) {
  ConvCase c;
  c.lens = {300, 20}, c.D = 24, c.W = 4, c.bias = true;
  ConvData d = make_data(c);
  ConvResults a = make_results(d, 1), b = make_results(d, 1);
  run_cpu(d, a);
  const size_t need = conv_bwd_workspace_bytes(d.inputs(), d.options());
  EXPECT_GT(need, 0u);
  std::vector<float> ws(need / 4 + 4, 12345.0f);  // garbage: every slot must be overwritten
  ExecContext ctx;
  ctx.workspace = ws.data(), ctx.workspace_bytes = need;
  conv_fwd(d.inputs(), b.outputs(), d.options(), ctx);
  conv_bwd(d.inputs(), d.dy.view, {}, b.grads(), d.options(), ctx);
  EXPECT_TRUE(same_flat("dweight", a.dw, b.dw));
  EXPECT_TRUE(same_flat("dbias", a.db, b.db));
}

// Expects fn to throw linattn::Error whose message contains every fragment.
template <class Fn>
void expect_error(Fn fn, std::initializer_list<const char*> fragments, ErrorCode code = ErrorCode::kInvalidArgument) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning " << *fragments.begin();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const char* f : fragments) EXPECT_NE(e.message().find(f), std::string::npos) << e.what();
  }
}

TEST(ConvCpu, ValidationNamesArgumentExpectedAndActual) {
  ConvCase c;
  c.lens = {5, 7}, c.D = 8, c.W = 4, c.bias = c.residual = c.h0 = true;
  ConvData d = make_data(c);
  ConvResults r = make_results(d, 1);
  auto fwd = [&](ConvInputs in, ConvOutputs out, ConvOptions o) { conv_fwd(in, out, o); };
  ConvInputs in = d.inputs();
  ConvOptions opt = d.options();
  Tensor w9(DType::kF32, {8, 9}), w_d(DType::kF32, {7, 4}), b_bad(DType::kF32, {9});
  Tensor cu_f(DType::kF32, {3}), h_bad(DType::kF32, {3, 8, 4});
  Tensor ht(DType::kF32, {2, 8, 4});
  expect_error([&] { auto i = in; i.weight = w9; fwd(i, r.outputs(), opt); }, {"weight", "[1, 8]", "9"});
  expect_error([&] { auto i = in; i.weight = w_d; fwd(i, r.outputs(), opt); }, {"weight", "expected size 8", "got 7"});
  expect_error([&] { auto i = in; i.bias = b_bad; fwd(i, r.outputs(), opt); }, {"bias", "expected size 8", "got 9"});
  expect_error([&] { auto i = in; i.cu_seqlens = cu_f; fwd(i, r.outputs(), opt); }, {"cu_seqlens", "int32 or int64", "fp32"});
  expect_error([&] { auto i = in; i.initial_state = h_bad; fwd(i, r.outputs(), opt); }, {"initial_state", "expected size 2", "got 3"});
  expect_error([&] { auto i = in; i.residual.dtype = DType::kBF16; fwd(i, r.outputs(), opt); }, {"residual", "fp32", "bf16"});
  expect_error([&] { auto o = opt; o.use_graph = true, o.max_num_seqs = 3; fwd(in, r.outputs(), o); }, {"max_num_seqs", "2", "3"});
  expect_error([&] { auto o = opt; o.chunk_size = 48; fwd(in, r.outputs(), o); }, {"chunk_size", "48"});
  expect_error([&] { ConvOutputs o = r.outputs(); o.final_state = ht; fwd(in, o, opt); }, {"final_state", "output_final_state = false"});
  expect_error([&] { auto o = opt; o.output_final_state = true; fwd(in, r.outputs(), o); }, {"final_state", "rank 3", "none"});
  expect_error([&] { Tensor cu = d.cu.to(DType::kI32); cu.set(2, 13); auto i = in; i.cu_seqlens = cu; fwd(i, r.outputs(), opt); },
               {"cu_seqlens[2]", "expected <= T = 12", "got 13"});
  expect_error([&] { auto i = in; i.x.strides[2] = 2; fwd(i, r.outputs(), opt); }, {"x", "channel dim", "stride 2"});
  expect_error([&] { ConvGrads g = r.grads(); g.dbias = b_bad; conv_bwd(in, d.dy.view, {}, g, opt); }, {"dbias", "expected size 8"});
  expect_error([&] { conv_bwd(in, d.dy.view, ht, r.grads(), opt); }, {"d_final_state", "output_final_state = false"});
  ConvData d64 = make_data([] { ConvCase k; k.dtype = DType::kF64; return k; }());
  ConvResults r64 = make_results(d64, 1);
  expect_error([&] { conv_fwd(d64.inputs(), r64.outputs(), d64.options()); }, {"fp64"}, ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace linattn::testing
