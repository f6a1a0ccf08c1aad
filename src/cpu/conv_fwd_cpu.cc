// CPU short-conv forward: y = act(bias + sum_i weight[:, i] * xbar[t - W + 1 + i]) + residual,
// and the final state. Work item = (kRowTile rows x one channel block of 2 KiB per row), items
// ordered row-tile-major and cut into one contiguous range per thread; a thread takes its items
// block by block (weights staged once per block). Inside an item, rows go in order (four at a
// time inside a sequence, then two, then one: the W + 3 tap rows and W weight vectors loaded once
// for the four, x rows kPrefetchRows ahead prefetched) and each row is computed for every
// 16-channel vector of the block; the W taps are the previous rows of x, still in L1. bf16 x with
// W 2 / 4 and no residual takes conv_fwd_bf16dp.h for its 32-channel groups (fma_rows<4> / <2>
// in the four- / two-row steps, the vdpbf16ps dot_row for single rows); 16-bit outputs without
// residual take silu_pre on sums prescaled by -log2(e) (staged weights and bias carry it). The
// first W - 1 rows of a sequence take their older taps from
// initial_state slots (staged in fp32). W in {2, 3, 4} is compiled with constant W; other W (up to
// 8) take a runtime-W loop.
#include <algorithm>

#include "core/check.h"
#include "core/thread_pool.h"
#include "core/util.h"
#include "cpu/conv_cpu.h"
#include "cpu/conv_cpu_common.h"
#include "cpu/conv_fwd_bf16dp.h"

