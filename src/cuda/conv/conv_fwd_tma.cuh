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
// v9 knobs (runtime, TmaArgs): L2 cache hints on the x loads / bulk y stores, the block -> (span, group)
// order; kYS y staging tiles (compile time; bulk stores wait_group.read kYS - 2 before a tile is rewritten);
// kY = 3: a whole staged tile (kR rows x 1 KiB) by one 2-D tensor-map bulk store (y viewed as uint32
// [rows, D * sizeof(E) / 4], box 256 x kR; conv_fwd_tma_map.cc) where the tile is full and every row is
// stored, else per-row bulk stores as kY = 0.
#pragma once
#include <map>
#include <mutex>
#include <numeric>
#include <tuple>

#include "cuda/common/device_info.h"
#include "cuda/common/launch.h"
#include "cuda/common/tma.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/conv/conv_run.cuh"
#include "cuda/conv/conv_fwd_tma_map.h"

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
// The same with an L2 cache policy (createpolicy value).
__device__ __forceinline__ void bulk_load_row_hint(unsigned smem, const void* gmem, unsigned bytes, unsigned bar,
                                                   uint64_t pol) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;\n" ::"r"(smem),
      "l"(gmem), "r"(bytes), "r"(bar), "l"(pol)
      : "memory");
#endif
}
__device__ __forceinline__ void bulk_store_row_hint(void* gmem, unsigned smem, unsigned bytes, uint64_t pol) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, %3;\n" ::"l"(gmem),
               "r"(smem), "r"(bytes), "l"(pol)
               : "memory");
#endif
}
// A staged tile -> global by the 2-D tensor map (box at (col0, row0) in the map's elements), optionally
// with an L2 cache policy.
__device__ __forceinline__ void bulk_store_tile(const CUtensorMap* map, unsigned smem, int col0, int row0) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem), "r"(col0), "r"(row0)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_store_tile_hint(const CUtensorMap* map, unsigned smem, int col0, int row0,
                                                     uint64_t pol) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%2, %3}], [%1], %4;\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem), "r"(col0), "r"(row0), "l"(pol)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
// This thread's bulk groups: all but the newest N done reading shared memory / all complete.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}
__device__ __forceinline__ void bulk_wait0() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}

// Per-launch knobs (block-uniform). hints: ld policy code + 4 * st policy code + 16 * L2::256B prefetch
// (x=cp copies) + 32 * (x loads hinted) + 64 * (bulk y stores hinted). order: 0 block (x, y) = (span,
// group); 1 group-fastest over the linear block id; 2 group = y * mul mod gridDim.y (mul a unit mod it).
struct TmaArgs {
  int64_t group_rows;
  int order, mul, hints;
};

