// The fold prologue of tier 3's pass 2 (gdn_seg_fold.h; LINATTN_CUDA_SEG_COMBINE=fold): the 256 threads of a
// chain CTA (slot n, value head j, state columns v0 .. v0 + 63) walk the slot's initial state before the chain's
// rings start, in shared memory the rings take afterwards:
//   h = h0 of sequence n / s (or 0); for the slots i = s (n / s) .. n - 1 whose flags & skip == 0: h = M_i h + S_i
// Each step on mma.sync m16n8k8 in 3xTF32 as the tc combine (seg_combine_tc.cu): warp w owns rows 16 w .. 16 w + 15
// and all 64 columns (8 n tiles, one big and one small accumulator each); M double-buffered by cp.async (the next
// step's in flight during this one), rows padded to 132 floats (conflict-free A reads); h split {hi, lo} once by
// the warp that writes it (rows of 64 + 4 pairs: conflict-free B reads), one buffer: a barrier before the step's
// reads and one before its writes. The result goes to h0_seg (fp32 K-major, the chain's p.h0) from registers
// (no step: the initial state as loaded), then a proxy fence and a barrier: the rings' TMA boxes may overwrite
// this shared memory and every thread's h0_seg stores are visible to the chain's loads.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/mma.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/gdn/gdn_seg_fold.h"
#include "cuda/seg/seg_combine_common.cuh"

namespace linattn::cuda::fold {

using seg::combine::kK;
using seg::combine::split;
constexpr int kThreads = seg::combine::kThreads, kCols = 64, kNT = kCols / 8, kLdM = kK + 4, kLdS = kCols + 4;

struct FoldSmem {
  float m[2][kK][kLdM];  // M of this step (buffer it & 1) and the next
  uint2 hs[kK][kLdS];    // h split {hi, lo}
};

// The next slot in [from, end) that makes a step, or end.
__device__ __forceinline__ int64_t fold_next(const SegFold& f, int64_t from, int64_t end) {
  while (from < end && (f.flags[from] & f.skip)) ++from;
  return from;
}

// Slot n (of the virtual problem p: HV, K = 128, V), value head j, columns v0 .. v0 + 63; all kThreads threads.
__device__ __forceinline__ void fold_prologue(const SegFold& f, const GdnFwdParams& p, int64_t n, int j, int v0,
                                              FoldSmem& s) {
  const int tid = threadIdx.x, lane = tid % 32, g = lane / 4, tq = lane % 4, r0 = 16 * (tid / 32);
  const int V = p.V;
  const int64_t seq = n / f.segments, slot0 = seq * f.segments;
  float* out = f.h0_seg + (n * p.HV + j) * int64_t(kK) * V + v0;
  int64_t sl = fold_next(f, slot0, n);
  if (sl < n) seg::combine::prefetch_m<kLdM>(s.m[0], f.M + (sl * p.HV + j) * kK * kK, tid);
  cp_async_commit();
  const int64_t head0 = (seq * p.HV + j) * int64_t(kK) * V;
  for (int idx = tid; idx < kK * kCols; idx += kThreads) {
    const int row = idx / kCols, c = idx % kCols;
    const int64_t e = head0 + (f.h0_v_first ? int64_t(v0 + c) * kK + row : int64_t(row) * V + v0 + c);
    const float x = f.h0 ? load_elem(f.h0, f.h0_type, e) : 0.f;
    if (sl >= n) out[int64_t(row) * V + c] = x;  // no step: the initial state as it is
    s.hs[row][c] = split(x);
  }
  for (int it = 0; sl < n; ++it) {
    const int64_t nxt = fold_next(f, sl + 1, n);
    const float* add = f.S + (sl * p.HV + j) * int64_t(kK) * V + v0;
    float2 ad[kNT][2];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        ad[nt][half] = *reinterpret_cast<const float2*>(add + int64_t(r0 + g + 8 * half) * V + 8 * nt + 2 * tq);
    if (nxt < n) seg::combine::prefetch_m<kLdM>(s.m[(it + 1) & 1], f.M + (nxt * p.HV + j) * kK * kK, tid);
    cp_async_commit();
    cp_async_wait<1>();  // this step's M (the next one's may stay in flight)
    __syncthreads();     // M and h complete
    const float(*m)[kLdM] = s.m[it & 1];
    float big[kNT][4] = {}, small[kNT][4] = {};
#pragma unroll 2
    for (int kt = 0; kt < kK / 8; ++kt) {
      const int k0 = 8 * kt;
      const uint2 a0 = split(m[r0 + g][k0 + tq]), a1 = split(m[r0 + g + 8][k0 + tq]),
                  a2 = split(m[r0 + g][k0 + tq + 4]), a3 = split(m[r0 + g + 8][k0 + tq + 4]);
      const uint32_t ahi[4] = {a0.x, a1.x, a2.x, a3.x}, alo[4] = {a0.y, a1.y, a2.y, a3.y};
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const uint2 b0 = s.hs[k0 + tq][8 * nt + g], b1 = s.hs[k0 + tq + 4][8 * nt + g];
        mma1688_tf32(big[nt], ahi, b0.x, b1.x);
        mma1688_tf32(small[nt], alo, b0.x, b1.x);
        mma1688_tf32(small[nt], ahi, b0.y, b1.y);
      }
    }
    __syncthreads();  // every warp is done reading h (and this step's M buffer)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = r0 + g + 8 * half, col = 8 * nt + 2 * tq;
        const float y0 = (big[nt][2 * half] + small[nt][2 * half]) + ad[nt][half].x;
        const float y1 = (big[nt][2 * half + 1] + small[nt][2 * half + 1]) + ad[nt][half].y;
        if (nxt >= n) {
          *reinterpret_cast<float2*>(out + int64_t(row) * V + col) = make_float2(y0, y1);
        } else {
          const uint2 s0 = split(y0), s1 = split(y1);
          *reinterpret_cast<uint4*>(&s.hs[row][col]) = make_uint4(s0.x, s0.y, s1.x, s1.y);
        }
      }
    sl = nxt;
  }
  cp_async_wait<0>();
  fence_view_async_shared();  // the generic writes above, before the rings' async-proxy (TMA) writes
  __syncthreads();            // ... and h0_seg's stores, before the chain's loads
}

}  // namespace linattn::cuda::fold
