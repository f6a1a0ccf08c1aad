// The chunked (WY / UT) forward of ALGORITHMS.md section 3.1 written plainly in fp64, checked
// against the token recurrence of src/ref to ~1e-12: the executable statement of the math every
// fast path implements. Per chunk of n <= BT valid rows (chunks never cross a sequence start; a
// ragged last chunk simply has fewer rows, so padding rows contribute nothing):
//   gamma = in-chunk cumsum of g;  E_ij = e^{gamma_i - gamma_j} (channelwise for KDA), i >= j
//   L = strictly-lower(beta_i sum_d k_id k_jd E_ijd);  Ainv = (I + L)^-1 (forward substitution)
//   W = Ainv (beta e^gamma K);  U = Ainv (beta V);  Vh = U - W S
//   O = scale ((Q e^gamma) S + lower(sum_d q_id k_jd E_ijd) Vh)
//   S' = e^{gamma_L} S + (K e^{gamma_L - gamma})^T Vh
// E between different 16-row sub-chunks is formed as e^{gamma_i - gamma_r} e^{gamma_r - gamma_j}
// with r the first row of i's sub-chunk (FLA's KDA inter-sub-chunk form): both exponents are <= 0,
// so gates of -1000 never overflow. In-kernel transforms come from the reference's loader.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/chunk_attn_check.h"
#include "common/compare.h"
#include "ref/chunk_attn_detail.h"

namespace linattn::test {
namespace {

using ref::detail::HeadInputs;
constexpr int64_t kSub = 16;

// One chunk [c0, c0 + n) of head h: updates S [K, V] and writes o rows [n, V].
void chunk_step(const HeadInputs& h, int64_t c0, int64_t n, double scale, std::vector<double>& S,
                std::vector<double>& o) {
  const int64_t K = h.K, V = h.V;
  std::vector<double> gam(n * K);  // per channel (GDN: the scalar, repeated)
  for (int64_t d = 0; d < K; ++d) {
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) gam[i * K + d] = acc += h.log_decay(c0 + i, d);
  }
  auto E = [&](int64_t i, int64_t j, int64_t d) {  // e^{gamma_i - gamma_j}, i >= j
    const int64_t r = (i / kSub) * kSub;
    if (j >= r) return std::exp(gam[i * K + d] - gam[j * K + d]);
    return std::exp(gam[i * K + d] - gam[r * K + d]) * std::exp(gam[r * K + d] - gam[j * K + d]);
  };
  auto q = [&](int64_t i, int64_t d) { return h.q[(c0 + i) * K + d]; };
  auto k = [&](int64_t i, int64_t d) { return h.k[(c0 + i) * K + d]; };
  auto beta = [&](int64_t i) { return h.beta[c0 + i]; };
  std::vector<double> L(n * n, 0.0), Aqk(n * n, 0.0), Ainv(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      double kk = 0, qk = 0;
      for (int64_t d = 0; d < K; ++d) {
        const double e = E(i, j, d);
        kk += k(i, d) * k(j, d) * e;
        qk += q(i, d) * k(j, d) * e;
      }
      if (j < i) L[i * n + j] = beta(i) * kk;
      Aqk[i * n + j] = scale * qk;
    }
  }
  for (int64_t i = 0; i < n; ++i) {  // rows of (I + L) X = I, top to bottom
    Ainv[i * n + i] = 1.0;
    for (int64_t j = 0; j < i; ++j)
      for (int64_t m = j; m < i; ++m) Ainv[i * n + j] -= L[i * n + m] * Ainv[m * n + j];
  }
  std::vector<double> W(n * K, 0.0), Vh(n * V, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t m = 0; m <= i; ++m) {
      const double a = Ainv[i * n + m] * beta(m);
      for (int64_t d = 0; d < K; ++d) W[i * K + d] += a * std::exp(gam[m * K + d]) * k(m, d);
      for (int64_t c = 0; c < V; ++c) Vh[i * V + c] += a * h.v[(c0 + m) * V + c];  // U
    }
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < K; ++d)
      for (int64_t c = 0; c < V; ++c) Vh[i * V + c] -= W[i * K + d] * S[d * V + c];
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < V; ++c) {
      double acc = 0;
      for (int64_t d = 0; d < K; ++d)
        acc += scale * q(i, d) * std::exp(gam[i * K + d]) * S[d * V + c];
      for (int64_t j = 0; j <= i; ++j) acc += Aqk[i * n + j] * Vh[j * V + c];
      o[i * V + c] = acc;
    }
  }
  const int64_t last = n - 1;
  for (int64_t d = 0; d < K; ++d) {
    for (int64_t c = 0; c < V; ++c) {
      double acc = std::exp(gam[last * K + d]) * S[d * V + c];
      for (int64_t i = 0; i < n; ++i)
        acc += k(i, d) * std::exp(gam[last * K + d] - gam[i * K + d]) * Vh[i * V + c];
      S[d * V + c] = acc;
    }
  }
}

