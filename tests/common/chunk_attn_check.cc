// Reference results and standard comparisons for GDN / KDA tests (see chunk_attn_check.h).
#include "common/chunk_attn_check.h"

#include <string>

#include "common/compare.h"
#include "ref/chunk_attn_ref.h"

namespace linattn::test {

ChunkAttnOutTensors ref_forward(const ChunkAttnData& d) {
  // o must carry q's dtype; run the reference on fp64 copies of q/k/v when they are narrower.
  const ChunkAttnData d64 = d.spec.dtype == DType::kF64 ? d : with_qkv_dtype(d, DType::kF64);
  ChunkAttnOutTensors out = alloc_outputs(d64, DType::kF64, DType::kF64);
  ref::chunk_attn_fwd(d64.inputs(), out.views(), d64.opt());
  return out;
}

ChunkAttnGradTensors ref_backward(const ChunkAttnData& d, const ChunkAttnCotangents& c) {
  ChunkAttnGradTensors g = alloc_grads(d, DType::kF64, DType::kF64);
  ref::chunk_attn_bwd(d.inputs(), c.d_o.view(), c.d_final_state.view(), g.views(), d.opt());
  return g;
}

namespace {

// Per-token tensors are compared on their valid rows (dim 1 < valid_tokens).
TensorView valid_rows(const ChunkAttnData& d, const TensorView& t) {
  return d.cu_seqlens.defined() ? narrow(t, 1, 0, d.valid_tokens) : t;
}

void check_one(::testing::AssertionResult& res, bool& ok, const std::string& name,
               const TensorView& ref, const TensorView& got, const Tolerance& tol) {
  if (!got.defined()) return;
  if (!ref.defined()) {
    ok = false;
    res << name << ": no reference value\n";
    return;
  }
  const ::testing::AssertionResult r = tensors_close(name, ref, got, tol);
  if (!r) {
    ok = false;
    res << r.message() << "\n";
  }
}

}  // namespace

::testing::AssertionResult fwd_close(const ChunkAttnData& d, const ChunkAttnOutTensors& ref,
                                     const ChunkAttnOutTensors& got, DType input) {
  ::testing::AssertionResult res = ::testing::AssertionFailure();
  bool ok = true;
  check_one(res, ok, "o", valid_rows(d, ref.o), valid_rows(d, got.o), tolerance(input, Qty::kO));
  check_one(res, ok, "final_state", ref.final_state, got.final_state,
            tolerance(input, Qty::kFinalState));
  return ok ? ::testing::AssertionSuccess() : res;
}

::testing::AssertionResult bwd_close(const ChunkAttnData& d, const ChunkAttnGradTensors& ref,
                                     const ChunkAttnGradTensors& got, DType input) {
  ::testing::AssertionResult res = ::testing::AssertionFailure();
  bool ok = true;
  auto rows = [&](const Tensor& t) { return valid_rows(d, t.view()); };
  check_one(res, ok, "dq", rows(ref.dq), rows(got.dq), tolerance(input, Qty::kDq));
  check_one(res, ok, "dk", rows(ref.dk), rows(got.dk), tolerance(input, Qty::kDk));
  check_one(res, ok, "dv", rows(ref.dv), rows(got.dv), tolerance(input, Qty::kDv));
  check_one(res, ok, "dg", rows(ref.dg), rows(got.dg), tolerance(input, Qty::kDg));
  check_one(res, ok, "dbeta", rows(ref.dbeta), rows(got.dbeta), tolerance(input, Qty::kDbeta));
  check_one(res, ok, "dA_log", ref.dA_log, got.dA_log, tolerance(input, Qty::kDA_log));
  check_one(res, ok, "ddt_bias", ref.ddt_bias, got.ddt_bias,
            tolerance(input, d.kda() ? Qty::kDdt_bias : Qty::kDdt_bias_head));
  check_one(res, ok, "dinitial_state", ref.dinitial_state, got.dinitial_state,
            tolerance(input, Qty::kDh0));
  return ok ? ::testing::AssertionSuccess() : res;
}

}  // namespace linattn::test
