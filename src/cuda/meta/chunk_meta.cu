// One-block kernel for the static chunk tables (see chunk_meta.h). 1024 threads: pass 1 scans the
// per-sequence chunk counts tile by tile (warp shuffles + one smem round per tile, running carry),
// writing chunk_offsets; pass 2 maps every table row r to its sequence by binary search over the
// offsets it just wrote (upper_bound - 1 skips zero-length sequences), or writes a sentinel.
// Optional pass 3 (seq_order set): a counting sort of the sequences by chunk count, longest first
// (counts >= kBins - 1 share the first bin), through a shared histogram and a block scan; ties land
// in atomic order, which only changes which CTA a head-level kernel starts first, never a result.
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/common/pdl.cuh"
#include "cuda/meta/chunk_meta.h"

namespace linattn::cuda {
namespace {

constexpr int kThreads = 1024, kBins = kThreads;  // pass 3: one histogram bin per thread

__device__ __forceinline__ int64_t load_cu(const void* cu, bool i64, int64_t i) {
  return i64 ? static_cast<const int64_t*>(cu)[i] : static_cast<const int32_t*>(cu)[i];
}

// Exclusive prefix sum of v over the block's threads in thread order; total = the block's sum. Ends
// with a barrier, so warp_sums is free again when it returns.
__device__ __forceinline__ int64_t block_exclusive_scan(int64_t v, int64_t* warp_sums, int lane, int warp,
                                                        int64_t& total) {
  int64_t incl = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    int64_t o = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += o;
  }
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int64_t w = warp_sums[lane];
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      int64_t o = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += o;
    }
    warp_sums[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  const int64_t excl = (warp > 0 ? warp_sums[warp - 1] : 0) + incl - v;
  total = warp_sums[kThreads / 32 - 1];
  __syncthreads();
  return excl;
}

// kPdl (LINATTN_CUDA_PDL=1): launched with PDL (waits for the kernel that wrote cu and for the previous kernels'
// reads of the tables) and lets the prep launch at once (it waits for these tables itself).
template <bool kPdl = false>
__global__ void __launch_bounds__(kThreads) chunk_meta_kernel(const void* cu, bool cu_i64,
                                                              int64_t n_max, int64_t t_max, int bt,
                                                              int64_t nt_max, int32_t* indices,
                                                              int32_t* offsets, int32_t* seq_order) {
  pdl_wait<kPdl>();
  pdl_launch_dependents<kPdl>();
  __shared__ int64_t warp_sums[kThreads / 32];
  __shared__ int32_t bins[kBins];
  __shared__ int64_t carry;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (tid == 0) carry = 0;
  __syncthreads();
  for (int64_t base = 0; base < n_max; base += kThreads) {
    const int64_t n = base + tid;
    int64_t cnt = 0;
    if (n < n_max) {
      int64_t bos = min(max(load_cu(cu, cu_i64, n), int64_t(0)), t_max);
      int64_t eos = min(max(load_cu(cu, cu_i64, n + 1), bos), t_max);
      cnt = (eos - bos + bt - 1) / bt;
    }
    const int64_t before = carry;  // read before the scan's first barrier, so tid 0's update below is safe
    int64_t tile_total;
    const int64_t excl = before + block_exclusive_scan(cnt, warp_sums, lane, warp, tile_total);
    if (n < n_max) offsets[n] = static_cast<int32_t>(min(excl, nt_max));
    if (tid == 0) carry = before + tile_total;
    __syncthreads();
  }
  const int64_t total = min(carry, nt_max);
  if (tid == 0) offsets[n_max] = static_cast<int32_t>(total);
  __syncthreads();  // offsets (global) visible to the whole block
  for (int64_t r = tid; r < nt_max; r += kThreads) {
    int32_t seq = -1, c = 0;
    if (r < total) {
      int64_t lo = 0, hi = n_max;  // upper_bound over offsets[0..n_max)
      while (lo < hi) {
        int64_t mid = (lo + hi) >> 1;
        if (offsets[mid] <= r) lo = mid + 1;
        else hi = mid;
      }
      seq = static_cast<int32_t>(lo - 1);
      c = static_cast<int32_t>(r - offsets[lo - 1]);
    }
    indices[2 * r] = seq;
    indices[2 * r + 1] = c;
  }
  if (seq_order == nullptr) return;
  // Pass 3: bin b = kBins - 1 - min(count, kBins - 1), so the exclusive scan over bins is longest first.
  bins[tid] = 0;
  __syncthreads();
  for (int64_t n = tid; n < n_max; n += kThreads)
    atomicAdd(&bins[kBins - 1 - min(offsets[n + 1] - offsets[n], kBins - 1)], 1);
  __syncthreads();
  int64_t all;
  bins[tid] = static_cast<int32_t>(block_exclusive_scan(bins[tid], warp_sums, lane, warp, all));  // first slot
  __syncthreads();
  for (int64_t n = tid; n < n_max; n += kThreads)
    seq_order[atomicAdd(&bins[kBins - 1 - min(offsets[n + 1] - offsets[n], kBins - 1)], 1)] =
        static_cast<int32_t>(n);
}

}  // namespace

void build_chunk_meta(const void* cu_seqlens, bool cu_i64, int64_t n_max, int64_t t_max, int bt,
                      int64_t nt_max, int32_t* chunk_indices, int32_t* chunk_offsets, void* stream,
                      int32_t* seq_order) {
  LINATTN_CHECK(n_max >= 0 && t_max >= 0 && nt_max >= 0 && bt > 0, "chunk_meta: bad capacity N_max=",
                n_max, " T_max=", t_max, " NT_max=", nt_max, " BT=", bt);
  LINATTN_CHECK(nt_max < (int64_t(1) << 31) && n_max < (int64_t(1) << 31),
                "chunk_meta: capacity exceeds int32 tables (NT_max=", nt_max, ", N_max=", n_max, ")");
  const bool pdl = pdl_enabled();
  launch_pdl(pdl, pdl ? chunk_meta_kernel<true> : chunk_meta_kernel<>, dim3(1), dim3(kThreads), 0,
             static_cast<cudaStream_t>(stream), cu_seqlens, cu_i64, n_max, t_max, bt, nt_max, chunk_indices,
             chunk_offsets, seq_order);
}

}  // namespace linattn::cuda
