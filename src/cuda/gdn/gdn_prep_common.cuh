// Device helpers shared by the chunk-parallel prep kernels of GDN (gdn_prep.cu) and KDA
// (kda/kda_fwd_prep.cu): a 16x16x16 TF32 tensor-core product on fp32 shared-memory tiles, the
// inversion of the unit lower-triangular (I + L) of one chunk, a row's warp-reduced sum of squares
// (l2-norm scales), 16-element packed stores, and the cp.async of a chunk's q / k rows.
// invert_unit_lower: 64 threads invert the 16x16 diagonal blocks by right-looking forward
// substitution (15 dependent steps, one column per thread); the off-diagonal blocks are merged
// by distance, X_ab = -X_aa sum_m L_am X_mb, one warp per block on TF32 tensor cores (FLA's
// precision for these merges). Needs >= BT threads and >= BT/16 - 1 warps; tscr: per-warp scratch.
// invert_unit_lower_cols: the same blocks merged by column chains (one warp per column block, warp barriers).
#pragma once
#include <cuda_runtime.h>

#include "cuda/common/mma.cuh"
#include "cuda/gdn/gdn_common.cuh"

namespace linattn::cuda {

// acc (16x16 as two m16n8 tiles) += A[16 rows a0.., 16 cols ka..] * B[16 rows kb.., 16 cols nb..].
template <int LDA, int LDB>
__device__ __forceinline__ void mma16x16_tf32(float (&acc)[2][4], const float (*A)[LDA], int a0, int ka,
                                              const float (*B)[LDB], int kb, int nb, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
    uint32_t fa[4];
    fa[0] = to_tf32(A[a0 + g][ka + 8 * ks + t]);
    fa[1] = to_tf32(A[a0 + g + 8][ka + 8 * ks + t]);
    fa[2] = to_tf32(A[a0 + g][ka + 8 * ks + t + 4]);
    fa[3] = to_tf32(A[a0 + g + 8][ka + 8 * ks + t + 4]);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
      mma1688_tf32(acc[nt], fa, to_tf32(B[kb + 8 * ks + t][nb + 8 * nt + g]),
                   to_tf32(B[kb + 8 * ks + t + 4][nb + 8 * nt + g]));
  }
}

// The 16x16 diagonal blocks of X = (I + L)^-1, one column per thread (threads 0 .. BT-1), right-looking.
template <int BT, int LD>
__device__ __forceinline__ void solve_diag_blocks(const float (*L)[LD], float (*X)[LD], int tid) {
  if (tid < BT) {
    const int o = 16 * (tid / 16), col = tid % 16;
    float x[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) x[r] = r == col ? 1.f : 0.f;
#pragma unroll
    for (int c = 0; c < 15; ++c)
#pragma unroll
      for (int r = c + 1; r < 16; ++r) x[r] -= L[o + r][o + c] * x[c];
#pragma unroll
    for (int r = 0; r < 16; ++r) X[o + r][o + col] = x[r];
  }
}

// One off-diagonal block by one warp: X_ab = -X_aa sum_{m = b}^{a-1} L_am X_mb (a > b; X_aa and every X_mb
// of the sum final); tw: the warp's 16x16 scratch.
template <int LD>
__device__ __forceinline__ void merge_block(const float (*L)[LD], float (*X)[LD], float (*tw)[20], int a, int b,
                                            int lane) {
  const int g = lane >> 2, t = lane & 3;
  float acc[2][4] = {};
  for (int m = b; m < a; ++m) mma16x16_tf32<LD, LD>(acc, L, 16 * a, 16 * m, X, 16 * m, 16 * b, lane);
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    tw[g][8 * nt + 2 * t] = acc[nt][0];
    tw[g][8 * nt + 2 * t + 1] = acc[nt][1];
    tw[g + 8][8 * nt + 2 * t] = acc[nt][2];
    tw[g + 8][8 * nt + 2 * t + 1] = acc[nt][3];
  }
  __syncwarp();
  float res[2][4] = {};
  mma16x16_tf32<LD, 20>(res, X, 16 * a, 16 * a, tw, 0, 0, lane);
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const int c = 16 * b + 8 * nt + 2 * t;
    X[16 * a + g][c] = -res[nt][0];
    X[16 * a + g][c + 1] = -res[nt][1];
    X[16 * a + g + 8][c] = -res[nt][2];
    X[16 * a + g + 8][c + 1] = -res[nt][3];
  }
}

// X = (I + L)^-1 for the strictly lower L (upper blocks of X already zeroed by the caller).
template <int BT, int LD>
__device__ __forceinline__ void invert_unit_lower(const float (*L)[LD], float (*X)[LD], float (*tscr)[16][20],
                                                  int tid) {
  constexpr int NB = BT / 16;
  solve_diag_blocks<BT, LD>(L, X, tid);
  __syncthreads();
  const int warp = tid >> 5, lane = tid & 31;
#pragma unroll
  for (int d = 1; d < NB; ++d) {
    if (warp < NB - d) merge_block<LD>(L, X, tscr[warp], warp + d, warp, lane);
    __syncthreads();
  }
}

