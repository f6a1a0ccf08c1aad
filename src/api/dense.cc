// Bodies of the dense helper ops (dense.h): validate, then run on the tensors' backend. CPU work
// goes through run_or_record (recorded when a CPU graph capture is active); CUDA work is
// launched on ctx.stream (cuda/dense), so a CUDA stream capture records it. CUDA tensors under a
// CPU capture raise [address-or-lifetime] (the CPU graph cannot replay device work).
#include "linattn/dense.h"

#include "core/capture.h"
#include "core/check.h"
#include "cpu/convert.h"
#include "cpu/dense_cpu.h"
#include "meta/chunk_attn_desc.h"

#if LINATTN_WITH_CUDA
#include "cuda/dense/dense_cuda.h"
#endif

namespace linattn {

namespace {

bool on_cuda(const TensorView& t, const char* op) {
  if (t.device.type != DeviceType::kCUDA) return false;
  forbid_during_capture(op, FailureCategory::kAddressOrLifetime);
#if !LINATTN_WITH_CUDA
  LINATTN_UNSUPPORTED(op, ": tensors on ", device_name(t.device), " need the CUDA backend (not built)");
#endif
  return true;
}

void check_2d(const TensorView& t, const char* name, Device dev) {
  meta::expect_rank(t, name, 2);
  meta::expect_device(t, name, dev);
  meta::expect_contiguous(t, name);
}

}  // namespace

void dense_prepare(Device device, const ExecContext& ctx) {
  if (device.type != DeviceType::kCUDA) return;
#if LINATTN_WITH_CUDA
  cuda::dense_prepare(device.index, ctx.stream);
#else
  (void)ctx;
  LINATTN_UNSUPPORTED("dense_prepare: ", device_name(device), " needs the CUDA backend (not built)");
#endif
}

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
  const int64_t lda = a.shape[1], ldb = b.shape[1], ldc = c.shape[1];
  if (on_cuda(a, "gemm")) {
#if LINATTN_WITH_CUDA
    meta::expect_dtype(b, "b", a.dtype);
    LINATTN_CHECK(c.dtype == a.dtype || c.dtype == DType::kF32, "c: expected dtype ", dtype_name(a.dtype),
                  " (a's) or fp32, got ", dtype_name(c.dtype));
    cuda::GemmArgs g;
    g.trans_a = trans_a;
    g.trans_b = trans_b;
    g.M = M, g.N = N, g.K = K;
    g.alpha = alpha, g.beta = beta;
    g.a = a.data, g.b = b.data, g.c = c.data;
    g.lda = lda, g.ldb = ldb, g.ldc = ldc;
    g.ab_dtype = a.dtype, g.c_dtype = c.dtype;
    cuda::gemm(a.device.index, ctx.stream, g);
#endif
    return;
  }
  for (const auto* t : {&a, &b, &c})
    LINATTN_CHECK(t->dtype == DType::kF32, "gemm: expected fp32 tensors on the CPU backend, got ",
                  dtype_name(t->dtype));
  const float *pa = a.ptr<float>(), *pb = b.ptr<float>();
  float* pc = c.ptr<float>();
  run_or_record("gemm", [=] { cpu::sgemm(trans_a, trans_b, M, N, K, alpha, pa, lda, pb, ldb, beta, pc, ldc); });
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
  return {x.data, g.data, w.ptr<float>(), x.dtype, g.dtype, x.shape[0], x.shape[1],
          act == NormGate::kSigmoid, eps};
}

#if LINATTN_WITH_CUDA
static cuda::RmsNormArgs cuda_norm(const cpu::RmsNormParams& p) {
  LINATTN_CHECK(p.x_dtype != DType::kF64 && p.g_dtype != DType::kF64,
                "x / g: fp64 is not supported by the CUDA kernels");
  return {p.x, p.g, p.w, p.x_dtype, p.g_dtype, p.R, p.D, p.sigmoid_gate, p.eps};
}
#endif

static void check_like(const TensorView& t, const TensorView& x, const char* name) {
  meta::expect_rank(t, name, 2);
  meta::expect_dim(t, name, 0, x.shape[0]);
  meta::expect_dim(t, name, 1, x.shape[1]);
  meta::expect_contiguous(t, name);
  meta::expect_device(t, name, x.device);
  meta::expect_dtype_float(t, name);
}

void rms_norm_gated_fwd(const TensorView& x, const TensorView& g, const TensorView& w, const TensorView& y,
                        const TensorView& rstd, NormGate act, float eps, const ExecContext& ctx) {
  const cpu::RmsNormParams p = norm_params(x, g, w, act, eps);
  check_like(y, x, "y");
  if (rstd.defined()) {
    meta::expect_rank(rstd, "rstd", 1);
    meta::expect_dim(rstd, "rstd", 0, x.shape[0]);
    meta::expect_dtype(rstd, "rstd", DType::kF32);
    meta::expect_device(rstd, "rstd", x.device);
  }
  void* py = y.data;
  const DType yt = y.dtype;
  float* pr = rstd.defined() ? rstd.ptr<float>() : nullptr;
  if (on_cuda(x, "rms_norm_gated_fwd")) {
#if LINATTN_WITH_CUDA
    cuda::rms_norm_gated_fwd(cuda_norm(p), py, yt, pr, ctx.stream);
#endif
    return;
  }
  run_or_record("rms_norm_gated_fwd", [=] { cpu::rms_norm_gated_fwd(p, py, yt, pr); });
}

