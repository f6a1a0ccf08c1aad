// GDN / KDA kernels of context parallelism on CUDA (cp_dev.h):
//  - chunk_head_state / chunk_tail_grad: the combines over the gathered records, one CTA per
//    (value head, 32-column block of V), 256 threads; the K x 32 state block in shared memory,
//    thread (row group, column) accumulates rows d = group + 8 i in fp32; the rank chain is
//    walked on the device from the layout (every CTA walks the same one).
//  - chunk_head_record: the head's state gradient in K-major fp32.
//  - token_state_pass: S_loc and M of the tail segment token by token (the exact recurrence
//    S <- (I - beta k k^T) Diag(e^g) S + beta k v^T, M with v = 0 from the identity), one warp per
//    state column (V value columns then K transition columns), lane rows d = lane + 32 i. The
//    shape- and dtype-general fallback of tier 3's chunked state pass (cuda/seg): exact but serial
//    in tokens.
#include "cuda/common/check.h"
#include "parallel/cp_dev_meta.cuh"

namespace linattn::parallel::dev {
namespace {

constexpr int kCols = 32, kGroups = kThreads / kCols;

__device__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ bool empty_rank(const Rd& rd, int r) { return rd.off(r) >= rd.off(r + 1); }

// Y = op(A) X + B on the shared block X [K][kCols] (op = transpose when tr), B rows at
// b + d * V + c0 (K-major [K, V]); A [K, K] row-major.
__device__ void affine_block(float* X, const float* A, bool tr, const float* b, int64_t K, int64_t V, int64_t c0) {
  const int cc = threadIdx.x % kCols, grp = threadIdx.x / kCols;
  float acc[256 / kGroups];
  int i = 0;
  for (int64_t d = grp; d < K; d += kGroups, ++i) {
    float s = 0.0f;
    for (int64_t e = 0; e < K; ++e) s += (tr ? A[e * K + d] : A[d * K + e]) * X[e * kCols + cc];
    acc[i] = s + (c0 + cc < V ? b[d * V + c0 + cc] : 0.0f);
  }
  __syncthreads();
  i = 0;
  for (int64_t d = grp; d < K; d += kGroups, ++i) X[d * kCols + cc] = acc[i];
  __syncthreads();
}

__device__ void load_block(float* X, const float* src, const StateDims& s, int64_t n, int64_t j, int64_t c0) {
  for (int64_t i = threadIdx.x; i < s.K * kCols; i += blockDim.x) {
    const int64_t d = i / kCols, c = c0 + i % kCols;
    X[i] = c < s.V ? src[state_at(s, n, j, d, c)] : 0.0f;
  }
  __syncthreads();
}

__device__ void store_block(const float* X, float* dst, const StateDims& s, int64_t n, int64_t j, int64_t c0) {
  for (int64_t i = threadIdx.x; i < s.K * kCols; i += blockDim.x) {
    const int64_t d = i / kCols, c = c0 + i % kCols;
    if (c < s.V) dst[state_at(s, n, j, d, c)] = X[i];
  }
}

__global__ void head_state_kernel(Layout L, StateDims s, const float* all, int64_t stride, float* h0_local,
                                  bool absolute, float* S_out) {
  extern __shared__ float X[];
  const Rd rd(L);
  const int64_t n = rd.head(L.rank), j = blockIdx.x, c0 = blockIdx.y * int64_t(kCols);
  int start = -1;  // the rank the sequence starts on (earlier ranks between are crossed)
  for (int r = L.rank - 1; n >= 0 && r >= 0 && start < 0; --r)
    if (!empty_rank(rd, r) && rd.starts_on(n, r)) start = r;
  if (n < 0 || start < 0) {
    if (S_out)
      for (int64_t i = threadIdx.x; i < s.K * kCols; i += blockDim.x) {
        const int64_t d = i / kCols, c = c0 + i % kCols;
        if (c < s.V) S_out[(j * s.K + d) * s.V + c] = 0.0f;
      }
    return;
  }
  const int64_t MK = s.HV * s.K * s.K;
  if (absolute) {
    const float* S0 = all + start * stride + MK + j * s.K * s.V;
    for (int64_t i = threadIdx.x; i < s.K * kCols; i += blockDim.x) {
      const int64_t d = i / kCols, c = c0 + i % kCols;
      X[i] = c < s.V ? S0[d * s.V + c] : 0.0f;
    }
    __syncthreads();
  } else {
    load_block(X, h0_local, s, n, j, c0);
  }
  for (int r = absolute ? start + 1 : start; r < L.rank; ++r) {
    if (empty_rank(rd, r)) continue;
    const float* rec = all + r * stride;
    affine_block(X, rec + j * s.K * s.K, false, rec + MK + j * s.K * s.V, s.K, s.V, c0);
  }
  if (S_out) {
    for (int64_t i = threadIdx.x; i < s.K * kCols; i += blockDim.x) {
      const int64_t d = i / kCols, c = c0 + i % kCols;
      if (c < s.V) S_out[(j * s.K + d) * s.V + c] = X[i];
    }
  } else {
    store_block(X, h0_local, s, n, j, c0);
  }
}

__global__ void tail_grad_kernel(Layout L, StateDims s, const float* mall, int64_t mstride, const float* dall,
                                 int64_t dstride, float* dht_local) {
  extern __shared__ float X[];
  const Rd rd(L);
  const int64_t n = rd.tail(L.rank);
  if (n < 0) return;
  int end = -1;  // the rank the sequence ends on
  for (int r = L.rank + 1; r < L.world && end < 0; ++r)
    if (!empty_rank(rd, r) && rd.ends_on(n, r)) end = r;
  if (end < 0) return;
  const int64_t j = blockIdx.x, c0 = blockIdx.y * int64_t(kCols);
  for (int64_t i = threadIdx.x; i < s.K * kCols; i += blockDim.x) {
    const int64_t d = i / kCols, c = c0 + i % kCols;
    X[i] = c < s.V ? dall[end * dstride + (j * s.K + d) * s.V + c] : 0.0f;
  }
  __syncthreads();
  for (int r = end - 1; r > L.rank; --r) {
    if (empty_rank(rd, r)) continue;
    affine_block(X, mall + r * mstride + j * s.K * s.K, true, dall + r * dstride + j * s.K * s.V, s.K, s.V, c0);
  }
  store_block(X, dht_local, s, n, j, c0);
}

__global__ void head_record_kernel(Layout L, StateDims s, const float* src, float* rec) {
  const int64_t n = Rd(L).head(L.rank);
  CP_GRID_LOOP(i, s.state()) {
    const int64_t j = i / (s.K * s.V), d = (i / s.V) % s.K, c = i % s.V;
    rec[i] = n >= 0 ? src[state_at(s, n, j, d, c)] : 0.0f;
  }
}

__device__ float softplus(float x) { return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))); }

