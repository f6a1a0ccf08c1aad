// CUDA short-conv forward v8 (opt-in, LINATTN_CONV_CUDA_FWD=tma; conv_run.cuh: FwdVariant): the v6
// long-run kernel (conv_fwd_run.cu: same block = 1 KiB of every row x one row group, same thread
// mapping, window in registers, fast / general tile steps, same FMAs in the same order, so y is
// bitwise v6's) with the copies moved to the bulk-copy engine (sm_90): a kR-row tile's x (and
// residual) row slices arrive by 1-D cp.async.bulk (one per row, issued by lanes of warp 0) into a
// kS-stage ring whose stages complete on mbarriers (expect_tx); y rows are staged in shared memory
// (2 tiles) and written by cp.async.bulk stores (one per row; bulk groups waited with .read before
// a staging tile is rewritten), or by 16-byte st.global from the staged tile (kY = 1), or directly
// with v6's 4-byte stores (kY = 2); kX = false keeps v6's 16-byte cp.async copies. One barrier per
// tile as v6. Rows inside no sequence (only with garbage offsets) are not stored: thread 0 (always
// active) records them per tile in a mask. Row slices 16-byte aligned, D * sizeof(E) a multiple of 16.
#pragma once
#include <map>
#include <mutex>
#include <tuple>

#include "cuda/common/device_info.h"
#include "cuda/common/launch.h"
#include "cuda/common/tma.cuh"
#include "cuda/conv/conv_run.cuh"

