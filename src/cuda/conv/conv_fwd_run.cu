// CUDA short-conv forward, long runs (v6; design in conv_run.cuh): y = act(bias + sum_i
// weight[:, i] * xbar[t - W + 1 + i]) + residual. Block = 1 KiB of every row x one group of
// group_rows consecutive rows (any split: the forward has no partial sums); a thread walks every
// row of its group with the x window in registers (loaded from global memory / initial_state once
// per group and at each sequence start) and writes y. x (and residual) come through the staged
// ring; silu and residual are compile-time flags of the kernel.
#include "cuda/common/launch.h"
#include "cuda/conv/conv_run.cuh"

namespace linattn::cuda::conv {
namespace {

template <class E, int kW, bool kSilu, bool kRes>
__global__ void __launch_bounds__(kThreads, 4) fwd_run_kernel(const ConvParams p, int64_t group_rows) {
  constexpr int kC = run_chans<E>(), SPAN = run_span<E>(), H = kW - 1;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int c0 = static_cast<int>(blockIdx.x) * SPAN;  // rows and D < 2^31: 32-bit indices
  const int c = c0 + static_cast<int>(threadIdx.x) * kC;
  const bool active = c < p.D;
  const int rend = static_cast<int>(seq_start(p, p.N));  // rows past the last sequence are padding
  const int g0 = static_cast<int>(blockIdx.y) * static_cast<int>(group_rows);
  const int g1 = g0 + static_cast<int>(group_rows) < rend ? g0 + static_cast<int>(group_rows) : rend;
  if (g0 >= g1) return;  // block-uniform

  Taps<kW> taps[kC];
  float bias[kC];
#pragma unroll
  for (int j = 0; j < kC; ++j) {
    bias[j] = 0.0f;
#pragma unroll
    for (int k = 0; k < kW; ++k) taps[j].w[k] = 0.0f;
  }
  if (active) load_taps<kW, kC>(taps, bias, p, c, kW);
  float xw[kC][H];  // x of rows u - H + k
  int n = static_cast<int>(find_seq(p, g0)), bos, eos;
  seq_bounds32(p, n, &bos, &eos);
  if (active) run_x_window<E, kW, kC>(xw, p, g0, bos, n, c);
  E* const y0 = static_cast<E*>(p.y.data) + c;
  const int64_t yst = p.y.st;

  auto row = [&](const E* xp, const E* rp, E* yp) {
    float xu[kC], res[kC], out[kC];
    load_lanes<E, kC>(xp, xu);
    if constexpr (kRes) load_lanes<E, kC>(rp, res);
#pragma unroll
    for (int j = 0; j < kC; ++j) {
      float z = fmaf(taps[j].w[H], xu[j], bias[j]);
#pragma unroll
      for (int k = 0; k < H; ++k) z = fmaf(taps[j].w[k], xw[j][k], z);
      if constexpr (kSilu) z = silu_f(z);
      if constexpr (kRes) z += res[j];
      out[j] = z;
#pragma unroll
      for (int k = 0; k + 1 < H; ++k) xw[j][k] = xw[j][k + 1];
      xw[j][H - 1] = xu[j];
    }
    store_lanes<E, kC>(yp, out);
  };

  RunCopy<E> cx, cr;
  cx.init(p.x, g0, c0, p.D, smem_raw);
  if constexpr (kRes) cr.init(p.residual, g0, c0, p.D, smem_raw + kRunRows * kRunRowBytes);
  constexpr int kStage = (kRes ? 2 : 1) * kRunRows * kRunRowBytes;  // bytes: x rows, then residual rows
  const int ntiles = (g1 - g0 + kRunRows - 1) / kRunRows;
  auto issue = [&](int k, int st) {
    const int left = g1 - g0 - k * kRunRows;
    const int nrows = left < kRunRows ? left : kRunRows;
    cx.issue(st * kStage, nrows);
    if constexpr (kRes) cr.issue(st * kStage, nrows);
  };
  auto body = [&](int k, int st) {
    if (!active) return;
    const E* xs = reinterpret_cast<const E*>(smem_raw + st * kStage) + threadIdx.x * kC;
    const E* rs = xs + kRunRows * SPAN;
    const int r = g0 + k * kRunRows;
    E* yp = y0 + static_cast<int64_t>(r) * yst;
    if (r >= bos && r + kRunRows <= eos && r + kRunRows <= g1) {  // one sequence: no tests
#pragma unroll
      for (int i = 0; i < kRunRows; ++i, yp += yst) row(xs + i * SPAN, rs + i * SPAN, yp);
    } else {
      const int nrows = g1 - r < kRunRows ? g1 - r : kRunRows;
#pragma unroll 1
      for (int i = 0; i < nrows; ++i) {
        const int u = r + i;
        if (u >= eos) {
          while (u >= eos && n + 1 < p.N) {
            ++n;
            seq_bounds32(p, n, &bos, &eos);
          }
          run_x_window<E, kW, kC>(xw, p, bos, bos, n, c);  // initial_state taps of the new sequence
        }
        if (u < bos || u >= eos) continue;  // not in a sequence (only with garbage offsets)
        row(xs + i * SPAN, rs + i * SPAN, yp + i * yst);
      }
    }
  };
  run_pipeline(ntiles, issue, body);
}

template <class E, int kW, bool kSilu, bool kRes>
void launch_one(const ConvParams& p, cudaStream_t stream, dim3 grid, int64_t group_rows) {
  const size_t smem = run_smem_bytes(kRes ? 2 : 1);
  ensure_dynamic_smem(reinterpret_cast<const void*>(fwd_run_kernel<E, kW, kSilu, kRes>), smem);
  fwd_run_kernel<E, kW, kSilu, kRes><<<grid, kThreads, smem, stream>>>(p, group_rows);
}

template <class E, int kW>
void launch_w(const ConvParams& p, cudaStream_t stream, dim3 grid, int64_t group_rows) {
  const bool res = p.residual.data != nullptr;
  if (p.silu) {
    if (res) launch_one<E, kW, true, true>(p, stream, grid, group_rows);
    else launch_one<E, kW, true, false>(p, stream, grid, group_rows);
  } else {
    if (res) launch_one<E, kW, false, true>(p, stream, grid, group_rows);
    else launch_one<E, kW, false, false>(p, stream, grid, group_rows);
  }
}

}  // namespace

template <class E>
void fwd_run(const ConvParams& p, cudaStream_t stream, int64_t group_rows, int64_t groups) {
  const dim3 grid(static_cast<unsigned>((p.D + run_span<E>() - 1) / run_span<E>()), static_cast<unsigned>(groups));
  if (p.W == 2) launch_w<E, 2>(p, stream, grid, group_rows);
  else if (p.W == 3) launch_w<E, 3>(p, stream, grid, group_rows);
  else launch_w<E, 4>(p, stream, grid, group_rows);
  LINATTN_CONV_CUDA_OK(cudaGetLastError());
}

template void fwd_run<float>(const ConvParams&, cudaStream_t, int64_t, int64_t);
template void fwd_run<__nv_bfloat16>(const ConvParams&, cudaStream_t, int64_t, int64_t);
template void fwd_run<__half>(const ConvParams&, cudaStream_t, int64_t, int64_t);

}  // namespace linattn::cuda::conv
