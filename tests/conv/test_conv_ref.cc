// The fp64 short-conv reference: hand-computed values (tap order, state slot convention, varlen
// reset, final state for len < W) and its backward against central finite differences of
// L = sum(y * dy) + sum(final_state * d_final_state), for every option.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "conv_case.h"
#include "ref/conv_ref.h"

namespace linattn::testing {
namespace {

TEST(ConvRef, HandComputedTapsStateAndReset) {
  // D = 1, W = 3, two sequences [1, 2, 3] and [5]; weight (a, b, c) = (2, 3, 5).
  Tensor x(DType::kF32, {1, 4, 1}), w(DType::kF32, {1, 3}), h0(DType::kF32, {2, 1, 3});
  Tensor cu(DType::kI32, {3});
  const double xs[] = {1, 2, 3, 5}, ws[] = {2, 3, 5}, hs[] = {100, 7, 11, 200, 13, 17};
  for (int i = 0; i < 4; ++i) x.set(i, xs[i]);
  for (int i = 0; i < 3; ++i) w.set(i, ws[i]);
  for (int i = 0; i < 6; ++i) h0.set(i, hs[i]);
  cu.set(0, 0), cu.set(1, 3), cu.set(2, 4);
  ConvInputs in;
  in.x = x, in.weight = w, in.cu_seqlens = cu;
  ConvOptions opt;
  opt.activation = Activation::kNone;
  ref::ConvRefFwd r = ref::conv_ref_fwd(in, opt);
  EXPECT_EQ(r.y.get(0), 5 * 1);                  // weight[:, W-1] multiplies x_t
  EXPECT_EQ(r.y.get(1), 3 * 1 + 5 * 2);
  EXPECT_EQ(r.y.get(2), 2 * 1 + 3 * 2 + 5 * 3);
  EXPECT_EQ(r.y.get(3), 5 * 5);                  // varlen resets at each sequence start
  EXPECT_EQ(r.final_state.get(0), 1);            // seq 0: last W inputs
  EXPECT_EQ(r.final_state.get(2), 3);
  EXPECT_EQ(r.final_state.get(3), 0);            // seq 1 (len 1 < W): older slots from zeros
  EXPECT_EQ(r.final_state.get(5), 5);
  in.initial_state = h0;
  r = ref::conv_ref_fwd(in, opt);
  EXPECT_EQ(r.y.get(0), 2 * 7 + 3 * 11 + 5 * 1);  // slot 0 (100) never read
  EXPECT_EQ(r.y.get(3), 2 * 13 + 3 * 17 + 5 * 5);
  EXPECT_EQ(r.final_state.get(3), 13);            // len 1: final = [h0[1], h0[2], x0]
  EXPECT_EQ(r.final_state.get(4), 17);
  EXPECT_EQ(r.final_state.get(5), 5);
}

// L(inputs) in fp64.
double loss(const ConvData& d) {
  const ref::ConvRefFwd r = ref::conv_ref_fwd(d.inputs(), d.options());
  double l = 0;
  for (int64_t t = 0; t < d.c.B * d.c.T; ++t)
    for (int64_t c = 0; c < d.c.D; ++c) {
      const int64_t b = t / d.c.T, tt = t % d.c.T;
      if (d.c.varlen() && tt >= d.c.real_rows()) continue;
      l += r.y.get(t * d.c.D + c) * d.dy.store.get((b * d.c.T + tt) * d.dy.store.shape()[2] + c);
    }
  if (d.c.dht)
    for (int64_t i = 0; i < d.dht.numel(); ++i) l += r.final_state.get(i) * d.dht.get(i);
  return l;
}

// Central differences on every element of `t` (a tensor that d's inputs point to).
void fd_check(ConvData& d, Tensor& t, int64_t row_stride, const Tensor& grad, const char* name) {
  const double h = 1e-6;
  const int64_t n = grad.numel();
  const int64_t D = grad.shape().back();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t si = row_stride ? (i / D) * row_stride + i % D : i;
    if (d.c.varlen() && row_stride && (i / D) >= d.c.real_rows()) continue;
    const double v = t.get(si);
    t.set(si, v + h);
    const double lp = loss(d);
    t.set(si, v - h);
    const double lm = loss(d);
    t.set(si, v);
    const double fd = (lp - lm) / (2 * h);
    EXPECT_NEAR(grad.get(i), fd, 1e-6 * (1 + std::fabs(fd))) << name << "[" << i << "] " << d.c.str();
  }
}

TEST(ConvRef, BackwardMatchesFiniteDifferences) {
  int seed = 0;
  for (int W : {1, 2, 4})
    for (bool varlen : {false, true})
      for (bool silu : {false, true}) {
        ConvCase c;
        c.dtype = DType::kF64, c.small_dtype = DType::kF64;
        c.D = 3, c.W = W, c.seed = ++seed;
        if (varlen) c.lens = {0, 1, W + 2, W - 1 > 0 ? W - 1 : 2};
        else c.B = 2, c.T = W + 1;
        c.act = silu ? Activation::kSilu : Activation::kNone;
        c.bias = c.residual = c.h0 = c.dht = true;
        c.strided = varlen;
        ConvData d = make_data(c);
        const ref::ConvRefGrads g = ref::conv_ref_bwd(d.inputs(), d.dy.view, d.dht, d.options());
        const int64_t rs = d.x.store.shape()[2];
        fd_check(d, d.x.store, rs, g.dx, "dx");
        fd_check(d, d.weight, 0, g.dweight, "dweight");
        fd_check(d, d.bias, 0, g.dbias, "dbias");
        fd_check(d, d.residual.store, rs, g.dresidual, "dresidual");
        fd_check(d, d.h0, 0, g.dinitial_state, "dinitial_state");
      }
}

}  // namespace
}  // namespace linattn::testing
