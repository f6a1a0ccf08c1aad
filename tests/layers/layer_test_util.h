// Shared by the CPU layer tests: the tiny layer configuration they all start from (hidden 8,
// 2 q/k heads, 4 value heads for GDN / 2 for KDA, head dims 4, conv 4, chunk 16) and a seeded
// normal input [1, T, hid].
#pragma once
#include <random>

#include "linattn/layers.h"

namespace linattn::layer_test {

inline LayerConfig tiny(LayerKind kind) {
  LayerConfig c;
  c.kind = kind;
  c.hidden_size = 8;
  c.num_heads = 2;
  c.num_v_heads = kind == LayerKind::kKda ? 2 : 4;
  c.head_k_dim = 4;
  c.head_v_dim = 4;
  c.conv_size = 4;
  c.chunk_size = 16;
  return c;
}

inline Tensor rand_x(int64_t T, int64_t hid, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  Tensor x(DType::kF32, {1, T, hid});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, nd(rng));
  return x;
}

}  // namespace linattn::layer_test