// The whole op in chunked form, results in fp64 tensors shaped like ref_forward's.
ChunkAttnOutTensors chunked_forward(const ChunkAttnData& data, int64_t BT) {
  ChunkAttnOutTensors out = alloc_outputs(data, DType::kF64, DType::kF64);
  const meta::ChunkAttnDesc d = ref::detail::describe_and_validate(data.inputs(), data.opt());
  const auto seqs = ref::detail::sequences(d, data.inputs());
  std::vector<double> S(d.K * d.V), o;
  for (int64_t n = 0; n < d.N; ++n) {
    for (int64_t j = 0; j < d.HV; ++j) {
      const HeadInputs h = ref::detail::load_head(d, data.inputs(), seqs[n], j);
      S.assign(S.size(), 0.0);
      if (d.has_h0) ref::detail::load_state(d, data.initial_state, n, j, S.data());
      for (int64_t c0 = 0; c0 < h.L; c0 += BT) {
        const int64_t len = std::min(BT, h.L - c0);
        o.assign(len * d.V, 0.0);
        chunk_step(h, c0, len, d.scale, S, o);
        for (int64_t i = 0; i < len; ++i) {
          const int64_t row = seqs[n].b * d.T + seqs[n].t0 + c0 + i;
          for (int64_t c = 0; c < d.V; ++c) out.o.set((row * d.HV + j) * d.V + c, o[i * d.V + c]);
        }
      }
      ref::detail::store_state(d, out.final_state, n, j, S.data());
    }
  }
  return out;
}

struct ChunkCase {
  const char* name;
  ChunkOp op;
  GateDist dist;
  double extreme;
  bool options;  // l2norm + gate + sigmoid(neg eigval) in kernel, state_v_first
};

void PrintTo(const ChunkCase& c, std::ostream* os) { *os << c.name; }

class RefChunked : public ::testing::TestWithParam<ChunkCase> {};

TEST_P(RefChunked, EqualsRecurrence) {
  const ChunkCase c = GetParam();
  for (int64_t BT : {16, 32, 64}) {
    ChunkAttnSpec s;
    s.opt.op = c.op;
    s.opt.output_final_state = true;
    s.opt.use_qk_l2norm_in_kernel = s.opt.use_gate_in_kernel = c.options;
    s.opt.use_beta_sigmoid_in_kernel = s.opt.allow_neg_eigval = c.options;
    s.opt.state_v_first = c.options;
    s.seqlens = edge_seqlens(BT);
    s.seqlens.push_back(3 * BT - 5);
    s.pad_tokens = 3;
    s.H = 1;
    s.HV = 3;
    s.K = 12;
    s.V = 7;
    s.gate = c.dist;
    s.extreme_gate_frac = c.extreme;
    s.seed = 100 + BT;
    s.all_dtypes(DType::kF64);
    const ChunkAttnData d = make_chunk_attn(s);
    const ChunkAttnOutTensors rec = ref_forward(d), chk = chunked_forward(d, BT);
    const Tolerance tol{1e-12, 0.0};
    const TensorView ro = narrow(rec.o.view(), 1, 0, d.valid_tokens);
    const TensorView co = narrow(chk.o.view(), 1, 0, d.valid_tokens);
    EXPECT_TRUE(tensors_close("o", ro, co, tol)) << "BT " << BT;
    EXPECT_TRUE(tensors_close("final_state", rec.final_state, chk.final_state, tol)) << "BT " << BT;
    EXPECT_TRUE(all_finite(co)) << "BT " << BT;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RefChunked,
    ::testing::Values(
        ChunkCase{"gdn", ChunkOp::kGdn, GateDist::kLogSigmoid, 0.0, false},
        ChunkCase{"gdn_mixed_heads", ChunkOp::kGdn, GateDist::kMixedHeads, 0.0, false},
        ChunkCase{"gdn_extreme", ChunkOp::kGdn, GateDist::kLogSigmoid, 0.05, false},
        ChunkCase{"gdn_options", ChunkOp::kGdn, GateDist::kLogSigmoid, 0.0, true},
        ChunkCase{"kda", ChunkOp::kKda, GateDist::kLogSigmoid, 0.0, false},
        ChunkCase{"kda_mixed_heads", ChunkOp::kKda, GateDist::kMixedHeads, 0.0, false},
        ChunkCase{"kda_extreme", ChunkOp::kKda, GateDist::kLogSigmoid, 0.1, false},
        ChunkCase{"kda_options", ChunkOp::kKda, GateDist::kLogSigmoid, 0.0, true}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace linattn::test
