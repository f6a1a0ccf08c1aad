// Row conversion between the caller's dtypes and fp32 working buffers (see bwd_io.h).
// bf16 / fp16 go through the core host conversions (round to nearest even on store).
#include "cpu/bwd_io.h"

#include <cstring>

#include "core/half.h"

namespace linattn::cpu::bwd {

void load_rows(const BwdBuf& src, int64_t off, int64_t row_stride, int rows, int cols, float* dst,
               int ldd) {
  for (int r = 0; r < rows; ++r) {
    const int64_t o = off + r * row_stride;
    float* d = dst + static_cast<int64_t>(r) * ldd;
    switch (src.dtype) {
      case DType::kF32:
        std::memcpy(d, static_cast<const float*>(src.data) + o, sizeof(float) * cols);
        break;
      case DType::kBF16: {
        const uint16_t* s = static_cast<const uint16_t*>(src.data) + o;
        for (int c = 0; c < cols; ++c) d[c] = bf16_bits_to_float(s[c]);
        break;
      }
      case DType::kF16: {
        const uint16_t* s = static_cast<const uint16_t*>(src.data) + o;
        for (int c = 0; c < cols; ++c) d[c] = fp16_bits_to_float(s[c]);
        break;
      }
      case DType::kF64: {
        const double* s = static_cast<const double*>(src.data) + o;
        for (int c = 0; c < cols; ++c) d[c] = static_cast<float>(s[c]);
        break;
      }
      default:
        for (int c = 0; c < cols; ++c) d[c] = 0.0f;  // integer dtypes never reach here
        break;
    }
  }
}

void store_rows(const BwdOut& dst, int64_t off, int64_t row_stride, int rows, int cols,
                const float* src, int lds) {
  for (int r = 0; r < rows; ++r) {
    const int64_t o = off + r * row_stride;
    const float* s = src + static_cast<int64_t>(r) * lds;
    switch (dst.dtype) {
      case DType::kF32:
        std::memcpy(static_cast<float*>(dst.data) + o, s, sizeof(float) * cols);
        break;
      case DType::kBF16: {
        uint16_t* d = static_cast<uint16_t*>(dst.data) + o;
        for (int c = 0; c < cols; ++c) d[c] = float_to_bf16_bits(s[c]);
        break;
      }
      case DType::kF16: {
        uint16_t* d = static_cast<uint16_t*>(dst.data) + o;
        for (int c = 0; c < cols; ++c) d[c] = float_to_fp16_bits(s[c]);
        break;
      }
      case DType::kF64: {
        double* d = static_cast<double*>(dst.data) + o;
        for (int c = 0; c < cols; ++c) d[c] = s[c];
        break;
      }
      default:
        break;
    }
  }
}

void prefetch_rows(const BwdBuf& src, int64_t off, int64_t row_stride, int rows, int cols) {
  if (!src.data) return;
  const size_t es = dtype_size(src.dtype);
  const char* base = static_cast<const char*>(src.data);
  for (int r = 0; r < rows; ++r) {
    const char* p = base + (off + r * row_stride) * static_cast<int64_t>(es);
    for (size_t b = 0; b < cols * es; b += 64) __builtin_prefetch(p + b, 0, 2);
  }
}

void zero_rows(const BwdOut& dst, int64_t r0, int64_t r1, int64_t width) {
  if (!dst.data || r1 <= r0) return;
  const size_t es = dtype_size(dst.dtype);
  std::memset(static_cast<char*>(dst.data) + r0 * width * es, 0,
              static_cast<size_t>((r1 - r0) * width) * es);
}

float load_one(const BwdBuf& src, int64_t off) {
  float v;
  load_rows(src, off, 0, 1, 1, &v, 1);
  return v;
}

void store_one(const BwdOut& dst, int64_t off, double v) {
  if (dst.dtype == DType::kF64) {
    static_cast<double*>(dst.data)[off] = v;
    return;
  }
  const float f = static_cast<float>(v);
  store_rows(dst, off, 0, 1, 1, &f, 1);
}

int64_t load_index(const BwdBuf& idx, int64_t i) {
  return idx.dtype == DType::kI64 ? static_cast<const int64_t*>(idx.data)[i]
                                  : static_cast<const int32_t*>(idx.data)[i];
}

}  // namespace linattn::cpu::bwd
