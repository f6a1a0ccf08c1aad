// Shared pieces of KDA preps v6 (kda_fwd_prep_v6.cu) and v7 (kda_fwd_prep_v7.cu), BT = 64, K = 128:
// constants, the shared-memory layout (v6 keeps q / k rows in shared memory, v7 does not), the tile
// slot indexing of the 40 m16n8 Gram tiles (slot U of warp w is tile w + 8 U), ldmatrix addressing,
// the gate loads and forms, and the half2 staging of the reference-row operands. The kernel body is
// kda_fwd_prep_v6_body.cuh. Included by those two .cu files only (anonymous namespace: one copy each).
#pragma once
#include <cuda_runtime.h>

#include <type_traits>

#include "cuda/common/mma.cuh"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/gdn/gdn_kernels.h"
#include "cuda/gdn/gdn_prep_common.cuh"

namespace linattn::cuda {
namespace {

constexpr int kK = 128, kBT = 64, kThreads = 256, kLdK = kK + 8, kLdG = kK + 4, kLd = kBT + 4;
constexpr int kLevels = 6, kSlice = 32, kRounds = kK / kSlice;  // 4 rounds of 32 channels (v4: 8 of 16)
constexpr int kLdW = kLevels * kSlice / 2 + 4;  // 32-bit words per staging row: 96 fp16 pairs + 4 (conflict-free)
constexpr int kStRows = kBT + kBT / 2;           // k-versions of all 64 tokens, then q-versions of a level's 32 right tokens
constexpr int kTilesPerWarp = 5;                 // 40 tiles: level 32: 16, level 16: 8, levels 8..1: 4 each

// Inputs of the Gram phase: v6 keeps q / k rows in shared memory (cp.async), v7 reads them from
// global memory (L2) where it needs them, which leaves ~74 KB per CTA (three CTAs per SM).
template <class T>
struct InQk {
  T q[kBT][kLdK];
  T k[kBT][kLdK];
  float gam[kBT][kLdG];  // log2 cumsum
};
struct InG {
  float gam[kBT][kLdG];  // log2 cumsum
};

template <class T, bool kQkGlobal>
struct PrepSmem {
  union {
    std::conditional_t<kQkGlobal, InG, InQk<T>> in;
    struct {
      float qk[kBT][kLd];  // rq_i rk_j sum_d q_id k_jd 2^(gam_id - gam_jd), then X = (I + L)^-1
      float kk[kBT][kLd];  // rk_i rk_j sum_d k_id k_jd 2^(..), then L
    } out;
  } r;
  union {
    uint32_t st[kStRows][kLdW];  // fp16 pairs of one channel slice, level lv in words [16 lv, +16)
    float tscr[kBT / 16 - 1][16][20];
    float gtot[3][kK];  // raw gate sums of row quarters 0..2 (the cumsum phase only)
  } w;
  float beta[kBT], rq[kBT], rk[kBT], pd[kBT];  // rq / rk: l2-norm scales (1 without); pd: raw q_i . k_i
  float sq[kBT], sk[kBT], uq[kBT], uk[kBT];    // staging normalisers 1 / ||x|| and accumulator scales r / s
};

// Index of right token i among the 32 right tokens of level l.
__device__ __forceinline__ int compact_right(int i, int l) { return ((i >> 1) & ~(l - 1)) | (i & (l - 1)); }

// Tile slot U (0..4) of warp w holds tile tt = w + 8 U (v4's numbering): slots 0 / 1 level 32
// (q / k versions), slot 2 level 16, slots 3 / 4 levels 2 + (w >> 2) / 4 + (w >> 2) with 8 / l
// blocks packed per tile. Row r (0..15): token i, version (0 q, 1 k), block; column n (0..7): left
// token j and its block (a row and a column pair only when their blocks match).
template <int U>
__device__ __forceinline__ int slot_level(int w) {
  return U < 2 ? 0 : U == 2 ? 1 : 2 * (U - 3) + 2 + (w >> 2);
}
template <int U>
__device__ __forceinline__ void slot_row(int w, int r, int& i, int& ver, int& blk) {
  if constexpr (U < 2) {
    ver = U;
    i = 32 + 16 * ((w >> 2) & 1) + r;
    blk = 0;
  } else if constexpr (U == 2) {
    ver = w >> 2;
    i = 32 * ((w >> 1) & 1) + 16 + r;
    blk = 0;
  } else {
    const int lv = slot_level<U>(w), lg = 5 - lv, l = 1 << lg, tau = w & 3;
    const int bb = (tau << (lv - 2)) + (r >> (lg + 1)), rr = r & (2 * l - 1);
    ver = rr >> lg;
    i = (bb << (lg + 1)) + l + (rr & (l - 1));
    blk = bb;
  }
}
template <int U>
__device__ __forceinline__ void slot_col(int w, int n, int& j, int& blk) {
  if constexpr (U < 2) {
    j = 8 * (w & 3) + n;
    blk = 0;
  } else if constexpr (U == 2) {
    j = 32 * ((w >> 1) & 1) + 8 * (w & 1) + n;
    blk = 0;
  } else {
    const int lv = slot_level<U>(w), lg = 5 - lv, tau = w & 3;
    const int bb = (tau << (lv - 2)) + (n >> lg);
    j = (bb << (lg + 1)) + (n & ((1 << lg) - 1));
    blk = bb;
  }
}

// Byte offsets into st of lane's ldmatrix rows, slot U. A (x4: rows 0-7 / 8-15 x k-words 0-3 / 4-7 =
// the m16n8k16 A fragment): row (lane % 8) + 8 ((lane / 8) % 2), k-words 4 (lane / 16); B (x4 over
// both k-steps: k-words 0-3, 4-7, 8-11, 12-15 = b0 / b1 of k-step 0, then of k-step 1): column
// lane % 8, k-words 4 (lane / 8). Rows are 16-B aligned (kLdW % 4 == 0); the 8 rows of a matrix fall
// in distinct bank quads exactly when v5's per-lane loads did (row index mod 8 distinct).
template <int U>
__device__ __forceinline__ void slot_ldsm(int w, int lane, uint32_t& a, uint32_t& b) {
  const int lv = slot_level<U>(w), l = 32 >> lv;
  int i, v, bi, jj, bj;
  slot_row<U>(w, (lane & 7) + 8 * ((lane >> 3) & 1), i, v, bi);
  slot_col<U>(w, lane & 7, jj, bj);
  a = 4 * ((v ? i : kBT + compact_right(i, l)) * kLdW + 16 * lv + 4 * (lane >> 4));
  b = 4 * (jj * kLdW + 16 * lv + 4 * (lane >> 3));
}

__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], uint32_t addr) {  // volatile: stays between the barriers
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// Accumulators of slot U to qk (q rows) / kk (k rows), scaled by uq_i or uk_i and uk_j.
template <int U, class S>
__device__ __forceinline__ void slot_store(S& s, int w, int g, int t, const float (&acc)[4]) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    int i, ver, bi, jj, bj;
    slot_row<U>(w, g + 8 * (e >> 1), i, ver, bi);
    slot_col<U>(w, 2 * t + (e & 1), jj, bj);
    if (bi != bj) continue;
    float* dst = ver ? &s.r.out.kk[i][jj] : &s.r.out.qk[i][jj];
    *dst = acc[e] * (ver ? s.uk[i] : s.uq[i]) * s.uk[jj];
  }
}