// kY: 0 bulk row stores, 1 16-byte st.global from staging, 2 v6's direct stores, 3 tile tensor stores.
template <class E, int kW, bool kSilu, bool kRes, int kR, int kS, bool kX, int kY, int kYS = 2>
__global__ void __launch_bounds__(kThreads, 4)
    fwd_tma_kernel(const ConvParams p, const TmaArgs a, const __grid_constant__ CUtensorMap ymap) {
  constexpr bool kStaged = kY != 2, kBulkY = kY == 0 || kY == 3;
  static_assert(kYS >= 2 && (kBulkY || kYS == 2), "deeper y staging: bulk stores only");
  constexpr int kC = run_chans<E>(), SPAN = run_span<E>(), H = kW - 1;
  constexpr int kStage = (kRes ? 2 : 1) * kR * kRunRowBytes;  // bytes: x rows, then residual rows
  constexpr int kYTile = kR * kRunRowBytes;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ uint64_t full[kS];  // stage s holds its tile (kX only)
  __shared__ uint32_t skip[kYS];  // rows of staging tile b not to store
  unsigned char* const ysm = smem_raw + kS * kStage;  // kYS staging tiles of y (kStaged)
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32;
  const bool w0 = tid < 32;
  int span = static_cast<int>(blockIdx.x), grp = static_cast<int>(blockIdx.y);
  if (a.order == 1) {
    const int lin = span + static_cast<int>(gridDim.x) * grp;
    span = lin / static_cast<int>(gridDim.y), grp = lin % static_cast<int>(gridDim.y);
  } else if (a.order == 2) {
    grp = static_cast<int>(static_cast<int64_t>(grp) * a.mul % gridDim.y);
  }
  const int64_t group_rows = a.group_rows;
  const bool hint_ld = (a.hints >> 5) & 1, hint_st = (a.hints >> 6) & 1, pf256 = (a.hints >> 4) & 1;
  const uint64_t ld_pol = hint_ld ? l2_policy(a.hints & 3) : 0;
  const uint64_t st_pol = hint_st ? l2_policy((a.hints >> 2) & 3) : 0;
  const int c0 = span * SPAN;  // rows and D < 2^31: 32-bit indices
  const int c = c0 + tid * kC;
  const bool active = c < p.D;
  const unsigned nb = static_cast<unsigned>((p.D - c0 < SPAN ? p.D - c0 : SPAN) * sizeof(E));  // row slice bytes
  const int rend = static_cast<int>(seq_start(p, p.N));  // rows past the last sequence are padding
  const int g0 = grp * static_cast<int>(group_rows);
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
          const E* xg = static_cast<const E*>(p.x.data) + r * p.x.st + c0;
          if (hint_ld) bulk_load_row_hint(s, xg, nb, bar, ld_pol);
          else bulk_load_row(s, xg, nb, bar);
          if constexpr (kRes) {
            const E* rg = static_cast<const E*>(p.residual.data) + r * p.residual.st + c0;
            if (hint_ld) bulk_load_row_hint(s + kR * kRunRowBytes, rg, nb, bar, ld_pol);
            else bulk_load_row(s + kR * kRunRowBytes, rg, nb, bar);
          }
        }
      }
    } else if (hint_ld) {
      cx.issue_hint(st * kStage, nrows, ld_pol, pf256);
      if constexpr (kRes) cr.issue_hint(st * kStage, nrows, ld_pol, pf256);
    } else {
      cx.issue(st * kStage, nrows);
      if constexpr (kRes) cr.issue(st * kStage, nrows);
    }
  };
  // Stores tile k's staged y rows (kStaged), after the barrier that ends body(k).
  auto store = [&](int k) {
    const int nrows = tile_rows(k);
    const unsigned m = skip[k % kYS];
    const int r0 = g0 + k * kR;
    if constexpr (kBulkY) {
      if (w0) {
        if (kY == 3 && nrows == kR && m == 0) {
          if (lane == 0) {
            const unsigned ys = sbase + kS * kStage + (k % kYS) * kYTile;
            const int col = span * (kRunRowBytes / 4);
            if (hint_st) bulk_store_tile_hint(&ymap, ys, col, r0, st_pol);
            else bulk_store_tile(&ymap, ys, col, r0);
          }
        } else if (lane < nrows && !((m >> lane) & 1)) {
          E* yr = yg + static_cast<int64_t>(r0 + lane) * yst + c0;
          const unsigned ys = sbase + kS * kStage + (k % kYS) * kYTile + lane * kRunRowBytes;
          if (hint_st) bulk_store_row_hint(yr, ys, nb, st_pol);
          else bulk_store_row(yr, ys, nb);
        }
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
                *reinterpret_cast<const uint4*>(ysm + (k % kYS) * kYTile + i * kRunRowBytes + q * 16);
      }
    }
  };
  auto body = [&](int k, int st) {
    const E* xs = reinterpret_cast<const E*>(smem_raw + st * kStage) + tid * kC;
    const E* rs = xs + kR * SPAN;
    const int r = g0 + k * kR;
    // y row i of the tile: the staging tile (kStaged) or global memory (kY = 2).
    E* yp;
    int64_t ys;
    if constexpr (kStaged) yp = reinterpret_cast<E*>(ysm + (k % kYS) * kYTile) + tid * kC, ys = SPAN;
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
    if constexpr (kStaged) {
      if (tid == 0) skip[k % kYS] = m;
      if constexpr (kBulkY) fence_view_async_shared();
    }
  };

  // The ring: tile k + kS - 1 goes into the stage of tile k - 1 after the barrier that ends body(k - 1);
  // tile k - 1's y is stored after it too, and its staging tile is rewritten by body(k + kYS - 1), after
  // warp 0 waited (before that step's barrier) until at most the newest kYS - 2 store groups still read.
