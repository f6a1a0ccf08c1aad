// Shared setup of the CUDA forward tests (GDN and KDA; the backward tests start from the same base
// shape): the base shape every case starts from
// (H = 2, HV = 4, K = V = 128, B = 2, T = 150, final state on), the case lists' common specs, the
// padding check of o (NaN-prefilled outputs: padding rows must stay untouched) and one case run
// against the fp64 reference through a forced CUDA path.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

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
