// Prep v6 of the chunked KDA forward, BT = 64, K = 128: prep v5 (removed, git history at 239ab91; v4's hierarchy
// of reference rows, every factor 2^-|gam_i - gam_n| <= 1, no positive exponent, no division by a
// decay; fp16 Gram operands of normalised rows on m16n8k16, 4 rounds of 32 channels, qg / kg / kgl
// from the staging loop) with four changes:
// - Thread mapping: a warp stages 8 tokens x the round's 32 channels (lane = 8 x channel group +
//   token) instead of 32 tokens x 8 channels, so each fused-operand store writes 8 rows x 64
//   contiguous bytes (full 32-B sectors, 8 lines per warp instruction; v5: 32 rows x 16 B, 32 lines
//   of half sectors). Shared accesses stay conflict-free (8 consecutive rows per quarter-warp).
// - Staging products in packed half2: the normalised row (|x| <= 1) and the factor f <= 1 are each
//   rounded to fp16 once per pair, then one HMUL2 per pair (v5: two FMUL + one F2FP per pair per
//   level). Three roundings instead of one: relative error ~1.7 x 2^-11, still ~30x below the
//   bf16 rounding of Ab / P; no overflow (both factors <= 1); fp16 subnormals keep the absolute
//   error <= 2^-24 of the row norm, as v5.
// - Gate phase: thread (row quarter, channel pair) loads two channels per row (bf16x2 / half2 /
//   float2 when g is 2-element aligned, else two scalar loads) through a stepped row pointer; the
//   quarters' totals go through a small array in the staging area. lower_bound form: fast divide.
// - Gram fragments by ldmatrix.x4 (3 per tile and round: A of both k-steps, B of both) instead of 12
//   scalar shared loads per tile.
// 256 threads, ~109 KB shared memory: two CTAs per SM. Same masking and outputs as v5.
#include <cuda_runtime.h>

#include <atomic>

#include "cuda/common/launch.h"
#include "cuda/common/mma.cuh"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/gdn/gdn_prep_common.cuh"
#include "cuda/kda/kda_fwd_prep_v6.cuh"

