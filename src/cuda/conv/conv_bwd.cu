// CUDA short-conv backward (formulas in src/cpu/conv_bwd_cpu.cc). Three launches:
//  1. main: on aligned flat layouts with W <= 4 and enough blocks the long-run kernel
//     (conv_bwd_run.cu, v6, conv_run.cuh: use_run), else the tile kernel here (v3; tiling in
//     conv_common.cuh).
//     Tiles: x rows [tile - (W-1), tile end + W - 1) and dy rows [tile, tile end + W - 1) go
//     to shared memory by cp.async, double-buffered; each thread walks its rows of kC channels
//     with the x window and the last W - 1 dz in registers (z recomputed, never stored; W - 1
//     rows after its range are recomputed as halo), writes dx (+ d_final_state terms) and
//     dresidual, and accumulates dweight / dbias over all tiles of its row group. The block then
//     sums its row chunks in a fixed order and writes one partial per row group:
//     partials[group][W + 1][D].
//  2. reduce: dweight / dbias = sum over row groups in a fixed order (strided per warp, then the
//     8 warps in order): deterministic, run to run and replay to replay.
//  3. dinitial_state per (sequence, channel), from the first min(W - 1, len) tokens.
// Grids depend only on shapes; padding rows (>= cu_seqlens[N]) are never read by the math nor
// written. Eager calls without workspace allocate the partials stream-ordered.

#include "cuda/common/eager_pool.h"
#include "cuda/common/launch.h"
#include "cuda/conv/conv_cuda.h"
#include "cuda/conv/conv_run.cuh"

