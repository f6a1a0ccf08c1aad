// Helpers shared by the metadata / runtime tests: catching a linattn::Error, and random varlen
// layouts that cover the cases the graph contract names (N = 1, N = N_max, T = T_max, T = 0,
// zero-length sequences inside and at the tail, lengths that are and are not multiples of BT).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "linattn/error.h"
#include "linattn/meta.h"
#include "linattn/tensor.h"

namespace linattn::testing {

// The Error `f` throws, or nullopt (and a test failure) when it throws nothing.
template <class F>
std::optional<Error> error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

struct Layout {
  Capacity cap;
  int64_t N = 0;              // real sequences
  std::vector<int64_t> cu;    // [N_max + 1], tail repeats cu[N]
  bool multiples = false;     // every length a multiple of BT
  int64_t T() const { return cu[static_cast<size_t>(N)]; }
};

inline Layout random_layout(std::mt19937_64& rng) {
  auto uni = [&](int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  static constexpr int kBT[3] = {16, 32, 64};
  Layout L;
  L.cap.BT = kBT[uni(0, 2)];
  L.cap.N_max = uni(0, 3) == 0 ? 1 : uni(1, 16);
  L.cap.T_max = uni(1, 6 * L.cap.BT);
  const int64_t BT = L.cap.BT, N_max = L.cap.N_max, T_max = L.cap.T_max;
  switch (uni(0, 2)) {
    case 0: L.N = 1; break;
    case 1: L.N = N_max; break;
    default: L.N = uni(1, N_max);
  }
  int64_t T = 0;
  switch (uni(0, 3)) {
    case 0: T = T_max; break;
    case 1: T = uni(0, 2) == 0 ? 0 : uni(0, T_max); break;
    default: T = uni(0, T_max);
  }
  L.multiples = uni(0, 3) == 0;
  std::vector<int64_t> cuts;
  if (L.multiples) {
    T = T / BT * BT;
    for (int64_t i = 1; i < L.N; ++i) cuts.push_back(uni(0, T / BT) * BT);
  } else if (uni(0, 2) == 0) {  // zero-heavy: few distinct cut points
    const int64_t a = uni(0, T), b = uni(0, T);
    for (int64_t i = 1; i < L.N; ++i) cuts.push_back(uni(0, 1) ? a : b);
  } else {
    for (int64_t i = 1; i < L.N; ++i) cuts.push_back(uni(0, T));
  }
  std::sort(cuts.begin(), cuts.end());
  L.cu.push_back(0);
  for (int64_t c : cuts) L.cu.push_back(c);
  L.cu.push_back(T);
  while (static_cast<int64_t>(L.cu.size()) < N_max + 1) L.cu.push_back(T);
  return L;
}

// cu values into a host tensor of `dtype` (int32 or int64).
inline Tensor cu_tensor(const std::vector<int64_t>& cu, DType dtype) {
  Tensor t(dtype, {static_cast<int64_t>(cu.size())});
  for (size_t i = 0; i < cu.size(); ++i) {
    if (dtype == DType::kI64) t.data<int64_t>()[i] = cu[i];
    else t.data<int32_t>()[i] = static_cast<int32_t>(cu[i]);
  }
  return t;
}

}  // namespace linattn::testing
