// Shared pieces of the CPU conv kernels: sequence bounds from cu_seqlens (or the dense batch),
// row pointers of [B, T, D] tensors, per-block staging of weight / bias in fp32, and the
// channel blocking (about 4 KiB of every row per block, so a block's rows stream well).
#pragma once
#include <algorithm>
#include <cstdint>

#include "cpu/conv_simd.h"
#include "cpu/dtype_io.h"
#include "meta/conv_desc.h"

namespace linattn::cpu::conv {

using meta::ConvParams;
using meta::ConvRows;
using meta::kConvMaxW;
using simd::kLanes;
using simd::vf;

inline constexpr int64_t kRowsPerPass = 64;  // rows a channel vector walks before the next one
inline constexpr int kMaxBlock = 2048;       // channels per block, upper bound (bf16 / fp16)

template <class E>
constexpr int block_channels() {
  return static_cast<int>(4096 / sizeof(E));
}

// First row of sequence n (n in [0, N]), clamped to [0, rows]: in graph mode cu_seqlens is
// data read at replay, so garbage offsets must never address outside the tensors.
inline int64_t seq_start(const ConvParams& p, int64_t n) {
  if (!p.varlen) return n * p.T;
  const int64_t v = p.cu_dtype == DType::kI64 ? static_cast<const int64_t*>(p.cu)[n]
                                              : static_cast<const int32_t*>(p.cu)[n];
  return std::clamp<int64_t>(v, 0, p.rows());
}

// Tokens [bos, eos) of sequence n, with eos >= bos even for non-monotone garbage offsets.
inline void seq_bounds(const ConvParams& p, int64_t n, int64_t* bos, int64_t* eos) {
  *bos = seq_start(p, n);
  *eos = std::max(*bos, seq_start(p, n + 1));
}

// Calls fn(n, a, b, bos, eos) for every non-empty piece [a, b) of [r0, r1) inside sequence n
// (tokens [bos, eos)), in row order. Padding rows belong to no sequence.
template <class Fn>
void for_each_segment(const ConvParams& p, int64_t r0, int64_t r1, Fn&& fn) {
  if (r0 >= r1 || p.N == 0) return;
  int64_t n;
  if (!p.varlen) {
    n = p.T > 0 ? r0 / p.T : p.N;
  } else {  // largest n < N with cu[n] <= r0
    int64_t lo = 0, hi = p.N - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (seq_start(p, mid) <= r0) lo = mid;
      else hi = mid - 1;
    }
    n = lo;
  }
  for (; n < p.N; ++n) {
    int64_t bos, eos;
    seq_bounds(p, n, &bos, &eos);
    if (bos >= r1) break;
    const int64_t a = std::max(r0, bos), b = std::min(r1, eos);
    if (a < b) fn(n, a, b, bos, eos);
  }
}

// Pointer to element (row r, channel 0) of a [B, T, D] tensor; rows of one sequence share b.
template <class E>
struct RowPtr {
  E* base = nullptr;  // start of batch row b
  int64_t st = 0;
  E* at(int64_t t) const { return base + t * st; }
};

template <class E>
RowPtr<E> rows_of(const ConvRows& t, int64_t b) {
  return {static_cast<E*>(t.data) + b * t.sb, t.st};
}

// Batch row of sequence n (flat row r of it is token r - b * T of that batch row).
inline int64_t batch_of(const ConvParams& p, int64_t n) { return p.varlen ? 0 : n; }

// fp32 staging of weight [D, W] (transposed to [W][block]) and bias for channels [c0, c0 + nc),
// zero-padded to a multiple of kLanes.
struct Stage {
  float w[kConvMaxW][kMaxBlock + kLanes];
  float bias[kMaxBlock + kLanes];

  void load(const ConvParams& p, int64_t c0, int nc) {
    const int W = static_cast<int>(p.W);
    const int padded = (nc + kLanes - 1) / kLanes * kLanes;
    for (int c = 0; c < padded; ++c) {
      for (int i = 0; i < W; ++i)
        w[i][c] = c < nc ? load_as_float(p.weight, p.w_dtype, (c0 + c) * p.W + i) : 0.0f;
      bias[c] = (c < nc && p.bias) ? load_as_float(p.bias, p.b_dtype, c0 + c) : 0.0f;
    }
  }
};

// Lanes [0, m) of a [N, D, W] state at (n, channels c.., slot s), as fp32 (0 when absent).
inline vf load_state(const void* s, DType dt, const ConvParams& p, int64_t n, int64_t c, int64_t slot,
                     int m) {
  float tmp[kLanes] = {};
  if (s)
    for (int l = 0; l < m; ++l) tmp[l] = load_as_float(s, dt, ((n * p.D) + c + l) * p.W + slot);
  return simd::load(tmp);
}

}  // namespace linattn::cpu::conv
