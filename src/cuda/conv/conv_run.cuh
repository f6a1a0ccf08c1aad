// Long-run short conv (v6, both passes; conv_fwd_run.cu / conv_bwd_run.cu). A block of kThreads
// threads owns a 1 KiB slice of every row (512 bf16 / fp16 or 256 fp32 channels: 4 bytes per
// thread) and one group of consecutive rows; each thread walks ALL rows of its group in order
// with the x window (and, backward, the dz window) in registers, so the W - 1 halo rows are
// paid once per group (hundreds of rows), not once per 16. Rows reach shared memory in
// kRunRows-row tiles by 16-byte cp.async through a kRunStages-deep ring (one barrier per tile);
// a tile whose rows all lie inside one sequence (and away from its ends) runs a fully unrolled
// step without range tests, the rest runs a general per-row step. Applies to layouts whose row
// slices are 16-byte aligned, D a multiple of 16 / sizeof(E), flat rows (varlen, B = 1, or batch
// stride = T * row stride: row r at r * st) and W in {2, 3, 4}; grids depend only on shapes.
#pragma once
#include <cstdlib>
#include <string>

#include "core/check.h"
#include "core/env.h"
#include "core/util.h"
#include "cuda/conv/conv_common.cuh"

namespace linattn::cuda::conv {

constexpr int kRunRows = 8;    // rows per tile (the unrolled fast step), default
constexpr int kRunStages = 4;  // tiles in the ring: 3 in flight while one is computed, default
constexpr int kRunRowBytes = kThreads * 4;

template <class E>
constexpr int run_span() {  // channels per block
  return kRunRowBytes / static_cast<int>(sizeof(E));
}
template <class E>
constexpr int run_chans() {  // channels per thread
  return 4 / static_cast<int>(sizeof(E));
}
// Dynamic shared memory of a block with `tensors` staged tensors, kR-row tiles, kS stages.
inline size_t run_smem_bytes(int tensors, int kR = kRunRows, int kS = kRunStages) {
  return static_cast<size_t>(kS) * tensors * kR * kRunRowBytes;
}

inline bool run_flat(const ConvRows& t, const ConvParams& p) {
  return !t.data || p.varlen || p.B == 1 || t.sb == p.T * t.st;
}

// LINATTN_CONV_CUDA_PATH (measurement override, read once per process): "run" forces the long-run
// kernels on every eligible layout, "tiles" the v3 tile kernels; unset / empty: the shape rule. Any other
// value is an error (the v4 streaming kernels of "stream" were removed in session 10, perf-notes "Pruned").
// 0: shape rule, 1: run, 2: tiles.
inline int conv_path() {
  static const int v = [] {
    LINATTN_CHECK(std::getenv("LINATTN_CONV_CUDA_FWD_ROWS") == nullptr,
                  "LINATTN_CONV_CUDA_FWD_ROWS is set, but it steered the v4 streaming forward, removed in session 10 "
                  "(docs/perf-notes.md, Short conv, Pruned); unset it");
    const std::string e = env_or("LINATTN_CONV_CUDA_PATH", "");
    return 1 + choice_index("LINATTN_CONV_CUDA_PATH", e, {"run", "tiles"}, -1,
                            e == "stream" ? "the v4 streaming kernels (stream) were removed in session 10 "
                                            "(docs/perf-notes.md, Short conv, Pruned)"
                                          : "");
  }();
  return v;
}
// Whether the long-run kernels take an eligible layout: LINATTN_CONV_CUDA_PATH=run forces them,
// =tiles excludes them; otherwise when the grid has >= kRunMinBlocks blocks (below that, short
// inputs keep the v3 tiles' finer split: more blocks for few rows).
constexpr int64_t kRunMinBlocks = 384;
inline bool use_run(int64_t blocks) {
  const int v = conv_path();
  if (v == 1) return true;
  if (v == 2) return false;
  return blocks >= kRunMinBlocks;
}
inline int64_t conv_env(const char* name) { return std::atoll(env_or(name, "0").c_str()); }

// Taps and bias of channels [c, c + V): fp32 weight / bias (the usual case) by plain loads,
// all in flight at once; other dtypes through load_small.
template <int kCap, int V>
__device__ __forceinline__ void load_taps(Taps<kCap>* taps, float* bias, const ConvParams& p, int64_t c, int W) {
  if (p.w_dtype == DType::kF32) {
    const float* w = static_cast<const float*>(p.weight) + c * p.W;
#pragma unroll
    for (int j = 0; j < V; ++j) taps[j].load_f32(w + j * p.W, W);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) taps[j].load(p, c + j, W);
  }
  if (p.bias && p.b_dtype == DType::kF32) {
#pragma unroll
    for (int j = 0; j < V; ++j) bias[j] = __ldg(static_cast<const float*>(p.bias) + c + j);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) bias[j] = p.bias ? load_small(p.bias, p.b_dtype, c + j) : 0.0f;
  }
}

