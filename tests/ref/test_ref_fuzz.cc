// Seeded fuzz of the reference's argument handling: random shapes (each dim occasionally off by
// one, ranks occasionally wrong), dtypes, options, optional tensors and cu_seqlens contents (valid
// layouts with zero-length sequences, or corrupted). Every call must either succeed, writing every
// valid row of o with finite values, or throw linattn::Error. Anything else (another exception, a
// crash, an out-of-bounds read caught by the ASan run) fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "common/chunk_attn_gen.h"
#include "common/compare.h"
#include "linattn/error.h"
#include "ref/chunk_attn_ref.h"

namespace linattn::test {
namespace {

struct Fuzzer {
  Rng rng;
  double p_dim = 0.02, p_dtype = 0.02;

  std::vector<int64_t> shape(std::vector<int64_t> s) {
    for (auto& x : s)
      if (rng.bernoulli(p_dim)) x = std::max<int64_t>(0, x + (rng.bernoulli(0.5) ? 1 : -1));
    if (rng.bernoulli(p_dim)) {
      if (rng.bernoulli(0.5) && s.size() > 1)
        s.pop_back();
      else if (s.size() < 5)
        s.push_back(1);
    }
    return s;
  }
  DType dtype(DType good) {
    if (!rng.bernoulli(p_dtype)) return good;
    const DType all[] = {DType::kF32, DType::kF16, DType::kBF16,
                         DType::kI32, DType::kI64, DType::kF64};
    return all[rng.integer(0, 5)];
  }
  Tensor tensor(DType good, std::vector<int64_t> s) {
    return randn(rng, dtype(good), shape(std::move(s)));
  }
  bool flip(bool b, double p = 0.03) { return rng.bernoulli(p) ? !b : b; }
};

TEST(RefFuzz, PassesOrThrowsError) {
  const bool sanitized = std::getenv("LINATTN_SANITIZED") != nullptr;
  const int iters = sanitized ? 1500 : 4000;
  Fuzzer f{Rng(20240601)};
  int passed = 0, threw = 0;
  for (int it = 0; it < iters; ++it) {
    Rng& r = f.rng;
    ChunkAttnOptions opt;
    opt.op = r.bernoulli(0.5) ? ChunkOp::kGdn : ChunkOp::kKda;
    const bool kda = opt.op == ChunkOp::kKda;
    const bool varlen = r.bernoulli(0.5);
    const int64_t H = r.integer(1, 3), HV = H * r.integer(1, 3), K = r.integer(1, 5),
                  V = r.integer(1, 4);
    int64_t B = varlen ? (r.bernoulli(0.95) ? 1 : 2) : r.integer(0, 3), T = r.integer(0, 7);
    int64_t N = B;
    Tensor cu;
    if (varlen) {
      N = r.integer(1, 4);
      const int64_t used = r.integer(0, T);
      cu = cu_seqlens_tensor(random_seqlens(r, N, used, 0.3),
                             r.bernoulli(0.5) ? DType::kI32 : DType::kI64);
      if (r.bernoulli(0.1)) cu.set(r.integer(0, N), static_cast<double>(r.integer(-2, T + 3)));
      if (r.bernoulli(0.02)) cu = cu.to(DType::kF32);
    }
    opt.chunk_size = r.bernoulli(0.97) ? static_cast<int>(16 << r.integer(0, 2))
                                       : static_cast<int>(r.integer(0, 100));
    opt.scale = r.bernoulli(0.5) ? 0.0 : r.uniform(-0.1, 2.0);
    opt.use_qk_l2norm_in_kernel = r.bernoulli(0.3);
    opt.use_gate_in_kernel = r.bernoulli(0.3);
    opt.use_beta_sigmoid_in_kernel = r.bernoulli(0.3);
    opt.allow_neg_eigval = f.flip(opt.use_beta_sigmoid_in_kernel && r.bernoulli(0.5));
    opt.state_v_first = r.bernoulli(0.3);
    opt.has_lower_bound = f.flip(kda && r.bernoulli(0.3));
    opt.lower_bound = r.uniform(-6.0, 0.5);
    opt.safe_gate = f.flip(opt.has_lower_bound && r.bernoulli(0.3));
    opt.output_final_state = r.bernoulli(0.5);
    const bool h0 = r.bernoulli(0.5);
    const std::vector<int64_t> st =
        opt.state_v_first ? std::vector<int64_t>{N, HV, V, K} : std::vector<int64_t>{N, HV, K, V};
    const DType dt = r.bernoulli(0.5) ? DType::kF32 : DType::kBF16;
    std::vector<int64_t> gshape = {B, T, HV};
    if (kda) gshape.push_back(K);
    const Tensor q = f.tensor(dt, {B, T, H, K}), k = f.tensor(dt, {B, T, H, K});
    const Tensor v = f.tensor(dt, {B, T, HV, V}), g = f.tensor(DType::kF32, gshape);
    const Tensor beta = f.tensor(DType::kF32, {B, T, HV});
    const Tensor A_log = f.flip(opt.use_gate_in_kernel) ? f.tensor(DType::kF32, {HV}) : Tensor();
    const Tensor dt_bias =
        f.flip(opt.use_gate_in_kernel && r.bernoulli(0.7))
            ? f.tensor(DType::kF32, kda ? std::vector<int64_t>{HV * K} : std::vector<int64_t>{HV})
            : Tensor();
    const Tensor h0t = f.flip(h0) ? f.tensor(DType::kF32, st) : Tensor();
    ChunkAttnInputs in{q, k, v, g, beta, A_log, dt_bias, h0t, cu, {}, {}};
    Tensor o = nan_tensor(f.dtype(dt), f.shape({B, T, HV, V}));
    Tensor ht =
        f.flip(opt.output_final_state) ? nan_tensor(f.dtype(DType::kF32), f.shape(st)) : Tensor();
    try {
      ref::chunk_attn_fwd(in, {o, ht}, opt);
    } catch (const Error&) {
      ++threw;
      continue;
    } catch (...) {
      FAIL() << "iteration " << it << ": an exception other than linattn::Error";
    }
    ++passed;
    const int64_t valid = varlen ? static_cast<int64_t>(cu.get(N)) : T;
    ASSERT_TRUE(all_finite(narrow(o.view(), 1, 0, valid))) << "iteration " << it;
    // Backward with a random subset of gradients.
    const Tensor d_o = f.tensor(DType::kF32, {B, T, HV, V});
    const Tensor d_ht = r.bernoulli(0.5) ? f.tensor(DType::kF32, st) : Tensor();
    auto maybe = [&](const Tensor& like) {
      return like.defined() && r.bernoulli(0.7) ? f.tensor(DType::kF32, like.shape()) : Tensor();
    };
    const Tensor dq = maybe(q), dk = maybe(k), dv = maybe(v), dg = maybe(g), db = maybe(beta);
    const Tensor dA = maybe(A_log), ddt = maybe(dt_bias), dh0 = maybe(h0t);
    try {
      ref::chunk_attn_bwd(in, d_o, d_ht, {dq, dk, dv, dg, db, dA, ddt, dh0}, opt);
    } catch (const Error&) {
      continue;
    } catch (...) {
      FAIL() << "iteration " << it << ": backward threw an exception other than linattn::Error";
    }
  }
  EXPECT_GT(passed, iters / 10) << "fuzz too hostile to exercise the valid paths";
  EXPECT_GT(threw, iters / 10) << "fuzz too gentle to exercise validation";
}

}  // namespace
}  // namespace linattn::test
