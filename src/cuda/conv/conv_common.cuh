// Device helpers of the CUDA short conv. Both kernels use the same tiling: a block of kThreads
// threads owns one channel tile (256 bytes of every row: 128 bf16/fp16 or 64 fp32 channels)
// and a group of consecutive kRowTile-row tiles. Tiles (with their W - 1 halo rows) are copied
// into shared memory with cp.async, double-buffered: the copy of tile i + 1 is in flight while
// tile i is computed (tile_pipeline). Each thread then computes kC adjacent channels (2 for
// 16-bit types on the 16-byte path: 4-byte shared loads and global stores; else 1) over
// kRowTile / chunks consecutive rows of the tile (ThreadTile), in order, with the last W - 1
// inputs in registers; rows advance by pointer steps (no per-row index math). Also here: element conversion, small-tensor loads of any float dtype, sequence
// bounds (clamped, so garbage offsets never address outside the tensors), silu, error check.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/check.h"
#include "meta/conv_desc.h"

namespace linattn::cuda::conv {

using meta::ConvParams;
using meta::ConvRows;
using meta::kConvMaxW;

#define LINATTN_CONV_CUDA_OK(call)                                                            \
  do {                                                                                        \
    const cudaError_t e_ = (call);                                                            \
    LINATTN_CHECK_CODE(e_ == cudaSuccess, ::linattn::ErrorCode::kBackend,                     \
                       ::linattn::FailureCategory::kNone, #call, ": ", cudaGetErrorString(e_)); \
  } while (0)

constexpr int kThreads = 256;
constexpr int kRowTile = static_cast<int>(meta::kConvCudaRowTile);

template <class E>
constexpr int tile_channels() {
  return static_cast<int>(256 / sizeof(E));
}

template <class E>
__device__ __forceinline__ float to_f(E v);
template <>
__device__ __forceinline__ float to_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }

template <class E>
__device__ __forceinline__ E from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

__device__ __forceinline__ float load_small(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case DType::kF64: return static_cast<float>(static_cast<const double*>(p)[i]);
    default: return 0.0f;
  }
}

__device__ __forceinline__ void store_small(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(p)[i] = v; break;
    case DType::kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    case DType::kF16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case DType::kF64: static_cast<double*>(p)[i] = v; break;
    default: break;
  }
}

__device__ __forceinline__ int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// First row of sequence n (n in [0, N]), clamped to [0, rows].
__device__ __forceinline__ int64_t seq_start(const ConvParams& p, int64_t n) {
  if (!p.varlen) return n * p.T;
  const int64_t v = p.cu_dtype == DType::kI64 ? static_cast<const int64_t*>(p.cu)[n]
                                              : static_cast<const int32_t*>(p.cu)[n];
  return clamp64(v, 0, p.B * p.T);
}

// Tokens [bos, eos) of sequence n, eos >= bos even for non-monotone garbage offsets.
__device__ __forceinline__ void seq_bounds(const ConvParams& p, int64_t n, int64_t* bos, int64_t* eos) {
  *bos = seq_start(p, n);
  const int64_t e = seq_start(p, n + 1);
  *eos = e > *bos ? e : *bos;
}

// The sequence whose rows contain r (largest n < N with start(n) <= r).
__device__ __forceinline__ int64_t find_seq(const ConvParams& p, int64_t r) {
  // rows < 2^31 (checked at launch): a 32-bit division, not the 64-bit subroutine.
  if (!p.varlen) return p.T > 0 ? static_cast<int64_t>(static_cast<uint32_t>(r) / static_cast<uint32_t>(p.T)) : p.N;
  int64_t lo = 0, hi = p.N - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (seq_start(p, mid) <= r) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Element (flat row r, channel c) of a [B, T, D] tensor; rows < 2^31 (checked at launch).
// Flat layouts (varlen, B = 1, or batch stride = T * row stride: every contiguous tensor) need no
// division; the test is uniform and loop-invariant, so it leaves the copy loops.
template <class E>
__device__ __forceinline__ E* elem(const ConvRows& t, const ConvParams& p, int64_t r, int64_t c) {
  if (p.varlen || p.B == 1 || t.sb == p.T * t.st) return static_cast<E*>(t.data) + r * t.st + c;
  const int64_t b = p.varlen ? 0 : static_cast<int64_t>(static_cast<uint32_t>(r) / static_cast<uint32_t>(p.T));
  return static_cast<E*>(t.data) + b * t.sb + (r - b * p.T) * t.st + c;
}

// Fast sigmoid: 1 / (1 + 2^(-z log2 e)) with the flush-to-zero MUFU forms (ex2, rcp): 4
// instructions instead of ~9 (the non-ftz ex2 / div.approx add denormal range fix-ups; a
// denormal ex2 result or reciprocal changes sigmoid by < 1e-38). rcp(inf) = 0 for z -> -inf.
__device__ __forceinline__ float sigmoidf_(float z) {
  float e, s;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(z * -1.4426950408889634f));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(s) : "f"(1.0f + e));
  return s;
}

