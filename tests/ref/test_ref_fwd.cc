// Forward identities of the fp64 reference: a hand-worked example, the matrix form of the
// recurrence, state layouts, GVA, varlen (zero-length sequences, padding rows, int32/int64, equal
// to separate calls), every in-kernel transform against its precomputed equivalent, scale, half
// dtype inputs, and extreme gates (-1000) staying finite and resetting the state.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/chunk_attn_check.h"
#include "common/compare.h"
#include "ref/chunk_attn_ref.h"

namespace linattn::test {
namespace {

constexpr Tolerance kExact{1e-14, 0.0};

ChunkAttnSpec spec64(ChunkOp op, int64_t T, int64_t H, int64_t HV, int64_t K, int64_t V,
                     uint64_t seed) {
  ChunkAttnSpec s;
  s.opt.op = op;
  s.opt.output_final_state = true;
  s.T = T;
  s.H = H;
  s.HV = HV;
  s.K = K;
  s.V = V;
  s.seed = seed;
  s.all_dtypes(DType::kF64);
  return s;
}

class RefFwd : public ::testing::TestWithParam<ChunkOp> {};

TEST(RefFwdHand, GdnTwoTokens) {
  ChunkAttnSpec s = spec64(ChunkOp::kGdn, 2, 1, 1, 2, 1, 1);
  s.opt.scale = 1.0;
  ChunkAttnData d = make_chunk_attn(s);
  const double q[2][2] = {{1, 1}, {0, 1}}, k[2][2] = {{1, 0}, {0.6, 0.8}}, v[2] = {3, -1};
  const double g[2] = {-0.5, -1.0}, beta[2] = {0.5, 0.25}, h0[2] = {1, 2};
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < 2; ++i) {
      d.q.set(t * 2 + i, q[t][i]);
      d.k.set(t * 2 + i, k[t][i]);
    }
    d.v.set(t, v[t]);
    d.g.set(t, g[t]);
    d.beta.set(t, beta[t]);
  }
  d.initial_state.set(0, h0[0]);
  d.initial_state.set(1, h0[1]);
  const ChunkAttnOutTensors out = ref_forward(d);
  // Token 1: decay, predict with the decayed state, write, read.
  double S[2] = {std::exp(-0.5) * 1, std::exp(-0.5) * 2};
  double e = 3 - S[0];
  S[0] += 0.5 * e;
  EXPECT_DOUBLE_EQ(out.o.get(0), S[0] + S[1]);
  S[0] *= std::exp(-1.0);
  S[1] *= std::exp(-1.0);
  e = -1 - (0.6 * S[0] + 0.8 * S[1]);
  S[0] += 0.25 * 0.6 * e;
  S[1] += 0.25 * 0.8 * e;
  EXPECT_DOUBLE_EQ(out.o.get(1), S[1]);
  EXPECT_DOUBLE_EQ(out.final_state.get(0), S[0]);
  EXPECT_DOUBLE_EQ(out.final_state.get(1), S[1]);
}

