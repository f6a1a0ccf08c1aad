// Small capturable ops used to test Graph and GraphBuckets while the real ops are written.
// They follow the capture rules of include/linattn/graph.h: validate at call time, record a
// by-value closure with run_or_record, read cu_seqlens and the chunk tables at replay, bound
// every loop by the capacity. Padding rows (>= cu[N_max]) are never written.
//   chunk_scale:  y[t] = 2 x[t] + n + 1000 c   for token t in chunk c of sequence n
//                 (walks the chunk_indices rows, skipping sentinels)
//   seq_sum:      s[n, :] += sum over the tokens of sequence n of x[t, :]
//                 (walks chunk_offsets; a zero-length sequence keeps its state)
// And their eager exact-size references, plus ops doing forbidden work during capture.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/capture.h"
#include "core/check.h"
#include "linattn/meta.h"
#include "linattn/tensor.h"

namespace linattn::testing {

inline int64_t cu_at(const void* cu, bool i64, int64_t i) {
  return i64 ? static_cast<const int64_t*>(cu)[i] : static_cast<const int32_t*>(cu)[i];
}

// x, y: [1, T_max, D] fp32; cu [N_max + 1]; idx [NT_max, 2].
inline void chunk_scale(const Capacity& cap, const TensorView& cu, const TensorView& idx,
                        const TensorView& x, const TensorView& y) {
  LINATTN_CHECK(x.ndim == 3 && x.shape[1] == cap.T_max, "x: expected [1, T_max, D], got ", x.shape_str());
  LINATTN_CHECK(idx.shape[0] == cap.NT_max(), "idx: expected NT_max rows, got ", idx.shape[0]);
  const int64_t D = x.shape[2], NT_max = cap.NT_max(), T_max = cap.T_max;
  const int BT = cap.BT;
  const void* pcu = cu.data;
  const bool i64 = cu.dtype == DType::kI64;
  const int32_t* pidx = idx.ptr<const int32_t>();
  const float* px = x.ptr<const float>();
  float* py = y.ptr<float>();
  run_or_record("chunk_scale", [=] {
    for (int64_t r = 0; r < NT_max; ++r) {
      const int32_t n = pidx[2 * r], c = pidx[2 * r + 1];
      if (n < 0) continue;
      const int64_t bos = cu_at(pcu, i64, n), eos = std::min(cu_at(pcu, i64, n + 1), T_max);
      for (int64_t t = bos + int64_t{c} * BT; t < std::min(bos + int64_t{c + 1} * BT, eos); ++t) {
        for (int64_t d = 0; d < D; ++d) py[t * D + d] = 2.0f * px[t * D + d] + n + 1000.0f * c;
      }
    }
  });
}

// x: [1, T_max, D]; s: [N_max, D] fp32 in/out; off [N_max + 1].
inline void seq_sum(const Capacity& cap, const TensorView& cu, const TensorView& off,
                    const TensorView& x, const TensorView& s) {
  LINATTN_CHECK(s.ndim == 2 && s.shape[0] == cap.N_max, "s: expected [N_max, D], got ", s.shape_str());
  const int64_t D = x.shape[2], N_max = cap.N_max, T_max = cap.T_max;
  const int BT = cap.BT;
  const void* pcu = cu.data;
  const bool i64 = cu.dtype == DType::kI64;
  const int32_t* poff = off.ptr<const int32_t>();
  const float* px = x.ptr<const float>();
  float* ps = s.ptr<float>();
  run_or_record("seq_sum", [=] {
    for (int64_t n = 0; n < N_max; ++n) {
      const int64_t bos = cu_at(pcu, i64, n), eos = std::min(cu_at(pcu, i64, n + 1), T_max);
      for (int64_t c = 0; c < poff[n + 1] - poff[n]; ++c) {
        for (int64_t t = bos + c * BT; t < std::min(bos + (c + 1) * BT, eos); ++t) {
          for (int64_t d = 0; d < D; ++d) ps[n * D + d] += px[t * D + d];
        }
      }
    }
  });
}

// Eager references on exact-size host data: cu [N + 1], x [T, D] -> y [T, D]; s [N, D] in/out.
inline void chunk_scale_eager(const std::vector<int64_t>& cu, int BT, int64_t D, const float* x, float* y) {
  for (size_t n = 0; n + 1 < cu.size(); ++n) {
    for (int64_t t = cu[n]; t < cu[n + 1]; ++t) {
      const int64_t c = (t - cu[n]) / BT;
      for (int64_t d = 0; d < D; ++d) y[t * D + d] = 2.0f * x[t * D + d] + static_cast<float>(n) + 1000.0f * c;
    }
  }
}
inline void seq_sum_eager(const std::vector<int64_t>& cu, int64_t D, const float* x, float* s) {
  for (size_t n = 0; n + 1 < cu.size(); ++n) {
    for (int64_t t = cu[n]; t < cu[n + 1]; ++t) {
      for (int64_t d = 0; d < D; ++d) s[n * D + d] += x[t * D + d];
    }
  }
}

// Forbidden work, the way a library op reports it.
inline void eager_only_op() { forbid_eager_during_capture("eager_only_op (use_graph = false)"); }
inline void allocating_op() { forbid_alloc_during_capture("allocating_op: workspace allocation"); }

}  // namespace linattn::testing
