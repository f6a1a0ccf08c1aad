// chunked15 (kdabwd15, session 14; the default since its A/B at 4e4abfa): the head's global row / scalar loads of
// the KDA chunk kernel (C15 of kda_bwd_chunk2_kernel.cuh, on chunked14) as a cp.async group of their own issued
// ahead of the head's tiles (head 0: ahead of q / k), the gate tile in the same group. In chunked14 each of these went
// out behind the 152 KB of tiles (or behind S / dS) and its first use waited for the queue ahead of it:
//  - beta (threads < BT): the head-start barrier (gate tile) waited for it, so the formula pass did not overlap;
//  - dt_bias / A_log (every thread, gate_const of the formula pass): the formula pass itself waited for them;
//  - the v pairs of the Y.v row dots: the dots waited for S / dS to land, defeating C14's overlap;
//  - the beta draw of the dbeta store (gdn_beta_draw, warps 4-5 after the chain's second barrier: a round trip every
//    other warp waited for at the head's last barrier): formed with beta at the head start, kept in shared memory.
// Registers were tried first: the prefetched words spilled (STL right behind the LDG: a stall before the tile issue).
// Same expressions on the same inputs: the values are chunked14's bits.
#pragma once
#include "cuda/kda/kda_bwd_chunk12_parts.cuh"

namespace linattn::cuda {
namespace kda_bwd {

template <class T, int BT, int V>
struct KdaChunk15Smem : KdaChunk2Smem<T, BT, V> {
  static constexpr int kLdVt = V + 8;
  T vt[BT][kLdVt];     // v rows of the head (rows < len; 0 past)
  uint32_t braw[BT];   // the aligned 4-byte word holding beta[t0 + i, j]
  float dtb[kK];       // dt_bias[j, 0..K)
  float alog;          // A_log[j]
  float bdraw[BT];     // d beta / d(beta input) per row (gdn_beta_draw)
};

// The v tile needs 16-byte aligned rows (else Y.v reads v from global as chunked14).
template <int V>
__device__ __forceinline__ bool v_tile_ok(const GdnFwdParams& f) {
  return (reinterpret_cast<uintptr_t>(f.v) & 15u) == 0 && (int64_t(f.HV) * V * 2) % 16 == 0;
}

// Issues (no commit) the head's v rows, beta words, dt_bias row and A_log, and the gate tile when gtile.
template <class T, int BT, int V, int NT>
__device__ __forceinline__ void load_pre15(KdaChunk15Smem<T, BT, V>& s, const GdnFwdParams& f, int64_t t0, int len,
                                           int j, int tid, bool gtile, bool vtile) {
  static_assert(NT > BT + kK, "one thread per beta row, dt_bias channel and A_log");
  if (vtile)
    load_rows_async_r<T, BT, V, KdaChunk15Smem<T, BT, V>::kLdVt, NT>(
        s.vt, static_cast<const T*>(f.v) + (t0 * f.HV + j) * int64_t(V), int64_t(f.HV) * V, len, tid);
  if (tid < BT) {
    const bool b16 = f.beta_type == ElemType::kF16 || f.beta_type == ElemType::kBF16;  // else fp32 (load_elem)
    const bool valid = tid < len;
    const int64_t i = valid ? (t0 + tid) * f.HV + j : 0;
    const uintptr_t base = reinterpret_cast<uintptr_t>(f.beta);
    const uintptr_t a = base + uintptr_t(i) * (b16 ? 2u : 4u), w = a & ~uintptr_t(3);
    // A 16-bit beta's aligned word may reach 2 bytes past the tensor's last element (or before its first, for a
    // view at 2 mod 4): that row reads its 2 bytes alone, into the half of the word beta15 takes.
    if (b16 && valid && (w < base || w + 4 > base + uintptr_t(f.T_total * f.HV) * 2u)) {
      const uint32_t h = *reinterpret_cast<const unsigned short*>(a);
      s.braw[tid] = (a & 2u) ? h << 16 : h;
    } else {
      cp_async4(&s.braw[tid], reinterpret_cast<const void*>(w), valid);
    }
  } else if (f.gate_in_kernel && tid < BT + kK) {
    if (f.dt_bias) cp_async4(&s.dtb[tid - BT], f.dt_bias + j * kK + (tid - BT), true);
  } else if (f.gate_in_kernel && tid == BT + kK) {
    if (f.A_log) cp_async4(&s.alog, f.A_log + j, true);
  }
  if (gtile) load_gate_tile13<BT, NT>(s.a, f, t0, len, j, tid);
}

// gate_const's value from the loaded inputs (the same expressions).
template <class T, int BT, int V>
__device__ __forceinline__ GateConst gate_const15(const GdnFwdParams& f, const KdaChunk15Smem<T, BT, V>& s, int c) {
  GateConst k{0.f, 1.f};
  if (!f.gate_in_kernel) return k;
  k.dtb = f.dt_bias ? s.dtb[c] : 0.f;
  k.ea = f.has_lower_bound ? (f.A_log ? expf(s.alog) : 1.f) : expf(s.alog);
  return k;
}

// beta and its draw of row tid (< BT) from the loaded word: gdn_beta / gdn_beta_draw's expressions.
template <class T, int BT, int V>
__device__ __forceinline__ void beta15(KdaChunk15Smem<T, BT, V>& s, const GdnFwdParams& f, int64_t t0, int len, int j,
                                       int tid) {
  if (tid >= len) {
    s.beta[tid] = 0.f;
    return;
  }
  const uint32_t w = s.braw[tid];
  const uintptr_t a = reinterpret_cast<uintptr_t>(f.beta) + uintptr_t((t0 + tid) * f.HV + j) * 2u;
  const unsigned short hw = static_cast<unsigned short>((a & 2u) ? w >> 16 : w & 0xffffu);
  const float b = f.beta_type == ElemType::kF16    ? __half2float(__ushort_as_half(hw))
                  : f.beta_type == ElemType::kBF16 ? __uint_as_float(uint32_t(hw) << 16)
                                                   : __uint_as_float(w);
  float bb = b, dr = 1.f;
  if (f.beta_sigmoid) {  // one sigmoid for both (the same expression in gdn_beta and gdn_beta_draw)
    const float sg = 1.f / (1.f + expf(-b));
    bb = f.neg_eigval ? sg * 2.f : sg;
    dr = (f.neg_eigval ? 2.f : 1.f) * sg * (1.f - sg);
  }
  s.beta[tid] = bb;
  s.bdraw[tid] = dr;
}

}  // namespace kda_bwd
}  // namespace linattn::cuda