namespace linattn::cuda::conv {

__device__ __forceinline__ void bulk_load_row(unsigned smem, const void* gmem, unsigned bytes, unsigned bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(smem),
               "l"(gmem), "r"(bytes), "r"(bar)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_store_row(void* gmem, unsigned smem, unsigned bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(gmem), "r"(smem), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
// This thread's bulk groups: all done reading shared memory / all complete.
__device__ __forceinline__ void bulk_wait_read0() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_wait0() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}
// Generic-proxy shared writes made visible to the async proxy (before a bulk store reads them).
__device__ __forceinline__ void fence_async_smem() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

template <class E, int kW, bool kSilu, bool kRes, int kR, int kS, bool kX, int kY>
__global__ void __launch_bounds__(kThreads, 4) fwd_tma_kernel(const ConvParams p, int64_t group_rows) {
  constexpr int kC = run_chans<E>(), SPAN = run_span<E>(), H = kW - 1;
  constexpr int kStage = (kRes ? 2 : 1) * kR * kRunRowBytes;  // bytes: x rows, then residual rows
  constexpr int kYTile = kR * kRunRowBytes;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ uint64_t full[kS];  // stage s holds its tile (kX only)
  __shared__ uint32_t skip[2];   // rows of staging tile b not to store
  unsigned char* const ysm = smem_raw + kS * kStage;  // 2 staging tiles of y (kY < 2)
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
  if constexpr (kX) {
    if (tid == 0) {
      for (int s = 0; s < kS; ++s) mbar_init(&full[s], 1);
      fence_barrier_init();
    }
  }
  __syncthreads();

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

  RunCopy<E, kR> cx, cr;  // kX = false: v6's copies
  if constexpr (!kX) {
    cx.init(p.x, g0, c0, p.D, smem_raw);
    if constexpr (kRes) cr.init(p.residual, g0, c0, p.D, smem_raw + kR * kRunRowBytes);
  }
  const unsigned sbase = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
  const int ntiles = (g1 - g0 + kR - 1) / kR;
  auto tile_rows = [&](int k) {
    const int left = g1 - g0 - k * kR;
    return left < kR ? left : kR;
  };
  auto issue = [&](int k, int st) {
    const int nrows = tile_rows(k);
    if constexpr (kX) {
      if (w0) {
        const unsigned bar = static_cast<unsigned>(__cvta_generic_to_shared(&full[st]));
        if (lane == 0) mbar_arrive_expect_tx(&full[st], nrows * nb * (kRes ? 2u : 1u));
        __syncwarp();
        if (lane < nrows) {
          const int64_t r = g0 + k * kR + lane;
          const unsigned s = sbase + st * kStage + lane * kRunRowBytes;
          bulk_load_row(s, static_cast<const E*>(p.x.data) + r * p.x.st + c0, nb, bar);
          if constexpr (kRes)
            bulk_load_row(s + kR * kRunRowBytes, static_cast<const E*>(p.residual.data) + r * p.residual.st + c0, nb,
                          bar);
        }
      }
    } else {
      cx.issue(st * kStage, nrows);
      if constexpr (kRes) cr.issue(st * kStage, nrows);
    }
  };
  // Stores tile k's staged y rows (kY < 2), after the barrier that ends body(k).
  auto store = [&](int k) {
    const int nrows = tile_rows(k);
    const unsigned m = skip[k & 1];
    const int r0 = g0 + k * kR;
    if constexpr (kY == 0) {
      if (w0) {
        if (lane < nrows && !((m >> lane) & 1))
          bulk_store_row(yg + static_cast<int64_t>(r0 + lane) * yst + c0, sbase + kS * kStage + (k & 1) * kYTile +
                                                                              lane * kRunRowBytes,
                         nb);
        bulk_commit();
      }
    } else if constexpr (kY == 1) {
      const int q = tid % 64, ro = tid / 64;
      const int cq = c0 + q * (16 / static_cast<int>(sizeof(E)));
      if (cq < p.D) {
#pragma unroll
        for (int i = ro; i < kR; i += 4)
          if (i < nrows && !((m >> i) & 1))
            *reinterpret_cast<uint4*>(yg + static_cast<int64_t>(r0 + i) * yst + cq) =
                *reinterpret_cast<const uint4*>(ysm + (k & 1) * kYTile + i * kRunRowBytes + q * 16);
      }
    }
  };
  auto body = [&](int k, int st) {
    const E* xs = reinterpret_cast<const E*>(smem_raw + st * kStage) + tid * kC;
    const E* rs = xs + kR * SPAN;
    const int r = g0 + k * kR;
    // y row i of the tile: the staging tile (kY < 2) or global memory (kY = 2).
    E* yp;
    int64_t ys;
    if constexpr (kY < 2) yp = reinterpret_cast<E*>(ysm + (k & 1) * kYTile) + tid * kC, ys = SPAN;
    else yp = yg + static_cast<int64_t>(r) * yst + c, ys = yst;
    uint32_t m = 0;
    if (r >= bos && r + kR <= eos && r + kR <= g1) {  // one sequence: no tests
      if (active) {
#pragma unroll
        for (int i = 0; i < kR; ++i, yp += ys) row(xs + i * SPAN, rs + i * SPAN, yp);
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
        if (active) row(xs + i * SPAN, rs + i * SPAN, yp + i * ys);
      }
    }
    if constexpr (kY < 2) {
      if (tid == 0) skip[k & 1] = m;
      if constexpr (kY == 0) fence_async_smem();
    }
  };

  // The ring: tile k + kS - 1 goes into the stage of tile k - 1 after the barrier that ends body(k - 1);
  // tile k - 1's y is stored after it too, and its staging tile is rewritten by body(k + 1), after
  // warp 0 waited for the bulk stores issued at step k to finish reading.
#pragma unroll
  for (int k = 0; k < kS - 1; ++k) {
    if (k < ntiles) issue(k, k);
    if constexpr (!kX) cp_async_commit();
  }
  for (int k = 0; k < ntiles; ++k) {
    const int st = k % kS;
    if constexpr (kX) mbar_wait(&full[st], static_cast<uint32_t>((k / kS) & 1));
    else cp_async_wait<kS - 2>();
    if constexpr (kY == 0)
      if (w0) bulk_wait_read0();
    __syncthreads();
    if constexpr (kY < 2)
      if (k > 0) store(k - 1);
    const int nk = k + kS - 1;
    if (nk < ntiles) issue(nk, nk % kS);
    if constexpr (!kX) cp_async_commit();
    body(k, st);
  }
  if constexpr (kY < 2) {
    __syncthreads();
    store(ntiles - 1);
    if constexpr (kY == 0)
      if (w0) bulk_wait0();
  }
}

// Dynamic shared memory of an instance: the ring, then 2 staging tiles of y (kY < 2).
inline size_t tma_smem_bytes(bool res, int kR, int kS, int kY) {
  return static_cast<size_t>(kS) * (res ? 2 : 1) * kR * kRunRowBytes + (kY < 2 ? 2u * kR * kRunRowBytes : 0u);
}

// Launch of one (ring, copy, store) configuration, silu / residual picked at run time.
template <class E, int kW, int kR, int kS, bool kX, int kY>
void launch_tma(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  const bool res = p.residual.data != nullptr;
  void (*k)(ConvParams, int64_t);
  if (p.silu)
    k = res ? fwd_tma_kernel<E, kW, true, true, kR, kS, kX, kY> : fwd_tma_kernel<E, kW, true, false, kR, kS, kX, kY>;
  else
    k = res ? fwd_tma_kernel<E, kW, false, true, kR, kS, kX, kY> : fwd_tma_kernel<E, kW, false, false, kR, kS, kX, kY>;
  const size_t smem = tma_smem_bytes(res, kR, kS, kY);
  ensure_dynamic_smem(reinterpret_cast<const void*>(k), smem);
  int occ = 0;
  if (v.waves > 0) {  // resident blocks per SM of this instance: fixed per device
    static std::mutex mu;
    static std::map<std::tuple<const void*, int, size_t>, int> occs;
    const int dev = current_device_info().ordinal;
    std::lock_guard<std::mutex> lock(mu);
    auto it = occs.find({reinterpret_cast<const void*>(k), dev, smem});
    if (it == occs.end()) {
      LINATTN_CONV_CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, kThreads, smem));
      it = occs.emplace(std::make_tuple(reinterpret_cast<const void*>(k), dev, smem), occ > 0 ? occ : 1).first;
    }
    occ = it->second;
  }
  const int64_t spans = (p.D + run_span<E>() - 1) / run_span<E>();
  const int64_t g = variant_group_rows(p, v, run_span<E>(), kR, occ);
  const int64_t groups = (p.B * p.T + g - 1) / g;
  k<<<dim3(static_cast<unsigned>(spans), static_cast<unsigned>(groups)), kThreads, smem, stream>>>(p, g);
  LINATTN_CONV_CUDA_OK(cudaGetLastError());
}


}  // namespace linattn::cuda::conv
