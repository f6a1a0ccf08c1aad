// Row conversions (see convert.h). The scalar loops double as the tails of the vector loops.
#include "cpu/intrin.h"
#include "cpu/convert.h"

#include <cstring>

#include "core/half.h"


namespace linattn::cpu {

float load_one(const void* src, DType dt, int64_t i) {
  switch (dt) {
    case DType::kF32: return static_cast<const float*>(src)[i];
    case DType::kBF16: return bf16_bits_to_float(static_cast<const uint16_t*>(src)[i]);
    case DType::kF16: return fp16_bits_to_float(static_cast<const uint16_t*>(src)[i]);
    case DType::kF64: return static_cast<float>(static_cast<const double*>(src)[i]);
    default: return 0.0f;
  }
}

void load_row(const void* src, DType dt, int64_t off, int64_t n, float* dst) {
  int64_t i = 0;
  if (dt == DType::kF32) {
    std::memcpy(dst, static_cast<const float*>(src) + off, static_cast<size_t>(n) * sizeof(float));
    return;
  }
#if defined(__AVX512F__)
  const uint16_t* h = static_cast<const uint16_t*>(src) + off;
  if (dt == DType::kBF16) {
    for (; i + 16 <= n; i += 16) {
      const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)));
      _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
  } else if (dt == DType::kF16) {
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
  }
#endif
  for (; i < n; ++i) dst[i] = load_one(src, dt, off + i);
}

void store_row(const float* src, int64_t n, DType dt, void* dst, int64_t off) {
  int64_t i = 0;
  switch (dt) {
    case DType::kF32:
      std::memcpy(static_cast<float*>(dst) + off, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF64:
      for (; i < n; ++i) static_cast<double*>(dst)[off + i] = src[i];
      return;
    case DType::kBF16: {
      uint16_t* h = static_cast<uint16_t*>(dst) + off;
#if defined(__AVX512BF16__)
      for (; i + 16 <= n; i += 16) {
        const __m256bh b = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
        std::memcpy(h + i, &b, 32);
      }
#endif
      for (; i < n; ++i) h[i] = float_to_bf16_bits(src[i]);
      return;
    }
    case DType::kF16: {
      uint16_t* h = static_cast<uint16_t*>(dst) + off;
#if defined(__AVX512F__)
      for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
      for (; i < n; ++i) h[i] = float_to_fp16_bits(src[i]);
      return;
    }
    default: return;
  }
}

}  // namespace linattn::cpu
