// CUDA short-conv forward: y = act(bias + sum_i weight[:, i] * xbar[t - W + 1 + i]) + residual.
// Aligned flat layouts with W <= 4 and enough blocks run the long-run kernel (conv_fwd_run.cu, v6,
// conv_run.cuh: use_run; LINATTN_CONV_CUDA_FWD selects its opt-in variants); the rest this
// shared-memory tile kernel (v3).
// Tiling and thread mapping in conv_common.cuh: x rows [tile - (W-1), tile end) and residual
// rows of a 64-row tile go to shared memory by cp.async (double-buffered), each thread then
// walks its rows of kC channels with the last W - 1 inputs in registers and writes y. x is read
// from DRAM once per tile (+ W - 1 halo rows, mostly L2 hits). The first W - 1 rows of a
// sequence read their older taps from initial_state slots. A second small kernel writes the
// final state. Grid = (channel tiles, row groups): fixed by the shapes, never by cu_seqlens.

#include "cuda/common/launch.h"
#include "cuda/conv/conv_cuda.h"
#include "cuda/conv/conv_run.cuh"

namespace linattn::cuda {
namespace conv {
namespace {

template <class E, bool kVec, int kW>
__global__ void __launch_bounds__(kThreads, kW > 0 ? 4 : 1) fwd_kernel(const ConvParams p, int64_t tiles_per_group) {
  using TT = ThreadTile<E, kVec>;
  constexpr int kCap = kW > 0 ? kW : kConvMaxW;
  constexpr int CB = TT::CB, kC = TT::kC;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int W = kW > 0 ? kW : static_cast<int>(p.W);
  const int H = W - 1;
  const int rows_x = kRowTile + H;
  E* const sm = reinterpret_cast<E*>(smem_raw);
  const bool has_res = p.residual.data != nullptr;
  // Elements per buffer: x rows, then residual rows when there is a residual (without one the
  // block needs half the shared memory, so more blocks fit on an SM).
  const int stage = (rows_x + (has_res ? kRowTile : 0)) * CB;

  const int64_t rows = p.B * p.T;
  const int64_t ntiles = (rows + kRowTile - 1) / kRowTile;
  const TT th;
  const int64_t c = th.c;
  const int64_t t_begin = blockIdx.y * tiles_per_group;
  const int64_t t_end = t_begin + tiles_per_group < ntiles ? t_begin + tiles_per_group : ntiles;

  Taps<kCap> taps[kC];
  float bias[kC];
#pragma unroll
  for (int j = 0; j < kC; ++j) {
    bias[j] = 0.0f;
    if (c + j < p.D) {
      taps[j].load(p, c + j, W);
      if (p.bias) bias[j] = load_small(p.bias, p.b_dtype, c + j);
    }
  }
  auto issue = [&](int64_t tile, int s) {
    const int64_t tr0 = tile * kRowTile, tr1 = tr0 + kRowTile < rows ? tr0 + kRowTile : rows;
    E* const buf = sm + s * stage;
    copy_rows<E, kVec>(buf, tr0 - H, p.x, p, tr0 - H > 0 ? tr0 - H : 0, tr1, th.c0);
    if (has_res) copy_rows<E, kVec>(buf + rows_x * CB, tr0, p.residual, p, tr0, tr1, th.c0);
    cp_async_commit();
  };
  auto body = [&](int64_t tile, int s) {
    const int64_t tr0 = tile * kRowTile;
    const int64_t r0 = tr0 + th.chunk * TT::kRows;
    const int64_t r1 = r0 + TT::kRows < rows ? r0 + TT::kRows : rows;
    if (c >= p.D || r0 >= r1) return;
    const E* xs = sm + s * stage + th.cl * kC;  // row u at (u - (tr0 - H)) * CB
    const E* rs = xs + rows_x * CB;             // row u at (u - tr0) * CB
    for (int64_t n = find_seq(p, r0); n < p.N; ++n) {
      int64_t bos, eos;
      seq_bounds(p, n, &bos, &eos);
      if (bos >= r1) break;
      const int64_t a = r0 > bos ? r0 : bos, b = r1 < eos ? r1 : eos;
      if (a >= b) continue;
      const int off = static_cast<int>(a - tr0);
      Window<kCap> win[kC];  // xbar[u - W + 1 + k], k < W - 1
      init_windows<E, kCap, kC, CB>(win, xs + off * CB, p, a, bos, n, c, W);
      const E* xp = xs + (off + H) * CB;
      const E* rp = rs + off * CB;
      E* yp = elem<E>(p.y, p, a, c);
      const int64_t ys = p.y.st;
      // silu / residual as compile-time flags of the row loop: no per-row tests or selects.
      auto rows_loop = [&](auto silu_c, auto res_c) {
        constexpr bool kSilu = decltype(silu_c)::value, kRes = decltype(res_c)::value;
#pragma unroll 2
        for (int u = static_cast<int>(b - a); u > 0; --u, xp += CB, rp += CB, yp += ys) {
          float xu[kC], out[kC], res[kC];
          load_lanes<E, kC>(xp, xu);
          if constexpr (kRes) load_lanes<E, kC>(rp, res);
#pragma unroll
          for (int j = 0; j < kC; ++j) {
            float acc = taps[j].conv(bias[j], win[j], xu[j], W);
            if constexpr (kSilu) acc = silu_f(acc);
            if constexpr (kRes) acc += res[j];
            out[j] = acc;
            win[j].push(xu[j], W);
          }
          store_lanes<E, kC>(yp, out);
        }
      };
      using T_ = std::true_type;
      using F_ = std::false_type;
      if (p.silu) {
        if (has_res) rows_loop(T_{}, T_{});
        else rows_loop(T_{}, F_{});
      } else {
        if (has_res) rows_loop(F_{}, T_{});
        else rows_loop(F_{}, F_{});
      }
    }
  };
  tile_pipeline(t_begin, t_end, issue, body);
}

// final[n, c, s] = concat(h0[n, c, :], x_seq[:, c])[len + s]; one thread per (n, c).
template <class E>
__global__ void final_state_kernel(const ConvParams p) {
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const int64_t n = blockIdx.x;
  if (c >= p.D) return;
  int64_t bos, eos;
  seq_bounds(p, n, &bos, &eos);
  const int64_t len = eos - bos;
  for (int64_t s = 0; s < p.W; ++s) {
    const int64_t src = len + s;
    float v = 0.0f;
    if (src >= p.W) v = to_f(*elem<const E>(p.x, p, bos + src - p.W, c));
    else if (p.h0) v = load_small(p.h0, p.h0_dtype, (n * p.D + c) * p.W + src);
    static_cast<E*>(p.ht)[(n * p.D + c) * p.W + s] = from_f<E>(v);
  }
}

template <class E>
size_t smem_bytes(int64_t W, bool residual) {
  return static_cast<size_t>(2 * ((residual ? 2 : 1) * kRowTile + W - 1) * tile_channels<E>()) * sizeof(E);
}

template <class E, bool kVec, int kW>
void launch_kernel(const ConvParams& p, cudaStream_t stream, dim3 grid, int64_t tpg) {
  // > 48 KiB of dynamic shared memory: opted in per (kernel, device) (a process-wide once would
  // leave every other GPU of the process at the default limit).
  ensure_dynamic_smem(reinterpret_cast<const void*>(fwd_kernel<E, kVec, kW>), smem_bytes<E>(kConvMaxW, true));
  fwd_kernel<E, kVec, kW><<<grid, kThreads, smem_bytes<E>(p.W, p.residual.data != nullptr), stream>>>(p, tpg);
}

// Forward long-run groups: ~kRunFwdBlocks blocks, >= 64 rows per group (the W - 1 rows before a
// group are read again), a multiple of the tile.
constexpr int64_t kRunFwdBlocks = 2048;
int64_t run_group_rows(int64_t rows, int64_t spans) {
  int64_t g = (rows * spans + kRunFwdBlocks - 1) / kRunFwdBlocks;
  g = g < 64 ? 64 : g;
  return (g + kRunRows - 1) / kRunRows * kRunRows;
}

template <class E>
void launch(const ConvParams& p, cudaStream_t stream) {
  conv_path();  // rejects a bad LINATTN_CONV_CUDA_PATH on every layout (read once)
  const int64_t rows = p.B * p.T;
  LINATTN_CHECK(rows < (int64_t{1} << 31), "x: expected fewer than 2^31 token rows (B * T), got ", rows);
  if (rows > 0 && p.N > 0) {
    const bool vec = p.D % static_cast<int64_t>(16 / sizeof(E)) == 0 && rows_aligned(p.x, sizeof(E)) &&
                     rows_aligned(p.residual, sizeof(E));
    const bool vec_out = vec && rows_aligned(p.y, sizeof(E));
    const int64_t spans = (p.D + run_span<E>() - 1) / run_span<E>();
    const int64_t run_rows = run_group_rows(rows, spans);
    const int64_t run_groups = (rows + run_rows - 1) / run_rows;
    const FwdVariant fv = fwd_variant();  // LINATTN_CONV_CUDA_FWD (A/B variants), parsed once per value
    if (vec_out && p.W >= 2 && p.W <= 4 && run_flat(p.x, p) && run_flat(p.residual, p) && run_flat(p.y, p) &&
        (fv.on || use_run(spans * run_groups))) {
      if (fv.on) fwd_run_variant<E>(p, stream, fv);
      else fwd_run<E>(p, stream, run_rows, run_groups);
    } else {
      const int64_t groups = meta::conv_cuda_num_row_groups(rows, p.D);
      const int64_t tpg = meta::conv_cuda_tiles_per_group(rows, p.D);
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
  if (p.ht && p.N > 0) {
    const dim3 grid(static_cast<unsigned>(p.N), static_cast<unsigned>((p.D + 127) / 128));
    final_state_kernel<E><<<grid, 128, 0, stream>>>(p);
    LINATTN_CONV_CUDA_OK(cudaGetLastError());
  }
}

}  // namespace
}  // namespace conv

bool stream_is_capturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  LINATTN_CONV_CUDA_OK(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status));
  return status != cudaStreamCaptureStatusNone;
}

void conv_fwd(const meta::ConvParams& p, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  switch (p.dtype) {
    case DType::kF32: return conv::launch<float>(p, s);
    case DType::kBF16: return conv::launch<__nv_bfloat16>(p, s);
    case DType::kF16: return conv::launch<__half>(p, s);
    default: LINATTN_UNSUPPORTED("conv_fwd (cuda): dtype ", dtype_name(p.dtype), " (expected fp32/bf16/fp16)");
  }
}

}  // namespace linattn::cuda
