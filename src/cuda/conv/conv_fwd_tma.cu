// CUDA short-conv forward with bulk y stores (opt-in, LINATTN_CONV_CUDA_FWD=x=cp; conv_run.cuh: FwdVariant;
// v8 / v9 in docs/perf-notes.md, the one variant of v7-v11 that won at a measured shape: x=cp,waves=2 at 8192 x
// 65536 bf16). The v6 long-run kernel (conv_fwd_run.cu: same block = 1 KiB of every row x one row group, same
// thread mapping, window in registers, fast / general tile steps, v6's 16-byte cp.async ring of 8-row tiles x 4
// stages, same FMAs in the same order, so y is bitwise v6's) with y rows staged in shared memory (2 tiles) and
// written by cp.async.bulk stores (sm_90; one per row by lanes of warp 0, after the barrier that ends the tile's
// compute; warp 0 waits wait_group.read 0 before a staging tile is rewritten). Rows inside no sequence (only with
// garbage offsets) are not stored: thread 0 records them per tile in a mask. Instances: bf16 / fp16 with W = 4
// (elsewhere, and off sm_90, fwd_bulk_y returns false and the caller runs the v6 kernel on the same grid).
#include "cuda/common/device_info.h"
#include "cuda/common/launch.h"
#include "cuda/common/tma.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/conv/conv_run.cuh"

