// Per-chunk scale records of the pipelined GDN forward's chain mode "tma3" (LINATTN_CUDA_GDN_CHAIN=tma3,
// gdn_fused_wgp.cu): the prep (gdn_prep.cu) forms the per-token scales that the state warpgroup (WG0)
// and the output warpgroup (WG1) otherwise form inside their chunk loops, by the same expressions (the
// helpers below, used by both sides: the same bits), and stores them as one record per (chunk row r,
// value head j); the fused kernel bulk-copies a record's two parts into its ring stages on the stages'
// mbarriers, beside the tiles (WG0: erk, wsc, decay; WG1: qsc). Why: by ncu's per-instruction samples
// (3d3a678) ~20% of WG0's chunk step was forming these scales (cp.async waits, exp2, LDS / STS).
// Record (fp32, 196 floats = 784 bytes, a 16-byte multiple): [0, 64) erk_t = 2^gam_t rk_t,
// [64, 128) wsc_t = 2^(gam_L - gam_t) rk_t (0 past the chunk end), [128] decay = 2^gam_L, [129, 132) 0,
// [132, 196) qsc_t = scale 2^gam_t rq_t. gam is the chunk-local cumsum in log2 units (GdnChunkWs::gam),
// gam_L its value at the chunk's last valid row; tokens past the chunk end take gam = rk = rq = 0
// (what the fused kernel's zero-filled cp.async copies gave). Buffer GdnChunkWs::sc: [nt_cap, HV]
// records; chunk c of sequence n is row chunk_offsets[n] + c (varlen) or n * ceil(T_seq / 64) + c.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {
namespace chain_sc {

constexpr int kTok = 64;  // BT
constexpr int kErk = 0, kWsc = 64, kDecay = 128, kQsc = 132, kRec = 196;
constexpr uint32_t kBytes0 = 4u * kQsc;              // WG0's part: erk, wsc, decay (+ 3 zeros)
constexpr uint32_t kBytes1 = 4u * (kRec - kQsc);     // WG1's part: qsc
static_assert(kBytes0 % 16 == 0 && kBytes1 % 16 == 0 && (4 * kRec) % 16 == 0, "bulk copies move 16-byte multiples");

// The scale expressions (one definition for the fused kernel's own scales and the prep's records).
__device__ __forceinline__ float erk(float g, float r) { return exp2f(g) * r; }
__device__ __forceinline__ float wsc(float gl, float g, float r) { return exp2f(gl - g) * r; }
__device__ __forceinline__ float decay(float gl) { return exp2f(gl); }
__device__ __forceinline__ float qsc(float scale, float g, float r) { return scale * exp2f(g) * r; }

// Prep side, all NT threads of the CTA of chunk row r, q/k head h (value heads h G .. h G + G - 1):
// gam [G][64] (chunk-local, valid below len), rk / rq [64] (valid below len) in shared memory.
template <int NT>
__device__ __forceinline__ void write_records(float* sc, int64_t r, int HV, int h, int G, const float* gam,
                                              const float* rk, const float* rq, int len, float scale, int tid) {
  for (int item = tid; item < G * kTok; item += NT) {
    const int jj = item / kTok, i = item % kTok;
    const float* gj = gam + jj * kTok;
    float* rec = sc + (r * HV + int64_t(h) * G + jj) * kRec;
    const bool valid = i < len;
    const float g = valid ? gj[i] : 0.f, rki = valid ? rk[i] : 0.f, rqi = valid ? rq[i] : 0.f, gl = gj[len - 1];
    rec[kErk + i] = erk(g, rki);
    rec[kWsc + i] = valid ? wsc(gl, g, rki) : 0.f;
    rec[kQsc + i] = qsc(scale, g, rqi);
    if (i < kQsc - kDecay) rec[kDecay + i] = i == 0 ? decay(gl) : 0.f;
  }
}

// Fused side: the record rows of sequence n, r0 (chunk 0) and rlast (the clamp: only a malformed varlen
// layout, whose chunks past nt_cap the prep dropped, reaches past the last row built).
__device__ __forceinline__ void record_rows(const GdnFwdParams& p, const GdnChunkWs& ws, int64_t n, int& r0,
                                            int& rlast) {
  if (p.cu_seqlens) {
    r0 = ws.chunk_offsets[n];
    rlast = max(ws.chunk_offsets[p.N] - 1, 0);
  } else {
    r0 = static_cast<int>(n * ((p.T_seq + kTok - 1) / kTok));
    rlast = 0x7fffffff;
  }
}
__device__ __forceinline__ const float* record(const GdnChunkWs& ws, int HV, int j, int r0, int rlast, int c) {
  return ws.sc + (int64_t(min(r0 + c, rlast)) * HV + j) * kRec;
}

}  // namespace chain_sc
}  // namespace linattn::cuda