__device__ __forceinline__ float silu_f(float z) { return z * sigmoidf_(z); }

// d silu(z) / dz.
__device__ __forceinline__ float silu_grad(float z) {
  const float s = sigmoidf_(z);
  return s * (1.0f + z * (1.0f - s));
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
#else
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// Copies rows [r_lo, r_hi) (within [0, rows)), channels [c0, c0 + CB) of t into
// sm[(r - base) * CB + (c - c0)]: 16-byte cp.async when kVec (every row slice 16-byte aligned,
// D a multiple of 16 / sizeof(E)), element copies otherwise. Channels >= D are not copied.
template <class E, bool kVec>
__device__ __forceinline__ void copy_rows(E* sm, int64_t base, const ConvRows& t, const ConvParams& p,
                                          int64_t r_lo, int64_t r_hi, int64_t c0) {
  constexpr int CB = tile_channels<E>();
  constexpr int kPer = kVec ? static_cast<int>(16 / sizeof(E)) : 1;
  constexpr int kPerRow = CB / kPer;
  constexpr int kRowsPerPass = kThreads / kPerRow;
  const int lane = threadIdx.x % kPerRow;
  const int64_t c = c0 + lane * kPer;
  if (c >= p.D) return;
#pragma unroll 4
  for (int64_t r = r_lo + threadIdx.x / kPerRow; r < r_hi; r += kRowsPerPass) {
    const E* src = elem<const E>(t, p, r, c);
    E* dst = sm + (r - base) * CB + lane * kPer;
    if constexpr (kVec) cp_async16(dst, src);
    else *dst = *src;
  }
}

// The last W - 1 values of one channel's stream (oldest first), in registers: every index is
// a compile-time constant after unrolling, also on the runtime-W path (kCap = kConvMaxW).
template <int kCap>
struct Window {
  float v[kCap > 1 ? kCap - 1 : 1];

  __device__ __forceinline__ void push(float x, int W) {
#pragma unroll
    for (int k = 0; k < kCap - 1; ++k) {
      if (k + 1 < W - 1) v[k] = v[k + 1];
      else if (k == W - 2) v[k] = x;
    }
  }
};

// weight[c, i] of channel c for i < kCap (0 past W), and weight[c, idx] for a runtime idx.
template <int kCap>
struct Taps {
  float w[kCap];
  float last;  // weight[c, W - 1]: multiplies the current token

  __device__ __forceinline__ void load(const ConvParams& p, int64_t c, int W) {
    last = 0.0f;
#pragma unroll
    for (int i = 0; i < kCap; ++i) {
      w[i] = i < W ? load_small(p.weight, p.w_dtype, c * p.W + i) : 0.0f;
      if (i == W - 1) last = w[i];
    }
  }
  // The same from fp32 weights wp = weight + c * W, without a dtype switch per load: the loads
  // are independent, so they are in flight together (the switch made them one after another).
  __device__ __forceinline__ void load_f32(const float* wp, int W) {
#pragma unroll
    for (int i = 0; i < kCap; ++i) w[i] = i < W ? __ldg(wp + i) : 0.0f;
    last = at(W - 1);
  }
  __device__ __forceinline__ float at(int idx) const {
    float v = 0.0f;
#pragma unroll
    for (int i = 0; i < kCap; ++i)
      if (i == idx) v = w[i];
    return v;
  }
  // bias + sum_{k < W-1} w[k] * win[k] + last * x.
  __device__ __forceinline__ float conv(float bias, const Window<kCap>& win, float x, int W) const {
    float z = bias;
#pragma unroll
    for (int k = 0; k < kCap - 1; ++k)
      if (k < W - 1) z += w[k] * win.v[k];
    return z + last * x;
  }
};

// Channels per thread: 2 for 16-bit types on the 16-byte path, else 1.
template <class E, bool kVec>
constexpr int chans_per_thread() {
  return kVec && sizeof(E) == 2 ? 2 : 1;
}

// kC adjacent elements <-> floats; kC = 2 only for 16-bit types (4-byte aligned on the 16-byte path).
template <class E, int kC>
__device__ __forceinline__ void load_lanes(const E* p, float* v) {
  if constexpr (kC == 1) {
    v[0] = to_f(p[0]);
  } else if constexpr (sizeof(E) == 2 && kC == 2) {
    float2 f;
    if constexpr (std::is_same_v<E, __nv_bfloat16>) f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
    else f = __half22float2(*reinterpret_cast<const __half2*>(p));
    v[0] = f.x;
    v[1] = f.y;
  } else {
    static_assert(kC == 1, "load_lanes: kC = 2 needs a 16-bit type");
  }
}

template <class E, int kC>
__device__ __forceinline__ void store_lanes(E* p, const float* v) {
  if constexpr (kC == 1) {
    p[0] = from_f<E>(v[0]);
  } else if constexpr (std::is_same_v<E, __nv_bfloat16>) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v[0], v[1]);
  } else {
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(v[0], v[1]);
  }
}

