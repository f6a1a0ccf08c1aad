// Tile loaders shared by the chunked GDN backward kernels: rows [t0, t0 + len) of a token-major
// tensor into a shared-memory tile with cp.async 16-byte pieces (rows past len zero-filled, never
// read), d_o with an on-the-fly conversion when it is not in the io type or not 16-byte aligned,
// and fp32 per-row scalars of the prep workspace.
#pragma once
#include "cuda/gdn/gdn_bwd_common.cuh"

namespace linattn::cuda {

// dst[row][0..COLS) <- src[row * stride + 0..COLS) for row < len, zeros for len <= row < ROWS.
template <class T, int ROWS, int COLS, int LD, int NT>
__device__ __forceinline__ void load_rows_async(T (*dst)[LD], const T* src, int64_t stride, int len,
                                                int tid) {
  constexpr int P = COLS / 8;
#pragma unroll
  for (int idx = tid; idx < ROWS * P; idx += NT) {
    const int row = idx / P, ch = idx % P;
    const bool valid = row < len;
    cp_async16(&dst[row][ch * 8], src + (valid ? row * stride + ch * 8 : 0), valid);
  }
}

// d_o rows (value head j, columns v0..v0+COLS) in the io type.
template <class T, int ROWS, int COLS, int LD, int NT>
__device__ __forceinline__ void load_do_rows(T (*dst)[LD], const GdnBwdParams& p, bool direct,
                                             int64_t t0, int len, int j, int v0, int tid) {
  const int64_t stride = int64_t(p.f.HV) * p.f.V;
  const int64_t base = (t0 * p.f.HV + j) * int64_t(p.f.V) + v0;
  if (direct) {
    load_rows_async<T, ROWS, COLS, LD, NT>(dst, static_cast<const T*>(p.d_o) + base, stride, len, tid);
    return;
  }
  constexpr int P = COLS / 8;
  for (int idx = tid; idx < ROWS * P; idx += NT) {
    const int row = idx / P, ch = idx % P;
    uint32_t w[4] = {0u, 0u, 0u, 0u};
    if (row < len) {
      const int64_t i = base + row * stride + ch * 8;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        w[e] = MmaType<T>::pack(load_elem(p.d_o, p.do_type, i + 2 * e), load_elem(p.d_o, p.do_type, i + 2 * e + 1));
    }
    *reinterpret_cast<uint4*>(&dst[row][ch * 8]) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// Thread i (0 <= i < ROWS; others do nothing): dst[i] <- src[i] if i < len, else 0 (4-byte
// cp.async). Callers pass tid - offset so that several arrays load in one pass.
template <int ROWS>
__device__ __forceinline__ void load_scalars_async(float* dst, const float* src, int len, int i) {
  if (i >= 0 && i < ROWS) cp_async4(dst + i, src + (i < len ? i : 0), i < len);
}

}  // namespace linattn::cuda