__device__ float log_gate(const TokenPass& p, float a, int64_t j, int64_t d) {
  if (!p.gate_in_kernel) return a;
  if (p.dt_bias) a += p.kda ? p.dt_bias[j * p.K + d] : p.dt_bias[j];
  if (p.kda && p.has_lower_bound) {
    const float x = p.A_log ? expf(p.A_log[j]) * a : a;
    return p.lower_bound / (1.0f + expf(-x));
  }
  return -expf(p.A_log[j]) * softplus(a);
}

template <int KR>
__global__ void token_state_kernel(TokenPass p, const int32_t* seg, float* rec) {
  if (seg[4] != 0) return;  // no tail on this rank
  const int64_t bos = seg[1], eos = seg[2];
  const int64_t j = blockIdx.x, c = blockIdx.y * int64_t(kThreads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (c >= p.V + p.K) return;
  const int64_t hk = j / (p.HV / p.H);
  float X[KR];
#pragma unroll
  for (int i = 0; i < KR; ++i) X[i] = (c >= p.V && lane + 32 * i == c - p.V) ? 1.0f : 0.0f;
  for (int64_t t = bos; t < eos; ++t) {
    float kr[KR], ss = 0.0f;
#pragma unroll
    for (int i = 0; i < KR; ++i) {
      const int64_t d = lane + 32 * i;
      kr[i] = d < p.K ? ld(p.k, p.io, (t * p.H + hk) * p.K + d) : 0.0f;
      ss += kr[i] * kr[i];
    }
    if (p.l2norm) {
      const float inv = 1.0f / sqrtf(warp_sum(ss) + 1e-6f);
#pragma unroll
      for (int i = 0; i < KR; ++i) kr[i] *= inv;
    }
    float b = ld(p.beta, p.beta_dt, t * p.HV + j);
    if (p.beta_sigmoid) b = (p.neg_eigval ? 2.0f : 1.0f) / (1.0f + expf(-b));
    const float vc = c < p.V ? ld(p.v, p.io, (t * p.HV + j) * p.V + c) : 0.0f;
    const float gs = p.kda ? 0.0f : expf(log_gate(p, ld(p.g, p.g_dt, t * p.HV + j), j, 0));
    float u = 0.0f;
#pragma unroll
    for (int i = 0; i < KR; ++i) {
      const int64_t d = lane + 32 * i;
      if (d >= p.K) continue;
      const float dec = p.kda ? expf(log_gate(p, ld(p.g, p.g_dt, (t * p.HV + j) * p.K + d), j, d)) : gs;
      X[i] *= dec;
      u += kr[i] * X[i];
    }
    u = warp_sum(u);
#pragma unroll
    for (int i = 0; i < KR; ++i) X[i] += b * kr[i] * (vc - u);
  }
#pragma unroll
  for (int i = 0; i < KR; ++i) {
    const int64_t d = lane + 32 * i;
    if (d >= p.K) continue;
    if (c < p.V) rec[p.HV * p.K * p.K + (j * p.K + d) * p.V + c] = X[i];
    else rec[(j * p.K + d) * p.K + (c - p.V)] = X[i];
  }
}

dim3 combine_grid(const StateDims& s) {
  return dim3(static_cast<unsigned>(s.HV), static_cast<unsigned>((s.V + kCols - 1) / kCols));
}

}  // namespace

