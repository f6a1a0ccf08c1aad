// chunked13 (kdabwd13, session 13; opt-in LINATTN_CUDA_KDA_BWD=chunked13): chunked12 (SPLIT + GC12 of
// kda_bwd_chunk2_kernel.cuh) with two changes that keep every value (bitwise chunked12):
//  - the raw fp32 gates of a head arrive as one cp.async tile in `a` (rows < len, zero-filled past it), committed
//    between the q / k rows and the head's 152 KB of tiles, and the staging's formula pass (stage_formula12) runs
//    while those tiles stream. chunked12 issues its 16 scalar gate loads per thread after the tiles' cp.asyncs and
//    stores them to `a` (the STS waiting on them was chunked7's hottest instruction, 3.2% of the samples, long
//    scoreboard), so the staging's loads and formula sat between the tile loads and their wait. 16-bit or
//    misaligned gates keep chunked12's staging (uniform branch);
//  - the off-diagonal / square split-TF32 operands with the hi part by cvt.rna's finite-input arithmetic
//    (split_tf32_t<true>, kda_bwd_chunk2_parts.cuh): 2 of its ~7 instructions fewer per split, ~150 splits per warp
//    and head;
//  - dq / dk stored in 8-channel pieces (store_dqdk13: 16-byte shared reads and global stores, store_out's
//    conversions) instead of one dtype-switched scalar store per element (~40 instructions per element and thread).
#pragma once
#include <cstdint>

#include "cuda/kda/kda_bwd_chunk12_parts.cuh"

namespace linattn::cuda {
namespace kda_bwd {

// Whether head gates can come as a cp.async tile: fp32, 16-byte aligned (rows are K = 128 floats, so every row too).
__device__ __forceinline__ bool gate_tile_ok(const GdnFwdParams& f) {
  return f.g_type == ElemType::kF32 && (reinterpret_cast<uintptr_t>(f.g) & 15u) == 0;
}

// a[i][0..K) <- g[t0 + i, j, 0..K) for rows i < len, zeros for len <= i < BT: 16-byte pieces, rolled.
template <int BT, int NT>
__device__ __forceinline__ void load_gate_tile13(float (*a)[kLdF], const GdnFwdParams& f, int64_t t0, int len, int j,
                                                 int tid) {
  constexpr int P = kK / 4;
  const float* src = static_cast<const float*>(f.g) + (t0 * f.HV + j) * int64_t(kK);
  const int64_t stride = int64_t(f.HV) * kK;
#pragma unroll 1
  for (int idx = tid; idx < BT * P; idx += NT) {
    const int row = idx / P, ch = idx % P;
    const bool valid = row < len;
    cp_async16(&a[row][ch * 4], src + (valid ? row * stride + ch * 4 : 0), valid);
  }
}

// store_dqdk_r (kda_bwd_chunk5_parts.cuh) in 8-channel pieces: each thread two 16-byte shared reads and one 16-byte
// store (bf16 / fp16; two for fp32; scalar stores when the output is not 16-byte aligned) per tensor and piece through
// store8_out, the conversions of store_out (the same bits), instead of one dtype-switched scalar store per element.
template <class T, int BT, int V, int NT>
__device__ __forceinline__ void store_dqdk13(KdaChunk2Smem<T, BT, V>& s, const GdnBwdParams& p, int64_t t0, int len,
                                             int h, int tid) {
  constexpr int PC = kK / 8;
  __syncthreads();
  const float* sk = stage_dk(s);
  const int64_t H = p.f.H;
  const bool vq = (reinterpret_cast<uintptr_t>(p.dq.p) & 15u) == 0, vk = (reinterpret_cast<uintptr_t>(p.dk.p) & 15u) == 0;
  const auto piece = [](const float* src, float (&x)[8]) {
    const float4 lo = *reinterpret_cast<const float4*>(src), hi = *reinterpret_cast<const float4*>(src + 4);
    x[0] = lo.x, x[1] = lo.y, x[2] = lo.z, x[3] = lo.w, x[4] = hi.x, x[5] = hi.y, x[6] = hi.z, x[7] = hi.w;
  };
#pragma unroll 1
  for (int idx = tid; idx < len * PC; idx += NT) {
    const int rr = idx / PC, c0 = (idx % PC) * 8;
    const int64_t o = ((t0 + rr) * H + h) * int64_t(kK) + c0;
    float x[8];
    if (p.dq.p) {
      piece(&s.a[rr][c0], x);
      store8_out(p.dq.p, p.dq.t, o, x, vq);
    }
    if (p.dk.p) {
      piece(sk + rr * kLdF + c0, x);
      store8_out(p.dk.p, p.dk.t, o, x, vk);
    }
  }
}

}  // namespace kda_bwd
}  // namespace linattn::cuda
