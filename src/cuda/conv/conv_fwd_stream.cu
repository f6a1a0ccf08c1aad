// CUDA short-conv forward, register streaming (conv_stream.cuh): a thread owns V = 16 /
// sizeof(E) channels (8 bf16 / fp16, 4 fp32; one 16-byte load of x, residual and store of y per
// row) and a run of R consecutive rows. Block = kWarps warps on one 32 * V channel span, warp w
// on rows [(blockIdx.y * kWarps + w) * R, + R); grid = (channel spans, row blocks). R is the
// largest of 64, 32, 16 that still gives >= 1536 blocks (~3 waves of 4 blocks per SM, so short
// inputs fill the GPU), raised when the grid's y limit needs it: a function of (rows, D) only.
// Per warp the prologue (taps, bias, W - 1 halo rows, the first kU rows) is one round trip of
// independent loads; then every row consumed requests the row kU ahead.
// Sequences inside a run restart the window (initial_state or zeros), as in the tile kernel.
#include "cuda/conv/conv_stream.cuh"

namespace linattn::cuda::conv {
namespace {

constexpr int kFwdWarps = 4;

template <class E, int kW, bool kRes, int kU>
__global__ void __launch_bounds__(kFwdWarps * 32) fwd_stream_kernel(const ConvParams p, int R) {
  constexpr int V = 16 / static_cast<int>(sizeof(E));
  constexpr int kCap = kW > 0 ? kW : kConvMaxW;
  using L = Lanes<E, V>;
  const int W = kW > 0 ? kW : static_cast<int>(p.W);
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * 32 + lane) * V;
  const int64_t rows = p.B * p.T;
  const int64_t r0 = (static_cast<int64_t>(blockIdx.y) * kFwdWarps + warp) * R;
  if (c >= p.D || r0 >= rows) return;
  const int64_t r1 = r0 + R < rows ? r0 + R : rows;

  Taps<kCap> taps[V];
  float bias[V];
  load_taps<kCap, V>(taps, bias, p, c, W);
  for (int64_t n = find_seq(p, r0); n < p.N; ++n) {
    int64_t bos, eos;
    seq_bounds(p, n, &bos, &eos);
    if (bos >= r1) break;
    const int64_t a = r0 > bos ? r0 : bos, b = r1 < eos ? r1 : eos;
    if (a >= b) continue;
    const int len = static_cast<int>(b - a);
    Window<kCap> win[V];
    init_windows_global<E, kCap, V>(win, p, a, bos, n, c, W);
    RowRing<E, L::kBytes, kU> xr, rr;
    xr.start(elem<const E>(p.x, p, a, c), p.x.st, len);
    if constexpr (kRes) rr.start(elem<const E>(p.residual, p, a, c), p.residual.st, len);
    E* const y0 = elem<E>(p.y, p, a, c);
    const int64_t ys = p.y.st;
    for (int base = 0; base < len; base += kU) {
#pragma unroll
      for (int k = 0; k < kU; ++k) {
        const int i = base + k;
        if (i < len) {
          float xu[V], out[V];
          L::to_float(xr.get(k, i, len), xu);
#pragma unroll
          for (int j = 0; j < V; ++j) {
            float acc = taps[j].conv(bias[j], win[j], xu[j], W);
            if (p.silu) acc = silu_f(acc);
            out[j] = acc;
            win[j].push(xu[j], W);
          }
          if constexpr (kRes) {
            float res[V];
            L::to_float(rr.get(k, i, len), res);
#pragma unroll
            for (int j = 0; j < V; ++j) out[j] += res[j];
          }
          L::from_float(out).store(y0 + static_cast<int64_t>(i) * ys);
        }
      }
    }
  }
}

template <class E, int kW, int kU>
void launch_u(const ConvParams& p, cudaStream_t stream, dim3 grid, int R) {
  if (p.residual.data) fwd_stream_kernel<E, kW, true, kU><<<grid, kFwdWarps * 32, 0, stream>>>(p, R);
  else fwd_stream_kernel<E, kW, false, kU><<<grid, kFwdWarps * 32, 0, stream>>>(p, R);
}

template <class E, int kW>
void launch_w(const ConvParams& p, cudaStream_t stream, dim3 grid, int R) {
  launch_u<E, kW, 4>(p, stream, grid, R);
}

}  // namespace

template <class E>
void fwd_stream(const ConvParams& p, cudaStream_t stream) {
  constexpr int64_t V = 16 / static_cast<int64_t>(sizeof(E));
  const int64_t rows = p.B * p.T;
  const int64_t spans = (p.D + 32 * V - 1) / (32 * V);
  auto blocks_y = [&](int64_t r) { return (rows + kFwdWarps * r - 1) / (kFwdWarps * r); };
  int64_t R = 64;
  while (R > 16 && spans * blocks_y(R) < 1536) R /= 2;
  if (fwd_rows_override() > 0) R = fwd_rows_override();
  while (blocks_y(R) > 65535) R *= 2;
  const dim3 grid(static_cast<unsigned>(spans), static_cast<unsigned>(blocks_y(R)));
  const int r = static_cast<int>(R);
  if (p.W == 2) launch_w<E, 2>(p, stream, grid, r);
  else if (p.W == 3) launch_w<E, 3>(p, stream, grid, r);
  else if (p.W == 4) launch_w<E, 4>(p, stream, grid, r);
  else launch_w<E, 0>(p, stream, grid, r);
  LINATTN_CONV_CUDA_OK(cudaGetLastError());
}

template void fwd_stream<float>(const ConvParams&, cudaStream_t);
template void fwd_stream<__nv_bfloat16>(const ConvParams&, cudaStream_t);
template void fwd_stream<__half>(const ConvParams&, cudaStream_t);

}  // namespace linattn::cuda::conv