template <class T>
__device__ __forceinline__ void load8(const T* x, float (&v)[8]) {
  const uint4 w = *reinterpret_cast<const uint4*>(x);
  const T* h = reinterpret_cast<const T*>(&w);
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = MmaType<T>::to_float(h[e]);
}

// v7: 8 elements of a global q / k row as raw 16 B (zeros for a row past the chunk's end: the address
// is clamped to row 0 of the chunk by the caller and the value is a select, never a multiply by 0).
__device__ __forceinline__ uint4 ldg16_or_zero(const void* x, bool valid) {
  uint4 w = make_uint4(0u, 0u, 0u, 0u);
  if (valid) w = *reinterpret_cast<const uint4*>(x);
  return w;
}

// Two elements of a 32-bit word by value (no address taken: the words stay in registers).
__device__ __forceinline__ float2 unpack2(uint32_t w, __nv_bfloat16) {
  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}
__device__ __forceinline__ float2 unpack2(uint32_t w, __half) {
  return __half22float2(__halves2half2(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)),
                                       __ushort_as_half(static_cast<unsigned short>(w >> 16))));
}

// 8 elements of 16 raw bytes, the first word set when `first`, else the second (a select per word).
template <class T>
__device__ __forceinline__ void unpack8_sel(bool first, const uint4& a, const uint4& b, float (&v)[8]) {
  const uint32_t w[4] = {first ? a.x : b.x, first ? a.y : b.y, first ? a.z : b.z, first ? a.w : b.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 f = unpack2(w[e], T());
    v[2 * e] = f.x, v[2 * e + 1] = f.y;
  }
}

