// CPU short-conv backward. With dz_t = dy_t * act'(z_t) (z recomputed, never stored):
//   dx_t = sum_i weight[:, W-1-i] dz_{t+i} (t+i < len) + d_final_state[:, t - len + W]
//   dweight[:, i] = sum_t dz_t xbar[t - W + 1 + i],  dbias = sum_t dz_t,  dresidual = dy,
//   dh0[:, s] = sum_{t < min(s, len)} dz_t weight[:, s-1-t] + d_final_state[:, s - len] (s >= len).
// Work item = one of conv_cpu_num_groups(rows) fixed row groups. It walks its rows in tiles of
// kRowTile, and every tile for each channel block (2 KiB per row) in row order: row u's dz goes
// to a ring of the last W rows (fp32, L1), dx of row u - W + 1 is then complete; the W - 1 rows
// after a piece are recomputed (halo). dweight / dbias sums of a (tile, block) are added to the
// group's partials[g][W + 1][D] (written only by that item) in tile order, and the groups are
// summed in order afterwards: bitwise independent of the thread count.
#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/thread_pool.h"
#include "core/util.h"
#include "cpu/conv_cpu.h"
#include "cpu/conv_cpu_common.h"

namespace linattn::cpu {

namespace conv {
namespace {

struct BwdScratch {
  float ring[kConvMaxW][kMaxBlock + kLanes];     // dz of rows u with u % W == slot
  float sums[kConvMaxW + 1][kMaxBlock + kLanes];  // dweight (0..W-1), dbias (W) of a (tile, block)
  float dht[kMaxBlock + kLanes];                  // a d_final_state slot row
};

template <class E>
LINATTN_SIMD_INLINE vf ld(const E* ptr, int m) {
  return m == kLanes ? simd::load(ptr) : simd::load_n(ptr, m);
}

// dz of one row from its W taps (type T) and dy; accumulates the (tile, block) sums when `acc`.
template <class T, class E, int kW, bool kSilu>
void dz_row(const T* const* taps, int W, const Stage& sg, const E* dy, float* dz, BwdScratch* acc, int nc) {
  const int nw = kW > 0 ? kW : W;
  for (int j = 0; j < nc; j += kLanes) {
    const int m = std::min(kLanes, nc - j);
    vf tap[kW > 0 ? kW : kConvMaxW];
    for (int i = 0; i < nw; ++i) tap[i] = ld(taps[i] + j, m);
    const vf g = ld(dy + j, m);
    vf d = g;
    if constexpr (kSilu) {
      vf z = simd::load(sg.bias + j);
      for (int i = 0; i < nw; ++i) z += simd::load(sg.w[i] + j) * tap[i];
      d = g * simd::silu_grad(z);
    }
    simd::store(dz + j, d);
    if (acc) {
      for (int i = 0; i < nw; ++i) simd::store(acc->sums[i] + j, simd::load(acc->sums[i] + j) + d * tap[i]);
      simd::store(acc->sums[nw] + j, simd::load(acc->sums[nw] + j) + d);
    }
  }
}

// dx of one row: sum_k weight[:, W-1-k] * dz_{t+k} (+ the d_final_state slot row).
template <class E, int kW>
void dx_row(const float* const* dzs, int W, const Stage& sg, const float* dht, E* dx, int nc, bool nt) {
  const int nw = kW > 0 ? kW : W;
  for (int j = 0; j < nc; j += kLanes) {
    const int m = std::min(kLanes, nc - j);
    vf acc = dht ? simd::load(dht + j) : simd::splat(0.0f);
    for (int k = 0; k < nw; ++k) acc += simd::load(sg.w[nw - 1 - k] + j) * simd::load(dzs[k] + j);
    put(dx + j, acc, m, nt);
  }
}

// Rows [a, b) of sequence n (tokens [bos, eos)) for channels [c0, c0 + nc).
template <class E, int kW, bool kSilu>
void bwd_piece(const ConvParams& p, Stage& sg, BwdScratch& sc, int64_t n, int64_t a, int64_t b, int64_t bos,
               int64_t eos, int64_t c0, int nc, bool stream) {
  const int W = static_cast<int>(p.W);
  const int64_t bi = batch_of(p, n), r2t = bi * p.T;
  const RowPtr<const E> x = rows_of<const E>(p.x, bi), dy = rows_of<const E>(p.dy, bi);
  const RowPtr<E> dx = rows_of<E>(p.dx, bi), dres = rows_of<E>(p.dres, bi);
  const int64_t e = std::min(b + W - 1, eos);  // dz is needed up to row b + W - 2
  const E* xt[kConvMaxW];
  const float* ft[kConvMaxW];
  const float* dzs[kConvMaxW];
  for (int64_t u = a; u < b + W - 1; ++u) {
    float* dz = sc.ring[u % W];
    if (u < e) {
      BwdScratch* acc = u < b ? &sc : nullptr;
      const E* g = dy.at(u - r2t) + c0;
      if (row_taps(p, sg, x, r2t, n, u, bos, c0, nc, xt, ft)) dz_row<E, E, kW, kSilu>(xt, W, sg, g, dz, acc, nc);
      else dz_row<float, E, kW, kSilu>(ft, W, sg, g, dz, acc, nc);
      if (u < b && p.dres.data) std::memcpy(dres.at(u - r2t) + c0, g, sizeof(E) * nc);
    } else {
      std::fill(dz, dz + nc, 0.0f);
    }
    const int64_t t = u - (W - 1);
    if (!p.dx.data || t < a) continue;
    for (int k = 0; k < W; ++k) dzs[k] = sc.ring[(t + k) % W];
    const float* dh = nullptr;
    if (p.dht && t >= eos - W) {
      state_row(p.dht, p.dht_dtype, p, n, c0, nc, t - (eos - W), sc.dht);
      dh = sc.dht;
    }
    E* dxr = dx.at(t - r2t) + c0;
    dx_row<E, kW>(dzs, W, sg, dh, dxr, nc, stream && stream_aligned(dxr));
  }
}

template <class E, int kW, bool kSilu>
void bwd_group(const ConvParams& p, Stage& sg, BwdScratch& sc, int64_t g, int64_t r0, int64_t r1, bool stream) {
  const int cb = block_channels<E>();
  const int W = static_cast<int>(p.W);
  float* part = p.partials ? p.partials + g * (p.W + 1) * p.D : nullptr;
  if (part) std::fill(part, part + (p.W + 1) * p.D, 0.0f);
  for (int64_t s0 = r0; s0 < r1; s0 += kRowTile) {
    const int64_t s1 = std::min(r1, s0 + kRowTile);
    for (int64_t c0 = 0; c0 < p.D; c0 += cb) {
      const int nc = static_cast<int>(std::min<int64_t>(cb, p.D - c0));
      const int padded = (nc + kLanes - 1) / kLanes * kLanes;
      sg.load(p, c0, nc);
      for (int i = 0; i <= W; ++i) std::fill(sc.sums[i], sc.sums[i] + padded, 0.0f);
      for_each_segment(p, s0, s1, [&](int64_t n, int64_t a, int64_t b, int64_t bos, int64_t eos) {
        bwd_piece<E, kW, kSilu>(p, sg, sc, n, a, b, bos, eos, c0, nc, stream);
      });
      if (!part) continue;
      for (int i = 0; i <= W; ++i)
        for (int c = 0; c < nc; ++c) part[i * p.D + c0 + c] += sc.sums[i][c];
    }
  }
}

template <class E, int kW, bool kSilu>
void bwd_all(const ConvParams& p, int threads) {
  const int64_t rows = p.rows(), groups = meta::conv_cpu_num_groups(rows);
  const bool stream = stream_outputs(rows * p.D * static_cast<int64_t>(sizeof(E)));
  parallel_for(
      groups,
      [&](int64_t g0, int64_t g1, int) {
        Stage sg;
        BwdScratch sc;
        for (int64_t g = g0; g < g1; ++g) {
          int64_t r0, r1;
          static_range(rows, static_cast<int>(groups), static_cast<int>(g), &r0, &r1);
          bwd_group<E, kW, kSilu>(p, sg, sc, g, r0, r1, stream);
        }
        if (stream) simd::stream_fence();
      },
      threads);
}

template <class E, int kW>
void bwd_opts(const ConvParams& p, int threads) {
  if (p.silu) bwd_all<E, kW, true>(p, threads);
  else bwd_all<E, kW, false>(p, threads);
}

template <class E>
void bwd_dtype(const ConvParams& p, int threads) {
  switch (p.W) {
    case 2: return bwd_opts<E, 2>(p, threads);
    case 3: return bwd_opts<E, 3>(p, threads);
    case 4: return bwd_opts<E, 4>(p, threads);
    default: return bwd_opts<E, 0>(p, threads);
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
            const auto off = [&](const ConvRows& r, int64_t t) { return bi * r.sb + (bos + t - r2t) * r.st + c; };
            for (int64_t t = 0; t < head; ++t) cat[W + t] = load_as_float(p.x.data, p.dtype, off(p.x, t));
            for (int64_t t = 0; t < head; ++t) {
              const float g = load_as_float(p.dy.data, p.dtype, off(p.dy, t));
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
    meta::ConvParams q = p;
    if (!want_sums) q.partials = nullptr;
    switch (p.dtype) {
      case DType::kF32: conv::bwd_dtype<float>(q, num_threads); break;
      case DType::kBF16: conv::bwd_dtype<simd::bf16_t>(q, num_threads); break;
      case DType::kF16: conv::bwd_dtype<simd::fp16_t>(q, num_threads); break;
      default: LINATTN_UNSUPPORTED("conv_bwd (cpu): dtype ", dtype_name(p.dtype), " (expected fp32/bf16/fp16)");
    }
  }
  if (want_sums) conv::reduce_partials(p, num_threads);
  if (p.dh0) conv::initial_state_grad(p, num_threads);
}

}  // namespace linattn::cpu
