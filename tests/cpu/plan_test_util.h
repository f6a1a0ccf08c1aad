// The descriptor the CPU planner tests plan for: N varlen sequences in one row of T tokens,
// H = 1, HV value heads, K = 128, V, compute chunk 64 (the rest of ChunkAttnDesc at its defaults).
#pragma once
#include <cstdint>

#include "meta/chunk_attn_desc.h"

namespace linattn::test {

inline meta::ChunkAttnDesc plan_desc(int64_t N, int64_t HV, int64_t V, int64_t T) {
  meta::ChunkAttnDesc d;
  d.B = 1;
  d.T = T;
  d.N = N;
  d.H = 1;
  d.HV = HV;
  d.K = 128;
  d.V = V;
  d.BT = 64;
  d.varlen = true;
  return d;
}

}  // namespace linattn::test