// 16-byte cp.async to a shared address (sm_80+; the kernels run on sm_90a).
__device__ __forceinline__ void cp_async16_s(unsigned smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem));
#endif
}

// One staged tensor's copy: the thread moves 16-byte chunk (tid % 64) of tile rows tid / 64 + 4 m;
// src walks the tensor one tile per issue (rows past the group are not copied). Addresses are
// set up once: per tile an issue is kR / 4 predicated cp.async and one pointer step.
template <class E, int kR = kRunRows>
struct RunCopy {
  static_assert(kR % 4 == 0, "4-row passes");
  const char* src;
  int64_t step4;  // bytes of 4 rows
  unsigned dst;   // shared address of the chunk in stage 0
  int ro;         // the thread's first tile row
  bool on;        // the chunk's channels are < D

  __device__ __forceinline__ void init(const ConvRows& t, int r0, int c0, int64_t D, const void* stage0) {
    const int q = static_cast<int>(threadIdx.x) % 64;
    ro = static_cast<int>(threadIdx.x) / 64;
    const int c = c0 + q * (16 / static_cast<int>(sizeof(E)));
    on = t.data != nullptr && c < D;
    step4 = 4 * t.st * static_cast<int64_t>(sizeof(E));
    src = on ? reinterpret_cast<const char*>(static_cast<const E*>(t.data) + static_cast<int64_t>(r0 + ro) * t.st + c)
             : nullptr;
    dst = static_cast<unsigned>(__cvta_generic_to_shared(stage0)) + ro * kRunRowBytes + q * 16;
  }
  // Copies rows [0, nrows) of the tile into the stage `off` bytes past stage 0, then steps src on.
  __device__ __forceinline__ void issue(unsigned off, int nrows) {
    if (on) {
#pragma unroll
      for (int m = 0; m < kR / 4; ++m)
        if (ro + 4 * m < nrows) cp_async16_s(dst + off + m * 4 * kRunRowBytes, src + m * step4);
      src += (kR / 4) * step4;
    }
  }
};

// kS-deep cp.async ring over ntiles (block-uniform) tiles: issue(k, s) copies tile k into stage s
// (no commit), body(k, s) computes it. Tile k + kS - 1 goes into the stage of tile k - 1 right
// after the barrier that ends every thread's work on k - 1.
template <int kS = kRunStages, class Issue, class Body>
__device__ __forceinline__ void run_pipeline(int ntiles, Issue&& issue, Body&& body) {
  static_assert(kS >= 2, "a ring of at least two stages");
#pragma unroll
  for (int k = 0; k < kS - 1; ++k) {
    if (k < ntiles) issue(k, k);
    cp_async_commit();
  }
  for (int k = 0; k < ntiles; ++k) {
    cp_async_wait<kS - 2>();
    __syncthreads();
    const int nk = k + kS - 1;
    if (nk < ntiles) issue(nk, nk % kS);
    cp_async_commit();
    body(k, k % kS);
  }
}

