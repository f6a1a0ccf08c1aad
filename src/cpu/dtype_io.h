// Scalar load/store of fp32 / bf16 / fp16 / fp64 elements as float, for kernels whose inner
// loops are not the bottleneck (norms, conversions).
#pragma once
#include <cstdint>

#include "core/half.h"
#include "linattn/tensor.h"

namespace linattn::cpu {

inline float load_as_float(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kBF16: return bf16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16: return fp16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kF64: return static_cast<float>(static_cast<const double*>(p)[i]);
    default: return 0.0f;
  }
}

inline void store_from_float(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(p)[i] = v; break;
    case DType::kBF16: static_cast<uint16_t*>(p)[i] = float_to_bf16_bits(v); break;
    case DType::kF16: static_cast<uint16_t*>(p)[i] = float_to_fp16_bits(v); break;
    case DType::kF64: static_cast<double*>(p)[i] = v; break;
    default: break;
  }
}

}  // namespace linattn::cpu