// S_t = (I - b k k^T) Diag(e^g) S_{t-1} + b k v^T, o = scale S_t^T q, as explicit matrices.
TEST_P(RefFwd, MatchesMatrixForm) {
  ChunkAttnSpec s = spec64(GetParam(), 7, 2, 4, 5, 3, 11);
  s.B = 2;
  s.opt.scale = 0.7;
  const ChunkAttnData d = make_chunk_attn(s);
  const ChunkAttnOutTensors out = ref_forward(d);
  const int64_t K = 5, V = 3, HV = 4, T = 7, gw = d.kda() ? K : 1;
  double max_err = 0;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t j = 0; j < HV; ++j) {
      std::vector<double> S(K * V);
      for (int64_t i = 0; i < K * V; ++i) S[i] = d.initial_state.get((b * HV + j) * K * V + i);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t row = b * T + t, qk = (row * 2 + j / 2) * K;
        const double bt = d.beta.get(row * HV + j);
        std::vector<double> Dm(K * V), N(K * V);
        for (int64_t r = 0; r < K; ++r)
          for (int64_t c = 0; c < V; ++c)
            Dm[r * V + c] =
                std::exp(d.g.get((row * HV + j) * gw + (gw == 1 ? 0 : r))) * S[r * V + c];
        for (int64_t r = 0; r < K; ++r) {
          for (int64_t c = 0; c < V; ++c) {
            double acc = Dm[r * V + c] + bt * d.k.get(qk + r) * d.v.get((row * HV + j) * V + c);
            for (int64_t m = 0; m < K; ++m)
              acc -= bt * d.k.get(qk + r) * d.k.get(qk + m) * Dm[m * V + c];
            N[r * V + c] = acc;
          }
        }
        S = N;
        for (int64_t c = 0; c < V; ++c) {
          double o = 0;
          for (int64_t r = 0; r < K; ++r) o += S[r * V + c] * d.q.get(qk + r);
          max_err = std::max(max_err, std::fabs(0.7 * o - out.o.get((row * HV + j) * V + c)));
        }
      }
      for (int64_t i = 0; i < K * V; ++i)
        max_err =
            std::max(max_err, std::fabs(S[i] - out.final_state.get((b * HV + j) * K * V + i)));
    }
  }
  EXPECT_LT(max_err, 1e-12);
}

TEST_P(RefFwd, StateVFirstIsTransposed) {
  ChunkAttnSpec s = spec64(GetParam(), 9, 1, 2, 4, 3, 21);
  s.seqlens = {4, 0, 5};
  const ChunkAttnData a = make_chunk_attn(s);
  ChunkAttnData b = a;
  b.spec.opt.state_v_first = true;
  b.initial_state = Tensor(DType::kF64, {3, 2, 3, 4});
  for (int64_t nh = 0; nh < 6; ++nh)
    for (int64_t kk = 0; kk < 4; ++kk)
      for (int64_t vv = 0; vv < 3; ++vv)
        b.initial_state.set((nh * 3 + vv) * 4 + kk, a.initial_state.get((nh * 4 + kk) * 3 + vv));
  const ChunkAttnOutTensors oa = ref_forward(a), ob = ref_forward(b);
  EXPECT_TRUE(tensors_close("o", oa.o, ob.o, kExact));
  ASSERT_EQ(ob.final_state.shape(), (std::vector<int64_t>{3, 2, 3, 4}));
  for (int64_t nh = 0; nh < 6; ++nh)
    for (int64_t kk = 0; kk < 4; ++kk)
      for (int64_t vv = 0; vv < 3; ++vv)
        EXPECT_EQ(ob.final_state.get((nh * 3 + vv) * 4 + kk),
                  oa.final_state.get((nh * 4 + kk) * 3 + vv));
}

TEST_P(RefFwd, GvaEqualsExpandedQk) {
  const int64_t H = 2, G = 3, K = 4;
  ChunkAttnSpec s = spec64(GetParam(), 6, H, H * G, K, 2, 31);
  s.B = 2;
  const ChunkAttnData a = make_chunk_attn(s);
  ChunkAttnData b = a;
  b.spec.H = H * G;
  b.q = Tensor(DType::kF64, {2, 6, H * G, K});
  b.k = Tensor(DType::kF64, {2, 6, H * G, K});
  for (int64_t row = 0; row < 12; ++row)
    for (int64_t j = 0; j < H * G; ++j)
      for (int64_t c = 0; c < K; ++c) {
        b.q.set((row * H * G + j) * K + c, a.q.get((row * H + j / G) * K + c));
        b.k.set((row * H * G + j) * K + c, a.k.get((row * H + j / G) * K + c));
      }
  const ChunkAttnOutTensors oa = ref_forward(a), ob = ref_forward(b);
  EXPECT_TRUE(tensors_close("o", oa.o, ob.o, kExact));
  EXPECT_TRUE(tensors_close("final_state", oa.final_state, ob.final_state, kExact));
}

