// CUDA dense helper ops of the layers (dense.h): cuBLAS GEMM, gated RMSNorm forward/backward,
// padding-row zeroing and dtype conversion, all on the caller's stream, no host synchronization
// and no host reads of device data, so every launch is graph-capturable.
// cuBLAS state lives in one DenseContext per (device, stream): the handle, a fixed 32 MiB
// cuBLAS workspace (set on every call, so cuBLAS never allocates inside a capture) and the
// RMSNorm backward's dw partials. dense_prepare creates it (the layers call it from reserve);
// an eager call on an unprepared stream creates it on the spot, a capturing one raises.
#pragma once
#include <cstddef>
#include <cstdint>

#include "linattn/dense.h"
#include "linattn/tensor.h"

namespace linattn::cuda {

// Creates the (device, stream) context if missing. Raises while `stream` is capturing.
void dense_prepare(int device, void* stream);
// Whether the context of (device, stream) exists.
bool dense_prepared(int device, void* stream);

// Row-major c[M, N] = alpha * op(a) @ op(b) + beta * c; a and b share a dtype (fp32, bf16, fp16),
// c is that dtype or fp32; fp32 accumulation (CUBLAS_COMPUTE_32F, no TF32).
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  float alpha = 1.0f, beta = 0.0f;
  const void* a = nullptr;  // [M, K] (or [K, M] when trans_a), leading dim lda
  const void* b = nullptr;  // [K, N] (or [N, K] when trans_b), leading dim ldb
  void* c = nullptr;        // [M, N], leading dim ldc
  int64_t lda = 0, ldb = 0, ldc = 0;
  DType ab_dtype = DType::kF32, c_dtype = DType::kF32;
};
void gemm(int device, void* stream, const GemmArgs& g);

struct RmsNormArgs {
  const void* x = nullptr;  // [R, D]
  const void* g = nullptr;  // [R, D]
  const float* w = nullptr; // [D]
  DType x_dtype = DType::kF32, g_dtype = DType::kF32;
  int64_t R = 0, D = 0;
  bool sigmoid_gate = false;  // act = sigmoid, else silu
  float eps = 1e-5f;
};
// Largest D the kernels take (32 lanes x 32 elements).
constexpr int64_t kRmsNormMaxD = 1024;
void rms_norm_gated_fwd(const RmsNormArgs& p, void* y, DType y_dtype, float* rstd, void* stream);
// dx / dg may be null. Rows >= valid_rows (valid_rows >= 0) get dx = dg = 0 and add nothing to
// dw. dw is a fixed-order sum (per-block partials of fixed row ranges, then blocks in order).
void rms_norm_gated_bwd(int device, void* stream, const RmsNormArgs& p, const void* dy, DType dy_dtype,
                        void* dx, DType dx_dtype, void* dg, DType dg_dtype, float* dw, int64_t valid_rows);

// Zero rows [cu[last], R) of a row-major [R, row_bytes] array; cu (int32 / int64, device) is read
// by the kernel. The grid depends only on R and row_bytes.
void zero_rows_from_cu(void* data, int64_t R, int64_t row_bytes, const void* cu, bool cu_i64, int64_t cu_last,
                       void* stream);
// dst[i] = (dst dtype) src[i], n elements, float dtypes.
void convert(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n, void* stream);

// Up to kCopyBatchMax device-to-device copies in one kernel launch (grid: pairs x blocks sized by the
// largest copy; 16-byte words where both pointers are 16-byte aligned, bytes otherwise).
struct CopyBatch {
  void* dst[kCopyBatchMax] = {};
  const void* src[kCopyBatchMax] = {};
  int64_t bytes[kCopyBatchMax] = {};
  int n = 0;
};
void copy_batch(const CopyBatch& b, void* stream);

}  // namespace linattn::cuda