#pragma unroll
  for (int k = 0; k < kS - 1; ++k) {
    if (k < ntiles) issue(k, k);
    if constexpr (!kX) cp_async_commit();
  }
  for (int k = 0; k < ntiles; ++k) {
    const int st = k % kS;
    if constexpr (kX) mbar_wait(&full[st], static_cast<uint32_t>((k / kS) & 1));
    else cp_async_wait<kS - 2>();
    if constexpr (kBulkY)
      if (w0) bulk_wait_read<kYS - 2>();
    __syncthreads();
    if constexpr (kStaged)
      if (k > 0) store(k - 1);
    const int nk = k + kS - 1;
    if (nk < ntiles) issue(nk, nk % kS);
    if constexpr (!kX) cp_async_commit();
    body(k, st);
  }
  if constexpr (kStaged) {
    __syncthreads();
    store(ntiles - 1);
    if constexpr (kBulkY)
      if (w0) bulk_wait0();
  }
}

// Dynamic shared memory of an instance: the ring, then kYS staging tiles of y (kY != 2).
inline size_t tma_smem_bytes(bool res, int kR, int kS, int kY, int kYS) {
  return static_cast<size_t>(kS) * (res ? 2 : 1) * kR * kRunRowBytes +
         (kY != 2 ? static_cast<size_t>(kYS) * kR * kRunRowBytes : 0u);
}

// order=spread's multiplier: the unit mod `groups` nearest to groups / (groups running at once), so the
// groups of concurrently running blocks lie ~evenly over the whole tensor.
inline int tma_spread_mul(int64_t groups, int64_t resident_groups) {
  if (groups <= 2) return 1;
  const int64_t m = resident_groups > 1 ? resident_groups : 1;
  const int64_t s = (groups + m / 2) / m > 1 ? (groups + m / 2) / m : 1;
  for (int64_t d = 0; d < groups; ++d) {
    if (s + d < groups && std::gcd(s + d, groups) == 1) return static_cast<int>(s + d);
    if (s - d >= 1 && std::gcd(s - d, groups) == 1) return static_cast<int>(s - d);
  }
  return 1;
}

// Launch of one (ring, copy, store, y staging) configuration, silu / residual picked at run time.
template <class E, int kW, int kR, int kS, bool kX, int kY, int kYS = 2>
void launch_tma(const ConvParams& p, cudaStream_t stream, const FwdVariant& v) {
  const bool res = p.residual.data != nullptr;
  void (*k)(ConvParams, TmaArgs, CUtensorMap);
  if (p.silu)
    k = res ? fwd_tma_kernel<E, kW, true, true, kR, kS, kX, kY, kYS>
            : fwd_tma_kernel<E, kW, true, false, kR, kS, kX, kY, kYS>;
  else
    k = res ? fwd_tma_kernel<E, kW, false, true, kR, kS, kX, kY, kYS>
            : fwd_tma_kernel<E, kW, false, false, kR, kS, kX, kY, kYS>;
  const size_t smem = tma_smem_bytes(res, kR, kS, kY, kYS);
  ensure_dynamic_smem(reinterpret_cast<const void*>(k), smem);
  int occ = 0;
  if (v.waves > 0 || v.order == 2) {  // resident blocks per SM of this instance: fixed per device
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
  TmaArgs a;
  a.group_rows = variant_group_rows(p, v, run_span<E>(), kR, v.waves > 0 ? occ : 0);
  const int64_t groups = (p.B * p.T + a.group_rows - 1) / a.group_rows;
  a.order = v.order;
  a.mul = v.order == 2 ? tma_spread_mul(groups, occ * current_device_info().sm_count / spans) : 1;
  a.hints = v.ld + 4 * v.st + (v.pf256 ? 16 : 0) + (v.ld != 0 || v.pf256 ? 32 : 0) + (v.st != 0 ? 64 : 0);
  CUtensorMap ymap{};  // unused unless kY = 3
  if constexpr (kY == 3)
    ymap = conv_y_tile_map(p.y.data, static_cast<uint64_t>(p.B * p.T), static_cast<uint64_t>(p.D) * sizeof(E),
                           static_cast<uint64_t>(p.y.st) * sizeof(E), kR);
  k<<<dim3(static_cast<unsigned>(spans), static_cast<unsigned>(groups)), kThreads, smem, stream>>>(p, a, ymap);
  LINATTN_CONV_CUDA_OK(cudaGetLastError());
}

}  // namespace linattn::cuda::conv
