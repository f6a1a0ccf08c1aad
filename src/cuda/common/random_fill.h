// Device-side seeded random fill for benchmarks and large tests (host generation of GB-sized
// inputs is too slow): element i gets a value from a counter-based hash of (seed, i), so the
// result does not depend on the launch shape. Normal(mean, stddev) via Box-Muller, or
// Uniform[lo, hi). fp32 / fp16 / bf16. Asynchronous on `stream`, capture-safe.
#pragma once
#include <cstdint>

#include "cuda/gdn/gdn_params.h"

namespace linattn::cuda {

void fill_normal(void* data, ElemType type, int64_t n, uint64_t seed, float mean, float stddev,
                 void* stream);
void fill_uniform(void* data, ElemType type, int64_t n, uint64_t seed, float lo, float hi,
                  void* stream);

}  // namespace linattn::cuda
