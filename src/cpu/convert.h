// Row conversion between the storage dtypes (fp32, bf16, fp16, fp64) and fp32 working buffers.
// Vectorized for AVX-512 (F16C / AVX512-BF16 where built), scalar through core/half.h otherwise;
// both round to nearest even, so the result never depends on where a row starts.
#pragma once
#include <cstdint>

#include "linattn/tensor.h"

namespace linattn::cpu {

// dst[i] = float(src[off + i]) for i < n.
void load_row(const void* src, DType dt, int64_t off, int64_t n, float* dst);
// dst[off + i] = dt(src[i]) for i < n.
void store_row(const float* src, int64_t n, DType dt, void* dst, int64_t off);
// One element.
float load_one(const void* src, DType dt, int64_t i);

}  // namespace linattn::cpu
