// Helpers of the CPU chunk-backward tests: run linattn::chunk_attn_bwd on generated inputs,
// compare against the fp64 reference, and compare two runs bit for bit.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>

#include "common/chunk_attn_check.h"
#include "common/chunk_attn_gen.h"
#include "common/compare.h"
#include "linattn/ops.h"

namespace linattn::test {

// Gradients written in the input dtype (dq..dbeta), fp32 for dA_log / ddt_bias / dh0.
inline ChunkAttnGradTensors cpu_backward(const ChunkAttnData& d, const ChunkAttnCotangents& c,
                                         int threads = 0, DType grad_dtype = DType::kF32,
                                         bool use_input_dtype = true) {
  ChunkAttnGradTensors g = alloc_grads(d, use_input_dtype ? d.spec.dtype : grad_dtype, DType::kF32);
  ExecContext ctx;
  ctx.num_threads = threads;
  chunk_attn_bwd(d.inputs(), c.d_o.view(), c.d_final_state.view(), g.views(), d.opt(), ctx);
  return g;
}

// The spec fields every CPU chunk test case sets the same way, from a test's Case struct (fields
// op, BT, dtype, H, HV, K, V, l2norm, gate, sigmoid, neg, vfirst, dist, extreme): neg takes the
// in-kernel beta sigmoid (it requires it); a lower bound is -5; bf16 / fp16 cases keep g in
// their dtype.
template <class Case>
void set_case_spec(ChunkAttnSpec& s, const Case& c, bool lower_bound, bool output_final_state) {
  s.opt.op = c.op;
  s.opt.chunk_size = c.BT;
  s.opt.use_qk_l2norm_in_kernel = c.l2norm;
  s.opt.use_gate_in_kernel = c.gate;
  s.opt.use_beta_sigmoid_in_kernel = c.sigmoid || c.neg;
  s.opt.allow_neg_eigval = c.neg;
  s.opt.state_v_first = c.vfirst;
  s.opt.has_lower_bound = lower_bound;
  s.opt.lower_bound = lower_bound ? -5.0 : 0.0;
  s.opt.output_final_state = output_final_state;
  s.H = c.H;
  s.HV = c.HV;
  s.K = c.K;
  s.V = c.V;
  s.dtype = c.dtype;
  s.gate_dtype = c.dtype == DType::kF32 ? DType::kF32 : c.dtype;
  s.gate = c.dist;
  s.extreme_gate_frac = c.extreme;
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  const TensorView& x = a.view();
  const TensorView& y = b.view();
  return x.nbytes() == y.nbytes() && std::memcmp(x.data, y.data, x.nbytes()) == 0;
}

inline ::testing::AssertionResult grads_bitwise_equal(const ChunkAttnGradTensors& a,
                                                      const ChunkAttnGradTensors& b) {
  const std::pair<const char*, std::pair<const Tensor*, const Tensor*>> all[] = {
      {"dq", {&a.dq, &b.dq}},         {"dk", {&a.dk, &b.dk}},
      {"dv", {&a.dv, &b.dv}},         {"dg", {&a.dg, &b.dg}},
      {"dbeta", {&a.dbeta, &b.dbeta}}, {"dA_log", {&a.dA_log, &b.dA_log}},
      {"ddt_bias", {&a.ddt_bias, &b.ddt_bias}},
      {"dinitial_state", {&a.dinitial_state, &b.dinitial_state}}};
  for (const auto& [name, t] : all)
    if (!same_bits(*t.first, *t.second)) return ::testing::AssertionFailure() << name << " differs bitwise";
  return ::testing::AssertionSuccess();
}

// Every element of rows [r0, T) (dim 1) of a [B, T, ...] tensor is exactly 0.
inline ::testing::AssertionResult rows_zero(const char* name, const Tensor& t, int64_t r0) {
  if (!t.defined()) return ::testing::AssertionSuccess();
  const int64_t T = t.shape()[1], inner = t.numel() / (t.shape()[0] * T);
  for (int64_t i = r0 * inner; i < T * inner; ++i)
    if (t.get(i) != 0.0)
      return ::testing::AssertionFailure() << name << ": padding element " << i << " = " << t.get(i);
  return ::testing::AssertionSuccess();
}

// ---- Fixed-capacity graph tests (GRAPH_CONTRACT.md section 8): content copied into static
// buffers with NaN garbage in the padding rows, forward + backward run as one unit.

// dst <- src byte for byte (same size).
inline void copy_into(Tensor& dst, const Tensor& src) {
  ASSERT_EQ(dst.view().nbytes(), src.view().nbytes());
  if (src.view().nbytes()) std::memcpy(dst.view().data, src.view().data, src.view().nbytes());
}

// NaN in rows [r0, T) of a [1, T, ...] float tensor.
inline void poison_rows(Tensor& t, int64_t r0) {
  if (!t.defined()) return;
  const int64_t T = t.shape()[1], inner = t.numel() / T;
  for (int64_t i = r0 * inner; i < T * inner; ++i) t.set(i, std::numeric_limits<double>::quiet_NaN());
}

// Outputs (input dtype, fp32 final state) and gradients (input dtype, fp32 dA_log / ddt_bias / dh0).
struct OpRun {
  ChunkAttnOutTensors out;
  ChunkAttnGradTensors grads;
};

inline OpRun alloc_run(const ChunkAttnData& d) {
  return {alloc_outputs(d, d.spec.dtype, DType::kF32), alloc_grads(d, d.spec.dtype, DType::kF32)};
}

inline void fwd_bwd(const ChunkAttnData& d, const ChunkAttnCotangents& c, const ChunkAttnOptions& opt, OpRun& r) {
  chunk_attn_fwd(d.inputs(), r.out.views(), opt);
  chunk_attn_bwd(d.inputs(), c.d_o.view(), c.d_final_state.view(), r.grads.views(), opt);
}

}  // namespace linattn::test
