// Conv kernels of context parallelism on CUDA (cp_dev.h): the last W rows of a rank (forward
// record), the head's virtual initial state built from the gathered records, and the backward's
// scatter of every later rank's head initial-state gradient onto the dx rows and the
// initial-state slots it came from. One thread per element (per channel for dx, so the adds of
// one element happen in rank order in one thread: deterministic). Records fp32 (exact for the
// fp32 / bf16 / fp16 inputs); rows of x / dx may be strided (channel dim contiguous).
#include "cuda/common/check.h"
#include "parallel/cp_dev_meta.cuh"

namespace linattn::parallel::dev {
namespace {

__global__ void tail_rows_kernel(const void* x, DType dt, int64_t stride, int64_t rows, int64_t D, int64_t W,
                                 float* rec) {
  CP_GRID_LOOP(i, W * D) {
    const int64_t k = i / D, d = i % D, row = rows - W + k;
    rec[i] = row >= 0 ? ld(x, dt, row * stride + d) : 0.0f;
  }
}

__global__ void head_state_kernel(Layout L, const float* all, const void* h0, DType h0dt, int64_t D, int64_t W,
                                  float* h0_local) {
  const Rd rd(L);
  const int64_t head = rd.head(L.rank), R0 = rd.off(L.rank);
  CP_GRID_LOOP(i, L.N * D * W) {
    const int64_t n = i / (D * W), d = (i / W) % D, s = i % W;
    float v = 0.0f;
    if (n == head) {
      const int64_t p = R0 - W + s, bos = rd.cu(n);
      if (p < bos) {
        if (h0) v = ld(h0, h0dt, (n * D + d) * W + W + p - bos);
      } else {
        int r = 0;
        for (int q = 0; q < L.rank; ++q)
          if (rd.off(q) <= p && p < rd.off(q + 1)) r = q;
        const int64_t k = p - (rd.off(r + 1) - W);
        if (k >= 0 && k < W) v = all[(r * W + k) * D + d];
      }
    } else if (h0) {
      v = ld(h0, h0dt, i);
    }
    h0_local[i] = v;
  }
}

__global__ void head_grad_kernel(Layout L, const float* dh0_local, int64_t D, int64_t W, float* rec) {
  const int64_t head = Rd(L).head(L.rank);
  CP_GRID_LOOP(e, D * W) rec[e] = head >= 0 ? dh0_local[head * D * W + e] : 0.0f;
}

__global__ void scatter_dx_kernel(Layout L, const float* all, void* dx, DType dt, int64_t stride, int64_t D,
                                  int64_t W) {
  const Rd rd(L);
  const int64_t R0 = rd.off(L.rank);
  CP_GRID_LOOP(d, D) {
    for (int r = L.rank + 1; r < L.world; ++r) {
      const int64_t m = rd.head(r);
      if (m < 0) continue;
      const int64_t bos = rd.cu(m), Rr = rd.off(r);
      for (int64_t s = 0; s < W; ++s) {
        const int64_t p = Rr - W + s, lr = p - R0;
        if (p < bos || lr < 0 || lr >= L.rows) continue;
        const int64_t at = lr * stride + d;
        st(dx, dt, at, ld(dx, dt, at) + all[(r * D + d) * W + s]);
      }
    }
  }
}

__global__ void dinit_kernel(Layout L, const float* all, const float* dh0_local, void* dinit, DType dt, int64_t D,
                             int64_t W) {
  const Rd rd(L);
  CP_GRID_LOOP(i, L.N * D * W) {
    const int64_t n = i / (D * W), d = (i / W) % D, s = i % W;
    float v = 0.0f;
    if (rd.starts_on(n, L.rank)) {
      v = dh0_local[i];
      const int64_t bos = rd.cu(n);
      for (int r = L.rank + 1; r < L.world; ++r) {
        if (rd.head(r) != n) continue;
        const int64_t k = bos - rd.off(r) + s;  // rank r's head slot of global row bos - W + s
        if (k >= 0 && k < W) v += all[(r * D + d) * W + k];
      }
    }
    st(dinit, dt, i, v);
  }
}

}  // namespace

void conv_tail_rows(const void* x, DType dt, int64_t row_stride, int64_t rows, int64_t D, int64_t W, float* rec,
                    void* stream) {
  tail_rows_kernel<<<blocks_for(W * D), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, dt, row_stride, rows, D,
                                                                                          W, rec);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void conv_head_state(const Layout& L, const float* all, const void* h0, DType h0dt, int64_t D, int64_t W,
                     float* h0_local, void* stream) {
  head_state_kernel<<<blocks_for(L.N * D * W), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(L, all, h0, h0dt, D,
                                                                                                 W, h0_local);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void conv_head_grad(const Layout& L, const float* dh0_local, int64_t D, int64_t W, float* rec, void* stream) {
  head_grad_kernel<<<blocks_for(D * W), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(L, dh0_local, D, W, rec);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void conv_scatter_dx(const Layout& L, const float* all, void* dx, DType dt, int64_t row_stride, int64_t D, int64_t W,
                     void* stream) {
  scatter_dx_kernel<<<blocks_for(D), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(L, all, dx, dt, row_stride, D,
                                                                                       W);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void conv_dinit(const Layout& L, const float* all, const float* dh0_local, void* dinit, DType dt, int64_t D, int64_t W,
                void* stream) {
  dinit_kernel<<<blocks_for(L.N * D * W), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(L, all, dh0_local, dinit,
                                                                                            dt, D, W);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::parallel::dev
