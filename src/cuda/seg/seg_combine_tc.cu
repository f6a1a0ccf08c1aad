// Tensor-core combine of tier 3 (opt-in: LINATTN_CUDA_SEG_COMBINE=tc (16 columns per CTA) / tc8 (8); seg_pass.h).
// The walk of seg_kernels.cu's seg_combine_kernel (one CTA of 256 threads per (CB state columns, value head,
// sequence), slots in order, reverse with M^T for the gradient), but each step's h <- M h + add runs on
// mma.sync m16n8k8 in 3xTF32 (x = hi + lo, both TF32; M h = M_hi h_hi + (M_lo h_hi + M_hi h_lo), the lo lo term
// below fp32 rounding): warp w owns output rows 16 w .. 16 w + 15 and all CB columns, and sums over k in two
// interleaved halves (even / odd k tiles) with the big and the small products in separate accumulators (short
// mma dependency chains). Not bitwise the FFMA combine (another summation order; ~fp32 rounding), so the tests
// hold it to the reference bars. Why: the FFMA step issues 160 LDS.128 (~4 shared wavefronts each) and 512 FFMA
// per thread, 8 warps per SM; here a warp's step (CB 16) is 64 LDS.32 + 64 splits of M, 64 LDS.64 of the
// pre-split h and 96 mma.
// Shared memory: M double-buffered by cp.async (step i + 1's in flight during step i), rows padded to
// 132 (forward, A = M) / 136 (reverse, A = M^T) floats so the fragment reads hit 32 banks; the state
// double-buffered, split ({hi, lo} pairs, rows of CB + 4 pairs: conflict-free B reads) and in fp32 (the slots'
// outputs): a step reads one buffer and writes the other, so one barrier per step. 188-197 KB: one CTA per SM.
#include "cuda/seg/seg_combine_tc.h"

#include <cuda_runtime.h>

#include "core/check.h"
#include "cuda/common/launch.h"
#include "cuda/common/pdl.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/seg/seg_combine_common.cuh"

