// CUDA kernels of the dense helper ops (dense_cuda.h).
//  rms_norm_gated_fwd: one warp per row; lane l owns elements d = l + 32 i (i < NPL, NPL a power
//    of two >= D / 32), fp32 math, any float dtype in and out. 8 rows per 256-thread block.
//  rms_norm_gated_bwd: same mapping. dw: the R rows are split into kBwdBlocks fixed contiguous
//    ranges (one per block, by R only); a block's warps sum their rows' dw terms in registers,
//    reduce in shared memory in warp order and write one partial row; a second kernel sums the
//    partials in block order. Deterministic and independent of the launch timing.
//  zero_rows_from_cu: grid-stride over the whole [R, row_bytes] array in 16-bit words (bytes when
//    row_bytes is odd), zeroing words at or past cu[last] * row_bytes.
//  convert: elementwise dtype conversion.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "core/check.h"
#include "cuda/common/check.h"
#include "cuda/dense/dense_context.h"
#include "cuda/dense/dense_cuda.h"

namespace linattn::cuda {
namespace {

constexpr int kRowsPerBlock = 8;
constexpr int kBwdBlocks = dense::kNormPartialBlocks;  // 2 per H200 SM

__device__ __forceinline__ float load_f(const void* p, int t, int64_t i) {
  switch (t) {
    case 0: return static_cast<const float*>(p)[i];
    case 1: return __half2float(static_cast<const __half*>(p)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}
__device__ __forceinline__ void store_f(void* p, int t, int64_t i, float v) {
  switch (t) {
    case 0: static_cast<float*>(p)[i] = v; break;
    case 1: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    default: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
  }
}
int code(DType t) {
  switch (t) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kBF16: return 2;
    default: LINATTN_UNSUPPORTED("dense CUDA kernels: dtype ", dtype_name(t), " (supported: fp32, fp16, bf16)");
  }
}

struct NormK {
  const void* x;
  const void* g;
  const float* w;
  int xt, gt;
  int64_t R, D;
  bool sig;
  float eps;
};

__device__ __forceinline__ void gate(float g, bool sig, float* a, float* da) {
  const float s = 1.0f / (1.0f + __expf(-g));
  if (sig) {
    *a = s;
    *da = s * (1.0f - s);
  } else {
    *a = g * s;
    *da = s * (1.0f + g * (1.0f - s));
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int NPL>
__global__ void norm_fwd_kernel(NormK p, void* y, int yt, float* rstd_out) {
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (r >= p.R) return;
  float xv[NPL];
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < NPL; ++i) {
    const int64_t d = lane + 32 * i;
    xv[i] = d < p.D ? load_f(p.x, p.xt, r * p.D + d) : 0.0f;
    ss += xv[i] * xv[i];
  }
  const float rstd = rsqrtf(warp_sum(ss) / float(p.D) + p.eps);
  if (rstd_out && lane == 0) rstd_out[r] = rstd;
#pragma unroll
  for (int i = 0; i < NPL; ++i) {
    const int64_t d = lane + 32 * i;
    if (d >= p.D) continue;
    float a, da;
    gate(load_f(p.g, p.gt, r * p.D + d), p.sig, &a, &da);
    store_f(y, yt, r * p.D + d, xv[i] * rstd * p.w[d] * a);
  }
}

template <int NPL>
__global__ void norm_bwd_kernel(NormK p, const void* dy, int dyt, void* dx, int dxt, void* dg, int dgt,
                                float* partials, int64_t valid_rows) {
  __shared__ float red[kRowsPerBlock][32 * NPL];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t per = (p.R + gridDim.x - 1) / gridDim.x;
  const int64_t r0 = int64_t(blockIdx.x) * per, r1 = min(p.R, r0 + per);
  const int64_t valid = valid_rows < 0 ? p.R : valid_rows;
  float dw[NPL];
#pragma unroll
  for (int i = 0; i < NPL; ++i) dw[i] = 0.0f;
  for (int64_t r = r0 + warp; r < r1; r += kRowsPerBlock) {
    if (r >= valid) {
#pragma unroll
      for (int i = 0; i < NPL; ++i) {
        const int64_t d = lane + 32 * i;
        if (d >= p.D) continue;
        if (dx) store_f(dx, dxt, r * p.D + d, 0.0f);
        if (dg) store_f(dg, dgt, r * p.D + d, 0.0f);
      }
      continue;
    }
    float xh[NPL], dxh[NPL];
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < NPL; ++i) {
      const int64_t d = lane + 32 * i;
      xh[i] = d < p.D ? load_f(p.x, p.xt, r * p.D + d) : 0.0f;
      ss += xh[i] * xh[i];
    }
    const float rstd = rsqrtf(warp_sum(ss) / float(p.D) + p.eps);
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < NPL; ++i) {
      const int64_t d = lane + 32 * i;
      xh[i] *= rstd;
      dxh[i] = 0.0f;
      if (d >= p.D) continue;
      float a, da;
      const float gv = load_f(p.g, p.gt, r * p.D + d), dyv = load_f(dy, dyt, r * p.D + d);
      gate(gv, p.sig, &a, &da);
      const float wd = p.w[d];
      if (dg) store_f(dg, dgt, r * p.D + d, dyv * xh[i] * wd * da);
      const float dn = dyv * a;  // gradient of xhat * w
      dw[i] += dn * xh[i];
      dxh[i] = dn * wd;
      m += dxh[i] * xh[i];
    }
    m = warp_sum(m) / float(p.D);
    if (dx) {
#pragma unroll
      for (int i = 0; i < NPL; ++i) {
        const int64_t d = lane + 32 * i;
        if (d < p.D) store_f(dx, dxt, r * p.D + d, rstd * (dxh[i] - xh[i] * m));
      }
    }
  }
#pragma unroll
  for (int i = 0; i < NPL; ++i) red[warp][lane + 32 * i] = dw[i];
  __syncthreads();
  for (int64_t d = threadIdx.x; d < p.D; d += blockDim.x) {
    float s = 0.0f;
    for (int w = 0; w < kRowsPerBlock; ++w) s += red[w][d];
    partials[int64_t(blockIdx.x) * p.D + d] = s;
  }
}

__global__ void sum_partials_kernel(const float* partials, int blocks, int64_t D, float* dw) {
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= D) return;
  float s = 0.0f;
  for (int b = 0; b < blocks; ++b) s += partials[int64_t(b) * D + d];
  dw[d] = s;
}

template <class W>
__global__ void zero_kernel(W* data, int64_t words, int64_t words_per_row, const void* cu, bool i64, int64_t last) {
  const int64_t end = i64 ? static_cast<const int64_t*>(cu)[last] : static_cast<const int32_t*>(cu)[last];
  const int64_t first = max(int64_t(0), end) * words_per_row;
  for (int64_t i = first + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += int64_t(gridDim.x) * blockDim.x)
    data[i] = W(0);
}

__global__ void convert_kernel(void* dst, int dt, const void* src, int st, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    store_f(dst, dt, i, load_f(src, st, i));
}

int npl_for(int64_t D) {
  LINATTN_CHECK(D >= 1 && D <= kRmsNormMaxD, "rms_norm_gated on CUDA: row width D = ", D, " (supported: 1..",
                kRmsNormMaxD, ")");
  int n = 1;
  while (32 * n < D) n *= 2;
  return n;
}

NormK norm_k(const RmsNormArgs& p) {
  return {p.x, p.g, p.w, code(p.x_dtype), code(p.g_dtype), p.R, p.D, p.sigmoid_gate, p.eps};
}

unsigned grid_for(int64_t work, int threads) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + threads - 1) / threads, 1, 4096));
}

}  // namespace

