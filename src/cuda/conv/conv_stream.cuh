// Register-streaming short conv (both passes; v4, opt-in: LINATTN_CONV_CUDA_PATH=stream, see
// kStreamFwd / kStreamBwd for why it is not the default): no shared-memory tiles. A thread owns V
// adjacent channels (one 16-byte access per row in the forward, 8 bytes in the backward: a warp
// reads 512 / 256 contiguous bytes of a row) and walks a run of consecutive rows, keeping the
// last W - 1 inputs (and, backward, W - 1 dz) in registers. RowRing keeps the next kU = 4 rows'
// loads in flight (row i + kU is requested when row i is consumed; 8 measured slower: fewer
// blocks fit). W - 1 halo rows are re-read at the start of every run and sequence (L2 hits).
// Applies to layouts whose row slices are all 16-byte aligned with D a multiple of
// 16 / sizeof(E); grids depend only on shapes.
#pragma once
#include <cstdlib>
#include <string>

#include "core/util.h"
#include "cuda/conv/conv_common.cuh"

namespace linattn::cuda::conv {

// kBytes raw bytes of one row slice (8 or 16), read through the read-only path.
template <int kBytes>
struct Raw;
template <>
struct Raw<16> {
  uint4 v;
  __device__ __forceinline__ void load(const void* p) { v = __ldg(static_cast<const uint4*>(p)); }
  __device__ __forceinline__ void store(void* p) const { *static_cast<uint4*>(p) = v; }
};
template <>
struct Raw<8> {
  uint2 v;
  __device__ __forceinline__ void load(const void* p) { v = __ldg(static_cast<const uint2*>(p)); }
  __device__ __forceinline__ void store(void* p) const { *static_cast<uint2*>(p) = v; }
};

// V elements of type E <-> V floats, through one kBytes = V * sizeof(E) access.
template <class E, int V>
struct Lanes {
  static constexpr int kBytes = V * static_cast<int>(sizeof(E));
  static_assert(kBytes == 8 || kBytes == 16, "Lanes: 8- or 16-byte accesses only");
  using R = Raw<kBytes>;

  __device__ __forceinline__ static void to_float(const R& r, float* f) {
    const uint32_t* w = reinterpret_cast<const uint32_t*>(&r.v);
#pragma unroll
    for (int k = 0; k < kBytes / 4; ++k) {
      if constexpr (sizeof(E) == 4) {
        f[k] = __uint_as_float(w[k]);
      } else if constexpr (std::is_same_v<E, __nv_bfloat16>) {
        f[2 * k] = __uint_as_float(w[k] << 16);
        f[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
      } else {
        const float2 h = __half22float2(*reinterpret_cast<const __half2*>(&w[k]));
        f[2 * k] = h.x;
        f[2 * k + 1] = h.y;
      }
    }
  }
  __device__ __forceinline__ static R from_float(const float* f) {
    R r;
    uint32_t* w = reinterpret_cast<uint32_t*>(&r.v);
#pragma unroll
    for (int k = 0; k < kBytes / 4; ++k) {
      if constexpr (sizeof(E) == 4) {
        w[k] = __float_as_uint(f[k]);
      } else if constexpr (std::is_same_v<E, __nv_bfloat16>) {
        const __nv_bfloat162 h = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
        w[k] = *reinterpret_cast<const uint32_t*>(&h);
      } else {
        const __half2 h = __floats2half2_rn(f[2 * k], f[2 * k + 1]);
        w[k] = *reinterpret_cast<const uint32_t*>(&h);
      }
    }
    return r;
  }
  __device__ __forceinline__ static void load(const E* p, float* f) {
    R r;
    r.load(p);
    to_float(r, f);
  }
};

// A window of the next kU rows of one stream (row i in slot i % kU once requested): get(k, ...)
// for k = i % kU (a compile-time constant after unrolling) returns row i and requests row
// i + kU when it is < n. base points at row 0, rows `stride` elements apart.
template <class E, int kBytes, int kU>
struct RowRing {
  Raw<kBytes> buf[kU];
  const E* base;
  int64_t stride;

  __device__ __forceinline__ void start(const E* b, int64_t s, int n) {
    base = b;
    stride = s;
#pragma unroll
    for (int k = 0; k < kU; ++k)
      if (k < n) buf[k].load(base + k * stride);
  }
  __device__ __forceinline__ Raw<kBytes> get(int k, int i, int n) {
    const Raw<kBytes> r = buf[k];
    if (i + kU < n) buf[k].load(base + static_cast<int64_t>(i + kU) * stride);
    return r;
  }
};

// Windows of V channels [c, c + V) before row a of sequence n (first row bos), from x rows in
// global memory (rows before bos from initial_state, zero without it).
template <class E, int kCap, int V>
__device__ __forceinline__ void init_windows_global(Window<kCap>* win, const ConvParams& p, int64_t a, int64_t bos,
                                                    int64_t n, int64_t c, int W) {
#pragma unroll
  for (int k = 0; k < kCap - 1; ++k) {
    if (k < W - 1) {
      const int64_t q = a - (W - 1) + k;
      float v[V];
      if (q >= bos) {
        Lanes<E, V>::load(elem<const E>(p.x, p, q, c), v);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j)
          v[j] = p.h0 ? load_small(p.h0, p.h0_dtype, (n * p.D + c + j) * p.W + W + q - bos) : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < V; ++j) win[j].v[k] = v[j];
    }
  }
}

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

// Measurement overrides, read once per process (like the CPU's LINATTN_CONV_STREAM_MIN_BYTES):
// LINATTN_CONV_CUDA_PATH=tiles / stream runs the v3 shared-memory tile kernels / the streaming
// kernels on every aligned layout (so the two designs are timed and tested in one build);
// LINATTN_CONV_CUDA_FWD_ROWS=R fixes the forward's rows per warp. Unset: the per-pass defaults
// below and the shape rule.
inline int64_t conv_env(const char* name) { return std::atoll(env_or(name, "0").c_str()); }
// Default kernels of aligned layouts per pass (true: streaming; false: v3 tiles). Both false:
// on the H200 the streaming kernels measured 5-7% slower than the tiles at 8192 x 65536 bf16
// (fwd 0.895 vs 0.843 ms, bwd 1.80 vs 1.76 ms) and up to 1.4x slower at T = 4096 (perf-notes).
constexpr bool kStreamFwd = false;
constexpr bool kStreamBwd = false;

// Whether an aligned layout runs the streaming kernel of a pass whose default is `dflt`.
inline bool use_stream(bool dflt) {
  static const std::string v = env_or("LINATTN_CONV_CUDA_PATH", "");
  if (v == "tiles") return false;
  if (v == "stream") return true;
  return dflt;
}
inline int64_t fwd_rows_override() {
  static const int64_t r = conv_env("LINATTN_CONV_CUDA_FWD_ROWS");
  return r;
}


// Entry points (conv_fwd_stream.cu / conv_bwd_stream.cu); the callers checked alignment.
template <class E>
void fwd_stream(const ConvParams& p, cudaStream_t stream);
template <class E>
void bwd_stream(const ConvParams& p, cudaStream_t stream, int64_t groups);

}  // namespace linattn::cuda::conv
