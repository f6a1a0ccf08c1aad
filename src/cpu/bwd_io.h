// Element-type conversion for the CPU chunk backward: rows of any float dtype (fp32, bf16,
// fp16, fp64) to / from fp32 working buffers (the shared vectorized cpu/convert.h rows), and
// the index readers for cu_seqlens.
#pragma once
#include <cstdint>

#include "cpu/chunk_bwd.h"

namespace linattn::cpu::bwd {

// dst[r * ldd + c] = src[off + r * row_stride + c] for r < rows, c < cols.
void load_rows(const BwdBuf& src, int64_t off, int64_t row_stride, int rows, int cols, float* dst,
               int ldd);
// dst[off + r * row_stride + c] = src[r * lds + c], rounded to dst's dtype (fp32 rows of 64 or
// more go through non-temporal stores: call store_fence() before the data is handed over).
void store_rows(const BwdOut& dst, int64_t off, int64_t row_stride, int rows, int cols,
                const float* src, int lds);
void store_fence();
// dst rows = src rows (fp32), with non-temporal stores when `stream` (data read back much later).
void copy_rows(int rows, int cols, const float* src, int64_t lds, float* dst, int64_t ldd, bool stream);
// Writes zeros to rows [r0, r1) of a [rows, width] tensor.
void zero_rows(const BwdOut& dst, int64_t r0, int64_t r1, int64_t width);
// Scalar store (for the few per-head values).
void store_one(const BwdOut& dst, int64_t off, double v);
// Entry i of an int32 / int64 index tensor.
int64_t load_index(const BwdBuf& idx, int64_t i);

}  // namespace linattn::cpu::bwd
