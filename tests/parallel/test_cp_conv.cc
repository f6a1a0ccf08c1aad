// Context-parallel short causal conv over 2, 4 and 8 simulated ranks on the CPU: y, final
// state, dx, dweight, dbias, dresidual and dinitial_state equal the single-device conv (fp32
// bars of tolerances.h), with sequences crossing ranks, ranks shorter than the window (the
// initial conv state then spans several earlier ranks and the sequence's own initial state),
// an empty rank, silu and no activation, with and without an initial state.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/chunk_attn_gen.h"
#include "common/compare.h"
#include "common/tolerances.h"
#include "cp_test_util.h"
#include "parallel/cp_ops.h"

namespace linattn::test {
namespace {

struct Conv {
  Tensor x, w, b, res, h0, cu, y, ht, dy, dht, dx, dw, db, dres, dh0;
  int64_t valid = 0;
};

Conv make(bool h0, uint64_t seed) {
  Rng rng(seed);
  const std::vector<int64_t> lens = {2, 40, 0, 3, 70, 1, 30};
  const int64_t D = 6, W = 4, N = static_cast<int64_t>(lens.size());
  int64_t T = 3;
  for (int64_t l : lens) T += l;
  Conv c;
  c.valid = T - 3;
  c.x = randn(rng, DType::kF32, {1, T, D});
  c.w = randn(rng, DType::kF32, {D, W}, 0.5);
  c.b = randn(rng, DType::kF32, {D});
  c.res = randn(rng, DType::kF32, {1, T, D});
  if (h0) c.h0 = randn(rng, DType::kF32, {N, D, W});
  c.cu = cu_seqlens_tensor(lens, DType::kI64);
  c.y = full(DType::kF32, {1, T, D}, 0.0);
  c.ht = full(DType::kF32, {N, D, W}, 0.0);
  c.dy = randn(rng, DType::kF32, {1, T, D});
  c.dht = randn(rng, DType::kF32, {N, D, W});
  c.dx = full(DType::kF32, {1, T, D}, 0.0);
  c.dres = full(DType::kF32, {1, T, D}, 0.0);
  c.dw = full(DType::kF32, {D, W}, 0.0);
  c.db = full(DType::kF32, {D}, 0.0);
  if (h0) c.dh0 = full(DType::kF32, {N, D, W}, 0.0);
  return c;
}

ConvInputs inputs(const Conv& c, const Tensor& x, const Tensor& res) { return {x, c.w, c.b, res, c.h0, c.cu}; }

class CpConv : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(CpConv, EqualsSingleDevice) {
  const auto [silu, has_h0] = GetParam();
  ConvOptions opt;
  opt.activation = silu ? Activation::kSilu : Activation::kNone;
  opt.output_final_state = true;
  Conv one = make(has_h0, 3);
  conv_fwd(inputs(one, one.x, one.res), {one.y, one.ht}, opt);
  conv_bwd(inputs(one, one.x, one.res), one.dy, one.dht, {one.dx, one.dw, one.db, one.dres, one.dh0}, opt);
  const int64_t T = one.x.shape()[1];
  auto rows = [&](const Tensor& t) { return narrow(t.view(), 1, 0, one.valid); };
  for (const std::vector<int64_t>& off : {rank_layout(2, T), rank_layout(4, T), rank_layout(8, T),
                                          std::vector<int64_t>{0, 0, 50, T}, std::vector<int64_t>{0, 45, T, T}}) {
    const int world = static_cast<int>(off.size()) - 1;
    SCOPED_TRACE("world " + std::to_string(world) + ", rank 1 starts at row " + std::to_string(off[1]));
    const Tensor offs = offsets_tensor(off);
    Conv got = make(has_h0, 3);
    std::vector<Tensor> dh0(static_cast<size_t>(world));
    run_ranks(world, [&](int r, parallel::Communicator& comm) {
      const int64_t r0 = off[r], n = off[r + 1] - off[r];
      Tensor x = take_rows(got.x, r0, n), res = take_rows(got.res, r0, n), y = take_rows(got.y, r0, n);
      Tensor dy = take_rows(got.dy, r0, n), dx = take_rows(got.dx, r0, n), dres = take_rows(got.dres, r0, n);
      Tensor dw(DType::kF32, {got.w.shape()}), db(DType::kF32, {got.b.shape()});
      if (has_h0) dh0[r] = Tensor(DType::kF32, got.h0.shape());
      parallel::CpContext cp{&comm, offs.view(), true};
      parallel::cp_conv_fwd(cp, inputs(got, x, res), {y, got.ht}, opt);
      parallel::cp_conv_bwd(cp, inputs(got, x, res), dy, got.dht, {dx, dw, db, dres, dh0[r]}, opt);
      put_rows(got.y, y, r0);
      put_rows(got.dx, dx, r0);
      put_rows(got.dres, dres, r0);
      if (r == 0) {
        got.dw = dw;
        got.db = db;
      }
    });
    if (has_h0)
      for (int64_t i = 0; i < got.dh0.numel(); ++i) {
        double s = 0.0;
        for (const Tensor& t : dh0) s += t.get(i);
        got.dh0.set(i, s);
      }
    const DType f = DType::kF32;
    EXPECT_TRUE(tensors_close("y", rows(one.y), rows(got.y), tolerance(f, Qty::kConvY)));
    EXPECT_TRUE(tensors_close("final_state", one.ht, got.ht, tolerance(f, Qty::kConvFinalState)));
    EXPECT_TRUE(tensors_close("dx", rows(one.dx), rows(got.dx), tolerance(f, Qty::kConvDx)));
    EXPECT_TRUE(tensors_close("dresidual", rows(one.dres), rows(got.dres), tolerance(f, Qty::kConvDresidual)));
    EXPECT_TRUE(tensors_close("dweight", one.dw, got.dw, tolerance(f, Qty::kConvDw)));
    EXPECT_TRUE(tensors_close("dbias", one.db, got.db, tolerance(f, Qty::kConvDb)));
    if (has_h0) {
      EXPECT_TRUE(tensors_close("dh0", one.dh0, got.dh0, tolerance(f, Qty::kConvDh0)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpConv, ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& i) {
                           return std::string(std::get<0>(i.param) ? "silu" : "none") +
                                  (std::get<1>(i.param) ? "_h0" : "_noh0");
                         });

}  // namespace
}  // namespace linattn::test