TEST_P(RefFwd, ZeroLengthSequencesPassStateThrough) {
  for (bool h0 : {true, false}) {
    ChunkAttnSpec s = spec64(GetParam(), 0, 1, 2, 3, 2, 41);
    s.seqlens = {0, 3, 0, 0, 2, 0};
    s.has_h0 = h0;
    const ChunkAttnData d = make_chunk_attn(s);
    const ChunkAttnOutTensors out = ref_forward(d);
    ASSERT_TRUE(all_finite(out.o.view()));
    const int64_t per_seq = 2 * 3 * 2;
    for (int64_t n : {0, 2, 3, 5})
      for (int64_t i = 0; i < per_seq; ++i)
        EXPECT_EQ(out.final_state.get(n * per_seq + i),
                  h0 ? d.initial_state.get(n * per_seq + i) : 0.0)
            << "sequence " << n << " entry " << i;
  }
  // All sequences empty, T = 0.
  ChunkAttnSpec s = spec64(GetParam(), 0, 1, 1, 2, 2, 42);
  s.seqlens = {0, 0};
  const ChunkAttnData d = make_chunk_attn(s);
  const ChunkAttnOutTensors out = ref_forward(d);
  EXPECT_TRUE(tensors_close("final_state", d.initial_state, out.final_state, kExact));
}

TEST_P(RefFwd, VarlenEqualsSeparateCallsAndBatch) {
  const std::vector<int64_t> lens = {5, 1, 0, 7};
  ChunkAttnSpec s = spec64(GetParam(), 0, 1, 2, 3, 2, 51);
  s.seqlens = lens;
  s.pad_tokens = 2;
  const ChunkAttnData d = make_chunk_attn(s);
  const ChunkAttnOutTensors all = ref_forward(d);
  // Padding rows stay untouched (NaN sentinel), every valid row is written.
  EXPECT_TRUE(all_finite(narrow(all.o.view(), 1, 0, d.valid_tokens)));
  for (int64_t i = d.valid_tokens * 2 * 2; i < all.o.numel(); ++i)
    EXPECT_TRUE(std::isnan(all.o.get(i)));
  int64_t t0 = 0;
  for (size_t n = 0; n < lens.size(); ++n) {
    ChunkAttnSpec one = s;
    one.seqlens.clear();
    one.T = lens[n];
    ChunkAttnData e = make_chunk_attn(one);
    const int64_t qk = 3, vw = 2 * 2, gw = d.kda() ? 2 * 3 : 2, st = 2 * 3 * 2;
    for (int64_t i = 0; i < lens[n] * qk; ++i) {
      e.q.set(i, d.q.get(t0 * qk + i));
      e.k.set(i, d.k.get(t0 * qk + i));
    }
    for (int64_t i = 0; i < lens[n] * vw; ++i) e.v.set(i, d.v.get(t0 * vw + i));
    for (int64_t i = 0; i < lens[n] * gw; ++i) e.g.set(i, d.g.get(t0 * gw + i));
    for (int64_t i = 0; i < lens[n] * 2; ++i) e.beta.set(i, d.beta.get(t0 * 2 + i));
    for (int64_t i = 0; i < st; ++i) e.initial_state.set(i, d.initial_state.get(n * st + i));
    const ChunkAttnOutTensors oe = ref_forward(e);
    for (int64_t i = 0; i < lens[n] * vw; ++i) EXPECT_EQ(oe.o.get(i), all.o.get(t0 * vw + i));
    for (int64_t i = 0; i < st; ++i)
      EXPECT_EQ(oe.final_state.get(i), all.final_state.get(n * st + i));
    t0 += lens[n];
  }
  // A fixed-length batch equals varlen over its rows.
  ChunkAttnSpec fb = spec64(GetParam(), 4, 1, 2, 3, 2, 52);
  fb.B = 3;
  const ChunkAttnData f = make_chunk_attn(fb);
  ChunkAttnData fv = f;
  fv.spec.B = 1;
  fv.spec.T = 12;
  fv.spec.seqlens = {4, 4, 4};
  fv.cu_seqlens = cu_seqlens_tensor(fv.spec.seqlens, DType::kI64);
  auto reshape = [](Tensor& t, std::vector<int64_t> shape) {
    Tensor r(t.dtype(), shape);
    for (int64_t i = 0; i < t.numel(); ++i) r.set(i, t.get(i));
    t = r;
  };
  reshape(fv.q, {1, 12, 1, 3});
  reshape(fv.k, {1, 12, 1, 3});
  reshape(fv.v, {1, 12, 2, 2});
  reshape(fv.g, f.kda() ? std::vector<int64_t>{1, 12, 2, 3} : std::vector<int64_t>{1, 12, 2});
  reshape(fv.beta, {1, 12, 2});
  const ChunkAttnOutTensors of = ref_forward(f), ov = ref_forward(fv);
  for (int64_t i = 0; i < of.o.numel(); ++i) EXPECT_EQ(of.o.get(i), ov.o.get(i));
  EXPECT_TRUE(tensors_close("final_state", of.final_state, ov.final_state, kExact));
}

