// Layout kernels shared by the CUDA context-parallel ops (cp_dev.h): this rank's virtual
// cu_seqlens and tail segment, picked state copies (initial / final states and their gradients
// between the global [N, ...] tensors and the rank's local ones), and the rank-ordered sum of
// parameter-gradient partials. One thread per element; fixed grids (shapes only).
#include "cuda/common/check.h"
#include "parallel/cp_dev_meta.cuh"

namespace linattn::parallel::dev {
namespace {

__global__ void virtual_cu_kernel(Layout L, int64_t* vcu, int32_t* seg) {
  const Rd rd(L);
  const int64_t R0 = rd.off(L.rank);
  CP_GRID_LOOP(i, L.N + 1) {
    int64_t v = rd.cu(i) - R0;
    vcu[i] = v < 0 ? 0 : (v > L.rows ? L.rows : v);
  }
  if (seg != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
    const int64_t n = rd.tail(L.rank);
    int64_t bos = n < 0 ? L.rows : rd.cu(n) - R0;
    bos = bos < 0 ? 0 : (bos > L.rows ? L.rows : bos);
    seg[0] = 0;
    seg[1] = static_cast<int32_t>(bos);
    seg[2] = static_cast<int32_t>(L.rows);
    seg[3] = 1;              // flags of slot 0: skipped
    seg[4] = n < 0 ? 1 : 0;  // flags of slot 1 (the tail): skipped without one
    seg[5] = 0;
  }
}

__global__ void copy_states_kernel(Layout L, Pick pick, bool zero_others, const void* src, DType sdt, void* dst,
                                   DType ddt, int64_t E) {
  const Rd rd(L);
  const int64_t total = L.N * E;
  CP_GRID_LOOP(i, total) {
    const int64_t n = i / E;
    const bool take = pick == Pick::kAll || (pick == Pick::kStartsHere ? rd.starts_on(n, L.rank) : rd.ends_on(n, L.rank));
    if (take) st(dst, ddt, i, src ? ld(src, sdt, i) : 0.0f);
    else if (zero_others) st(dst, ddt, i, 0.0f);
  }
}

__global__ void sum_ranks_kernel(const float* all, int parts, int64_t stride, int64_t n, void* dst, DType dt) {
  CP_GRID_LOOP(i, n) {
    double s = 0.0;
    for (int r = 0; r < parts; ++r) s += all[r * stride + i];
    st(dst, dt, i, static_cast<float>(s));
  }
}

}  // namespace

void virtual_cu(const Layout& L, int64_t* vcu, int32_t* seg, void* stream) {
  virtual_cu_kernel<<<blocks_for(L.N + 1), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(L, vcu, seg);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void copy_states(const Layout& L, Pick pick, bool zero_others, const void* src, DType sdt, void* dst, DType ddt,
                 int64_t E, void* stream) {
  if (L.N * E == 0) return;
  copy_states_kernel<<<blocks_for(L.N * E), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(L, pick, zero_others,
                                                                                              src, sdt, dst, ddt, E);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void sum_ranks(const float* all, int parts, int64_t stride, int64_t n, void* dst, DType dt, void* stream) {
  if (n == 0) return;
  sum_ranks_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(all, parts, stride, n, dst, dt);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::parallel::dev