namespace linattn::cuda {
namespace {

constexpr int kK = 128, kBT = 64, kThreads = 256, kLdK = kK + 8, kLdG = kK + 4, kLd = kBT + 4;
constexpr int kLevels = 6, kSlice = 32, kRounds = kK / kSlice;  // 4 rounds of 32 channels (v4: 8 of 16)
constexpr int kLdW = kLevels * kSlice / 2 + 4;  // 32-bit words per staging row: 96 fp16 pairs + 4 (conflict-free)
constexpr int kStRows = kBT + kBT / 2;           // k-versions of all 64 tokens, then q-versions of a level's 32 right tokens
constexpr int kTilesPerWarp = 5;                 // 40 tiles: level 32: 16, level 16: 8, levels 8..1: 4 each

template <class T>
struct V6Smem {
  union {
    struct {
      T q[kBT][kLdK];
      T k[kBT][kLdK];
      float gam[kBT][kLdG];  // log2 cumsum
    } in;
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

template <int R>
__device__ __forceinline__ void gate_pairs(const GdnFwdParams& p, int64_t t0, int j, int ch, int row0, int len,
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
  if (!p.gate_in_kernel) return;
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

template <class T>
__global__ void __launch_bounds__(kThreads, 2) kda_prep_v6_kernel(GdnFwdParams p, GdnChunkWs ws,
                                                                  const int32_t* chunk_indices, int nts) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<V6Smem<T>*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t r = blockIdx.x;
  const int j = blockIdx.y, h = j / (p.HV / p.H);
  int64_t t0;
  int len;
  if (!chunk_span(p, chunk_indices, nts, r, kBT, t0, len)) return;  // sentinel row / empty chunk: touch nothing
  {  // q / k rows: thread (row group, 8-element column), rows tid / 16 + 16 it; rows past len zero-filled
    const int c8 = (tid & 15) * 8, row0 = tid >> 4;
    const int64_t rs = int64_t(p.H) * kK;
    const T* qs = static_cast<const T*>(p.q) + (t0 * p.H + h) * kK + c8;
    const T* ks = static_cast<const T*>(p.k) + (t0 * p.H + h) * kK + c8;
#pragma unroll
    for (int it = 0; it < kBT / 16; ++it) {
      const int row = row0 + 16 * it;
      const bool valid = row < len;
      const int64_t off = valid ? row * rs : 0;
      cp_async16(&s.r.in.q[row][c8], qs + off, valid);
      cp_async16(&s.r.in.k[row][c8], ks + off, valid);
    }
  }
  cp_async_commit();

  // Per-channel cumsum while the copies fly: thread (quarter, channel pair) scans rows [16 quarter,
  // +16) of channels 2 cp, 2 cp + 1. Quarter 0 stores log2 units directly, the others raw sums and
  // their totals (gtot, in the staging area, unused until the Gram phase); after the barrier they add
  // the totals of the quarters before them.
  constexpr int RQ = kBT / 4;
  const int cp = tid & (kK / 2 - 1), qr = tid >> 6;
  {
    float ga[RQ], gb[RQ];
    gate_pairs<RQ>(p, t0, j, 2 * cp, qr * RQ, len, ga, gb);
    float a0 = 0.f, a1 = 0.f;
#pragma unroll
    for (int e = 0; e < RQ; ++e) {
      a0 += ga[e];
      a1 += gb[e];
      *reinterpret_cast<float2*>(&s.r.in.gam[qr * RQ + e][2 * cp]) =
          qr ? make_float2(a0, a1) : make_float2(a0 * kLog2e, a1 * kLog2e);
    }
    if (qr < 3) *reinterpret_cast<float2*>(&s.w.gtot[qr][2 * cp]) = make_float2(a0, a1);
  }
  if (tid < kBT) s.beta[tid] = tid < len ? gdn_beta(p, t0 + tid, j) : 0.f;
  __syncthreads();
  if (qr) {
    float b0 = 0.f, b1 = 0.f;
    for (int q2 = 0; q2 < qr; ++q2) {
      const float2 tq = *reinterpret_cast<const float2*>(&s.w.gtot[q2][2 * cp]);
      b0 += tq.x, b1 += tq.y;
    }
    b0 *= kLog2e, b1 *= kLog2e;
#pragma unroll 8
    for (int i = qr * RQ; i < qr * RQ + RQ; ++i) {
      float2* gp = reinterpret_cast<float2*>(&s.r.in.gam[i][2 * cp]);
      const float2 v = *gp;
      *gp = make_float2(fmaf(v.x, kLog2e, b0), fmaf(v.y, kLog2e, b1));
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  // l2-norm scales, staging normalisers and the raw diagonal q_i . k_i: lane (part, token 8 warp +
  // lane % 8) sums channels 32 m + 8 part (m < 4), then 2 shuffles.
  {
    const int i = 8 * warp + (lane & 7), pt = lane >> 3;
    float sq = 0.f, sk = 0.f, d = 0.f;
#pragma unroll
    for (int m = 0; m < kK / 32; ++m) {
      float xq[8], xk[8];
      load8<T>(&s.r.in.q[i][32 * m + 8 * pt], xq);
      load8<T>(&s.r.in.k[i][32 * m + 8 * pt], xk);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        sq += xq[e] * xq[e];
        sk += xk[e] * xk[e];
        d += xq[e] * xk[e];
      }
    }
#pragma unroll
    for (int m = 8; m < 32; m <<= 1) {
      sq += __shfl_xor_sync(0xffffffffu, sq, m);
      sk += __shfl_xor_sync(0xffffffffu, sk, m);
      d += __shfl_xor_sync(0xffffffffu, d, m);
    }
    if (pt == 0) {
      if (p.l2norm) {  // staging operands are the normalised rows themselves: accumulator scale 1
        const float a = rsqrtf(sq + 1e-6f), b = rsqrtf(sk + 1e-6f);
        s.rq[i] = a, s.rk[i] = b, s.sq[i] = a, s.sk[i] = b, s.uq[i] = 1.f, s.uk[i] = 1.f;
      } else {  // normalised for fp16 range only; the accumulators get the norms back
        const float a = sq > 1e-30f ? rsqrtf(sq) : 1.f, b = sk > 1e-30f ? rsqrtf(sk) : 1.f;
        s.rq[i] = 1.f, s.rk[i] = 1.f, s.sq[i] = a, s.sk[i] = b, s.uq[i] = 1.f / a, s.uk[i] = 1.f / b;
      }
      s.pd[i] = d;
    }
  }
  const int lr = len - 1;
  if (tid < kK) ws.gl[(r * p.HV + j) * kK + tid] = exp2f(s.r.in.gam[lr][tid]);
  __syncthreads();

  // Gram phase. Staging warp: 8 tokens (8 (warp % 4) + lane % 8, then + 32) x the round's 32 channels
  // (group cg = lane / 8: channels 32 rd + 8 cg), levels 3 sh .. 3 sh + 2 (sh = warp / 4); it also
  // writes the fused kernel's operands of its (token, 8 channels): qg / kg (sh 0), kgl (sh 1), so one
  // store instruction covers 8 rows x 64 contiguous bytes.
  const int sh = warp >> 2, cg = lane >> 3, si0 = 8 * (warp & 3) + (lane & 7);
  const int g = lane >> 2, t = lane & 3;
  uint32_t offa[kTilesPerWarp], offb[kTilesPerWarp];  // ldmatrix byte addresses in shared memory
  slot_ldsm<0>(warp, lane, offa[0], offb[0]);
  slot_ldsm<1>(warp, lane, offa[1], offb[1]);
  slot_ldsm<2>(warp, lane, offa[2], offb[2]);
  slot_ldsm<3>(warp, lane, offa[3], offb[3]);
  slot_ldsm<4>(warp, lane, offa[4], offb[4]);
  {
    const uint32_t stb = smem_u32(&s.w.st[0][0]);
#pragma unroll
    for (int u = 0; u < kTilesPerWarp; ++u) offa[u] += stb, offb[u] += stb;
  }
  float acc[kTilesPerWarp][4] = {};
  T* const gout0 = static_cast<T*>(sh ? ws.kgl : ws.qg) + (int64_t(j) * ws.T_cap + t0 + si0) * kK + 8 * cg;
  T* const kgout0 = static_cast<T*>(ws.kg) + (int64_t(j) * ws.T_cap + t0 + si0) * kK + 8 * cg;
#pragma unroll 1
  for (int rd = 0; rd < kRounds; ++rd) {
    const int c0 = kSlice * rd + 8 * cg;
#pragma unroll 1
    for (int it = 0; it < 2; ++it) {  // tokens si0, si0 + 32
      const int si = si0 + 32 * it;
      float gi[8], xq[8], xk[8];
      load8f(&s.r.in.gam[si][c0], gi);
      load8<T>(&s.r.in.q[si][c0], xq);
      load8<T>(&s.r.in.k[si][c0], xk);
      if (si < len) {  // gated operands, every exponent <= 0 (the same products as v4 / v5)
        const float rqi = s.rq[si], rki = s.rk[si];
        const int64_t ro = int64_t(32 * kK) * it + kSlice * rd;
        float va[8], vb[8];
        if (sh == 0) {
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const float eg = ex2_ftz(gi[e]);
            va[e] = xq[e] * rqi * eg;
            vb[e] = xk[e] * rki * eg;
          }
          store8<T>(kgout0 + ro, vb);
        } else {
          float gl8[8];
          load8f(&s.r.in.gam[lr][c0], gl8);
#pragma unroll
          for (int e = 0; e < 8; ++e) va[e] = xk[e] * rki * ex2_ftz(gl8[e] - gi[e]);
        }
        store8<T>(gout0 + ro, va);
      }
      const float sqi = s.sq[si], ski = s.sk[si];
      __half2 hq[4], hk[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        hq[e] = __floats2half2_rn(xq[2 * e] * sqi, xq[2 * e + 1] * sqi);
        hk[e] = __floats2half2_rn(xk[2 * e] * ski, xk[2 * e + 1] * ski);
      }
      if (sh == 0) stage_levels<0>(s.w.st, s.r.in.gam, si, c0, 4 * cg, gi, hq, hk);
      else stage_levels<3>(s.w.st, s.r.in.gam, si, c0, 4 * cg, gi, hq, hk);
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kTilesPerWarp; ++u) {  // 3 ldmatrix.x4 per tile (v5: 12 scalar loads)
      uint32_t fa0[4], fa1[4], fb[4];
      ldsm4(fa0, offa[u]);
      ldsm4(fa1, offa[u] + 32);  // k-step 1: 8 words on
      ldsm4(fb, offb[u]);
      mma16816<__half>(acc[u], fa0, fb[0], fb[1]);
      mma16816<__half>(acc[u], fa1, fb[2], fb[3]);
    }
    if (rd + 1 < kRounds) __syncthreads();
  }
  // q, k and gam are dead (their last reads precede the last round's barrier): qk / kk take their place.
  slot_store<0>(s, warp, g, t, acc[0]);
  slot_store<1>(s, warp, g, t, acc[1]);
  slot_store<2>(s, warp, g, t, acc[2]);
  slot_store<3>(s, warp, g, t, acc[3]);
  slot_store<4>(s, warp, g, t, acc[4]);
  if (tid < kBT) s.r.out.qk[tid][tid] = s.pd[tid] * s.rq[tid] * s.rk[tid];
  __syncthreads();

  // L (in place of kk), P (to global), upper blocks of X zeroed (in place of qk); one item per thread.
  constexpr int kSeg = 16;
  T* Ab = static_cast<T*>(ws.Ab);
  T* P = static_cast<T*>(ws.P);
  static_assert(kBT * (kBT / kSeg) == kThreads, "one (row, 16-column segment) item per thread");
  {
    const int i = tid / (kBT / kSeg), c0 = (tid % (kBT / kSeg)) * kSeg;
    const float bi = s.beta[i];
    float pv[kSeg];
#pragma unroll
    for (int e = 0; e < kSeg; ++e) {
      const int jc = c0 + e;
      const float kv = s.r.out.kk[i][jc], qv = s.r.out.qk[i][jc];
      s.r.out.kk[i][jc] = (jc < i && i < len) ? bi * kv : 0.f;
      pv[e] = (jc <= i && i < len) ? p.scale * qv : 0.f;
      if ((i >> 4) < (c0 >> 4)) s.r.out.qk[i][jc] = 0.f;
    }
    if (i < len) store16<T>(P + (j * ws.T_cap + t0 + i) * kBT + c0, pv);
  }
  __syncthreads();
  invert_unit_lower<kBT, kLd>(s.r.out.kk, s.r.out.qk, s.w.tscr, tid);
  {
    const int i = tid / (kBT / kSeg), c0 = (tid % (kBT / kSeg)) * kSeg;
    if (i < len) {
      float av[kSeg];
#pragma unroll
      for (int e = 0; e < kSeg; ++e) av[e] = s.r.out.qk[i][c0 + e] * s.beta[c0 + e];
      store16<T>(Ab + (j * ws.T_cap + t0 + i) * kBT + c0, av);
      if (ws.Ai) {  // the backward's unscaled (I + L)^-1
#pragma unroll
        for (int e = 0; e < kSeg; ++e) av[e] = s.r.out.qk[i][c0 + e];
        store16<T>(static_cast<T*>(ws.Ai) + (j * ws.T_cap + t0 + i) * kBT + c0, av);
      }
    }
  }
}

std::atomic<int64_t> g_launches{0};

template <class T>
void launch_t(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* ci, int64_t nt_cap,
              cudaStream_t stream) {
  prefer_max_shared_carveout(reinterpret_cast<const void*>(kda_prep_v6_kernel<T>));  // two CTAs per SM
  const int nts = p.cu_seqlens ? 0 : static_cast<int>((p.T_seq + kBT - 1) / kBT);
  launch(kda_prep_v6_kernel<T>, dim3(static_cast<unsigned>(nt_cap), p.HV), dim3(kThreads),
         sizeof(V6Smem<T>), stream, p, ws, ci, nts);
  g_launches.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

void launch_kda_prep_v6(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                        int64_t nt_cap, cudaStream_t stream) {
  if (p.io == ElemType::kBF16) launch_t<__nv_bfloat16>(p, ws, chunk_indices, nt_cap, stream);
  else launch_t<__half>(p, ws, chunk_indices, nt_cap, stream);
}

int64_t kda_prep_v6_launches() { return g_launches.load(std::memory_order_relaxed); }

}  // namespace linattn::cuda
