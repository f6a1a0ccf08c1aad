// Row conversion between the caller's dtypes and fp32 working buffers (see bwd_io.h): the
// shared cpu/convert.h rows (round to nearest even), non-temporal stores for wide fp32 rows.
#include "cpu/intrin.h"
#include "cpu/bwd_io.h"

#include <cstring>

#include "core/half.h"
#include "cpu/convert.h"

namespace linattn::cpu::bwd {

void load_rows(const BwdBuf& src, int64_t off, int64_t row_stride, int rows, int cols, float* dst,
               int ldd) {
  for (int r = 0; r < rows; ++r)
    load_row(src.data, src.dtype, off + r * row_stride, cols, dst + static_cast<int64_t>(r) * ldd);
}

namespace {

// dst[0, n) = src[0, n) with non-temporal stores on the 64-byte aligned middle: gradient rows
// are written once and not read back here, so skipping the read-for-ownership saves bandwidth.
void stream_copy(float* dst, const float* src, int64_t n) {
#if defined(__AVX512F__)
  int64_t i = 0;
  while (i < n && (reinterpret_cast<uintptr_t>(dst + i) & 63) != 0) {
    dst[i] = src[i];
    ++i;
  }
  for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
  for (; i < n; ++i) dst[i] = src[i];
#else
  std::memcpy(dst, src, sizeof(float) * n);
#endif
}

}  // namespace

void store_rows(const BwdOut& dst, int64_t off, int64_t row_stride, int rows, int cols,
                const float* src, int lds) {
  for (int r = 0; r < rows; ++r) {
    const float* s = src + static_cast<int64_t>(r) * lds;
    const int64_t o = off + r * row_stride;
    if (dst.dtype == DType::kF32 && cols >= 64) stream_copy(static_cast<float*>(dst.data) + o, s, cols);
    else store_row(s, cols, dst.dtype, dst.data, o);
  }
}

void copy_rows(int rows, int cols, const float* src, int64_t lds, float* dst, int64_t ldd, bool stream) {
  for (int r = 0; r < rows; ++r) {
    if (stream) stream_copy(dst + r * ldd, src + r * lds, cols);
    else std::memcpy(dst + r * ldd, src + r * lds, sizeof(float) * cols);
  }
}

void store_fence() {
#if defined(__AVX512F__)
  _mm_sfence();
#endif
}

void zero_rows(const BwdOut& dst, int64_t r0, int64_t r1, int64_t width) {
  if (!dst.data || r1 <= r0) return;
  const size_t es = dtype_size(dst.dtype);
  std::memset(static_cast<char*>(dst.data) + r0 * width * es, 0,
              static_cast<size_t>((r1 - r0) * width) * es);
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