// kC raw elements copied as one access (dresidual = dy).
template <class E, int kC>
__device__ __forceinline__ void copy_lanes(E* dst, const E* src) {
  if constexpr (kC == 1) dst[0] = src[0];
  else *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(src);
}

// One thread's place in a block's tile: channels [c, c + kC) (cl counts kC-channel lanes of the
// CB-channel tile), rows [chunk * kRows, (chunk + 1) * kRows) of each kRowTile-row tile.
template <class E, bool kVec>
struct ThreadTile {
  static constexpr int kC = chans_per_thread<E, kVec>();
  static constexpr int CB = tile_channels<E>();
  static constexpr int kLanes = CB / kC;             // threads per tile row
  static constexpr int kChunks = kThreads / kLanes;  // row chunks per tile
  static constexpr int kRows = kRowTile / kChunks;   // rows per thread and tile
  int cl, chunk;
  int64_t c0, c;

  __device__ __forceinline__ ThreadTile() {
    cl = static_cast<int>(threadIdx.x) % kLanes;
    chunk = static_cast<int>(threadIdx.x) / kLanes;
    c0 = static_cast<int64_t>(blockIdx.x) * CB;
    c = c0 + cl * kC;
  }
};

// The double-buffered tile loop shared by both passes: issue(tile, stage) starts the cp.async
// copies of a tile (and commits them); body(tile, stage) computes it once they have landed.
template <class Issue, class Body>
__device__ __forceinline__ void tile_pipeline(int64_t t_begin, int64_t t_end, Issue&& issue, Body&& body) {
  if (t_begin < t_end) issue(t_begin, 0);
  for (int64_t tile = t_begin; tile < t_end; ++tile) {
    const int s = static_cast<int>((tile - t_begin) & 1);
    if (tile + 1 < t_end) {
      issue(tile + 1, s ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    body(tile, s);
    __syncthreads();
  }
}

// Windows of kC channels [c, c + kC) before row a of sequence n (rows [bos, ...)): x rows from
// shared memory (xa = the thread's slot of row a - (W - 1), rows CB elements apart), rows before
// bos from initial_state (zero without it).
template <class E, int kCap, int kC, int CB>
__device__ __forceinline__ void init_windows(Window<kCap>* win, const E* xa, const ConvParams& p, int64_t a,
                                             int64_t bos, int64_t n, int64_t c, int W) {
#pragma unroll
  for (int k = 0; k < kCap - 1; ++k) {
    if (k < W - 1) {
      const int64_t q = a - (W - 1) + k;
      float v[kC];
      if (q >= bos) {
        load_lanes<E, kC>(xa + k * CB, v);
      } else {
#pragma unroll
        for (int j = 0; j < kC; ++j)
          v[j] = p.h0 ? load_small(p.h0, p.h0_dtype, (n * p.D + c + j) * p.W + W + q - bos) : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < kC; ++j) win[j].v[k] = v[j];
    }
  }
}

// Whether a [B, T, D] tensor allows 16-byte access of every row slice (absent tensors do).
inline bool rows_aligned(const ConvRows& t, size_t elem) {
  const int64_t per = static_cast<int64_t>(16 / elem);
  if (!t.data) return true;
  return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.sb % per == 0 && t.st % per == 0;
}

}  // namespace linattn::cuda::conv
