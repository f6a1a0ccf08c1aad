// CPU short-conv backward. With dz_t = dy_t * act'(z_t) (z recomputed, never stored):
//   dx_t = sum_i weight[:, W-1-i] dz_{t+i} (t+i < len) + d_final_state[:, t - len + W]
//   dweight[:, i] = sum_t dz_t xbar[t - W + 1 + i],  dbias = sum_t dz_t,  dresidual = dy,
//   dh0[:, s] = sum_{t < min(s, len)} dz_t weight[:, s-1-t] + d_final_state[:, s - len] (s >= len).
// Work item = (row group g x channel block). The rows are cut into conv_cpu_num_groups(rows)
// fixed groups; each item walks its group in passes of kRowsPerPass rows, one 16-channel vector
// at a time, with the x window and the last W - 1 dz in registers (W - 1 halo rows per pass are
// recomputed). dweight / dbias partial sums go to partials[g][W + 1][D] (each slot written by
// one item) and are summed over g in order afterwards: bitwise independent of the thread count.
#include <algorithm>

#include "core/check.h"
#include "core/thread_pool.h"
#include "core/util.h"
#include "cpu/conv_cpu.h"
#include "cpu/conv_cpu_common.h"

namespace linattn::cpu {

namespace conv {
namespace {

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

// Per-item fp32 sums of dweight (slots 0..W-1) and dbias (slot W) for the block's channels.
struct BlockSums {
  float v[kConvMaxW + 1][kMaxBlock + kLanes];
};

// Rows [a, b) of sequence n (tokens [bos, eos)), lanes [0, m) of channel vector c (offset j).
template <class E, int kW, bool kFull>
void bwd_vector(const ConvParams& p, const Stage& sg, BlockSums& sums, int j, int64_t c, int m,
                int64_t n, int64_t a, int64_t b, int64_t bos, int64_t eos) {
  constexpr int kCap = kW > 0 ? kW : kConvMaxW;
  const int W = kW > 0 ? kW : static_cast<int>(p.W);
  const int64_t bi = batch_of(p, n), r2t = bi * p.T;
  const RowPtr<const E> x = rows_of<const E>(p.x, bi), dy = rows_of<const E>(p.dy, bi);
  const RowPtr<E> dx = rows_of<E>(p.dx, bi), dres = rows_of<E>(p.dres, bi);
  const bool want_dx = p.dx.data != nullptr, want_dres = p.dres.data != nullptr;
  const int64_t e = std::min(b + W - 1, eos);  // dz is needed up to row b + W - 2

  vf w[kCap], win[kCap], dzr[kCap], dw[kCap];
  for (int i = 0; i < W; ++i) {
    w[i] = simd::load(&sg.w[i][j]);
    dw[i] = simd::splat(0.0f);
    dzr[i] = simd::splat(0.0f);
  }
  vf db = simd::splat(0.0f);
  const vf bias = simd::load(&sg.bias[j]);
  for (int k = 0; k < W - 1; ++k) {
    const int64_t q = a - (W - 1) + k;
    win[k] = q >= bos ? ld<E, kFull>(x.at(q - r2t) + c, m)
                      : load_state(p.h0, p.h0_dtype, p, n, c, W + q - bos, m);
  }
  for (int64_t u = a; u < b + W - 1; ++u) {
    vf dz = simd::splat(0.0f), xu = dz;
    if (u < e) {
      xu = ld<E, kFull>(x.at(u - r2t) + c, m);
      const vf g = ld<E, kFull>(dy.at(u - r2t) + c, m);
      dz = g;
      if (p.silu) {
        vf z = bias;
        for (int k = 0; k < W - 1; ++k) z += w[k] * win[k];
        z += w[W - 1] * xu;
        dz = g * simd::silu_grad(z);
      }
      if (u < b) {
        for (int k = 0; k < W - 1; ++k) dw[k] += dz * win[k];
        dw[W - 1] += dz * xu;
        db += dz;
        if (want_dres) st<E, kFull>(dres.at(u - r2t) + c, g, m);
      }
    }
    const int64_t t = u - (W - 1);
    if (want_dx && t >= a) {
      vf acc = w[0] * dz;
      for (int k = 0; k < W - 1; ++k) acc += w[W - 1 - k] * dzr[k];
      if (p.dht && t >= eos - W) acc += load_state(p.dht, p.dht_dtype, p, n, c, t - (eos - W), m);
      st<E, kFull>(dx.at(t - r2t) + c, acc, m);
    }
    for (int k = 0; k + 1 < W - 1; ++k) {
      win[k] = win[k + 1];
      dzr[k] = dzr[k + 1];
    }
    if (W > 1) {
      win[W - 2] = xu;
      dzr[W - 2] = dz;
    }
  }
  for (int i = 0; i < W; ++i) simd::store(&sums.v[i][j], simd::load(&sums.v[i][j]) + dw[i]);
  simd::store(&sums.v[W][j], simd::load(&sums.v[W][j]) + db);
}

template <class E, int kW>
void bwd_item(const ConvParams& p, int64_t g, int64_t r0, int64_t r1, int64_t c0, int nc) {
  Stage sg;
  sg.load(p, c0, nc);
  BlockSums sums;
  const int padded = (nc + kLanes - 1) / kLanes * kLanes;
  for (int i = 0; i <= p.W; ++i) std::fill(sums.v[i], sums.v[i] + padded, 0.0f);
  for (int64_t s0 = r0; s0 < r1; s0 += kRowsPerPass) {
    for_each_segment(p, s0, std::min(r1, s0 + kRowsPerPass),
                     [&](int64_t n, int64_t a, int64_t b, int64_t bos, int64_t eos) {
                       int j = 0;
                       for (; j + kLanes <= nc; j += kLanes)
                         bwd_vector<E, kW, true>(p, sg, sums, j, c0 + j, kLanes, n, a, b, bos, eos);
                       if (j < nc)
                         bwd_vector<E, kW, false>(p, sg, sums, j, c0 + j, nc - j, n, a, b, bos, eos);
                     });
  }
  if (!p.partials) return;
  for (int i = 0; i <= p.W; ++i)
    std::copy(sums.v[i], sums.v[i] + nc, p.partials + (g * (p.W + 1) + i) * p.D + c0);
}

template <class E, int kW>
void bwd_all(const ConvParams& p, int threads) {
  const int cb = block_channels<E>();
  const int64_t nblk = ceil_div(p.D, cb), rows = p.rows();
  const int64_t groups = meta::conv_cpu_num_groups(rows);
  parallel_for(
      groups * nblk,
      [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t g = t / nblk, c0 = (t % nblk) * cb;
          int64_t r0, r1;
          static_range(rows, static_cast<int>(groups), static_cast<int>(g), &r0, &r1);
          bwd_item<E, kW>(p, g, r0, r1, c0, static_cast<int>(std::min<int64_t>(cb, p.D - c0)));
        }
      },
      threads);
}

template <class E>
void bwd_dtype(const ConvParams& p, int threads) {
  switch (p.W) {
    case 2: return bwd_all<E, 2>(p, threads);
    case 3: return bwd_all<E, 3>(p, threads);
    case 4: return bwd_all<E, 4>(p, threads);
    default: return bwd_all<E, 0>(p, threads);
  }
}

// dweight[c, i] = sum_g partials[g][i][c], dbias[c] = sum_g partials[g][W][c], g in order.
void reduce_partials(const ConvParams& p, int threads) {
  const int64_t groups = meta::conv_cpu_num_groups(p.rows());
  parallel_for(
      p.D,
      [&](int64_t c0, int64_t c1, int) {
        for (int64_t c = c0; c < c1; ++c)
          for (int64_t i = 0; i <= p.W; ++i) {
            float s = 0.0f;
            for (int64_t g = 0; g < groups; ++g) s += p.partials[(g * (p.W + 1) + i) * p.D + c];
            if (i < p.W && p.dweight) store_from_float(p.dweight, p.dw_dtype, c * p.W + i, s);
            if (i == p.W && p.dbias) store_from_float(p.dbias, p.db_dtype, c, s);
          }
      },
      threads);
}

// dh0 of every sequence; recomputes dz for its first min(W - 1, len) tokens.
void initial_state_grad(const ConvParams& p, int threads) {
  const int W = static_cast<int>(p.W);
  parallel_for(
      p.N,
      [&](int64_t n0, int64_t n1, int) {
        for (int64_t n = n0; n < n1; ++n) {
          int64_t bos, eos;
          seq_bounds(p, n, &bos, &eos);
          const int64_t len = eos - bos;
          const int64_t bi = batch_of(p, n), r2t = bi * p.T;
          const int64_t head = std::min<int64_t>(W - 1, len);
          for (int64_t c = 0; c < p.D; ++c) {
            float cat[2 * kConvMaxW], wc[kConvMaxW], dz[kConvMaxW];
            for (int k = 0; k < W; ++k) {
              cat[k] = p.h0 ? load_as_float(p.h0, p.h0_dtype, (n * p.D + c) * W + k) : 0.0f;
              wc[k] = load_as_float(p.weight, p.w_dtype, c * W + k);
            }
            const auto off = [&](int64_t t) { return bi * p.x.sb + (bos + t - r2t) * p.x.st + c; };
            const auto doff = [&](int64_t t) { return bi * p.dy.sb + (bos + t - r2t) * p.dy.st + c; };
            for (int64_t t = 0; t < head; ++t) cat[W + t] = load_as_float(p.x.data, p.dtype, off(t));
            for (int64_t t = 0; t < head; ++t) {
              const float g = load_as_float(p.dy.data, p.dtype, doff(t));
              dz[t] = g;
              if (p.silu) {
                float z = p.bias ? load_as_float(p.bias, p.b_dtype, c) : 0.0f;
                for (int i = 0; i < W; ++i) z += wc[i] * cat[t + 1 + i];
                dz[t] = g * simd::silu_grad(simd::splat(z))[0];
              }
            }
            for (int s = 0; s < W; ++s) {
              float v = 0.0f;
              for (int64_t t = 0; t < std::min<int64_t>(s, len); ++t) v += dz[t] * wc[s - 1 - t];
              if (p.dht && s >= len) v += load_as_float(p.dht, p.dht_dtype, (n * p.D + c) * W + s - len);
              store_from_float(p.dh0, p.dh0_dtype, (n * p.D + c) * W + s, v);
            }
          }
        }
      },
      threads);
}

}  // namespace
}  // namespace conv

void conv_bwd(const meta::ConvParams& p, int num_threads) {
  const bool want_sums = p.dweight || p.dbias;
  LINATTN_ASSERT(!want_sums || p.partials || meta::conv_cpu_num_groups(p.rows()) == 0,
                 "conv_bwd (cpu): dweight / dbias need the partials workspace");
  if (p.dx.data || p.dres.data || want_sums) {
    switch (p.dtype) {
      case DType::kF32: conv::bwd_dtype<float>(p, num_threads); break;
      case DType::kBF16: conv::bwd_dtype<simd::bf16_t>(p, num_threads); break;
      case DType::kF16: conv::bwd_dtype<simd::fp16_t>(p, num_threads); break;
      default: LINATTN_UNSUPPORTED("conv_bwd (cpu): dtype ", dtype_name(p.dtype), " (expected fp32/bf16/fp16)");
    }
  }
  if (want_sums) conv::reduce_partials(p, num_threads);
  if (p.dh0) conv::initial_state_grad(p, num_threads);
}

}  // namespace linattn::cpu