namespace linattn::cuda {
namespace conv {
namespace {

constexpr int kWarps = kThreads / 32;

template <class E, bool kVec, int kW>
__global__ void __launch_bounds__(kThreads, kW > 0 ? 3 : 1) bwd_kernel(const ConvParams p, int64_t tiles_per_group) {
  using TT = ThreadTile<E, kVec>;
  constexpr int kCap = kW > 0 ? kW : kConvMaxW;
  constexpr int CB = TT::CB, kC = TT::kC;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int W = kW > 0 ? kW : static_cast<int>(p.W);
  const int H = W - 1;
  const int rows_x = kRowTile + 2 * H, rows_g = kRowTile + H;
  const int stage = (rows_x + rows_g) * CB;  // elements per buffer: x rows, then dy rows
  E* const sm = reinterpret_cast<E*>(smem_raw);

  const int64_t rows = p.B * p.T;
  const int64_t ntiles = (rows + kRowTile - 1) / kRowTile;
  const TT th;
  const int64_t c = th.c;
  const int64_t t_begin = blockIdx.y * tiles_per_group;
  const int64_t t_end = t_begin + tiles_per_group < ntiles ? t_begin + tiles_per_group : ntiles;
  const bool want_dx = p.dx.data != nullptr, want_dres = p.dres.data != nullptr;

  Taps<kCap> taps[kC];
  float bias[kC], db[kC], dw[kC][kCap];
#pragma unroll
  for (int j = 0; j < kC; ++j) {
    bias[j] = db[j] = 0.0f;
#pragma unroll
    for (int i = 0; i < kCap; ++i) dw[j][i] = 0.0f;
    if (c + j < p.D) {
      taps[j].load(p, c + j, W);
      if (p.bias) bias[j] = load_small(p.bias, p.b_dtype, c + j);
    }
  }
  auto issue = [&](int64_t tile, int s) {
    const int64_t tr0 = tile * kRowTile;
    const int64_t hi = tr0 + kRowTile + H < rows ? tr0 + kRowTile + H : rows;
    E* const buf = sm + s * stage;
    copy_rows<E, kVec>(buf, tr0 - H, p.x, p, tr0 - H > 0 ? tr0 - H : 0, hi, th.c0);
    copy_rows<E, kVec>(buf + rows_x * CB, tr0, p.dy, p, tr0, hi, th.c0);
    cp_async_commit();
  };
  auto body = [&](int64_t tile, int s) {
    const int64_t tr0 = tile * kRowTile;
    const int64_t r0 = tr0 + th.chunk * TT::kRows;
    const int64_t r1 = r0 + TT::kRows < rows ? r0 + TT::kRows : rows;
    if (c >= p.D || r0 >= r1) return;
    const E* xs = sm + s * stage + th.cl * kC;  // row u at (u - (tr0 - H)) * CB
    const E* gs = xs + rows_x * CB;             // row u at (u - tr0) * CB
    for (int64_t n = find_seq(p, r0); n < p.N; ++n) {
      int64_t bos, eos;
      seq_bounds(p, n, &bos, &eos);
      if (bos >= r1) break;
      const int64_t a = r0 > bos ? r0 : bos, b = r1 < eos ? r1 : eos;
      if (a >= b) continue;
      const int len = static_cast<int>(b - a);                       // rows whose sums / dres we own
      const int ext = static_cast<int>((b + H < eos ? b + H : eos) - a);  // dz needed up to row b + W - 2
      const int off = static_cast<int>(a - tr0);
      Window<kCap> win[kC], dzr[kC];  // xbar / dz of rows u - W + 1 + k
      init_windows<E, kCap, kC, CB>(win, xs + off * CB, p, a, bos, n, c, W);
#pragma unroll
      for (int j = 0; j < kC; ++j)
#pragma unroll
        for (int k = 0; k < kCap - 1; ++k) dzr[j].v[k] = 0.0f;
      const E* xp = xs + (off + H) * CB;
      const E* gp = gs + off * CB;
      E* dresp = want_dres ? elem<E>(p.dres, p, a, c) : nullptr;
      E* dxp = want_dx ? elem<E>(p.dx, p, a, c) : nullptr;
      const int64_t dres_s = p.dres.st, dx_s = p.dx.st;
      // One row step. Steady rows (H <= i < len, and before the d_final_state rows) need none of
      // the range tests, and silu is a compile-time flag there: most rows take that loop.
      auto step = [&](int i, auto steady_c, auto silu_c) {
        constexpr bool kSteady = decltype(steady_c)::value;
        const bool do_silu = kSteady ? decltype(silu_c)::value : p.silu;
        float xu[kC] = {}, dz[kC] = {};
        if (kSteady || i < ext) {
          load_lanes<E, kC>(xp, xu);
          load_lanes<E, kC>(gp, dz);
          if (do_silu) {
#pragma unroll
            for (int j = 0; j < kC; ++j) dz[j] *= silu_grad(taps[j].conv(bias[j], win[j], xu[j], W));
          }
          if (kSteady || i < len) {
#pragma unroll
            for (int j = 0; j < kC; ++j) {
#pragma unroll
              for (int k = 0; k < kCap - 1; ++k)
                if (k < W - 1) dw[j][k] += dz[j] * win[j].v[k];
#pragma unroll
              for (int k = 0; k < kCap; ++k)
                if (k == W - 1) dw[j][k] += dz[j] * xu[j];
              db[j] += dz[j];
            }
            if (want_dres) {
              copy_lanes<E, kC>(dresp, gp);
              dresp += dres_s;
            }
          }
        }
        if (want_dx && (kSteady || i >= H)) {
          const int64_t t = a + i - H;
          float acc[kC];
#pragma unroll
          for (int j = 0; j < kC; ++j) {
            acc[j] = taps[j].at(0) * dz[j];  // dz_{t+k} pairs with weight[W-1-k]
#pragma unroll
            for (int k = 0; k < kCap - 1; ++k)
              if (k < W - 1) acc[j] += taps[j].at(W - 1 - k) * dzr[j].v[k];
            if (!kSteady && p.dht && t >= eos - W)
              acc[j] += load_small(p.dht, p.dht_dtype, (n * p.D + c + j) * p.W + t - (eos - W));
          }
          store_lanes<E, kC>(dxp, acc);
          dxp += dx_s;
        }
#pragma unroll
        for (int j = 0; j < kC; ++j) {
          win[j].push(xu[j], W);
          dzr[j].push(dz[j], W);
        }
        xp += CB;
        gp += CB;
      };
      using T_ = std::true_type;
      using F_ = std::false_type;
      int i = 0;
      for (; i < H; ++i) step(i, F_{}, F_{});
      int i_end = len > i ? len : i;
      if (p.dht) {  // rows t >= eos - W add d_final_state terms: the general step
        const int64_t lim = eos - W - a + H;
        if (lim < i_end) i_end = lim > i ? static_cast<int>(lim) : i;
      }
      // Not unrolled: an unrolled pair of steps needs > 80 registers (3 blocks per SM).
      if (p.silu) {
#pragma unroll 1
        for (; i < i_end; ++i) step(i, T_{}, T_{});
      } else {
#pragma unroll 1
        for (; i < i_end; ++i) step(i, T_{}, F_{});
      }
      for (; i < len + H; ++i) step(i, F_{}, F_{});
    }
  };
  tile_pipeline(t_begin, t_end, issue, body);
  // Fixed-order sum over the row chunks of the block, then one partial per row group.
  if (!p.partials) return;
  float* red = reinterpret_cast<float*>(smem_raw);  // [kChunks][W + 1][CB]; tiles are done
#pragma unroll
  for (int j = 0; j < kC; ++j) {
    const int cc = th.cl * kC + j;
#pragma unroll
    for (int i = 0; i < kCap; ++i)
      if (i < W) red[(th.chunk * (W + 1) + i) * CB + cc] = dw[j][i];
    red[(th.chunk * (W + 1) + W) * CB + cc] = db[j];
  }
  __syncthreads();
  for (int idx = static_cast<int>(threadIdx.x); idx < (W + 1) * CB; idx += kThreads) {
    const int i = idx / CB, cc = idx % CB;
    if (th.c0 + cc >= p.D) continue;
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < TT::kChunks; ++k) sum += red[(k * (W + 1) + i) * CB + cc];
    p.partials[(static_cast<int64_t>(blockIdx.y) * (W + 1) + i) * p.D + th.c0 + cc] = sum;
  }
}

// dweight[c, i] / dbias[c] = sum_g partials[g][i][c]; block (32 channels, 8 warps), grid
// (channel groups, W + 1). Warp y sums g = y, y + 8, ...; then the 8 warps in order.
__global__ void reduce_kernel(const ConvParams p, int64_t groups) {
  __shared__ float part[kWarps][32];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int64_t i = blockIdx.y;
  float s = 0.0f;
  if (c < p.D)
    for (int64_t g = threadIdx.y; g < groups; g += kWarps) s += p.partials[(g * (p.W + 1) + i) * p.D + c];
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || c >= p.D) return;
  float total = 0.0f;
#pragma unroll
  for (int y = 0; y < kWarps; ++y) total += part[y][threadIdx.x];
  if (i < p.W) {
    if (p.dweight) store_small(p.dweight, p.dw_dtype, c * p.W + i, total);
  } else if (p.dbias) {
    store_small(p.dbias, p.db_dtype, c, total);
  }
}

// dh0[n, c, s] = sum_{t < min(s, len)} dz_t weight[c, s-1-t] + d_final_state[n, c, s - len] (s >= len).
template <class E>
__global__ void initial_state_grad_kernel(const ConvParams p) {
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const int64_t n = blockIdx.x;
  if (c >= p.D) return;
  const int W = static_cast<int>(p.W);
  int64_t bos, eos;
  seq_bounds(p, n, &bos, &eos);
  const int64_t len = eos - bos;
  const int64_t head = len < W - 1 ? len : W - 1;
  float cat[2 * kConvMaxW], wc[kConvMaxW], dz[kConvMaxW];
  for (int k = 0; k < W; ++k) {
    cat[k] = p.h0 ? load_small(p.h0, p.h0_dtype, (n * p.D + c) * W + k) : 0.0f;
    wc[k] = load_small(p.weight, p.w_dtype, c * W + k);
  }
  for (int64_t t = 0; t < head; ++t) cat[W + t] = to_f(*elem<const E>(p.x, p, bos + t, c));
  for (int64_t t = 0; t < head; ++t) {
    const float g = to_f(*elem<const E>(p.dy, p, bos + t, c));
    dz[t] = g;
    if (p.silu) {
      float z = p.bias ? load_small(p.bias, p.b_dtype, c) : 0.0f;
      for (int i = 0; i < W; ++i) z += wc[i] * cat[t + 1 + i];
      dz[t] = g * silu_grad(z);
    }
  }
  for (int s = 0; s < W; ++s) {
    float v = 0.0f;
    for (int64_t t = 0; t < (s < len ? s : len); ++t) v += dz[t] * wc[s - 1 - t];
    if (p.dht && s >= len) v += load_small(p.dht, p.dht_dtype, (n * p.D + c) * W + s - len);
    store_small(p.dh0, p.dh0_dtype, (n * p.D + c) * W + s, v);
  }
}

template <class E>
size_t smem_bytes(int64_t W) {
  const int64_t tiles = 2 * (2 * kRowTile + 3 * (W - 1)) * tile_channels<E>() * static_cast<int64_t>(sizeof(E));
  const int64_t red = static_cast<int64_t>(kThreads) * 2 * (W + 1) * 4;  // kChunks * CB = kThreads * kC floats per tap
  return static_cast<size_t>(tiles > red ? tiles : red);
}

template <class E, bool kVec, int kW>
void launch_kernel(const ConvParams& p, cudaStream_t stream, dim3 grid, int64_t tpg) {
  // > 48 KiB of dynamic shared memory: opted in per (kernel, device) (a process-wide once would
  // leave every other GPU of the process at the default limit).
  ensure_dynamic_smem(reinterpret_cast<const void*>(bwd_kernel<E, kVec, kW>), smem_bytes<E>(kConvMaxW));
  bwd_kernel<E, kVec, kW><<<grid, kThreads, smem_bytes<E>(p.W), stream>>>(p, tpg);
}

template <class E>
void launch(ConvParams p, cudaStream_t stream) {
  conv_path();  // rejects a bad LINATTN_CONV_CUDA_PATH on every layout (read once)
  const int64_t rows = p.B * p.T;
  LINATTN_CHECK(rows < (int64_t{1} << 31), "x: expected fewer than 2^31 token rows (B * T), got ", rows);
  const bool want_sums = p.dweight || p.dbias;
  const bool any_rows = rows > 0 && p.N > 0;
  const int64_t groups = any_rows ? meta::conv_cuda_num_row_groups(rows, p.D) : 0;
  void* owned = nullptr;
  if (want_sums && !p.partials && groups > 0) {
    owned = eager_alloc(static_cast<size_t>(groups * (p.W + 1) * p.D) * 4, stream);
    p.partials = static_cast<float*>(owned);
  }
  if (!want_sums) p.partials = nullptr;
  if (any_rows && (p.dx.data || p.dres.data || want_sums)) {
    const bool vec = p.D % static_cast<int64_t>(16 / sizeof(E)) == 0 && rows_aligned(p.x, sizeof(E)) &&
                     rows_aligned(p.dy, sizeof(E));
    const bool vec_out = vec && rows_aligned(p.dx, sizeof(E)) && rows_aligned(p.dres, sizeof(E));
    const int64_t tpg = meta::conv_cuda_tiles_per_group(rows, p.D);
    const int64_t run_blocks = (p.D + run_span<E>() - 1) / run_span<E>() * groups;
    if (vec_out && p.W >= 2 && p.W <= 4 && run_flat(p.x, p) && run_flat(p.dy, p) && run_flat(p.dx, p) &&
        run_flat(p.dres, p) && use_run(run_blocks)) {
      bwd_run<E>(p, stream, tpg * kRowTile, groups);
    } else {
      const dim3 grid(static_cast<unsigned>((p.D + tile_channels<E>() - 1) / tile_channels<E>()),
                      static_cast<unsigned>(groups));
      if (!vec) launch_kernel<E, false, 0>(p, stream, grid, tpg);
      else if (p.W == 2) launch_kernel<E, true, 2>(p, stream, grid, tpg);
      else if (p.W == 3) launch_kernel<E, true, 3>(p, stream, grid, tpg);
      else if (p.W == 4) launch_kernel<E, true, 4>(p, stream, grid, tpg);
      else launch_kernel<E, true, 0>(p, stream, grid, tpg);
      LINATTN_CONV_CUDA_OK(cudaGetLastError());
    }
  }
  if (want_sums) {
    const dim3 grid(static_cast<unsigned>((p.D + 31) / 32), static_cast<unsigned>(p.W + 1));
    reduce_kernel<<<grid, dim3(32, kWarps), 0, stream>>>(p, groups);
    LINATTN_CONV_CUDA_OK(cudaGetLastError());
  }
  if (owned) LINATTN_CONV_CUDA_OK(cudaFreeAsync(owned, stream));
  if (p.dh0 && p.N > 0) {
    const dim3 grid(static_cast<unsigned>(p.N), static_cast<unsigned>((p.D + 127) / 128));
    initial_state_grad_kernel<E><<<grid, 128, 0, stream>>>(p);
    LINATTN_CONV_CUDA_OK(cudaGetLastError());
  }
}

}  // namespace
}  // namespace conv

void conv_bwd(const meta::ConvParams& p, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  switch (p.dtype) {
    case DType::kF32: return conv::launch<float>(p, s);
    case DType::kBF16: return conv::launch<__nv_bfloat16>(p, s);
    case DType::kF16: return conv::launch<__half>(p, s);
    default: LINATTN_UNSUPPORTED("conv_bwd (cuda): dtype ", dtype_name(p.dtype), " (expected fp32/bf16/fp16)");
  }
}

}  // namespace linattn::cuda
