// chunked16 (kdabwd16, session 14; opt-in LINATTN_CUDA_KDA_BWD=chunked16): three latency cuts of the KDA chunk kernel
// (C16 of kda_bwd_chunk2_kernel.cuh, on chunked15), the same values (bitwise chunked15):
//  - the head's S / dS (64 KB, addressed by the chunk row and head alone) prefetched into L2 before chunk_span's two
//    dependent index loads, so their HBM fetch overlaps the kernel entry instead of starting behind the other tiles;
//    for G > 1 the next head's S / dS at the head's start;
//  - V = 128, fp32 aligned gates: the gate chain's raw gates as a cp.async group issued right after the pm / lm
//    barrier into tiles dead until the next head (rows < BT / 2 in vh, the rest in the v tile vt): they land during
//    the intra phase, and the chain reads them from shared memory instead of 16 global loads per thread after its
//    start (16-bit / unaligned gates: chunked12's loads at the same point, into the same rows; one copy of the chain);
//  - the row-scale pass's lane test from a fresh %laneid (chunked15 reloaded a spilled lane right after the q / k
//    barrier, an LDL queued behind the head's cp.async stream).
#pragma once
#include "cuda/kda/kda_bwd_chunk15_parts.cuh"

namespace linattn::cuda {
namespace kda_bwd {

// L2 prefetch of S / dS of chunk row r, value head j (128-byte lines, spread over the threads).
template <class T, int V, int NT>
__device__ __forceinline__ void prefetch_states16(const GdnBwdWs& w, const GdnFwdParams& f, int64_t r, int j,
                                                  int tid) {
  constexpr int LINES = kK * V * int(sizeof(T)) / 128;
  const int64_t soff = (r * f.HV + j) * int64_t(kK) * V;
#pragma unroll 1
  for (int idx = tid; idx < 2 * LINES; idx += NT) {
    const char* b = reinterpret_cast<const char*>(static_cast<const T*>(idx < LINES ? w.hS : w.hdS) + soff);
    asm volatile("prefetch.global.L2 [%0];" ::"l"(b + int64_t(idx % LINES) * 128));
  }
}

// The chain's raw-gate rows: i < BT / 2 in vh (gate_scratch), the rest in vt (both dead from the pm / lm barrier to
// the next head's loads).
template <class T, int BT, int V>
struct ChainRows16 {
  static_assert(sizeof(float) * (BT / 2) * kK <= sizeof(T) * BT * (V + 8), "half the rows fit in vh and in vt");
  float (*lo)[kK];
  float (*hi)[kK];
  __device__ __forceinline__ float* operator[](int i) const { return i < BT / 2 ? lo[i] : hi[i - BT / 2]; }
};
template <class T, int BT, int V>
__device__ __forceinline__ ChainRows16<T, BT, V> chain_rows16(KdaChunk15Smem<T, BT, V>& s) {
  static_assert(sizeof(KdaChunk2Smem<T, BT, V>) % 16 == 0, "vt (right past the base) holds 16-byte aligned rows");
  return {gate_scratch(s), reinterpret_cast<float(*)[kK]>(&s.vt[0][0])};
}

// Issues (no commit) the raw gates of value head j into the chain's rows (zeros past len): gate_tile_ok gates only.
template <class T, int BT, int V, int NT>
__device__ __forceinline__ void load_chain_gates16(KdaChunk15Smem<T, BT, V>& s, const GdnFwdParams& f, int64_t t0,
                                                   int len, int j, int tid) {
  const ChainRows16<T, BT, V> rows = chain_rows16(s);
  const bool more = len > BT / 2;  // else every hi row is zero-filled from a mapped base (row t0)
  load_gate_tile13<BT / 2, NT, kK>(rows.lo, f, t0, len, j, tid);
  load_gate_tile13<BT / 2, NT, kK>(rows.hi, f, more ? t0 + BT / 2 : t0, more ? len - BT / 2 : 0, j, tid);
}

// The chain's raw gates when they cannot come as cp.async pieces (16-bit or unaligned gates): chunked12's loads
// (load_gate_raw_r's values), stored into the same rows; synchronous, so the walks start a round trip later.
template <class T, int BT, int V, int NT>
__device__ __forceinline__ void stage_chain_gates16(KdaChunk15Smem<T, BT, V>& s, const GdnBwdParams& p, int64_t t0,
                                                    int len, int j, int tid) {
  stage_gate_loads12<BT, NT>(chain_rows16(s), p, t0, len, j, tid);
}

__device__ __forceinline__ int lane_now16() {
  int l;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));
  return l;
}

}  // namespace kda_bwd
}  // namespace linattn::cuda
