// Shared setup of the CUDA forward tests (GDN and KDA; the backward tests start from the same base
// shape): the base shape every case starts from
// (H = 2, HV = 4, K = V = 128, B = 2, T = 150, final state on), the case lists' common specs, the
// padding check of o (NaN-prefilled outputs: padding rows must stay untouched) and one case run
// against the fp64 reference through a forced CUDA path.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "common/compare.h"
#include "cuda_test_util.h"

namespace linattn::test {

struct FwdCase {
  std::string name;
  ChunkAttnSpec spec;
};

inline ChunkAttnSpec fwd_base_spec(DType dt, int bt, ChunkOp op = ChunkOp::kGdn) {
  ChunkAttnSpec s;
  s.opt.op = op;
  s.dtype = dt;
  s.H = 2;
  s.HV = 4;
  s.K = 128;
  s.V = 128;
  s.B = 2;
  s.T = 150;
  s.opt.chunk_size = bt;
  s.opt.output_final_state = true;
  return s;
}

// The FLA layer's options: in-kernel l2norm, gate and beta sigmoid, [V, K] states.
inline ChunkAttnSpec layer_options_spec(DType dt, int bt, ChunkOp op) {
  ChunkAttnSpec s = fwd_base_spec(dt, bt, op);
  s.opt.use_qk_l2norm_in_kernel = true;
  s.opt.use_gate_in_kernel = true;
  s.opt.use_beta_sigmoid_in_kernel = true;
  s.opt.state_v_first = true;
  return s;
}

// Varlen with lengths 0, 1, BT-1, BT, BT+1, 2BT+3, padding rows, int64 cu_seqlens, mixed decays.
inline ChunkAttnSpec varlen_edges_spec(DType dt, int bt, ChunkOp op) {
  ChunkAttnSpec s = fwd_base_spec(dt, bt, op);
  s.seqlens = edge_seqlens(bt);
  s.pad_tokens = 7;
  s.cu_dtype = DType::kI64;
  s.gate = GateDist::kMixedHeads;
  s.opt.scale = 0.37;
  return s;
}

// Strong decays with 5% of the gates at -1000, a zero-length sequence, no h0, GVA 3.
inline ChunkAttnSpec varlen_strong_spec(DType dt, int bt, ChunkOp op) {
  ChunkAttnSpec s = fwd_base_spec(dt, bt, op);
  s.seqlens = {300, 0, 5, 64, 129};
  s.has_h0 = false;
  s.gate = GateDist::kStrong;
  s.extreme_gate_frac = 0.05;
  s.H = 1;
  s.HV = 3;
  return s;
}

// GDN: negative eigenvalues, no decay, in-kernel l2norm and beta sigmoid, V 64, one sequence of 257, bf16
// gates and state.
inline ChunkAttnSpec neg_eigval_no_decay_v64_spec(DType dt, int bt) {
  ChunkAttnSpec s = fwd_base_spec(dt, bt);
  s.opt.use_beta_sigmoid_in_kernel = true;
  s.opt.allow_neg_eigval = true;
  s.opt.use_qk_l2norm_in_kernel = true;
  s.gate = GateDist::kNoDecay;
  s.V = 64;
  s.T = 257;
  s.B = 1;
  s.gate_dtype = DType::kBF16;
  s.state_dtype = DType::kBF16;
  return s;
}

// The GDN forward cases (test_cuda_gdn_fwd, test_cuda_gdn_prep): the layer options, varlen edges, strong
// decays with -1000 gates and GVA 3, negative eigenvalues with bf16 gates and V 64, V 256 without ht.
inline std::vector<FwdCase> gdn_fwd_cases(DType dt, int bt) {
  std::vector<FwdCase> r;
  r.push_back({"layer_options_dense", layer_options_spec(dt, bt, ChunkOp::kGdn)});
  r.push_back({"varlen_edges_mixed_decay", varlen_edges_spec(dt, bt, ChunkOp::kGdn)});
  r.push_back({"varlen_strong_decay_no_h0_gva3", varlen_strong_spec(dt, bt, ChunkOp::kGdn)});
  r.push_back({"neg_eigval_no_decay_v64_bf16_gates", neg_eigval_no_decay_v64_spec(dt, bt)});
  ChunkAttnSpec l = fwd_base_spec(dt, bt);
  l.V = 256;
  l.H = l.HV = l.B = 1;
  l.T = 1000;
  l.opt.output_final_state = false;
  r.push_back({"long_v256_no_ht", l});
  return r;
}

// The name suffix of a (dtype, chunk size) parameter: "bf16_bt64".
inline std::string dtype_bt_name(const ::testing::TestParamInfo<std::tuple<DType, int>>& info) {
  return std::string(dtype_name(std::get<0>(info.param))) + "_bt" + std::to_string(std::get<1>(info.param));
}

// The chunked forward of d with the switch `env` at `value` for the call (the old value restored after).
inline ChunkAttnOutTensors fwd_with_env(const ChunkAttnData& d, const char* env, const char* value, int vs) {
  ScopedEnv e(env, value);
  return run_cuda_fwd(d, api::CudaGdnPath::kChunked, vs);
}

// o (valid rows only: padding rows stay NaN in both) and, where `want` has one, the final state of `got`
// within `tol` of `want`; `what` follows "o" / "final_state" in the messages.
inline void expect_outputs_close(const ChunkAttnData& d, const ChunkAttnOutTensors& want,
                                 const ChunkAttnOutTensors& got, Tolerance tol, const std::string& what = "") {
  const bool var = d.cu_seqlens.defined();
  auto valid = [&](const Tensor& o) { return var ? narrow(o.view(), 1, 0, d.valid_tokens) : o.view(); };
  EXPECT_TRUE(tensors_close("o" + what, valid(want.o), valid(got.o), tol));
  if (want.final_state.defined()) {
    EXPECT_TRUE(tensors_close("final_state" + what, want.final_state, got.final_state, tol));
  }
}

// For every case: the chunked forward with the switches as they stand (`got`) within `tol` of the one with
// `env` at `value` (`want`), whose run must not launch the instance `launches` counts (else `ran_msg`).
inline void expect_cases_close_with_env(const std::vector<FwdCase>& cases, int vs, const char* env, const char* value,
                                        int64_t (*launches)(), const char* ran_msg, Tolerance tol) {
  for (const FwdCase& c : cases) {
    SCOPED_TRACE(c.name);
    const ChunkAttnData d = make_chunk_attn(c.spec);
    const ChunkAttnOutTensors got = run_cuda_fwd(d, api::CudaGdnPath::kChunked, vs);
    const int64_t before = launches();
    const ChunkAttnOutTensors want = fwd_with_env(d, env, value, vs);
    EXPECT_EQ(launches(), before) << ran_msg;
    expect_outputs_close(d, want, got, tol);
  }
}

inline void check_padding_untouched(const ChunkAttnData& d, const ChunkAttnOutTensors& got) {
  if (!d.cu_seqlens.defined()) return;
  const int64_t row = d.spec.HV * d.spec.V;
  for (int64_t t = d.valid_tokens; t < d.spec.T; ++t)
    for (int64_t i = 0; i < row; ++i)
      ASSERT_TRUE(std::isnan(got.o.get(t * row + i))) << "padding row " << t << " of o was written";
}

// Every output element finite (NaN-prefilled outputs: also catches unwritten elements).
inline ::testing::AssertionResult all_finite(const ChunkAttnData& d, const ChunkAttnOutTensors& got) {
  const int64_t end = d.cu_seqlens.defined() ? d.valid_tokens * d.spec.HV * d.spec.V : got.o.numel();
  for (int64_t i = 0; i < end; ++i)
    if (!std::isfinite(got.o.get(i))) return ::testing::AssertionFailure() << "o[" << i << "] = " << got.o.get(i);
  if (got.final_state.defined())
    for (int64_t i = 0; i < got.final_state.numel(); ++i)
      if (!std::isfinite(got.final_state.get(i)))
        return ::testing::AssertionFailure() << "final_state[" << i << "] = " << got.final_state.get(i);
  return ::testing::AssertionSuccess();
}

inline void run_fwd_case(const FwdCase& c, api::CudaGdnPath path, int vs) {
  SCOPED_TRACE(c.name + " vs=" + std::to_string(vs));
  const ChunkAttnData d = make_chunk_attn(c.spec);
  const ChunkAttnOutTensors ref = ref_forward(d);
  const ChunkAttnOutTensors got = run_cuda_fwd(d, path, vs);
  EXPECT_TRUE(fwd_close(d, ref, got, c.spec.dtype));
  EXPECT_TRUE(all_finite(d, got));
  check_padding_untouched(d, got);
}

}  // namespace linattn::test
