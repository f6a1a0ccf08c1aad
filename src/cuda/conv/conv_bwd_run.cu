// CUDA short-conv backward, long runs (v6; design in conv_run.cuh, formulas in
// src/cpu/conv_bwd_cpu.cc). Block = 1 KiB of every row x one row group [g0, g1) of
// meta::conv_cuda_num_row_groups (the count the partials workspace is sized by). A thread walks
// rows u of its group: z_u recomputed from the x window, dz_u = dy_u * silu'(z_u), dweight /
// dbias sums in registers (one partial per (group, channel): a fixed order, padding rows never
// reached), dresidual_u = dy_u, and dx_{u-W+1} from the dz window (look-behind: dx_t is written
// by the group owning row t + W - 1, or at the sequence's end by the group owning its last row).
// Before its first row the group recomputes dz of the W - 1 rows before g0 (global loads);
// sequence starts reset the windows (initial_state), sequence ends flush their last W - 1 dx rows
// (+ d_final_state). Reduce and dinitial_state kernels: conv_bwd.cu.
#include "cuda/common/launch.h"
#include "cuda/conv/conv_run.cuh"

namespace linattn::cuda::conv {
namespace {

// d silu(z) / dz = s (1 + z (1 - s)) = s + s (z - z s): 6 instructions with the sigmoid.
__device__ __forceinline__ float silu_grad_run(float z) {
  const float s = sigmoidf_(z);
  return fmaf(s, fmaf(-z, s, z), s);
}

// kR-row tiles, kS stages (64 KiB for 8 x 4: 3 blocks per SM; 96 KiB for 16 x 3: 2 blocks).
template <class E, int kW, bool kSilu, int kR, int kS>
__global__ void __launch_bounds__(kThreads, kR * kS <= 32 ? 3 : 2)
    bwd_run_kernel(const ConvParams p, int64_t group_rows) {
  constexpr int kC = run_chans<E>(), SPAN = run_span<E>(), H = kW - 1;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int c0 = static_cast<int>(blockIdx.x) * SPAN;  // rows and D < 2^31: 32-bit indices
  const int c = c0 + static_cast<int>(threadIdx.x) * kC;
  const bool active = c < p.D;
  const int rend = static_cast<int>(seq_start(p, p.N));  // rows past the last sequence are padding
  const int g0 = static_cast<int>(blockIdx.y) * static_cast<int>(group_rows);
  const int g1 = g0 + static_cast<int>(group_rows) < rend ? g0 + static_cast<int>(group_rows) : rend;
  const bool want_dx = p.dx.data != nullptr, want_dres = p.dres.data != nullptr;

  float dw[kC][kW], db[kC];
#pragma unroll
  for (int j = 0; j < kC; ++j) {
    db[j] = 0.0f;
#pragma unroll
    for (int k = 0; k < kW; ++k) dw[j][k] = 0.0f;
  }
  if (g0 < g1) {  // block-uniform
    Taps<kW> taps[kC];
    float bias[kC];
#pragma unroll
    for (int j = 0; j < kC; ++j) {
      bias[j] = 0.0f;
#pragma unroll
      for (int k = 0; k < kW; ++k) taps[j].w[k] = 0.0f;
    }
    if (active) load_taps<kW, kC>(taps, bias, p, c, kW);
    float xw[kC][H], dzw[kC][H];  // x / dz of rows u - H + k
    int n = static_cast<int>(find_seq(p, g0)), bos, eos;
    seq_bounds32(p, n, &bos, &eos);
    const E* const x0 = static_cast<const E*>(p.x.data) + c;
    const E* const dy0 = static_cast<const E*>(p.dy.data) + c;
    E* const dx0 = want_dx ? static_cast<E*>(p.dx.data) + c : nullptr;
    E* const dres0 = want_dres ? static_cast<E*>(p.dres.data) + c : nullptr;
    const int64_t xst = p.x.st, gst = p.dy.st, dxst = p.dx.st, drst = p.dres.st;

    // z, dz of one row; the dweight / dbias sums when `own`; then dx_{u-H} into acc.
    auto row_math = [&](const float* xu, const float* gu, float* dz, float* acc, bool own) {
#pragma unroll
      for (int j = 0; j < kC; ++j) {
        float z = fmaf(taps[j].w[H], xu[j], bias[j]);
#pragma unroll
        for (int k = 0; k < H; ++k) z = fmaf(taps[j].w[k], xw[j][k], z);
        dz[j] = kSilu ? gu[j] * silu_grad_run(z) : gu[j];
        if (own) {
#pragma unroll
          for (int k = 0; k < H; ++k) dw[j][k] = fmaf(dz[j], xw[j][k], dw[j][k]);
          dw[j][H] = fmaf(dz[j], xu[j], dw[j][H]);
          db[j] += dz[j];
        }
        float a = taps[j].w[0] * dz[j];  // dx_t = sum_k weight[H - k] dz_{t+k}, t = u - H
#pragma unroll
        for (int k = 0; k < H; ++k) a = fmaf(taps[j].w[H - k], dzw[j][k], a);
        acc[j] = a;
      }
    };
    auto push = [&](const float* xu, const float* dz) {
#pragma unroll
      for (int j = 0; j < kC; ++j) {
#pragma unroll
        for (int k = 0; k + 1 < H; ++k) xw[j][k] = xw[j][k + 1], dzw[j][k] = dzw[j][k + 1];
        if (H > 0) xw[j][H - 1] = xu[j], dzw[j][H - 1] = dz[j];
      }
    };
    auto dht_add = [&](float* acc, int t) {  // d_final_state reaches rows t >= eos - W
      if (p.dht && t >= eos - kW) {
#pragma unroll
        for (int j = 0; j < kC; ++j)
          acc[j] += load_small(p.dht, p.dht_dtype, (static_cast<int64_t>(n) * p.D + c + j) * kW + t - (eos - kW));
      }
    };
    auto reset = [&](int u) {  // windows at row u of sequence n
      run_x_window<E, kW, kC>(xw, p, u, bos, n, c);
#pragma unroll
      for (int j = 0; j < kC; ++j)
#pragma unroll
        for (int k = 0; k < H; ++k) dzw[j][k] = 0.0f;
    };
    // The general step of row u (x / dy values given): sequence changes, range tests, flush.
    auto row_general = [&](int u, const float* xu, const float* gu) {
      if (u >= eos) {
        while (u >= eos && n + 1 < p.N) {
          ++n;
          seq_bounds32(p, n, &bos, &eos);
        }
        reset(bos);
      }
      if (u < bos || u >= eos) return;  // not in a sequence (only with garbage offsets)
      const bool own = u >= g0;
      float dz[kC], acc[kC];
      row_math(xu, gu, dz, acc, own);
      const int t = u - H;
      if (own && want_dres) store_lanes<E, kC>(dres0 + static_cast<int64_t>(u) * drst, gu);  // exact: gu came from E
      if (own && t >= bos && want_dx) {
        dht_add(acc, t);
        store_lanes<E, kC>(dx0 + static_cast<int64_t>(t) * dxst, acc);
      }
      push(xu, dz);
      if (u == eos - 1 && want_dx) {  // the sequence's last W - 1 dx rows (dz past eos = 0)
#pragma unroll
        for (int k = 0; k < H; ++k) {
          const int tt = eos - H + k;
          if (tt < bos) continue;
#pragma unroll
          for (int j = 0; j < kC; ++j) {
            float a = 0.0f;
#pragma unroll
            for (int m = 0; m + k < H; ++m) a = fmaf(taps[j].w[H - m], dzw[j][k + m], a);
            acc[j] = a;
          }
          dht_add(acc, tt);
          store_lanes<E, kC>(dx0 + static_cast<int64_t>(tt) * dxst, acc);
        }
      }
    };

    // The W - 1 rows before g0 (same sequence): dz only, from global memory.
    const int s = g0 - H > bos ? g0 - H : bos;
    if (active) {
      reset(s);
      for (int u = s; u < g0; ++u) {
        float xu[kC], gu[kC];
        load_lanes<E, kC>(x0 + static_cast<int64_t>(u) * xst, xu);
        load_lanes<E, kC>(dy0 + static_cast<int64_t>(u) * gst, gu);
        row_general(u, xu, gu);
      }
    }

    RunCopy<E, kR> cx, cg;
    cx.init(p.x, g0, c0, p.D, smem_raw);
    cg.init(p.dy, g0, c0, p.D, smem_raw + kR * kRunRowBytes);
    constexpr int kStage = 2 * kR * kRunRowBytes;  // bytes: x rows, then dy rows
    const int ntiles = (g1 - g0 + kR - 1) / kR;
    auto issue = [&](int k, int st) {
      const int left = g1 - g0 - k * kR;
      const int nrows = left < kR ? left : kR;
      cx.issue(st * kStage, nrows);
      cg.issue(st * kStage, nrows);
    };
    auto body = [&](int k, int st) {
      if (!active) return;
      const E* xs = reinterpret_cast<const E*>(smem_raw + st * kStage) + threadIdx.x * kC;
      const E* gs = xs + kR * SPAN;
      const int r = g0 + k * kR;
      if (r - H >= bos && r + kR < eos && r + kR <= g1) {  // one sequence, no ends
        E* const dxp = want_dx ? dx0 + static_cast<int64_t>(r - H) * dxst : nullptr;
        E* const drp = want_dres ? dres0 + static_cast<int64_t>(r) * drst : nullptr;
#pragma unroll
        for (int i = 0; i < kR; ++i) {
          float xu[kC], gu[kC], dz[kC], acc[kC];
          load_lanes<E, kC>(xs + i * SPAN, xu);
          load_lanes<E, kC>(gs + i * SPAN, gu);
          row_math(xu, gu, dz, acc, true);
          if (want_dx) store_lanes<E, kC>(dxp + i * dxst, acc);
          if (want_dres) copy_lanes<E, kC>(drp + i * drst, gs + i * SPAN);
          push(xu, dz);
        }
      } else {
        const int nrows = g1 - r < kR ? g1 - r : kR;
#pragma unroll 1
        for (int i = 0; i < nrows; ++i) {
          float xu[kC], gu[kC];
          load_lanes<E, kC>(xs + i * SPAN, xu);
          load_lanes<E, kC>(gs + i * SPAN, gu);
          row_general(r + i, xu, gu);
        }
      }
    };
    run_pipeline<kS>(ntiles, issue, body);
  }
  if (!p.partials || !active) return;
#pragma unroll
  for (int k = 0; k <= kW; ++k)
#pragma unroll
    for (int j = 0; j < kC; ++j)
      p.partials[(static_cast<int64_t>(blockIdx.y) * (kW + 1) + k) * p.D + c + j] = k < kW ? dw[j][k] : db[j];
}

template <class E, int kW, int kR, int kS>
void launch_one(const ConvParams& p, cudaStream_t stream, dim3 grid, int64_t group_rows) {
  const size_t smem = run_smem_bytes(2, kR, kS);
  if (p.silu) {
    ensure_dynamic_smem(reinterpret_cast<const void*>(bwd_run_kernel<E, kW, true, kR, kS>), smem);
    bwd_run_kernel<E, kW, true, kR, kS><<<grid, kThreads, smem, stream>>>(p, group_rows);
  } else {
    ensure_dynamic_smem(reinterpret_cast<const void*>(bwd_run_kernel<E, kW, false, kR, kS>), smem);
    bwd_run_kernel<E, kW, false, kR, kS><<<grid, kThreads, smem, stream>>>(p, group_rows);
  }
}

// Tile shape of bf16 / fp16 with W = 4: 16-row tiles in a 3-stage ring (2 blocks per SM, ~29
// instead of ~36 instructions per element) when groups have >= 128 rows: measured 3-8% faster at
// T >= 16384 (H200, perf-notes v6); 8 x 4 (3 blocks per SM) for the 64-row groups of T = 4096 and
// every other type / width. LINATTN_CONV_CUDA_RUN_TILE=8 / 16 forces one (measurement override).
inline int run_tile_env() {
  static const int v = static_cast<int>(conv_env("LINATTN_CONV_CUDA_RUN_TILE"));
  return v;
}

template <class E, int kW>
void launch_w(const ConvParams& p, cudaStream_t stream, dim3 grid, int64_t group_rows) {
  if constexpr (kW == 4 && sizeof(E) == 2) {
    const int env = run_tile_env();
    if (env == 16 || (env != 8 && group_rows >= 128)) return launch_one<E, kW, 16, 3>(p, stream, grid, group_rows);
  }
  launch_one<E, kW, kRunRows, kRunStages>(p, stream, grid, group_rows);
}

}  // namespace

template <class E>
void bwd_run(const ConvParams& p, cudaStream_t stream, int64_t group_rows, int64_t groups) {
  const dim3 grid(static_cast<unsigned>((p.D + run_span<E>() - 1) / run_span<E>()), static_cast<unsigned>(groups));
  if (p.W == 2) launch_w<E, 2>(p, stream, grid, group_rows);
  else if (p.W == 3) launch_w<E, 3>(p, stream, grid, group_rows);
  else launch_w<E, 4>(p, stream, grid, group_rows);
  LINATTN_CONV_CUDA_OK(cudaGetLastError());
}

template void bwd_run<float>(const ConvParams&, cudaStream_t, int64_t, int64_t);
template void bwd_run<__nv_bfloat16>(const ConvParams&, cudaStream_t, int64_t, int64_t);
template void bwd_run<__half>(const ConvParams&, cudaStream_t, int64_t, int64_t);

}  // namespace linattn::cuda::conv