// seq_bounds in 32 bits (rows < 2^31, checked at launch): the kernels keep them in registers.
__device__ __forceinline__ void seq_bounds32(const ConvParams& p, int n, int* bos, int* eos) {
  int64_t b, e;
  seq_bounds(p, n, &b, &e);
  *bos = static_cast<int>(b);
  *eos = static_cast<int>(e);
}

// x window (rows u - H .. u - 1, oldest first) of kC channels at row u of sequence n (first row
// bos): x rows from global memory, rows before bos from initial_state slots (zero without it).
template <class E, int kW, int kC>
__device__ __forceinline__ void run_x_window(float (*xw)[kW > 1 ? kW - 1 : 1], const ConvParams& p, int u, int bos,
                                             int n, int c) {
  constexpr int H = kW - 1;
#pragma unroll
  for (int k = 0; k < H; ++k) {
    const int q = u - H + k;
    float v[kC];
    if (q >= bos) {
      load_lanes<E, kC>(static_cast<const E*>(p.x.data) + static_cast<int64_t>(q) * p.x.st + c, v);
    } else {
#pragma unroll
      for (int j = 0; j < kC; ++j)
        v[j] = p.h0 ? load_small(p.h0, p.h0_dtype, (static_cast<int64_t>(n) * p.D + c + j) * kW + kW + q - bos) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kC; ++j) xw[j][k] = v[j];
  }
}

// Forward variants for A/B runs (opt-in; conv_fwd_run.cu parses them): LINATTN_CONV_CUDA_FWD, parsed once per
// distinct value, a comma-separated list of: "v6" (the long-run kernel, the default where it runs), "x=cp" (v8 / v9:
// the v6 kernel with y staged in shared memory and written by cp.async.bulk row stores, conv_fwd_tma.cu; sm_90,
// bf16 / fp16 with W = 4, elsewhere the v6 kernel with the same grid), blocks=N (target grid) or waves=N (N x the
// resident blocks of the device). Set and non-empty, it forces the long-run path wherever eligible (as
// LINATTN_CONV_CUDA_PATH=run). Measured (perf-notes, Version 9): x=cp,waves=2 is the fastest forward at 8192 x 65536
// bf16 (0.5445 vs 0.5596 ms queued) and slower at every other shape, so opt-in. Every other variant of v7-v11 (rings,
// L2 hints, bulk x loads, other y stores, orders, y staging depths, tile stores, v10 phases, v11 register streaming)
// was removed in session 10 (perf-notes, Short conv, Pruned): naming one is an error.
struct FwdVariant {
  bool on = false;
  bool bulk_y = false;   // x=cp: bulk y stores (conv_fwd_tma.cu)
  int64_t blocks = 0;    // 0: v6's rule (~2048 blocks, >= 64 rows per group)
  int64_t waves = 0;
};
FwdVariant fwd_variant();  // parses the variable (LINATTN_CHECK on unknown keys / values), cached per value

// Rows per group of a variant launch: v6's rule, or v.blocks / v.waves (occ = resident blocks per SM
// of the instance), rounded up to a multiple of kR, at most 65535 groups.
int64_t variant_group_rows(const ConvParams& p, const FwdVariant& v, int64_t span, int kR, int occ);
// Resident blocks per SM of kernel k with smem bytes of dynamic shared memory on the current device (cached).
int run_occupancy(const void* k, size_t smem);

// Launch of the forward / backward long-run kernels (the callers checked eligibility).
template <class E>
void fwd_run(const ConvParams& p, cudaStream_t stream, int64_t group_rows, int64_t groups);
template <class E>
void fwd_run_variant(const ConvParams& p, cudaStream_t stream, const FwdVariant& v);
template <class E>
bool fwd_bulk_y(const ConvParams& p, cudaStream_t stream, const FwdVariant& v);  // conv_fwd_tma.cu: false if none
template <class E>
void bwd_run(const ConvParams& p, cudaStream_t stream, int64_t group_rows, int64_t groups);

}  // namespace linattn::cuda::conv
