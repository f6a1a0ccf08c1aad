// chunked17 (kdabwd17, session 15; the default since e829969, also LINATTN_CUDA_KDA_BWD=chunked17): chunked15 with
// three cuts that keep every value (C17 of kda_bwd_chunk2_kernel.cuh), aimed at the profile of chunked15
// (bench/results/h200-ncu-deep-20261202-b089b04, docs/perf-notes.md "chunked17"):
//  - the row scales (rq / rk) batched: every warp loads its 8 q / k rows at once (one 8-byte load per row and lane)
//    and runs the 8 butterflies interleaved, instead of one row per step (a dependent chain of 4 shared loads and 5
//    shuffles per row, 5.5% of the stall samples). The same elements in the same order per lane, the same butterfly:
//    the same bits;
//  - the bf16 pairs of the diagonal walks, the <S, dS'> row dots, Y.v and the L2-norm tail unpacked by a shift and a
//    mask (ld_pair_x, kda_bwd_chunk11_parts.cuh), not by the PRMT + shift of __bfloat162float on each half: one
//    instruction less per pair, the same floats (bf16 -> fp32 is exact);
//  - eg / egl steps as one basic block each (frag_eg14 / frag_egl14 with C17): the lane's row test as a select of the
//    factor 1 instead of a divergent branch around the loads (x * 1 = x: the same values). Unrolled by 2 too it
//    spilled (stack 144 -> 152 B, STL / LDL 73 / 68 -> 95 / 82), so the loop stays rolled.
#pragma once
#include "cuda/kda/kda_bwd_chunk14_parts.cuh"

namespace linattn::cuda {
namespace kda_bwd {

// rq / rk of the BT q rows and BT k rows: warp w takes rows w + NW u (u < 2 BT / NW; q rows first), lane l the
// elements 4 l .. 4 l + 3 summed in that order (row_sumsq_warp's per-lane order for K = 128), then the xor
// butterfly 16, 8, 4, 2, 1 (row_sumsq_warp's), then the forward prep's formula.
template <class T, int BT, int NW>
__device__ __forceinline__ void row_scales17(float* rq, float* rk, const T (*q)[kLdK], const T (*k)[kLdK], bool l2norm,
                                             int warp, int lane) {
  static_assert(kK == 128 && (2 * BT) % NW == 0, "4 elements per lane, whole rows per warp");
  constexpr int R = 2 * BT / NW;
  float ss[R];
#pragma unroll
  for (int u = 0; u < R; ++u) {
    const int i = warp + NW * u;
    const T* row = i < BT ? &q[i][0] : &k[i - BT][0];
    const uint2 wv = *reinterpret_cast<const uint2*>(row + 4 * lane);
    const T* e = reinterpret_cast<const T*>(&wv);
    float acc = 0.f;
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const float v = MmaType<T>::to_float(e[x]);
      acc += v * v;
    }
    ss[u] = acc;
  }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1)
#pragma unroll
    for (int u = 0; u < R; ++u) ss[u] += __shfl_xor_sync(0xffffffffu, ss[u], d);
  if (lane == 0) {
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const int i = warp + NW * u;
      (i < BT ? rq : rk)[i < BT ? i : i - BT] = l2norm ? rsqrtf(ss[u] + 1e-6f) : 1.f;
    }
  }
}

}  // namespace kda_bwd
}  // namespace linattn::cuda
