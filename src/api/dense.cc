// Bodies of the dense helper ops (dense.h): validate, then run on the CPU (recorded when a CPU
// graph capture is active). CUDA versions raise Unsupported until the CUDA dense kernels land.
#include "linattn/dense.h"

#include "core/capture.h"
#include "core/check.h"
#include "cpu/dense_cpu.h"
#include "meta/chunk_attn_desc.h"

namespace linattn {

namespace {

void require_cpu(const TensorView& t, const char* op, const char* name) {
  if (t.device.type != DeviceType::kCPU)
    LINATTN_UNSUPPORTED(op, ": ", name, " on ", device_name(t.device),
                        ": the CUDA version of this op is not built yet");
}

void check_2d(const TensorView& t, const char* name, Device dev) {
  meta::expect_rank(t, name, 2);
  meta::expect_device(t, name, dev);
  meta::expect_contiguous(t, name);
}

}  // namespace

void gemm(const TensorView& a, bool trans_a, const TensorView& b, bool trans_b, const TensorView& c,
          float alpha, float beta, const ExecContext& ctx) {
  check_2d(a, "a", a.device);
  check_2d(b, "b", a.device);
  check_2d(c, "c", a.device);
  const int64_t M = trans_a ? a.shape[1] : a.shape[0], K = trans_a ? a.shape[0] : a.shape[1];
  const int64_t Kb = trans_b ? b.shape[1] : b.shape[0], N = trans_b ? b.shape[0] : b.shape[1];
  LINATTN_CHECK(K == Kb, "b: inner dimension expected ", K, " (from a ", a.shape_str(), trans_a ? "^T" : "",
                "), got ", Kb, " (b ", b.shape_str(), trans_b ? "^T" : "", ")");
  LINATTN_CHECK(c.shape[0] == M && c.shape[1] == N, "c: expected shape [", M, ", ", N, "], got ", c.shape_str());
  require_cpu(a, "gemm", "a");
  for (const auto* t : {&a, &b, &c})
    LINATTN_CHECK(t->dtype == DType::kF32, "gemm: expected fp32 tensors on the CPU backend, got ",
                  dtype_name(t->dtype));
  const float *pa = a.ptr<float>(), *pb = b.ptr<float>();
  float* pc = c.ptr<float>();
  const int64_t lda = a.shape[1], ldb = b.shape[1], ldc = c.shape[1];
  run_or_record("gemm", [=] { cpu::sgemm(trans_a, trans_b, M, N, K, alpha, pa, lda, pb, ldb, beta, pc, ldc); });
  (void)ctx;
}

static cpu::RmsNormParams norm_params(const TensorView& x, const TensorView& g, const TensorView& w,
                                      NormGate act, float eps) {
  check_2d(x, "x", x.device);
  meta::expect_dtype_float(x, "x");
  meta::expect_rank(g, "g", 2);
  meta::expect_dim(g, "g", 0, x.shape[0]);
  meta::expect_dim(g, "g", 1, x.shape[1]);
  meta::expect_contiguous(g, "g");
  meta::expect_device(g, "g", x.device);
  meta::expect_dtype_float(g, "g");
  meta::expect_rank(w, "w", 1);
  meta::expect_dim(w, "w", 0, x.shape[1]);
  meta::expect_dtype(w, "w", DType::kF32);
  meta::expect_device(w, "w", x.device);
  LINATTN_CHECK(eps > 0.0f, "eps: expected > 0, got ", eps);
  require_cpu(x, "rms_norm_gated", "x");
  return {x.data, g.data, w.ptr<float>(), x.dtype, g.dtype, x.shape[0], x.shape[1],
          act == NormGate::kSigmoid, eps};
}

static void check_like(const TensorView& t, const TensorView& x, const char* name) {
  meta::expect_rank(t, name, 2);
  meta::expect_dim(t, name, 0, x.shape[0]);
  meta::expect_dim(t, name, 1, x.shape[1]);
  meta::expect_contiguous(t, name);
  meta::expect_device(t, name, x.device);
  meta::expect_dtype_float(t, name);
}

void rms_norm_gated_fwd(const TensorView& x, const TensorView& g, const TensorView& w, const TensorView& y,
                        const TensorView& rstd, NormGate act, float eps, const ExecContext&) {
  const cpu::RmsNormParams p = norm_params(x, g, w, act, eps);
  check_like(y, x, "y");
  if (rstd.defined()) {
    meta::expect_rank(rstd, "rstd", 1);
    meta::expect_dim(rstd, "rstd", 0, x.shape[0]);
    meta::expect_dtype(rstd, "rstd", DType::kF32);
  }
  void* py = y.data;
  const DType yt = y.dtype;
  float* pr = rstd.defined() ? rstd.ptr<float>() : nullptr;
  run_or_record("rms_norm_gated_fwd", [=] { cpu::rms_norm_gated_fwd(p, py, yt, pr); });
}

void rms_norm_gated_bwd(const TensorView& x, const TensorView& g, const TensorView& w, const TensorView& dy,
                        const TensorView& dx, const TensorView& dg, const TensorView& dw, NormGate act,
                        float eps, int64_t valid_rows, const ExecContext&) {
  const cpu::RmsNormParams p = norm_params(x, g, w, act, eps);
  check_like(dy, x, "dy");
  if (dx.defined()) check_like(dx, x, "dx");
  if (dg.defined()) check_like(dg, x, "dg");
  meta::expect_rank(dw, "dw", 1);
  meta::expect_dim(dw, "dw", 0, x.shape[1]);
  meta::expect_dtype(dw, "dw", DType::kF32);
  const void* pdy = dy.data;
  void *pdx = dx.data, *pdg = dg.data;
  const DType tdy = dy.dtype, tdx = dx.dtype, tdg = dg.dtype;
  float* pdw = dw.ptr<float>();
  run_or_record("rms_norm_gated_bwd", [=] {
    cpu::rms_norm_gated_bwd(p, pdy, tdy, pdx, tdx, pdg, tdg, pdw, valid_rows);
  });
}

void zero_padding_rows(const TensorView& t, const TensorView& cu_seqlens, const ExecContext&) {
  LINATTN_CHECK(t.defined() && t.ndim >= 2, "t: expected a [B, T, ...] tensor, got ", t.shape_str());
  meta::expect_contiguous(t, "t");
  meta::expect_rank(cu_seqlens, "cu_seqlens", 1);
  LINATTN_CHECK(cu_seqlens.dtype == DType::kI32 || cu_seqlens.dtype == DType::kI64,
                "cu_seqlens: expected int32 or int64, got ", dtype_name(cu_seqlens.dtype));
  require_cpu(t, "zero_padding_rows", "t");
  const int64_t R = t.shape[0] * t.shape[1];
  const int64_t row_bytes = static_cast<int64_t>(t.nbytes()) / (R > 0 ? R : 1);
  const TensorView cu = cu_seqlens;
  void* data = t.data;
  run_or_record("zero_padding_rows", [=] {
    // Read at run time: a replay sees the current layout.
    const int64_t end = meta::read_index(cu, cu.shape[0] - 1);
    cpu::zero_rows(data, R, row_bytes, end);
  });
}

}  // namespace linattn