namespace linattn::cuda::seg {
namespace {

using combine::kK;
using combine::kThreads;

template <bool REV, int CB>
struct TcShape {
  static constexpr int kLdM = REV ? kK + 8 : kK + 4;  // A(r, k) reads at (g, t) / (t, g): 32 banks
  static constexpr int kLdS = CB + 4;                 // B reads hs[t][g] (8-byte pairs, + 4 rows): 32 banks
  static constexpr int kNT = CB / 8;                  // n tiles of 8 columns
};

template <bool REV, int CB>
struct TcSmem {
  float m[2][kK][TcShape<REV, CB>::kLdM];  // M of steps i (buffer i & 1) and i + 1
  uint2 hs[2][kK][TcShape<REV, CB>::kLdS];  // the walk's state split {hi, lo} (buffer cur) and the next
  float h[2][kK][CB];                       // the same states in fp32 (the outputs)
};

__device__ __forceinline__ uint2 split(float x) {
  constexpr uint32_t kMask = 0xffffe000u;  // the 19 TF32 bits
  const uint32_t hi = to_tf32(x) & kMask;
  return make_uint2(hi, to_tf32(x - __uint_as_float(hi)) & kMask);
}

// One step of warp w: rows 16 w .. 16 w + 15 of the next state = A h + add, A = M (REV: M^T) in buffer m, h
// split in hs; written to hn (fp32) and hsn (split). ad[nt][half]: this thread's addend (row g + 8 half,
// columns 8 nt + 2 t, + 1).
template <bool REV, int CB>
__device__ __forceinline__ void tc_step(const float (*m)[TcShape<REV, CB>::kLdM],
                                        const uint2 (*hs)[TcShape<REV, CB>::kLdS], float (*hn)[CB],
                                        uint2 (*hsn)[TcShape<REV, CB>::kLdS],
                                        const float2 (&ad)[TcShape<REV, CB>::kNT][2], int r0, int g, int t) {
  constexpr int NT = TcShape<REV, CB>::kNT;
  const auto A = [&](int r, int k) { return REV ? m[k][r] : m[r][k]; };
  float big[2][NT][4] = {}, small[2][NT][4] = {};
#pragma unroll
  for (int kt = 0; kt < kK / 8; ++kt) {
    const int k0 = 8 * kt, par = kt & 1;
    const uint2 a0 = split(A(r0 + g, k0 + t)), a1 = split(A(r0 + g + 8, k0 + t)), a2 = split(A(r0 + g, k0 + t + 4)),
                a3 = split(A(r0 + g + 8, k0 + t + 4));
    const uint32_t ahi[4] = {a0.x, a1.x, a2.x, a3.x}, alo[4] = {a0.y, a1.y, a2.y, a3.y};
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const uint2 b0 = hs[k0 + t][8 * nt + g], b1 = hs[k0 + t + 4][8 * nt + g];
      mma1688_tf32(big[par][nt], ahi, b0.x, b1.x);
      mma1688_tf32(small[par][nt], alo, b0.x, b1.x);
      mma1688_tf32(small[par][nt], ahi, b0.y, b1.y);
    }
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float x[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int i = 2 * half + e;
        x[e] = (big[0][nt][i] + big[1][nt][i]) + (small[0][nt][i] + small[1][nt][i]);
      }
      const float y0 = x[0] + ad[nt][half].x, y1 = x[1] + ad[nt][half].y;
      const int row = r0 + g + 8 * half, col = 8 * nt + 2 * t;
      *reinterpret_cast<float2*>(&hn[row][col]) = make_float2(y0, y1);
      const uint2 s0 = split(y0), s1 = split(y1);
      *reinterpret_cast<uint4*>(&hsn[row][col]) = make_uint4(s0.x, s0.y, s1.x, s1.y);
    }
}

// The walk (seg_pass.h combine_forward / combine_reverse / combine_forward_from_first; FIRST as in
// seg_kernels.cu). Per step: flags (loaded a step ahead) and this thread's addend fragment, the wait for its
// own copies of M, one barrier (M and h complete; every thread is done with step it - 1, so its M buffer
// takes step it + 1's copies and its h buffer the new state), the output slot's state, then the step.
// kPdl (LINATTN_CUDA_PDL=1, forward from h0 only): launched with PDL; the initial state (the caller's h0, which no
// earlier kernel writes) loads before the wait for the state pass.
template <bool REV, bool FIRST, int CB, bool kPdl = false>
__global__ void __launch_bounds__(kThreads) seg_combine_tc_kernel(GdnFwdParams p, SegTable t, const void* init,
                                                                   ElemType init_type, const float* init_seg,
                                                                   const float* M, const float* add, float* out) {
  static_assert(!(REV && FIRST), "the first-segment start is forward only");
  static_assert(!kPdl || !FIRST, "PDL: the first-segment start writes out before the wait");
  using Sh = TcShape<REV, CB>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<TcSmem<REV, CB>*>(smem_raw);
  const int tid = threadIdx.x, lane = tid % 32, g = lane / 4, tq = lane % 4, r0 = 16 * (tid / 32);
  const int c0 = blockIdx.x * CB, j = blockIdx.y;
  const int64_t n = blockIdx.z;
  const int V = p.V;
  const auto slot_of = [&](int it) { return n * t.segments + (REV ? t.segments - 1 - it : it); };
  for (int idx = tid; idx < kK * CB; idx += kThreads) {
    const int row = idx / CB, c = idx % CB;
    const float x = combine::initial_state<FIRST>(p, n, slot_of(0), j, row, c0 + c, init, init_type, init_seg, out);
    s.h[0][row][c] = x;
    s.hs[0][row][c] = split(x);
  }
  pdl_wait<kPdl>();  // M, add, the table: the state pass's; out: read by the previous call's kernels
  pdl_launch_dependents<kPdl>();
  const int32_t stop = REV ? kSegFirst : kSegLast;
  const int it0 = FIRST ? 1 : 0;
  if (it0 < t.segments) combine::prefetch_m<Sh::kLdM>(s.m[it0 & 1], M + (slot_of(it0) * p.HV + j) * kK * kK, tid);
  cp_async_commit();
  int32_t next_flags = it0 < t.segments ? t.flags[slot_of(it0)] : 0;
  int cur = 0;
  for (int it = it0; it < t.segments; ++it) {
    const int64_t head = slot_of(it) * p.HV + j;
    const int32_t flags = next_flags;
    if (it + 1 < t.segments) next_flags = t.flags[slot_of(it + 1)];
    const bool step = !(flags & (kSegEmpty | stop));  // uniform over the CTA
    float2 ad[Sh::kNT][2];
    if (step) {
#pragma unroll
      for (int nt = 0; nt < Sh::kNT; ++nt)
#pragma unroll
        for (int half = 0; half < 2; ++half)
          ad[nt][half] = *reinterpret_cast<const float2*>(add + (head * kK + r0 + g + 8 * half) * V + c0 + 8 * nt +
                                                          2 * tq);
    }
    cp_async_wait<0>();
    __syncthreads();
    if (it + 1 < t.segments)
      combine::prefetch_m<Sh::kLdM>(s.m[(it + 1) & 1], M + (slot_of(it + 1) * p.HV + j) * kK * kK, tid);
    cp_async_commit();
    for (int idx = tid; idx < kK * CB; idx += kThreads) {
      const int row = idx / CB, c = idx % CB;
      out[(head * kK + row) * V + c0 + c] = s.h[cur][row][c];
    }
    if (!step) continue;
    tc_step<REV, CB>(s.m[it & 1], s.hs[cur], s.h[cur ^ 1], s.hs[cur ^ 1], ad, r0, g, tq);
    cur ^= 1;
  }
  cp_async_wait<0>();
}

template <bool REV, bool FIRST, int CB>
void launch_tc(const GdnFwdParams& p, const SegTable& t, const void* init, ElemType init_type, const float* init_seg,
               const float* M, const float* add, float* out, void* stream) {
  const dim3 grid(p.V / CB, p.HV, static_cast<unsigned>(t.N));
  if constexpr (!REV && !FIRST) {
    if (pdl_enabled()) {
      launch_pdl(true, seg_combine_tc_kernel<false, false, CB, true>, grid, dim3(kThreads), sizeof(TcSmem<REV, CB>),
                 static_cast<cudaStream_t>(stream), p, t, init, init_type, init_seg, M, add, out);
      return;
    }
  }
  launch(seg_combine_tc_kernel<REV, FIRST, CB>, grid, dim3(kThreads), sizeof(TcSmem<REV, CB>),
         static_cast<cudaStream_t>(stream), p, t, init, init_type, init_seg, M, add, out);
}

template <int CB>
void launch_tc_cb(bool rev, bool first, const GdnFwdParams& p, const SegTable& t, const void* init,
                  ElemType init_type, const float* init_seg, const float* M, const float* add, float* out,
                  void* stream) {
  if (rev) launch_tc<true, false, CB>(p, t, init, init_type, init_seg, M, add, out, stream);
  else if (first) launch_tc<false, true, CB>(p, t, init, init_type, init_seg, M, add, out, stream);
  else launch_tc<false, false, CB>(p, t, init, init_type, init_seg, M, add, out, stream);
}

}  // namespace

void launch_combine_tc(bool rev, bool first, int cb, const GdnFwdParams& p, const SegTable& t, const void* init,
                       ElemType init_type, const float* init_seg, const float* M, const float* add, float* out,
                       void* stream) {
  LINATTN_CHECK(p.K == kK && (cb == 8 || cb == 16) && !(rev && first), "tier 3 tc combine: K ", p.K, ", ", cb,
                " columns per CTA");
  if (cb == 16 && p.V % 16 == 0) launch_tc_cb<16>(rev, first, p, t, init, init_type, init_seg, M, add, out, stream);
  else launch_tc_cb<8>(rev, first, p, t, init, init_type, init_seg, M, add, out, stream);
}

}  // namespace linattn::cuda::seg
