// Moving the recurrent state of one (sequence n, value head j) between the public h0 / ht
// tensors ([N, HV, K, V], or [N, HV, V, K] with state_v_first) and the kernels' K-major fp32
// working buffer S[K, ldS] (columns [v0, v0 + vt) of the full state). The padding columns
// [vt, ldS) of S are zeroed on load. h0 may be any float dtype; ht is fp32.
#pragma once
#include <algorithm>
#include <cstdint>

#include "cpu/chunk_params.h"
#include "cpu/convert.h"

namespace linattn::cpu {

inline void load_state(const ChunkParams& p, int64_t n, int64_t j, int64_t v0, int64_t vt, float* S,
                       int64_t ldS) {
  const int64_t base = (n * p.HV + j) * p.K * p.V;
  for (int64_t d = 0; d < p.K; ++d) {
    float* row = S + d * ldS;
    if (p.h0 == nullptr) {
      std::fill(row, row + vt, 0.0f);
    } else if (!p.state_v_first) {
      load_row(p.h0, p.h0_dtype, base + d * p.V + v0, vt, row);
    } else {
      for (int64_t c = 0; c < vt; ++c) row[c] = load_one(p.h0, p.h0_dtype, base + (v0 + c) * p.K + d);
    }
    std::fill(row + vt, row + ldS, 0.0f);
  }
}

inline void store_state(const ChunkParams& p, int64_t n, int64_t j, int64_t v0, int64_t vt, const float* S,
                        int64_t ldS) {
  if (p.ht == nullptr) return;
  float* dst = p.ht + (n * p.HV + j) * p.K * p.V;
  for (int64_t d = 0; d < p.K; ++d) {
    const float* row = S + d * ldS;
    if (!p.state_v_first) std::copy(row, row + vt, dst + d * p.V + v0);
    else
      for (int64_t c = 0; c < vt; ++c) dst[(v0 + c) * p.K + d] = row[c];
  }
}

}  // namespace linattn::cpu