void chunk_head_state(const Layout& L, const StateDims& s, const float* all, int64_t stride, float* h0_local,
                      bool absolute, float* S_out, void* stream) {
  LINATTN_CHECK(s.K <= 256, "context parallelism on CUDA: K = ", s.K, " (supported: K <= 256)");
  head_state_kernel<<<combine_grid(s), kThreads, s.K * kCols * sizeof(float), static_cast<cudaStream_t>(stream)>>>(
      L, s, all, stride, h0_local, absolute, S_out);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void chunk_tail_grad(const Layout& L, const StateDims& s, const float* mall, int64_t mstride, const float* dall,
                     int64_t dstride, float* dht_local, void* stream) {
  LINATTN_CHECK(s.K <= 256, "context parallelism on CUDA: K = ", s.K, " (supported: K <= 256)");
  tail_grad_kernel<<<combine_grid(s), kThreads, s.K * kCols * sizeof(float), static_cast<cudaStream_t>(stream)>>>(
      L, s, mall, mstride, dall, dstride, dht_local);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void chunk_head_record(const Layout& L, const StateDims& s, const float* src, float* rec, void* stream) {
  head_record_kernel<<<blocks_for(s.state()), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(L, s, src, rec);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void token_state_pass(const TokenPass& p, const int32_t* seg, float* rec, void* stream) {
  LINATTN_CHECK(p.K <= 256 && p.H > 0 && p.HV % p.H == 0, "context parallelism on CUDA: K = ", p.K, ", H = ", p.H,
                ", HV = ", p.HV, " (supported: K <= 256, HV a multiple of H)");
  const dim3 grid(static_cast<unsigned>(p.HV), static_cast<unsigned>((p.V + p.K + 7) / 8));
  auto s = static_cast<cudaStream_t>(stream);
  if (p.K <= 32) token_state_kernel<1><<<grid, kThreads, 0, s>>>(p, seg, rec);
  else if (p.K <= 64) token_state_kernel<2><<<grid, kThreads, 0, s>>>(p, seg, rec);
  else if (p.K <= 128) token_state_kernel<4><<<grid, kThreads, 0, s>>>(p, seg, rec);
  else token_state_kernel<8><<<grid, kThreads, 0, s>>>(p, seg, rec);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::parallel::dev
