// CPU dense helpers for the layers: row-major GEMM (OpenBLAS sgemm), gated RMSNorm forward and
// backward, row zeroing. Plain pointers and sizes (the api level unpacks TensorViews).
// Rows are split over the thread pool in static ranges; the dw reduction uses fixed 256-row
// blocks summed in order, so results do not depend on the thread count.
#pragma once
#include <cstdint>

#include "linattn/tensor.h"

namespace linattn::cpu {

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

struct RmsNormParams {
  const void* x;      // [R, D]
  const void* g;      // [R, D]
  const float* w;     // [D]
  DType x_dtype, g_dtype;
  int64_t R, D;
  bool sigmoid_gate;  // act = sigmoid, else silu
  float eps;
};

void rms_norm_gated_fwd(const RmsNormParams& p, void* y, DType y_dtype, float* rstd);
// valid_rows < 0: all rows. dx/dg may be null.
void rms_norm_gated_bwd(const RmsNormParams& p, const void* dy, DType dy_dtype, void* dx,
                        DType dx_dtype, void* dg, DType dg_dtype, float* dw, int64_t valid_rows);

// Zero rows [first_row, R) of a row-major [R, row_bytes] byte array.
void zero_rows(void* data, int64_t R, int64_t row_bytes, int64_t first_row);

}  // namespace linattn::cpu
