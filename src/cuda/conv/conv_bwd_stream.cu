// CUDA short-conv backward, register streaming (conv_stream.cuh; formulas in
// src/cpu/conv_bwd_cpu.cc). A thread owns V = 8 / sizeof(E) channels (4 bf16 / fp16, 2 fp32: one
// 8-byte load of x and dy, store of dx / dresidual per row; fewer channels than the forward
// because it holds W dweight sums and the dz window too). Block = kBwdWarps warps on one 32 * V
// channel span and one row group of meta::conv_cuda_num_row_groups (the count the partials
// workspace is sized by): warp w walks rows [g0 + w * G / kBwdWarps, + G / kBwdWarps) of the
// group's G rows, streaming x and dy (kU rows in flight), recomputing z (never stored) and W - 1
// halo rows of dz past its range, and writes dx (+ d_final_state terms) and dresidual. Its
// dweight / dbias sums are added over the block's warps in warp order in shared memory, one
// partial per (group, channel): the same fixed order every run (reduce and dinitial_state
// kernels: conv_bwd.cu).
#include "cuda/conv/conv_stream.cuh"

namespace linattn::cuda::conv {
namespace {

constexpr int kBwdWarps = 4;
static_assert(kRowTile % kBwdWarps == 0, "a group's rows split evenly over the warps");

template <class E, int kW, int kU>
__global__ void __launch_bounds__(kBwdWarps * 32) bwd_stream_kernel(const ConvParams p, int64_t tiles_per_group) {
  constexpr int V = 8 / static_cast<int>(sizeof(E));
  constexpr int kSpan = 32 * V;
  constexpr int kCap = kW > 0 ? kW : kConvMaxW;
  using L = Lanes<E, V>;
  __shared__ float red[kBwdWarps][kCap + 1][kSpan];
  const int W = kW > 0 ? kW : static_cast<int>(p.W);
  const int H = W - 1;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kSpan;
  const int64_t c = c0 + lane * V;
  const int64_t rows = p.B * p.T;
  const int64_t run = tiles_per_group * (kRowTile / kBwdWarps);
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * tiles_per_group * kRowTile + warp * run;
  const int64_t r1 = r0 + run < rows ? r0 + run : rows;
  const bool want_dx = p.dx.data != nullptr, want_dres = p.dres.data != nullptr;

  float dw[V][kCap], db[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    db[j] = 0.0f;
#pragma unroll
    for (int i = 0; i < kCap; ++i) dw[j][i] = 0.0f;
  }
  if (c < p.D && r0 < r1) {
    Taps<kCap> taps[V];
    float bias[V], rev[V][kCap];  // rev[j][k] = weight[c + j, W - 1 - k]: dz_{t+k} pairs with it
    load_taps<kCap, V>(taps, bias, p, c, W);
#pragma unroll
    for (int j = 0; j < V; ++j)
#pragma unroll
      for (int k = 0; k < kCap; ++k) rev[j][k] = k < W ? taps[j].at(W - 1 - k) : 0.0f;
    for (int64_t n = find_seq(p, r0); n < p.N; ++n) {
      int64_t bos, eos;
      seq_bounds(p, n, &bos, &eos);
      if (bos >= r1) break;
      const int64_t a = r0 > bos ? r0 : bos, b = r1 < eos ? r1 : eos;
      if (a >= b) continue;
      const int len = static_cast<int>(b - a);                            // rows whose sums / dres we own
      const int ext = static_cast<int>((b + H < eos ? b + H : eos) - a);  // dz needed up to row b + W - 2
      Window<kCap> win[V], dzr[V];  // xbar / dz of rows u - W + 1 + k
      init_windows_global<E, kCap, V>(win, p, a, bos, n, c, W);
#pragma unroll
      for (int j = 0; j < V; ++j)
#pragma unroll
        for (int k = 0; k < kCap - 1; ++k) dzr[j].v[k] = 0.0f;
      RowRing<E, L::kBytes, kU> xr, gr;
      xr.start(elem<const E>(p.x, p, a, c), p.x.st, ext);
      gr.start(elem<const E>(p.dy, p, a, c), p.dy.st, ext);
      E* const dres0 = want_dres ? elem<E>(p.dres, p, a, c) : nullptr;
      E* const dx0 = want_dx ? elem<E>(p.dx, p, a, c) : nullptr;
      const int64_t dres_s = p.dres.st, dx_s = p.dx.st;
      const int steps = len + H;
      for (int base = 0; base < steps; base += kU) {
#pragma unroll
        for (int k = 0; k < kU; ++k) {
          const int i = base + k;
          if (i >= steps) continue;
          float xu[V], dz[V];
#pragma unroll
          for (int j = 0; j < V; ++j) xu[j] = dz[j] = 0.0f;
          if (i < ext) {
            const typename L::R graw = gr.get(k, i, ext);
            L::to_float(xr.get(k, i, ext), xu);
            L::to_float(graw, dz);
            if (p.silu) {
#pragma unroll
              for (int j = 0; j < V; ++j) dz[j] *= silu_grad(taps[j].conv(bias[j], win[j], xu[j], W));
            }
            if (i < len) {
#pragma unroll
              for (int j = 0; j < V; ++j) {
#pragma unroll
                for (int q = 0; q < kCap - 1; ++q)
                  if (q < W - 1) dw[j][q] += dz[j] * win[j].v[q];
#pragma unroll
                for (int q = 0; q < kCap; ++q)
                  if (q == W - 1) dw[j][q] += dz[j] * xu[j];
                db[j] += dz[j];
              }
              if (want_dres) graw.store(dres0 + static_cast<int64_t>(i) * dres_s);
            }
          }
          if (want_dx && i >= H) {
            const int64_t t = a + i - H;
            const bool tail = p.dht && t >= eos - W;  // d_final_state reaches the last W rows
            float acc[V];
#pragma unroll
            for (int j = 0; j < V; ++j) {
              acc[j] = taps[j].w[0] * dz[j];  // dz_{t+W-1}
#pragma unroll
              for (int q = 0; q < kCap - 1; ++q)
                if (q < W - 1) acc[j] += rev[j][q] * dzr[j].v[q];  // dz_{t+q}
              if (tail)
                acc[j] += load_small(p.dht, p.dht_dtype, (n * p.D + c + j) * p.W + t - (eos - W));
            }
            L::from_float(acc).store(dx0 + static_cast<int64_t>(i - H) * dx_s);
          }
#pragma unroll
          for (int j = 0; j < V; ++j) {
            win[j].push(xu[j], W);
            dzr[j].push(dz[j], W);
          }
        }
      }
    }
  }
  if (!p.partials) return;  // uniform over the block
#pragma unroll
  for (int j = 0; j < V; ++j) {
#pragma unroll
    for (int i = 0; i < kCap; ++i)
      if (i < W) red[warp][i][lane * V + j] = dw[j][i];
    red[warp][W][lane * V + j] = db[j];
  }
  __syncthreads();
  for (int idx = static_cast<int>(threadIdx.x); idx < (W + 1) * kSpan; idx += kBwdWarps * 32) {
    const int i = idx / kSpan, cc = idx % kSpan;
    if (c0 + cc >= p.D) continue;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kBwdWarps; ++w) sum += red[w][i][cc];
    p.partials[(static_cast<int64_t>(blockIdx.y) * (W + 1) + i) * p.D + c0 + cc] = sum;
  }
}

template <class E, int kU>
void launch_w(const ConvParams& p, cudaStream_t stream, dim3 grid, int64_t tpg) {
  const dim3 block(kBwdWarps * 32);
  if (p.W == 2) bwd_stream_kernel<E, 2, kU><<<grid, block, 0, stream>>>(p, tpg);
  else if (p.W == 3) bwd_stream_kernel<E, 3, kU><<<grid, block, 0, stream>>>(p, tpg);
  else if (p.W == 4) bwd_stream_kernel<E, 4, kU><<<grid, block, 0, stream>>>(p, tpg);
  else bwd_stream_kernel<E, 0, kU><<<grid, block, 0, stream>>>(p, tpg);
}

}  // namespace

template <class E>
void bwd_stream(const ConvParams& p, cudaStream_t stream, int64_t groups) {
  constexpr int64_t kSpan = 32 * (8 / static_cast<int64_t>(sizeof(E)));
  const int64_t rows = p.B * p.T;
  const int64_t tpg = meta::conv_cuda_tiles_per_group(rows, p.D);
  const dim3 grid(static_cast<unsigned>((p.D + kSpan - 1) / kSpan), static_cast<unsigned>(groups));
  launch_w<E, 4>(p, stream, grid, tpg);
  LINATTN_CONV_CUDA_OK(cudaGetLastError());
}

template void bwd_stream<float>(const ConvParams&, cudaStream_t, int64_t);
template void bwd_stream<__nv_bfloat16>(const ConvParams&, cudaStream_t, int64_t);
template void bwd_stream<__half>(const ConvParams&, cudaStream_t, int64_t);

}  // namespace linattn::cuda::conv
