// Shared pieces of the CPU conv kernels: sequence bounds from cu_seqlens (or the dense batch),
// row pointers of [B, T, D] tensors, per-block staging of weight / bias in fp32, the staging of
// state slots and boundary rows, and the channel blocking. Kernels walk rows in order and, for
// each row, all 16-channel vectors of a block (2 KiB of the row): a channel-outer walk down a
// column of rows would hit the same L1 set and 4K-alias loads against pending stores whenever
// the row stride is a multiple of 4 KiB (D = 1024, 2048, 6144, 8192 in fp32).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "cpu/conv_simd.h"
#include "cpu/dtype_io.h"
#include "meta/conv_desc.h"

namespace linattn::cpu::conv {

using meta::ConvParams;
using meta::ConvRows;
using meta::kConvMaxW;
using simd::kLanes;
using simd::vf;

inline constexpr int64_t kRowTile = 256;  // rows per work item (forward) / per pass (backward)
inline constexpr int kMaxBlock = 1024;     // channels per block, upper bound (bf16 / fp16)

template <class E>
constexpr int block_channels() {
  return static_cast<int>(2048 / sizeof(E));
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

// Whether outputs of `bytes` are written with non-temporal stores: only when they cannot stay
// in the last-level cache anyway (default 32 MiB; env LINATTN_CONV_STREAM_MIN_BYTES overrides,
// which the tests use to cover both paths).
inline bool stream_outputs(int64_t bytes) {
  static const int64_t kDefault = int64_t{32} << 20;
  const char* env = std::getenv("LINATTN_CONV_STREAM_MIN_BYTES");
  const int64_t min_bytes = env ? std::atoll(env) : kDefault;
  return bytes >= min_bytes;
}

// Stores a full vector (or the first m lanes), streaming when `nt` (p aligned, see store_stream).
template <class E>
LINATTN_SIMD_INLINE void put(E* p, vf v, int m, bool nt) {
  if (m < kLanes) simd::store_n(p, v, m);
  else if (nt) simd::store_stream(p, v);
  else simd::store(p, v);
}

// Whether a row slice starting at p can take streaming stores.
template <class E>
bool stream_aligned(const E* p) {
  return reinterpret_cast<uintptr_t>(p) % (kLanes * sizeof(E)) == 0;
}

// fp32 staging of weight [D, W] (transposed to [W][block]) and bias for channels [c0, c0 + nc),
// zero-padded to a multiple of kLanes and multiplied by `scale` (the forward's silu_pre folds
// -log2(e) in here), plus scratch rows for the boundary rows of a sequence.
struct Stage {
  float w[kConvMaxW][kMaxBlock + kLanes];
  float bias[kMaxBlock + kLanes];
  float h[kConvMaxW][kMaxBlock + kLanes];  // state slots / converted rows of boundary taps

  void load(const ConvParams& p, int64_t c0, int nc, float scale = 1.0f) {
    const int W = static_cast<int>(p.W);
    const int padded = (nc + kLanes - 1) / kLanes * kLanes;
    for (int i = 0; i < W; ++i) std::fill(w[i] + nc, w[i] + padded, 0.0f);
    for (int c = 0; c < nc; ++c)
      for (int i = 0; i < W; ++i) w[i][c] = scale * load_as_float(p.weight, p.w_dtype, (c0 + c) * p.W + i);
    for (int c = 0; c < padded; ++c)
      bias[c] = (c < nc && p.bias) ? scale * load_as_float(p.bias, p.b_dtype, c0 + c) : 0.0f;
  }
};

// out[c] = slot `slot` of state s [N, D, W] for channels [c0, c0 + nc) of sequence n (0 if absent).
inline void state_row(const void* s, DType dt, const ConvParams& p, int64_t n, int64_t c0, int nc, int64_t slot,
                      float* out) {
  for (int c = 0; c < nc; ++c) out[c] = s ? load_as_float(s, dt, (n * p.D + c0 + c) * p.W + slot) : 0.0f;
}

// fp32 copy of nc elements of a row.
template <class E>
void row_to_float(const E* src, int nc, float* out) {
  int j = 0;
  for (; j + kLanes <= nc; j += kLanes) simd::store(out + j, simd::load(src + j));
  if (j < nc) simd::store_n(out + j, simd::load_n(src + j, nc - j), nc - j);
}

// The W taps of row u (xbar[u - W + 1 + i]) of sequence n for channels [c0, c0 + nc): pointers
// into x when all are inside the sequence (returns true), else fp32 rows staged in sg.h (x rows
// converted, state slots for positions before bos; returns false).
template <class E>
bool row_taps(const ConvParams& p, Stage& sg, const RowPtr<const E>& x, int64_t r2t, int64_t n, int64_t u,
              int64_t bos, int64_t c0, int nc, const E** xt, const float** ft) {
  const int W = static_cast<int>(p.W);
  if (u - bos >= W - 1) {
    for (int i = 0; i < W; ++i) xt[i] = x.at(u - W + 1 + i - r2t) + c0;
    return true;
  }
  for (int i = 0; i < W; ++i) {
    const int64_t q = u - W + 1 + i;
    if (q >= bos) row_to_float(x.at(q - r2t) + c0, nc, sg.h[i]);
    else state_row(p.h0, p.h0_dtype, p, n, c0, nc, W + q - bos, sg.h[i]);
    ft[i] = sg.h[i];
  }
  return false;
}

}  // namespace linattn::cpu::conv