// The same X by column chains (GDN prep v6): a column block b of X depends only on itself, so warp b merges
// X_(b+1)b, X_(b+2)b, ... in order with warp barriers only: one CTA barrier (after the diagonal blocks)
// instead of BT/16; every block is the same products in the same order as invert_unit_lower (same bits).
// The caller synchronises after it (the merges' X stores).
template <int BT, int LD>
__device__ __forceinline__ void invert_unit_lower_cols(const float (*L)[LD], float (*X)[LD], float (*tscr)[16][20],
                                                       int tid) {
  constexpr int NB = BT / 16;
  solve_diag_blocks<BT, LD>(L, X, tid);
  __syncthreads();
  const int warp = tid >> 5, lane = tid & 31;
  if (warp < NB - 1) {
    for (int a = warp + 1; a < NB; ++a) {
      merge_block<LD>(L, X, tscr[warp], a, warp, lane);
      __syncwarp();  // X_ab (other lanes' stores) is read by the next block of the chain; tw is rewritten
    }
  }
}

// Sum of squares of one K-element row held by a warp (lane reads K / 32 contiguous elements),
// reduced over the warp so every lane has it: the denominator of the l2-norm row scale
// rsqrt(ss + 1e-6) of the preps and the chunked backwards.
template <class T, int K>
__device__ __forceinline__ float row_sumsq_warp(const T* row, int lane) {
  float ss = 0.f;
#pragma unroll
  for (int e = 0; e < K / 32; ++e) {
    const float x = MmaType<T>::to_float(row[lane * (K / 32) + e]);
    ss += x * x;
  }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, d);
  return ss;
}

template <class T>
__device__ __forceinline__ void store16(T* dst, const float (&v)[16]) {
  uint32_t w[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) w[e] = MmaType<T>::pack(v[2 * e], v[2 * e + 1]);
  reinterpret_cast<uint4*>(dst)[0] = make_uint4(w[0], w[1], w[2], w[3]);
  reinterpret_cast<uint4*>(dst)[1] = make_uint4(w[4], w[5], w[6], w[7]);
}

template <class T>
__device__ __forceinline__ void store8(T* dst, const float (&v)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) w[e] = MmaType<T>::pack(v[2 * e], v[2 * e + 1]);
  *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
}

// cp.async of the chunk's q and k rows of q/k head h (K = 128 elements each) into q[BT][LD] /
// k[BT][LD]; rows >= len are zero-filled. All NT threads of the CTA; the caller commits.
template <int NT, int BT, int LD, class T>
__device__ __forceinline__ void load_qk_rows(const GdnFwdParams& p, int64_t t0, int h, int len, T (*q)[LD],
                                             T (*k)[LD], int tid) {
  constexpr int kKq = 128;
  const T* qsrc = static_cast<const T*>(p.q) + (t0 * p.H + h) * kKq;
  const T* ksrc = static_cast<const T*>(p.k) + (t0 * p.H + h) * kKq;
  for (int idx = tid; idx < BT * (kKq / 8); idx += NT) {
    const int row = idx / (kKq / 8), ch = idx % (kKq / 8);
    const bool valid = row < len;
    const int off = valid ? row * p.H * kKq + ch * 8 : 0;
    cp_async16(&q[row][ch * 8], qsrc + off, valid);
    cp_async16(&k[row][ch * 8], ksrc + off, valid);
  }
}

// KDA preps: the raw gates of key channel ch for rows [row0, row0 + R) of the chunk (0 past len;
// those rows' gates are never read: they may be garbage), all loads issued first, and the
// in-kernel gate's per-channel constants dt_bias[ch] and e^A_log of value head j.
template <int R>
__device__ __forceinline__ void load_gate_rows(const GdnFwdParams& p, int64_t t0, int j, int ch, int row0, int len,
                                               float (&gv)[R], float& dtb, float& ea) {
  constexpr int kKg = 128;
  const int64_t gbase = (t0 * p.HV + j) * kKg + ch, gstride = int64_t(p.HV) * kKg;
  if (p.g_type == ElemType::kF32) {
    const float* g = static_cast<const float*>(p.g) + gbase;
#pragma unroll
    for (int e = 0; e < R; ++e) gv[e] = row0 + e < len ? g[(row0 + e) * gstride] : 0.f;
  } else {
#pragma unroll
    for (int e = 0; e < R; ++e) gv[e] = row0 + e < len ? load_elem(p.g, p.g_type, gbase + (row0 + e) * gstride) : 0.f;
  }
  dtb = p.gate_in_kernel && p.dt_bias ? p.dt_bias[j * kKg + ch] : 0.f;
  ea = p.gate_in_kernel && p.A_log ? expf(p.A_log[j]) : 1.f;
}

}  // namespace linattn::cuda