namespace linattn::cuda::conv {
namespace {

constexpr int kYS = 2;  // y staging tiles

template <class E, int kW, bool kSilu, bool kRes>
__global__ void __launch_bounds__(kThreads, 4) fwd_bulk_y_kernel(const ConvParams p, int64_t group_rows) {
  constexpr int kR = kRunRows, kS = kRunStages;
  constexpr int kC = run_chans<E>(), SPAN = run_span<E>(), H = kW - 1;
  constexpr int kStage = (kRes ? 2 : 1) * kR * kRunRowBytes;  // bytes: x rows, then residual rows
  constexpr int kYTile = kR * kRunRowBytes;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ uint32_t skip[kYS];  // rows of staging tile b not to store
  unsigned char* const ysm = smem_raw + kS * kStage;  // kYS staging tiles of y
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32;
  const bool w0 = tid < 32;
  const int c0 = static_cast<int>(blockIdx.x) * SPAN;  // rows and D < 2^31: 32-bit indices
  const int c = c0 + tid * kC;
  const bool active = c < p.D;
  const unsigned nb = static_cast<unsigned>((p.D - c0 < SPAN ? p.D - c0 : SPAN) * sizeof(E));  // row slice bytes
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
  E* const yg = static_cast<E*>(p.y.data);
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

  RunCopy<E, kR> cx, cr;  // v6's copies
  cx.init(p.x, g0, c0, p.D, smem_raw);
  if constexpr (kRes) cr.init(p.residual, g0, c0, p.D, smem_raw + kR * kRunRowBytes);
  const unsigned sbase = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
  const int ntiles = (g1 - g0 + kR - 1) / kR;
  auto tile_rows = [&](int k) {
    const int left = g1 - g0 - k * kR;
    return left < kR ? left : kR;
  };
  auto issue = [&](int k, int st) {
    const int nrows = tile_rows(k);
    cx.issue(st * kStage, nrows);
    if constexpr (kRes) cr.issue(st * kStage, nrows);
  };
  // Stores tile k's staged y rows, after the barrier that ends body(k).
  auto store = [&](int k) {
    const int nrows = tile_rows(k);
    const unsigned m = skip[k % kYS];
    const int r0 = g0 + k * kR;
    if (w0) {
      if (lane < nrows && !((m >> lane) & 1)) {
        E* yr = yg + static_cast<int64_t>(r0 + lane) * yst + c0;
        bulk_store_row(yr, sbase + kS * kStage + (k % kYS) * kYTile + lane * kRunRowBytes, nb);
      }
      bulk_commit();
    }
  };
  auto body = [&](int k, int st) {
    const E* xs = reinterpret_cast<const E*>(smem_raw + st * kStage) + tid * kC;
    const E* rs = xs + kR * SPAN;
    const int r = g0 + k * kR;
    E* yp = reinterpret_cast<E*>(ysm + (k % kYS) * kYTile) + tid * kC;  // y row i of the tile at yp + i * SPAN
    uint32_t m = 0;
    if (r >= bos && r + kR <= eos && r + kR <= g1) {  // one sequence: no tests
      if (active) {
#pragma unroll
        for (int i = 0; i < kR; ++i, yp += SPAN) row(xs + i * SPAN, rs + i * SPAN, yp);
      }
    } else {
      const int nrows = g1 - r < kR ? g1 - r : kR;
#pragma unroll 1
      for (int i = 0; i < nrows; ++i) {
        const int u = r + i;
        if (u >= eos) {
          while (u >= eos && n + 1 < p.N) {
            ++n;
            seq_bounds32(p, n, &bos, &eos);
          }
          if (active) run_x_window<E, kW, kC>(xw, p, bos, bos, n, c);  // initial_state taps of the new sequence
        }
        if (u < bos || u >= eos) {  // not in a sequence (only with garbage offsets): not stored
          m |= 1u << i;
          continue;
        }
        if (active) row(xs + i * SPAN, rs + i * SPAN, yp + i * SPAN);
      }
    }
    if (tid == 0) skip[k % kYS] = m;
    fence_view_async_shared();
  };

  // The ring: tile k + kS - 1 goes into the stage of tile k - 1 after the barrier that ends body(k - 1);
  // tile k - 1's y is stored after it too, and its staging tile is rewritten by body(k + 1), after warp 0
  // waited (before that step's barrier) until its store groups are done reading.
#pragma unroll
  for (int k = 0; k < kS - 1; ++k) {
    if (k < ntiles) issue(k, k);
    cp_async_commit();
  }
  for (int k = 0; k < ntiles; ++k) {
    const int st = k % kS;
    cp_async_wait<kS - 2>();
    if (w0) bulk_wait_read0();
    __syncthreads();
    if (k > 0) store(k - 1);
    const int nk = k + kS - 1;
    if (nk < ntiles) issue(nk, nk % kS);
    cp_async_commit();
    body(k, st);
  }
  __syncthreads();
  store(ntiles - 1);
  if (w0) bulk_wait0();
}

template <class E>
void launch_bulk_y(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  const bool res = p.residual.data != nullptr;
  void (*k)(ConvParams, int64_t);
  if (p.silu) k = res ? fwd_bulk_y_kernel<E, 4, true, true> : fwd_bulk_y_kernel<E, 4, true, false>;
  else k = res ? fwd_bulk_y_kernel<E, 4, false, true> : fwd_bulk_y_kernel<E, 4, false, false>;
  // The ring, then kYS staging tiles of y.
  const size_t smem = run_smem_bytes(res ? 2 : 1) + static_cast<size_t>(kYS) * kRunRows * kRunRowBytes;
  ensure_dynamic_smem(reinterpret_cast<const void*>(k), smem);
  const int occ = v.waves > 0 ? run_occupancy(reinterpret_cast<const void*>(k), smem) : 0;
  const int64_t spans = (p.D + run_span<E>() - 1) / run_span<E>();
  const int64_t g = variant_group_rows(p, v, run_span<E>(), kRunRows, occ);
  const int64_t groups = (p.B * p.T + g - 1) / g;
  k<<<dim3(static_cast<unsigned>(spans), static_cast<unsigned>(groups)), kThreads, smem, stream>>>(p, g);
  LINATTN_CONV_CUDA_OK(cudaGetLastError());
}

}  // namespace

template <class E>
bool fwd_bulk_y(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  if constexpr (sizeof(E) == 4) {
    return false;
  } else {
    if (p.W != 4 || current_device_info().cc_major != 9) return false;  // bulk copies: the sm_90a binary
    launch_bulk_y<E>(p, stream, v);
    return true;
  }
}

template bool fwd_bulk_y<float>(const ConvParams&, cudaStream_t, const FwdVariant&);
template bool fwd_bulk_y<__nv_bfloat16>(const ConvParams&, cudaStream_t, const FwdVariant&);
template bool fwd_bulk_y<__half>(const ConvParams&, cudaStream_t, const FwdVariant&);

}  // namespace linattn::cuda::conv
