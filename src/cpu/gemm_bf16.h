// bf16 dot-product GEMM (AVX512-BF16 vdpbf16ps: 32 bf16 products per instruction, fp32
// accumulation, twice the fp32 FMA rate) and the packings it needs. Operands hold *pairs* of
// bf16 along the reduction dimension k in one uint32 (low half = even k):
//   A2(r, kp) = A2[r * a_rs + kp * a_ks] = (A(r, 2kp), A(r, 2kp+1)),
//   B2(kp, c) = B2[kp * ldb + c]         = (B(2kp, c), B(2kp+1, c)).
// Same blocking, tails and order guarantees as gemm.h (columns never change a bit when split).
// kHaveBf16Dot is false when the build has no AVX512-BF16: callers then stay on fp32.
#pragma once
#include <cstdint>

namespace linattn::cpu {

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
inline constexpr bool kHaveBf16Dot = true;
#else
inline constexpr bool kHaveBf16Dot = false;
#endif

struct GemmBf16Args {
  int M = 0, N = 0, Kp = 0;  // Kp = pairs along k
  const uint32_t* A = nullptr;
  int64_t a_rs = 0, a_ks = 1;
  const uint32_t* B = nullptr;
  int64_t ldb = 0;
  float* C = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;  // C = C * (c_row_scale ? c_row_scale[r] : c_scale) + A B
  float c_scale = 1.0f;
  const float* c_row_scale = nullptr;
};

void gemm_bf16(const GemmBf16Args& g);

// Row packing: dst[r * ldd + kp] = (src[r][2kp], src[r][2kp+1]) rounded to bf16 (0 past C).
void pack_bf16_rows(int R, int C, const float* src, int64_t lds, uint32_t* dst, int64_t ldd);
// Pair interleave along rows: dst[kp * ldd + c] = (src[2kp][c], src[2kp+1][c]) (row R = 0).
void pack_bf16_row_pairs(int R, int C, const float* src, int64_t lds, uint32_t* dst, int64_t ldd);
// 32-bit transpose: dst[c * ldd + r] = src[r * lds + c].
void transpose_u32(int R, int C, const uint32_t* src, int64_t lds, uint32_t* dst, int64_t ldd);

}  // namespace linattn::cpu