namespace linattn::cpu {

namespace conv {
namespace {

// Rows ahead that the two-row step prefetches into L1: the row-major walk starts a new 2 KiB
// stream every row, which the hardware prefetchers pick up late (bf16 6144 x 4096 silu: 7.2 ->
// 5.7 ms CPU per thread with 2 rows ahead, 4 and 8 the same).
inline constexpr int64_t kPrefetchRows = 4;
template <class E>
LINATTN_SIMD_INLINE void prefetch(const E* p) {
  __builtin_prefetch(p, 0, 3);
}

// Whether the forward of element type E takes the cheap silu_pre (1.4e-4 relative, far inside the
// 16-bit outputs' 2^-9 / 2^-12 rounding) on sums prescaled by simd::kSiluPreScale (weights and bias
// staged times it): 16-bit outputs without residual. fp32 outputs and outputs with a residual
// (silu(z) + r can cancel: the error is then relative to |silu(z)|, not to the output) take the
// accurate silu on unscaled sums.
template <class E, bool kSilu, bool kRes>
constexpr bool prescaled() {
  return kSilu && sizeof(E) == 2 && !kRes;
}
template <class E, bool kRes>
LINATTN_SIMD_INLINE vf act_silu(vf z) {
  if constexpr (prescaled<E, true, kRes>()) return simd::silu_pre(z);
  else return simd::silu(z);
}

// kR consecutive rows u .. u + kR - 1 of y for the block's channels [j0, nc) from the W + kR - 1
// tap rows u - W + 1 .. u + kR - 1 (type T: E, or fp32 staged by row_taps when kR = 1): per vector
// each tap row is loaded (and converted) once for the kR outputs and each weight vector once per
// tap; every output accumulates its taps in order, so kR does not change a result. pf (or null):
// the kR rows to prefetch.
template <class T, class E, int kR, int kW, bool kSilu, bool kRes>
void fwd_rows(const T* const* taps, int W, const Stage& sg, const E* const* res, E* const* y, int j0, int nc,
              const bool* nt, const E* const* pf) {
  const int nw = kW > 0 ? kW : W;
  const auto rows = [&](int j, int m) {
    const bool full = m == kLanes;
    if (pf) {
#pragma GCC unroll 4
      for (int r = 0; r < kR; ++r) prefetch(pf[r] + j);
    }
    const vf b = simd::load(sg.bias + j);
    vf acc[kR];
#pragma GCC unroll 4
    for (int r = 0; r < kR; ++r) acc[r] = b;
#pragma GCC unroll 11
    for (int q = 0; q < nw + kR - 1; ++q) {  // x row q is tap i = q - r of output row r
      const vf xq = full ? simd::load(taps[q] + j) : simd::load_n(taps[q] + j, m);
#pragma GCC unroll 4
      for (int r = 0; r < kR; ++r)
        if (q - r >= 0 && q - r < nw) acc[r] += simd::load(sg.w[q - r] + j) * xq;
    }
#pragma GCC unroll 4
    for (int r = 0; r < kR; ++r) {
      if constexpr (kSilu) acc[r] = act_silu<E, kRes>(acc[r]);
      if constexpr (kRes) acc[r] += full ? simd::load(res[r] + j) : simd::load_n(res[r] + j, m);
      put(y[r] + j, acc[r], m, nt[r]);
    }
  };
  int j = j0;
  for (; j + kLanes <= nc; j += kLanes) rows(j, kLanes);
  if (j < nc) rows(j, std::min(nc - j, kLanes - 1));  // the bound keeps GCC's -Warray-bounds quiet
}

// Rows [r0, r1) of the block at c0 (nc channels), staged in sg / ds. Channels [0, j0) of rows
// whose taps are all in x go through fma_rows / dot_row (bf16 dot path; j0 = 0 when it does not
// apply), the rest through fwd_rows.
template <class E, int kW, bool kSilu, bool kRes>
void fwd_item(const ConvParams& p, Stage& sg, const DotStage& ds, int j0, int64_t r0, int64_t r1, int64_t c0,
              int nc, bool stream) {
  constexpr bool kDot = dot_applies<E, kW, kRes>();
  const int W = static_cast<int>(p.W);
  for_each_segment(p, r0, r1, [&](int64_t n, int64_t a, int64_t b, int64_t bos, int64_t) {
    const int64_t bi = batch_of(p, n), r2t = bi * p.T;
    const RowPtr<const E> x = rows_of<const E>(p.x, bi), res = rows_of<const E>(p.residual, bi);
    const RowPtr<E> y = rows_of<E>(p.y, bi);
    const E* xt[kConvMaxW];
    const float* ft[kConvMaxW];
    const E* x2[kConvMaxW + 3];
    // kR rows u .. u + kR - 1 that take every tap from x: kR + W - 1 tap rows, outputs, residuals,
    // streaming flags and the rows to prefetch (kPrefetchRows ahead, while they are in the sequence).
    const auto multi = [&]<int kR>(int64_t u) {
      E* yk[kR];
      const E* rk[kR];
      bool ntk[kR];
      const E* pfk[kR];
      const bool pf = u + kR - 1 + kPrefetchRows < b;
      for (int i = 0; i < W + kR - 1; ++i) x2[i] = x.at(u - W + 1 + i - r2t) + c0;
      for (int r = 0; r < kR; ++r) {
        yk[r] = y.at(u + r - r2t) + c0;
        rk[r] = kRes ? res.at(u + r - r2t) + c0 : nullptr;
        ntk[r] = stream && stream_aligned(yk[r]);
        pfk[r] = pf ? x.at(u + r + kPrefetchRows - r2t) + c0 : nullptr;
      }
      if constexpr (kDot) {
        if (j0 > 0) fma_rows<kR, kW, kSilu>(x2, ds, j0, yk, ntk, pf ? pfk : nullptr);
      }
      fwd_rows<E, E, kR, kW, kSilu, kRes>(x2, W, sg, rk, yk, j0, nc, ntk, pf ? pfk : nullptr);
    };
    for (int64_t u = a; u < b;) {
      if (u + 3 < b && u - bos >= W - 1) {
        multi.template operator()<4>(u);
        u += 4;
        continue;
      }
      if (u + 1 < b && u - bos >= W - 1) {
        multi.template operator()<2>(u);
        u += 2;
        continue;
      }
      const E* rr = kRes ? res.at(u - r2t) + c0 : nullptr;
      E* yr = y.at(u - r2t) + c0;
      const bool nt = stream && stream_aligned(yr);
      if (row_taps(p, sg, x, r2t, n, u, bos, c0, nc, xt, ft)) {
        if constexpr (kDot) {
          if (j0 > 0) dot_row_any<kW, kSilu>(xt, ds, j0, yr, nt, nullptr);
        }
        fwd_rows<E, E, 1, kW, kSilu, kRes>(xt, W, sg, &rr, &yr, j0, nc, &nt, nullptr);
      } else {
        fwd_rows<float, E, 1, kW, kSilu, kRes>(ft, W, sg, &rr, &yr, 0, nc, &nt, nullptr);
      }
      ++u;
    }
  });
}

template <class E, int kW, bool kSilu, bool kRes>
void fwd_all(const ConvParams& p, int threads) {
  const int cb = block_channels<E>();
  const int64_t nblk = ceil_div(p.D, cb), rows = p.rows();
  const bool stream = stream_outputs(rows * p.D * static_cast<int64_t>(sizeof(E)));
  parallel_for(
      ceil_div(rows, kRowTile) * nblk,
      [&](int64_t t0, int64_t t1, int) {
        Stage sg;
        DotStage ds;
        // Block-major inside the thread's items: each block's weights are staged (and split for
        // the dot path) once per thread, not once per 256-row item (measured gain ~2%, in the noise).
        for (int64_t blk = 0; blk < nblk; ++blk) {
          const int64_t first = t0 + ((blk - t0 % nblk) % nblk + nblk) % nblk;
          if (first >= t1) continue;
          const int64_t c0 = blk * cb;
          const int nc = static_cast<int>(std::min<int64_t>(cb, p.D - c0));
          sg.load(p, c0, nc, prescaled<E, kSilu, kRes>() ? simd::kSiluPreScale : 1.0f);
          int j0 = 0;
          if constexpr (dot_applies<E, kW, kRes>()) j0 = ds.load(sg, static_cast<int>(p.W), nc);
          for (int64_t t = first; t < t1; t += nblk) {
            const int64_t tile = t / nblk;
            fwd_item<E, kW, kSilu, kRes>(p, sg, ds, j0, tile * kRowTile, std::min(rows, (tile + 1) * kRowTile), c0,
                                         nc, stream);
          }
        }
        if (stream) simd::stream_fence();
      },
      threads);
}

template <class E, int kW>
void fwd_opts(const ConvParams& p, int threads) {
  const bool res = p.residual.data != nullptr;
  if (p.silu) res ? fwd_all<E, kW, true, true>(p, threads) : fwd_all<E, kW, true, false>(p, threads);
  else res ? fwd_all<E, kW, false, true>(p, threads) : fwd_all<E, kW, false, false>(p, threads);
}

template <class E>
void fwd_dtype(const ConvParams& p, int threads) {
  switch (p.W) {
    case 2: return fwd_opts<E, 2>(p, threads);
    case 3: return fwd_opts<E, 3>(p, threads);
    case 4: return fwd_opts<E, 4>(p, threads);
    default: return fwd_opts<E, 0>(p, threads);
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
