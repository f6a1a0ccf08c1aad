// IEEE binary16 <-> float on the host, bit-exact round to nearest even (tested exhaustively).
#include "core/half.h"

namespace linattn {

float fp16_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0u);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    int e = -1;
    do { ++e; man <<= 1; } while ((man & 0x400u) == 0);
    bits = sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((man & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_fp16_bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((absu >> 13) & 0x3ffu));
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: Inf
  if (absu < 0x38800000u) {  // result is subnormal or zero (|f| < 2^-14)
    if (absu < 0x33000000u) return sign;  // < 2^-25 rounds to 0 (2^-25 exactly ties to even 0)
    const uint32_t e = absu >> 23;
    const uint32_t man = (absu & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14 + (113 - e) - 1 + ...: places value in units of 2^-24
    uint32_t q = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t r = absu - 0x38000000u;  // rebias exponent 127 -> 15 (<< 23 units)
  const uint32_t rem = r & 0x1fffu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

}  // namespace linattn