void rms_norm_gated_fwd(const RmsNormArgs& p, void* y, DType y_dtype, float* rstd, void* stream) {
  if (p.R == 0) return;
  const NormK k = norm_k(p);
  const int yt = code(y_dtype);
  const dim3 grid(static_cast<unsigned>((p.R + kRowsPerBlock - 1) / kRowsPerBlock)), block(32 * kRowsPerBlock);
  auto s = static_cast<cudaStream_t>(stream);
  switch (npl_for(p.D)) {
    case 1: norm_fwd_kernel<1><<<grid, block, 0, s>>>(k, y, yt, rstd); break;
    case 2: norm_fwd_kernel<2><<<grid, block, 0, s>>>(k, y, yt, rstd); break;
    case 4: norm_fwd_kernel<4><<<grid, block, 0, s>>>(k, y, yt, rstd); break;
    case 8: norm_fwd_kernel<8><<<grid, block, 0, s>>>(k, y, yt, rstd); break;
    case 16: norm_fwd_kernel<16><<<grid, block, 0, s>>>(k, y, yt, rstd); break;
    default: norm_fwd_kernel<32><<<grid, block, 0, s>>>(k, y, yt, rstd); break;
  }
  LINATTN_CUDA_CHECK_LAUNCH();
}

void rms_norm_gated_bwd(int device, void* stream, const RmsNormArgs& p, const void* dy, DType dy_dtype, void* dx,
                        DType dx_dtype, void* dg, DType dg_dtype, float* dw, int64_t valid_rows) {
  const int npl = npl_for(p.D);
  float* part = dense::partials(device, stream, size_t(kBwdBlocks) * size_t(p.D));
  const NormK k = norm_k(p);
  const int dyt = code(dy_dtype), dxt = dx ? code(dx_dtype) : 0, dgt = dg ? code(dg_dtype) : 0;
  auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(kBwdBlocks), block(32 * kRowsPerBlock);
  switch (npl) {
    case 1: norm_bwd_kernel<1><<<grid, block, 0, s>>>(k, dy, dyt, dx, dxt, dg, dgt, part, valid_rows); break;
    case 2: norm_bwd_kernel<2><<<grid, block, 0, s>>>(k, dy, dyt, dx, dxt, dg, dgt, part, valid_rows); break;
    case 4: norm_bwd_kernel<4><<<grid, block, 0, s>>>(k, dy, dyt, dx, dxt, dg, dgt, part, valid_rows); break;
    case 8: norm_bwd_kernel<8><<<grid, block, 0, s>>>(k, dy, dyt, dx, dxt, dg, dgt, part, valid_rows); break;
    case 16: norm_bwd_kernel<16><<<grid, block, 0, s>>>(k, dy, dyt, dx, dxt, dg, dgt, part, valid_rows); break;
    default: norm_bwd_kernel<32><<<grid, block, 0, s>>>(k, dy, dyt, dx, dxt, dg, dgt, part, valid_rows); break;
  }
  LINATTN_CUDA_CHECK_LAUNCH();
  sum_partials_kernel<<<static_cast<unsigned>((p.D + 127) / 128), 128, 0, s>>>(part, kBwdBlocks, p.D, dw);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void zero_rows_from_cu(void* data, int64_t R, int64_t row_bytes, const void* cu, bool cu_i64, int64_t cu_last,
                       void* stream) {
  if (R == 0 || row_bytes == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (row_bytes % 2 == 0) {
    const int64_t words = R * row_bytes / 2;
    zero_kernel<uint16_t><<<grid_for(words, 256), 256, 0, s>>>(static_cast<uint16_t*>(data), words, row_bytes / 2,
                                                                cu, cu_i64, cu_last);
  } else {
    zero_kernel<uint8_t><<<grid_for(R * row_bytes, 256), 256, 0, s>>>(static_cast<uint8_t*>(data), R * row_bytes,
                                                                      row_bytes, cu, cu_i64, cu_last);
  }
  LINATTN_CUDA_CHECK_LAUNCH();
}

void convert(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n, void* stream) {
  if (n == 0) return;
  convert_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(dst, code(dst_dtype), src,
                                                                                   code(src_dtype), n);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