void rms_norm_gated_bwd(const TensorView& x, const TensorView& g, const TensorView& w, const TensorView& dy,
                        const TensorView& dx, const TensorView& dg, const TensorView& dw, NormGate act,
                        float eps, int64_t valid_rows, const ExecContext& ctx) {
  const cpu::RmsNormParams p = norm_params(x, g, w, act, eps);
  check_like(dy, x, "dy");
  if (dx.defined()) check_like(dx, x, "dx");
  if (dg.defined()) check_like(dg, x, "dg");
  meta::expect_rank(dw, "dw", 1);
  meta::expect_dim(dw, "dw", 0, x.shape[1]);
  meta::expect_dtype(dw, "dw", DType::kF32);
  meta::expect_device(dw, "dw", x.device);
  const void* pdy = dy.data;
  void *pdx = dx.data, *pdg = dg.data;
  const DType tdy = dy.dtype, tdx = dx.dtype, tdg = dg.dtype;
  float* pdw = dw.ptr<float>();
  if (on_cuda(x, "rms_norm_gated_bwd")) {
#if LINATTN_WITH_CUDA
    cuda::rms_norm_gated_bwd(x.device.index, ctx.stream, cuda_norm(p), pdy, tdy, pdx, tdx, pdg, tdg, pdw,
                             valid_rows);
#endif
    return;
  }
  run_or_record("rms_norm_gated_bwd", [=] {
    cpu::rms_norm_gated_bwd(p, pdy, tdy, pdx, tdx, pdg, tdg, pdw, valid_rows);
  });
}

void zero_padding_rows(const TensorView& t, const TensorView& cu_seqlens, const ExecContext& ctx) {
  LINATTN_CHECK(t.defined() && t.ndim >= 2, "t: expected a [B, T, ...] tensor, got ", t.shape_str());
  meta::expect_contiguous(t, "t");
  meta::expect_rank(cu_seqlens, "cu_seqlens", 1);
  LINATTN_CHECK(cu_seqlens.dtype == DType::kI32 || cu_seqlens.dtype == DType::kI64,
                "cu_seqlens: expected int32 or int64, got ", dtype_name(cu_seqlens.dtype));
  meta::expect_device(cu_seqlens, "cu_seqlens", t.device);
  const int64_t R = t.shape[0] * t.shape[1];
  const int64_t row_bytes = static_cast<int64_t>(t.nbytes()) / (R > 0 ? R : 1);
  const TensorView cu = cu_seqlens;
  void* data = t.data;
  if (on_cuda(t, "zero_padding_rows")) {
#if LINATTN_WITH_CUDA
    cuda::zero_rows_from_cu(data, R, row_bytes, cu.data, cu.dtype == DType::kI64, cu.shape[0] - 1, ctx.stream);
#endif
    return;
  }
  run_or_record("zero_padding_rows", [=] {
    // Read at run time: a replay sees the current layout.
    const int64_t end = meta::read_index(cu, cu.shape[0] - 1);
    cpu::zero_rows(data, R, row_bytes, end);
  });
}

void convert_tensor(const TensorView& dst, const TensorView& src, const ExecContext& ctx) {
  LINATTN_CHECK(dst.ndim == src.ndim, "dst: expected rank ", src.ndim, " like src, got ", dst.ndim);
  for (int i = 0; i < src.ndim; ++i) meta::expect_dim(dst, "dst", i, src.shape[i]);
  meta::expect_contiguous(dst, "dst");
  meta::expect_contiguous(src, "src");
  meta::expect_device(dst, "dst", src.device);
  for (const auto* t : {&dst, &src})
    LINATTN_CHECK(t->dtype == DType::kF32 || t->dtype == DType::kBF16 || t->dtype == DType::kF16,
                  t == &dst ? "dst" : "src", ": expected dtype fp32, bf16 or fp16, got ", dtype_name(t->dtype));
  const int64_t n = src.numel();
  void* d = dst.data;
  const void* s = src.data;
  const DType dt = dst.dtype, st = src.dtype;
  if (on_cuda(src, "convert_tensor")) {
#if LINATTN_WITH_CUDA
    cuda::convert(d, dt, s, st, n, ctx.stream);
#endif
    return;
  }
  run_or_record("convert_tensor", [=] {
    constexpr int64_t kRow = 4096;
    float buf[kRow];
    for (int64_t i = 0; i < n; i += kRow) {
      const int64_t m = n - i < kRow ? n - i : kRow;
      cpu::load_row(s, st, i, m, buf);
      cpu::store_row(buf, m, dt, d, i);
    }
  });
}

}  // namespace linattn
