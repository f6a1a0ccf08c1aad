// CPU short-conv forward: y = act(bias + sum_i weight[:, i] * xbar[t - W + 1 + i]) + residual,
// and the final state. Work item = (256 rows x one channel block of ~4 KiB per row); inside it,
// each 16-channel vector walks up to kRowsPerPass rows of one sequence keeping the last W - 1
// inputs in registers, so x is read once from memory (plus W - 1 halo rows per pass, from
// cache). The first W - 1 rows of a sequence take their older taps from initial_state slots.
// W in {2, 3, 4} is compiled with constant W; other W (up to 8) take a runtime-W loop.
#include <algorithm>

#include "core/check.h"
#include "core/thread_pool.h"
#include "core/util.h"
#include "cpu/conv_cpu.h"
#include "cpu/conv_cpu_common.h"

namespace linattn::cpu {

namespace conv {
namespace {

inline constexpr int64_t kRowsPerTask = 256;

template <class E, bool kFull>
LINATTN_SIMD_INLINE vf ld(const E* ptr, int m) {
  if constexpr (kFull) return simd::load(ptr);
  else return simd::load_n(ptr, m);
}

template <class E, bool kFull>
LINATTN_SIMD_INLINE void st(E* ptr, vf v, int m) {
  if constexpr (kFull) simd::store(ptr, v);
  else simd::store_n(ptr, v, m);
}

// Rows [a, b) of sequence n (first token bos), lanes [0, m) of channel vector c (block offset j).
template <class E, int kW, bool kFull>
void fwd_vector(const ConvParams& p, const Stage& sg, int j, int64_t c, int m, int64_t n, int64_t a,
                int64_t b, int64_t bos) {
  constexpr int kCap = kW > 0 ? kW : kConvMaxW;
  const int W = kW > 0 ? kW : static_cast<int>(p.W);
  const int64_t bi = batch_of(p, n), r2t = bi * p.T;
  const RowPtr<const E> x = rows_of<const E>(p.x, bi);
  const RowPtr<const E> res = rows_of<const E>(p.residual, bi);
  const RowPtr<E> y = rows_of<E>(p.y, bi);
  const bool has_res = p.residual.data != nullptr;

  vf w[kCap], win[kCap];
  for (int i = 0; i < W; ++i) w[i] = simd::load(&sg.w[i][j]);
  const vf bias = simd::load(&sg.bias[j]);
  for (int k = 0; k < W - 1; ++k) {  // xbar[a - W + 1 + k]
    const int64_t q = a - (W - 1) + k;
    win[k] = q >= bos ? ld<E, kFull>(x.at(q - r2t) + c, m)
                      : load_state(p.h0, p.h0_dtype, p, n, c, W + q - bos, m);
  }
  for (int64_t u = a; u < b; ++u) {
    const vf xu = ld<E, kFull>(x.at(u - r2t) + c, m);
    vf acc = bias;
    for (int k = 0; k < W - 1; ++k) acc += w[k] * win[k];
    acc += w[W - 1] * xu;
    if (p.silu) acc = simd::silu(acc);
    if (has_res) acc += ld<E, kFull>(res.at(u - r2t) + c, m);
    st<E, kFull>(y.at(u - r2t) + c, acc, m);
    for (int k = 0; k + 1 < W - 1; ++k) win[k] = win[k + 1];
    if (W > 1) win[W - 2] = xu;
  }
}

template <class E, int kW>
void fwd_task(const ConvParams& p, int64_t r0, int64_t r1, int64_t c0, int nc) {
  Stage sg;
  sg.load(p, c0, nc);
  for (int64_t s0 = r0; s0 < r1; s0 += kRowsPerPass) {
    for_each_segment(p, s0, std::min(r1, s0 + kRowsPerPass),
                     [&](int64_t n, int64_t a, int64_t b, int64_t bos, int64_t) {
                       int j = 0;
                       for (; j + kLanes <= nc; j += kLanes)
                         fwd_vector<E, kW, true>(p, sg, j, c0 + j, kLanes, n, a, b, bos);
                       if (j < nc) fwd_vector<E, kW, false>(p, sg, j, c0 + j, nc - j, n, a, b, bos);
                     });
  }
}

template <class E, int kW>
void fwd_all(const ConvParams& p, int threads) {
  const int cb = block_channels<E>();
  const int64_t nblk = ceil_div(p.D, cb), rows = p.rows();
  const int64_t nchunk = ceil_div(rows, kRowsPerTask);
  parallel_for(
      nchunk * nblk,
      [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t ch = t / nblk, c0 = (t % nblk) * cb;
          fwd_task<E, kW>(p, ch * kRowsPerTask, std::min(rows, (ch + 1) * kRowsPerTask), c0,
                          static_cast<int>(std::min<int64_t>(cb, p.D - c0)));
        }
      },
      threads);
}

template <class E>
void fwd_dtype(const ConvParams& p, int threads) {
  switch (p.W) {
    case 2: return fwd_all<E, 2>(p, threads);
    case 3: return fwd_all<E, 3>(p, threads);
    case 4: return fwd_all<E, 4>(p, threads);
    default: return fwd_all<E, 0>(p, threads);
  }
}

// final[n, c, s] = concat(h0[n, c, :], x_seq[:, c])[len + s] (h0 = 0 when absent).
void final_state(const ConvParams& p, int threads) {
  parallel_for(
      p.N,
      [&](int64_t n0, int64_t n1, int) {
        for (int64_t n = n0; n < n1; ++n) {
          int64_t bos, eos;
          seq_bounds(p, n, &bos, &eos);
          const int64_t len = eos - bos;
          const int64_t bi = batch_of(p, n);
          for (int64_t c = 0; c < p.D; ++c)
            for (int64_t s = 0; s < p.W; ++s) {
              const int64_t src = len + s;
              float v = 0.0f;
              if (src >= p.W) {
                const int64_t t = bos + src - p.W - bi * p.T;
                v = load_as_float(p.x.data, p.dtype, bi * p.x.sb + t * p.x.st + c);
              } else if (p.h0) {
                v = load_as_float(p.h0, p.h0_dtype, (n * p.D + c) * p.W + src);
              }
              store_from_float(p.ht, p.dtype, (n * p.D + c) * p.W + s, v);
            }
        }
      },
      threads);
}

}  // namespace
}  // namespace conv

void conv_fwd(const meta::ConvParams& p, int num_threads) {
  switch (p.dtype) {
    case DType::kF32: conv::fwd_dtype<float>(p, num_threads); break;
    case DType::kBF16: conv::fwd_dtype<simd::bf16_t>(p, num_threads); break;
    case DType::kF16: conv::fwd_dtype<simd::fp16_t>(p, num_threads); break;
    default: LINATTN_UNSUPPORTED("conv_fwd (cpu): dtype ", dtype_name(p.dtype), " (expected fp32/bf16/fp16)");
  }
  if (p.ht) conv::final_state(p, num_threads);
}

}  // namespace linattn::cpu
