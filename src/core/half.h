// Host conversion between float and the 16-bit float formats (IEEE binary16, bfloat16).
// Round to nearest even; NaN stays NaN (quiet), +-Inf stays Inf; fp16 subnormals exact.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>

namespace linattn {

inline float bf16_bits_to_float(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float fp16_bits_to_float(uint16_t h);
uint16_t float_to_fp16_bits(float f);

inline float round_to_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }
inline float round_to_fp16(float f) { return fp16_bits_to_float(float_to_fp16_bits(f)); }

}  // namespace linattn
