// Helpers of the CUDA backward tests: NaN-filled device gradients, device cotangents, a direct
// call of the CUDA backward with a forced path (token-by-token or chunked, optional V-slice), and
// the checks shared by the backward tests (padding rows zero, bitwise equality, zero-length
// sequences, finiteness, the public op with and without a workspace).
#pragma once
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/compare.h"
#include "cuda_fwd_util.h"
#include "cuda_test_util.h"
#include "linattn/error.h"
#include "meta/chunk_attn_desc.h"

namespace linattn::test {

// One backward test case: inputs, the per-token gradient dtype, the cotangent dtype, and whether a
// d_final_state is passed.
struct BwdCase {
  std::string name;
  ChunkAttnSpec spec;
  DType grad_dtype;  // per-token gradients
  DType cot_dtype;   // d_o, d_final_state
  bool dht = true;
};

// The KDA backward cases the token-path and chunked tests share: gate in kernel (softplus form) with
// every layer option and GVA 2; lower_bound -5 + safe_gate on varlen edge lengths with padding and
// int64 cu_seqlens; lower_bound -3 without A_log, GVA 3, a zero-length sequence; -1000 gates mixed
// with strong decays, no h0; clamped -5 safe gates with strong decays.
inline std::vector<BwdCase> kda_bwd_cases(DType dt, int bt) {
  auto base = [&] { return fwd_base_spec(dt, bt, ChunkOp::kKda); };
  std::vector<BwdCase> r;
  {
    ChunkAttnSpec s = base();
    s.opt.use_qk_l2norm_in_kernel = true;
    s.opt.use_gate_in_kernel = true;
    s.opt.use_beta_sigmoid_in_kernel = true;
    s.opt.state_v_first = true;
    r.push_back({"gate_in_kernel_softplus_dense_gva2", s, DType::kF32, dt});
  }
  {
    ChunkAttnSpec s = base();
    s.seqlens = edge_seqlens(bt);
    s.pad_tokens = 7;
    s.cu_dtype = DType::kI64;
    s.opt.use_gate_in_kernel = true;
    s.opt.has_lower_bound = true;
    s.opt.lower_bound = -5.0;
    s.opt.safe_gate = true;
    s.dt_bias_2d = true;
    s.opt.scale = 0.37;
    r.push_back({"lower_bound_-5_safe_gate_varlen_edges", s, dt, DType::kF32});
  }
  {
    ChunkAttnSpec s = base();
    s.seqlens = {300, 0, 5, 64, 129};
    s.pad_tokens = 3;
    s.H = 1;
    s.HV = 3;
    s.opt.use_gate_in_kernel = true;
    s.opt.has_lower_bound = true;
    s.opt.lower_bound = -3.0;
    s.has_A_log = false;
    s.opt.use_qk_l2norm_in_kernel = true;
    r.push_back({"lower_bound_no_A_log_varlen_gva3", s, DType::kF32, dt});
  }
  {
    ChunkAttnSpec s = base();
    s.seqlens = {200, 1, 77};
    s.pad_tokens = 2;
    s.has_h0 = false;
    s.gate = GateDist::kMixedHeads;
    s.extreme_gate_frac = 0.05;
    r.push_back({"gates_-1000_strong_mixed_no_h0", s, dt, dt});
  }
  {
    ChunkAttnSpec s = base();
    s.gate = GateDist::kStrong;
    s.extreme_gate_frac = 0.02;
    s.opt.has_lower_bound = true;
    s.opt.lower_bound = -5.0;
    s.opt.safe_gate = true;
    s.opt.state_v_first = true;
    r.push_back({"safe_gate_clamped_-5_strong", s, DType::kF32, DType::kF32});
  }
  return r;
}

struct DevGrads {
  DevArena arena;
  ChunkAttnGrads g;
  TensorView d_o, dht;
};

inline std::unique_ptr<DevGrads> grads_to_device(const ChunkAttnGradTensors& h, const ChunkAttnCotangents& c) {
  auto r = std::make_unique<DevGrads>();
  r->g.dq = r->arena.upload(h.dq);
  r->g.dk = r->arena.upload(h.dk);
  r->g.dv = r->arena.upload(h.dv);
  r->g.dg = r->arena.upload(h.dg);
  r->g.dbeta = r->arena.upload(h.dbeta);
  r->g.dA_log = r->arena.upload(h.dA_log);
  r->g.ddt_bias = r->arena.upload(h.ddt_bias);
  r->g.dinitial_state = r->arena.upload(h.dinitial_state);
  r->d_o = r->arena.upload(c.d_o);
  r->dht = r->arena.upload(c.d_final_state);
  return r;
}

inline ChunkAttnGradTensors grads_to_host(const ChunkAttnGrads& g) {
  ChunkAttnGradTensors r;
  r.dq = download(g.dq);
  r.dk = download(g.dk);
  r.dv = download(g.dv);
  r.dg = download(g.dg);
  r.dbeta = download(g.dbeta);
  r.dA_log = download(g.dA_log);
  r.ddt_bias = download(g.ddt_bias);
  r.dinitial_state = download(g.dinitial_state);
  return r;
}

// CUDA backward of d with cotangents c; per-token gradients in grad_dtype, the rest fp32.
inline ChunkAttnGradTensors run_cuda_bwd(const ChunkAttnData& d, const ChunkAttnCotangents& c, DType grad_dtype,
                                         api::CudaGdnPath path, int vs = 0) {
  auto dev = to_device(d);
  auto dg = grads_to_device(alloc_grads(d, grad_dtype, DType::kF32), c);
  const meta::ChunkAttnDesc desc = meta::describe_chunk_attn(dev->in, d.opt());
  api::chunk_attn_bwd_cuda_forced(desc, dev->in, dg->d_o, dg->dht, dg->g, d.opt(), ExecContext{}, path, vs);
  return grads_to_host(dg->g);
}

// One case's inputs and seeded cotangents (seed * 31 + 7; d_final_state where the case passes one and the
// forward outputs a final state), for runs of the chunked backward under several switch values.
struct BwdInputs {
  ChunkAttnData d;
  ChunkAttnCotangents cot;
  DType grad_dtype;
};

inline BwdInputs bwd_inputs(const BwdCase& c) {
  BwdInputs in{make_chunk_attn(c.spec), {}, c.grad_dtype};
  Rng rng(c.spec.seed * 31 + 7);
  in.cot = random_cotangents(in.d, rng, c.cot_dtype, c.dht && c.spec.opt.output_final_state);
  return in;
}

// The chunked backward of `in` with the switch `env` at `value` for the call (the old value restored after).
inline ChunkAttnGradTensors bwd_with_env(const BwdInputs& in, const char* env, const char* value) {
  ScopedEnv e(env, value);
  return run_cuda_bwd(in.d, in.cot, in.grad_dtype, api::CudaGdnPath::kChunked);
}

// Gradient tensors by name (dinitial_state as dh0), for checks over all of them.
inline std::vector<std::pair<const char*, const Tensor*>> named_grads(const ChunkAttnGradTensors& g) {
  return {{"dq", &g.dq},         {"dk", &g.dk},     {"dv", &g.dv},
          {"dg", &g.dg},         {"dbeta", &g.dbeta}, {"dA_log", &g.dA_log},
          {"ddt_bias", &g.ddt_bias}, {"dh0", &g.dinitial_state}};
}

// No gradient element is NaN or infinite.
inline ::testing::AssertionResult grads_finite(const ChunkAttnGradTensors& g) {
  for (const auto& [name, t] : named_grads(g)) {
    if (!t->defined()) continue;
    for (int64_t i = 0; i < t->numel(); ++i) {
      const double x = t->get(i);
      if (!std::isfinite(x)) return ::testing::AssertionFailure() << name << "[" << i << "] = " << x;
    }
  }
  return ::testing::AssertionSuccess();
}

// Zero-length sequences: dh0 equals d_final_state (0 without it) exactly.
inline void check_zero_length_dh0(const ChunkAttnData& d, const ChunkAttnCotangents& c,
                                  const ChunkAttnGradTensors& g) {
  if (!d.cu_seqlens.defined() || !g.dinitial_state.defined()) return;
  const int64_t per = g.dinitial_state.numel() / d.N;
  for (int64_t n = 0; n < d.N; ++n) {
    if (d.cu_seqlens.get(n + 1) != d.cu_seqlens.get(n)) continue;
    for (int64_t i = n * per; i < (n + 1) * per; ++i) {
      const double want = c.d_final_state.defined() ? c.d_final_state.get(i) : 0.0;
      ASSERT_EQ(g.dinitial_state.get(i), want) << "zero-length sequence " << n << " element " << i;
    }
  }
}

// Every element of rows [r0, T) (dim 1) of a [B, T, ...] tensor is exactly 0.
inline ::testing::AssertionResult padding_zero(const char* name, const Tensor& t, int64_t r0) {
  if (!t.defined()) return ::testing::AssertionSuccess();
  const int64_t T = t.shape()[1], inner = t.numel() / (t.shape()[0] * T);
  for (int64_t i = r0 * inner; i < T * inner; ++i)
    if (t.get(i) != 0.0)
      return ::testing::AssertionFailure() << name << ": padding element " << i << " = " << t.get(i);
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult grads_padding_zero(const ChunkAttnData& d, const ChunkAttnGradTensors& g) {
  if (!d.cu_seqlens.defined()) return ::testing::AssertionSuccess();
  for (const auto& [name, t] : {std::pair{"dq", &g.dq}, {"dk", &g.dk}, {"dv", &g.dv}, {"dg", &g.dg},
                                {"dbeta", &g.dbeta}}) {
    const ::testing::AssertionResult r = padding_zero(name, *t, d.valid_tokens);
    if (!r) return r;
  }
  return ::testing::AssertionSuccess();
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.view().nbytes() == b.view().nbytes() &&
         std::memcmp(a.view().data, b.view().data, a.view().nbytes()) == 0;
}

inline ::testing::AssertionResult grads_bitwise(const ChunkAttnGradTensors& a, const ChunkAttnGradTensors& b) {
  const auto na = named_grads(a), nb = named_grads(b);
  for (size_t i = 0; i < na.size(); ++i)
    if (!same_bits(*na[i].second, *nb[i].second))
      return ::testing::AssertionFailure() << na[i].first << " differs bitwise";
  return ::testing::AssertionSuccess();
}

// The gradients `got` of `in`: within the fp64 reference `ref`'s bars, padding rows zero, finite, d_final_state
// passed to dh0 for zero-length sequences.
// Two backward runs of a case on the same inputs and cotangents (from Rng(seed)) give the same bits.
inline void expect_bwd_deterministic(const BwdCase& c, uint64_t seed,
                                     api::CudaGdnPath path = api::CudaGdnPath::kChunked) {
  const ChunkAttnData d = make_chunk_attn(c.spec);
  Rng rng(seed);
  const ChunkAttnCotangents cot = random_cotangents(d, rng, c.cot_dtype, true);
  const ChunkAttnGradTensors a = run_cuda_bwd(d, cot, c.grad_dtype, path);
  const ChunkAttnGradTensors b = run_cuda_bwd(d, cot, c.grad_dtype, path);
  EXPECT_TRUE(grads_bitwise(a, b));
}

inline void check_bwd_grads(const BwdInputs& in, const ChunkAttnGradTensors& ref, const ChunkAttnGradTensors& got,
                            const std::string& what = "") {
  EXPECT_TRUE(bwd_close(in.d, ref, got, in.d.spec.dtype)) << what;
  EXPECT_TRUE(grads_padding_zero(in.d, got));
  EXPECT_TRUE(grads_finite(got));
  check_zero_length_dh0(in.d, in.cot, got);
}

// The public op and its workspace query on CUDA tensors: a caller workspace and library-allocated
// scratch give the same bits and match the reference; in graph mode a short workspace is an
// address-or-lifetime error.
inline void check_public_op_workspace(const ChunkAttnData& d, const ChunkAttnCotangents& cot, DType grad_dtype) {
  auto dev = to_device(d);
  const size_t bytes = chunk_attn_bwd_workspace_bytes(dev->in, d.opt());
  EXPECT_GT(bytes, 0u);
  auto g1 = grads_to_device(alloc_grads(d, grad_dtype, DType::kF32), cot);
  auto g2 = grads_to_device(alloc_grads(d, grad_dtype, DType::kF32), cot);
  DevArena ws;
  const TensorView w = ws.alloc(DType::kI32, {static_cast<int64_t>(bytes / 4 + 1)});
  chunk_attn_bwd(dev->in, g1->d_o, g1->dht, g1->g, d.opt(), ExecContext{nullptr, w.data, bytes});
  chunk_attn_bwd(dev->in, g2->d_o, g2->dht, g2->g, d.opt(), ExecContext{});
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const ChunkAttnGradTensors a = grads_to_host(g1->g), b = grads_to_host(g2->g);
  EXPECT_TRUE(grads_bitwise(a, b));
  EXPECT_TRUE(bwd_close(d, ref_backward(d, cot), a, d.spec.dtype));
  ChunkAttnOptions gopt = d.opt();
  gopt.use_graph = true;
  gopt.max_num_seqs = d.N;
  const meta::ChunkAttnDesc gdesc = meta::describe_chunk_attn(dev->in, gopt);
  try {
    api::chunk_attn_bwd_cuda(gdesc, dev->in, g1->d_o, g1->dht, g1->g, gopt, ExecContext{nullptr, w.data, 1024});
    FAIL() << "a short workspace was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), FailureCategory::kAddressOrLifetime) << e.what();
  }
}

// check_public_op_workspace on `s` as varlen {100, 0, 37} with the in-kernel l2norm, bf16 gradients.
inline void check_public_op_varlen(ChunkAttnSpec s) {
  s.seqlens = {100, 0, 37};
  s.opt.use_qk_l2norm_in_kernel = true;
  const ChunkAttnData d = make_chunk_attn(s);
  Rng rng(9);
  check_public_op_workspace(d, random_cotangents(d, rng, DType::kBF16, true), DType::kBF16);
}

// The forced chunked path throws for `s` (a shape or gate it does not take).
inline void expect_chunked_refused(const ChunkAttnSpec& s) {
  const ChunkAttnData d = make_chunk_attn(s);
  Rng rng(3);
  const ChunkAttnCotangents cot = random_cotangents(d, rng, DType::kBF16, true);
  EXPECT_THROW(run_cuda_bwd(d, cot, DType::kF32, api::CudaGdnPath::kChunked), Error);
}

// Every gradient of `b` within half of its reference bar of `a` (valid rows of per-token ones);
// `ddt_bias_qty` picks the ddt_bias bar (GDN: Qty::kDdt_bias_head, KDA: Qty::kDdt_bias).
inline ::testing::AssertionResult grads_agree(const ChunkAttnData& d, const ChunkAttnGradTensors& a,
                                              const ChunkAttnGradTensors& b, DType input, Qty ddt_bias_qty) {
  const std::vector<std::pair<const char*, Qty>> qty = {
      {"dq", Qty::kDq}, {"dk", Qty::kDk}, {"dv", Qty::kDv}, {"dg", Qty::kDg}, {"dbeta", Qty::kDbeta},
      {"dA_log", Qty::kDA_log}, {"ddt_bias", ddt_bias_qty}, {"dh0", Qty::kDh0}};
  const auto ga = named_grads(a), gb = named_grads(b);
  ::testing::AssertionResult res = ::testing::AssertionFailure();
  bool ok = true;
  for (size_t i = 0; i < ga.size(); ++i) {
    const Tensor& x = *ga[i].second;
    const Tensor& y = *gb[i].second;
    if (!x.defined() || !y.defined()) continue;
    const std::string n = ga[i].first;
    Tolerance tol{0.01, 0.0};
    for (const auto& [name, q] : qty)
      if (name == n) tol = tolerance(input, q);
    tol.rel_rms *= 0.5;
    tol.atol *= 0.5;
    const bool per_token = n != "dA_log" && n != "ddt_bias" && n != "dh0";
    const TensorView xv = per_token && d.cu_seqlens.defined() ? narrow(x.view(), 1, 0, d.valid_tokens) : x.view();
    const TensorView yv = per_token && d.cu_seqlens.defined() ? narrow(y.view(), 1, 0, d.valid_tokens) : y.view();
    const ::testing::AssertionResult r = tensors_close(ga[i].first, xv, yv, tol);
    if (!r) {
      ok = false;
      res << r.message() << "\n";
    }
  }
  return ok ? ::testing::AssertionSuccess() : res;
}

}  // namespace linattn::test