TEST_P(RefFwd, CuSeqlensInt32EqualsInt64) {
  ChunkAttnSpec s = spec64(GetParam(), 0, 1, 1, 3, 2, 61);
  s.seqlens = {3, 0, 4};
  s.cu_dtype = DType::kI32;
  const ChunkAttnData a = make_chunk_attn(s);
  ChunkAttnData b = a;
  b.cu_seqlens = a.cu_seqlens.to(DType::kI64);
  const ChunkAttnOutTensors oa = ref_forward(a), ob = ref_forward(b);
  EXPECT_TRUE(
      tensors_close("o", narrow(oa.o.view(), 1, 0, 7), narrow(ob.o.view(), 1, 0, 7), kExact));
  EXPECT_TRUE(tensors_close("final_state", oa.final_state, ob.final_state, kExact));
}

TEST_P(RefFwd, ScaleMultipliesOutputOnly) {
  ChunkAttnSpec s = spec64(GetParam(), 5, 1, 1, 9, 2, 71);
  const ChunkAttnData a = make_chunk_attn(s);  // scale 0 = K^-0.5 = 1/3
  ChunkAttnData b = a;
  b.spec.opt.scale = 2.0 / 3.0;
  const ChunkAttnOutTensors oa = ref_forward(a), ob = ref_forward(b);
  for (int64_t i = 0; i < oa.o.numel(); ++i) EXPECT_NEAR(2 * oa.o.get(i), ob.o.get(i), 1e-14);
  EXPECT_TRUE(tensors_close("final_state", oa.final_state, ob.final_state, kExact));
}

TEST_P(RefFwd, HalfInputsAreReadExactly) {
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    ChunkAttnSpec s = spec64(GetParam(), 6, 1, 2, 4, 3, 81);
    s.dtype = dt;
    const ChunkAttnData h = make_chunk_attn(s);
    ChunkAttnOutTensors oh = alloc_outputs(h, dt, DType::kF64);
    ref::chunk_attn_fwd(h.inputs(), oh.views(), h.opt());
    const ChunkAttnOutTensors o64 = ref_forward(h);  // fp64 copies of the same values
    const Tensor rounded = o64.o.to(dt);
    for (int64_t i = 0; i < rounded.numel(); ++i) EXPECT_EQ(oh.o.get(i), rounded.get(i)) << i;
    EXPECT_TRUE(tensors_close("final_state", o64.final_state, oh.final_state, kExact));
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, RefFwd, ::testing::Values(ChunkOp::kGdn, ChunkOp::kKda),
                         [](const auto& info) {
                           return info.param == ChunkOp::kGdn ? "gdn" : "kda";
                         });

}  // namespace
}  // namespace linattn::test