__device__ __forceinline__ void prefetch_l2(const void* x) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(x));
}

__device__ __forceinline__ void load8f(const float* x, float (&v)[8]) {
  const float4 a = reinterpret_cast<const float4*>(x)[0], b = reinterpret_cast<const float4*>(x)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// Raw gates of channels ch, ch + 1 (ch even), rows [row0, row0 + R) into ga / gb (0 past len, never
// read there): one 2-element load per row when g is 2-element aligned (a uniform branch; else two
// scalar loads), a row pointer stepped by the row stride (no 64-bit multiply per row), the dtype
// switch outside the loops. Then the in-kernel gate form (one uniform branch), masked rows back to 0.
__device__ __forceinline__ float cvt1(float x) { return x; }
__device__ __forceinline__ float cvt1(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float cvt1(__half x) { return __half2float(x); }

template <int R, class E, class V2, class Cvt>
__device__ __forceinline__ void gate_pair_loads(const E* g, int64_t gstride, int n, bool vec, Cvt cvt,
                                                float (&ga)[R], float (&gb)[R]) {
  if (vec) {
#pragma unroll
    for (int e = 0; e < R; ++e) {
      float2 v = make_float2(0.f, 0.f);
      if (e < n) v = cvt(*reinterpret_cast<const V2*>(g));
      ga[e] = v.x, gb[e] = v.y;
      g += gstride;
    }
  } else {
#pragma unroll
    for (int e = 0; e < R; ++e) {
      ga[e] = e < n ? cvt1(g[0]) : 0.f;
      gb[e] = e < n ? cvt1(g[1]) : 0.f;
      g += gstride;
    }
  }
}

// The raw loads only (gate_pairs' first half; v9 issues them before its q / k copies and forms later).
template <int R>
__device__ __forceinline__ void gate_pair_raw(const GdnFwdParams& p, int64_t t0, int j, int ch, int row0, int len,
                                              float (&ga)[R], float (&gb)[R]) {
  const int64_t gbase = ((t0 + row0) * p.HV + j) * kK + ch, gstride = int64_t(p.HV) * kK;
  const int n = len - row0;  // rows e < n are valid
  if (p.g_type == ElemType::kF32) {
    const float* g = static_cast<const float*>(p.g) + gbase;
    gate_pair_loads<R, float, float2>(g, gstride, n, (reinterpret_cast<uintptr_t>(p.g) & 7) == 0,
                                      [](float2 v) { return v; }, ga, gb);
  } else if (p.g_type == ElemType::kBF16) {
    const __nv_bfloat16* g = static_cast<const __nv_bfloat16*>(p.g) + gbase;
    gate_pair_loads<R, __nv_bfloat16, __nv_bfloat162>(g, gstride, n, (reinterpret_cast<uintptr_t>(p.g) & 3) == 0,
                                                      [](__nv_bfloat162 v) { return __bfloat1622float2(v); }, ga, gb);
  } else {
    const __half* g = static_cast<const __half*>(p.g) + gbase;
    gate_pair_loads<R, __half, __half2>(g, gstride, n, (reinterpret_cast<uintptr_t>(p.g) & 3) == 0,
                                        [](__half2 v) { return __half22float2(v); }, ga, gb);
  }
}

template <int R>
__device__ __forceinline__ void gate_pairs(const GdnFwdParams& p, int64_t t0, int j, int ch, int row0, int len,
                                           float (&ga)[R], float (&gb)[R]) {
  gate_pair_raw<R>(p, t0, j, ch, row0, len, ga, gb);
  if (!p.gate_in_kernel) return;
  const int n = len - row0;  // rows e < n are valid
  const float dta = p.dt_bias ? p.dt_bias[j * kK + ch] : 0.f, dtb = p.dt_bias ? p.dt_bias[j * kK + ch + 1] : 0.f;
  const float ea = p.A_log ? expf(p.A_log[j]) : 1.f;
  auto form = [&](float (&gv)[R], float d) {
    if (p.has_lower_bound) {  // lower_bound sigmoid(ea x): fast divide (the denominator is >= 1, inf gives 0)
#pragma unroll
      for (int e = 0; e < R; ++e) {
        const float v = __fdividef(p.lower_bound, 1.f + __expf(-ea * (gv[e] + d)));
        gv[e] = e < n ? v : 0.f;
      }
    } else {
      // -ea softplus(x), softplus(x) = max(x, 0) + ln2 lg2(1 + 2^(-|x| log2 e)) on MUFU (as v4).
#pragma unroll
      for (int e = 0; e < R; ++e) {
        const float x = gv[e] + d;
        float l2;
        asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(l2) : "f"(1.f + ex2_ftz(-fabsf(x) * kLog2e)));
        const float v = -ea * (x > 20.f ? x : fmaxf(x, 0.f) + 0.6931471805599453f * l2);
        gv[e] = e < n ? v : 0.f;
      }
    }
  };
  form(ga, dta);
  form(gb, dtb);
}

// Staging of levels LV0 .. LV0 + 2 for token si, 8 channels (normalised rows as half2 pairs xq / xk,
// fp32 gam gi): k-version at row si, q-version (right tokens only) at row 64 + its rank among the
// level's right tokens. Factor pair rounded to fp16 once, then one HMUL2 per operand pair.
template <int LV0>
__device__ __forceinline__ void stage_levels(uint32_t (*st)[kLdW], const float (*gam)[kLdG], int si, int c0,
                                             int wo, const float (&gi)[8], const __half2 (&xq)[4],
                                             const __half2 (&xk)[4]) {
#pragma unroll
  for (int lvi = 0; lvi < 3; ++lvi) {
    const int lv = LV0 + lvi, l = 32 >> lv;
    const bool right = (si & l) != 0;
    const int nref = (si & ~(2 * l - 1)) | l;
    float gn[8];
    load8f(&gam[nref][c0], gn);
    uint32_t kv[4], qv[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      // -|gam_i - gam_n|: gam_i - gam_n for a right token, gam_n - gam_i for a left one (<= 0 both).
      const __half2 f = __floats2half2_rn(ex2_ftz(-fabsf(gi[2 * e] - gn[2 * e])), ex2_ftz(-fabsf(gi[2 * e + 1] - gn[2 * e + 1])));
      const __half2 vk = __hmul2(xk[e], f), vq = __hmul2(xq[e], f);
      kv[e] = *reinterpret_cast<const uint32_t*>(&vk);
      qv[e] = *reinterpret_cast<const uint32_t*>(&vq);
    }
    *reinterpret_cast<uint4*>(&st[si][16 * lv + wo]) = make_uint4(kv[0], kv[1], kv[2], kv[3]);
    if (right) *reinterpret_cast<uint4*>(&st[kBT + compact_right(si, l)][16 * lv + wo]) = make_uint4(qv[0], qv[1], qv[2], qv[3]);
  }
}

}  // namespace
}  // namespace linattn::cuda
