// Pieces of the KDA chunk-gradient kernel (kda_bwd_chunk2_kernel.cuh): the shared memory with the 16-row
// block products (blk), the gate constants once per (head, channel), the split-TF32 product, and the
// off-diagonal intra blocks with their decay factors either walked per fragment (decay_pair, V = 64) or
// read from per-channel 8-row-group prefix / suffix product tables built once per (chunk, head) in shared
// memory that is dead by then (DecayTab, V = 128).
// Every factor is a product of decays a <= 1: no exponent is ever positive, nothing is divided.
#pragma once
#include "cuda/kda/kda_bwd_chunk_common.cuh"

namespace linattn::cuda {
namespace kda_bwd {

// The default kernel's layout plus the per-channel decay products of each 16-row block (rows < len).
template <class T, int BT, int V>
struct KdaChunk2Smem : KdaChunkSmem<T, BT, V> {
  float blk[BT / 16][kK];
};

// bwd_gate_deriv split into its per-(head, channel) constants (dt_bias, e^A_log) and the per-token part
// of a raw value: the same expressions, so the same values.
struct GateConst {
  float dtb, ea;
};
__device__ __forceinline__ GateConst gate_const(const GdnFwdParams& f, int j, int c) {
  GateConst k{0.f, 1.f};
  if (!f.gate_in_kernel) return k;
  k.dtb = f.dt_bias ? f.dt_bias[j * kK + c] : 0.f;
  k.ea = f.has_lower_bound ? (f.A_log ? expf(f.A_log[j]) : 1.f) : expf(f.A_log[j]);
  return k;
}
__device__ __forceinline__ GateDeriv gate_deriv_raw(const GdnFwdParams& f, float raw, GateConst k) {
  if (!f.gate_in_kernel) return {raw, 1.f, 0.f};
  const float x = raw + k.dtb;
  if (!f.has_lower_bound) {
    const float sp = x > 20.f ? x : log1pf(expf(x));
    const float sg = 1.f / (1.f + expf(-x));
    const float g = -k.ea * sp;
    return {g, -k.ea * sg, g};
  }
  const float s = 1.f / (1.f + expf(-k.ea * x));
  const float ds = f.lower_bound * s * (1.f - s);
  return {f.lower_bound * s, ds * k.ea, f.A_log ? ds * k.ea * x : 0.f};
}

// 3xTF32 (split precision): x = hi + lo with hi, lo TF32 (~21 significant bits together), and
// acc += A B as A_lo B_hi + A_hi B_lo + A_hi B_hi (the A_lo B_lo term is below fp32 rounding). Plain
// TF32 (10 bits) would round the row side (q^ . dq2) and the column side (k^ . dka) of each intra term
// differently, and dgam's rowsum - colsum cancellation would leave that rounding in dA_log / dt_bias
// (the GDN backward's bf16 lesson, "CUDA GDN backward"): with the split it cancels to ~fp32.
struct Tf32x2 {
  uint32_t hi, lo;
};
__device__ __forceinline__ Tf32x2 split_tf32(float x) {
  constexpr uint32_t kMask = 0xffffe000u;  // the 19 TF32 bits (the mma ignores the 13 below)
  const uint32_t hi = to_tf32(x) & kMask;
  return {hi, to_tf32(x - __uint_as_float(hi)) & kMask};
}
// FS (chunked13): hi by the arithmetic cvt.rna's expansion applies to a finite x ((bits + 0x1000) & mask: round to
// nearest, ties away) without its non-finite test and select; lo as in split_tf32. Equal to split_tf32 for every
// finite x; a non-finite x still gives a non-finite lo (NaN: x - hi is NaN), so NaN / Inf still reach the sums.
// LT (chunked14, with FS): lo = (x - hi) truncated to TF32 by the mask (one LOP) instead of cvt.rna (emulated: the
// non-finite test, the add, the select): |lo| <= 2^-11 |x| after the rounded hi, so the truncation costs <= 2^-21 |x|
// (cvt: 2^-22), the order of the dropped lo * lo term. A non-finite x still gives a NaN lo (x - hi: NaN, and a NaN's
// bits & mask keep an all-ones exponent and a non-zero mantissa), so NaN / Inf still reach the sums.
template <bool FS, bool LT = false>
__device__ __forceinline__ Tf32x2 split_tf32_t(float x) {
  static_assert(FS || !LT, "LT is FS's split");
  if constexpr (LT) {
    constexpr uint32_t kMask = 0xffffe000u;
    const uint32_t hi = (__float_as_uint(x) + 0x1000u) & kMask;
    return {hi, __float_as_uint(x - __uint_as_float(hi)) & kMask};
  } else if constexpr (FS) {
    constexpr uint32_t kMask = 0xffffe000u;
    const uint32_t hi = (__float_as_uint(x) + 0x1000u) & kMask;
    return {hi, to_tf32(x - __uint_as_float(hi)) & kMask};
  } else {
    return split_tf32(x);
  }
}
__device__ __forceinline__ void mma_3xtf32(float (&d)[4], const Tf32x2 (&a)[4], Tf32x2 b0, Tf32x2 b1) {
  const uint32_t ahi[4] = {a[0].hi, a[1].hi, a[2].hi, a[3].hi}, alo[4] = {a[0].lo, a[1].lo, a[2].lo, a[3].lo};
  mma1688_tf32(d, alo, b0.hi, b1.hi);
  mma1688_tf32(d, ahi, b0.lo, b1.lo);
  mma1688_tf32(d, ahi, b0.hi, b1.hi);
}

// Fragment of B[k][n] for mma m16n8k8 (b0: k = tq, b1: k = tq + 4; n = g) over decay rows br..br+7 at
// channel d: pc carries the product of the rows already walked (<= 1); on return e1 / e2 are pc times
// the product over the fragment's rows after its row (AFTER: row side, walking down) or up to and
// including it (column side, walking up), and pc has taken all 8 rows.
template <bool AFTER>
__device__ __forceinline__ void decay_pair(const float (*a)[kLdF], int br, int d, int tq, float& pc, float& e1,
                                           float& e2) {
  float full = 1.f, p1 = 1.f, p2 = 1.f;
#pragma unroll
  for (int u = 0; u < 8; ++u) {
    const float x = a[br + u][d];
    full *= x;
    if (AFTER ? u > tq : u <= tq) p1 *= x;
    if (AFTER ? u > tq + 4 : u <= tq + 4) p2 *= x;
  }
  e1 = pc * p1;
  e2 = pc * p2;
  pc *= full;
}

// Per-channel decay products within each 8-row group (rows 8 gr .. 8 gr + 7): pre[t][c] = prod_{8 gr <= u <= t}
// a[u][c] (the order decay_pair multiplies in, so its values), suf[t][c] = prod_{t < u < 8 gr + 8} a[u][c].
// Pitch kLdT: the fragment reads at rows tq / tq + 4 and channels + g hit 32 banks.
constexpr int kLdT = kK + 8;
struct DecayTab {
  float (*pre)[kLdT];  // [BT][kLdT]
  float (*suf)[kLdT];  // [BT][kLdT]
};
template <int BT, int NT>
__device__ __forceinline__ void build_decay_tab(DecayTab tb, const float (*a)[kLdF], int tid) {
  static_assert((BT / 8) * kK % NT == 0, "whole passes");
#pragma unroll
  for (int idx = tid; idx < (BT / 8) * kK; idx += NT) {
    const int c = idx % kK, t0 = 8 * (idx / kK);
    float x[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) x[u] = a[t0 + u][c];
    float pr = 1.f, sf = 1.f;
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      pr *= x[u];
      tb.pre[t0 + u][c] = pr;
      tb.suf[t0 + 7 - u][c] = sf;
      sf *= x[7 - u];
    }
  }
}

// decay_pair from the tables (TAB) or walked over the 8 rows.
template <bool AFTER, bool TAB>
__device__ __forceinline__ void decay_pair_t(const float (*a)[kLdF], const DecayTab& tb, int br, int d, int tq,
                                             float& pc, float& e1, float& e2) {
  if constexpr (TAB) {
    const float (*t)[kLdT] = AFTER ? tb.suf : tb.pre;
    e1 = pc * t[br + tq][d];
    e2 = pc * t[br + tq + 4][d];
    pc *= tb.pre[br + 7][d];
  } else {
    decay_pair<AFTER>(a, br, d, tq, pc, e1, e2);
  }
}

// Row side, blocks left of the diagonal (row block I = wm, columns j < R1 = 16 I): sets
// dq2 = E_iR (.) sum_j daqk_ij k^_j E_Rj and rp likewise with dL (0 for I = 0).
template <class T, int BT, int V, int NTK, bool TAB = false, bool FS = false, bool LT = false>
__device__ __forceinline__ void offdiag_rows(const KdaChunkSmem<T, BT, V>& s, float (&dq2)[NTK][4],
                                             float (&rp)[NTK][4], int wm, int ck, int g, int tq,
                                             const DecayTab& tb = DecayTab{}) {
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      dq2[nt][e] = 0.f;
      rp[nt][e] = 0.f;
    }
  const int R1 = 16 * wm, r0 = R1 + g;
  if (wm == 0) return;
  float pc[NTK];  // prod_{8 kk + 8 <= t < R1} a_t at channel ck + 8 nt + g
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) pc[nt] = 1.f;
  for (int kk = 2 * wm - 1; kk >= 0; --kk) {
    const int br = 8 * kk;
    Tf32x2 fq[4], fl[4];
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int row = r0 + 8 * (x & 1), col = br + tq + 4 * (x >> 1);
      fq[x] = split_tf32_t<FS, LT>(s.u.in.daqk[row][col]);
      fl[x] = split_tf32_t<FS, LT>(s.u.in.dL[row][col]);
    }
    const float rk1 = s.rk[br + tq], rk2 = s.rk[br + tq + 4];
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int d = ck + 8 * nt + g;
      float e1, e2;
      decay_pair_t<true, TAB>(s.a, tb, br, d, tq, pc[nt], e1, e2);
      const Tf32x2 b0 = split_tf32_t<FS, LT>(rk1 * MmaType<T>::to_float(s.k[br + tq][d]) * e1);
      const Tf32x2 b1 = split_tf32_t<FS, LT>(rk2 * MmaType<T>::to_float(s.k[br + tq + 4][d]) * e2);
      mma_3xtf32(dq2[nt], fq, b0, b1);
      mma_3xtf32(rp[nt], fl, b0, b1);
    }
  }
  float er[NTK][4];  // E_iR = prod_{R1 <= t <= i} a_t, rows i = r0 (e 0, 1), r0 + 8 (e 2, 3)
  if constexpr (TAB) {  // r0 in the group starting at R1, r0 + 8 in the one at R1 + 8
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int col = ck + nt * 8 + 2 * tq;
      const float2 p0 = *reinterpret_cast<const float2*>(&tb.pre[r0][col]);
      const float2 pg = *reinterpret_cast<const float2*>(&tb.pre[R1 + 7][col]);
      const float2 p1 = *reinterpret_cast<const float2*>(&tb.pre[r0 + 8][col]);
      er[nt][0] = p0.x;
      er[nt][1] = p0.y;
      er[nt][2] = pg.x * p1.x;
      er[nt][3] = pg.y * p1.y;
    }
  }
#pragma unroll
  for (int nt = 0; nt < NTK && !TAB; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) er[nt][e] = 1.f;
#pragma unroll 4
  for (int t = R1; t < R1 + 16 && !TAB; ++t) {
    const bool lo = t <= r0, hi = t <= r0 + 8;
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const float2 av = *reinterpret_cast<const float2*>(&s.a[t][ck + nt * 8 + 2 * tq]);
      if (lo) {
        er[nt][0] *= av.x;
        er[nt][1] *= av.y;
      }
      if (hi) {
        er[nt][2] *= av.x;
        er[nt][3] *= av.y;
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      dq2[nt][e] *= er[nt][e];
      rp[nt][e] *= er[nt][e];
    }
}

// Column side, blocks below the diagonal (column block J = wm, rows i >= R1 = 16 J + 16, reference
// R = R1 - 1): sets ca = E_Rj (.) sum_i (daqk_ij q^_i + beta_i dL_ij k^_i) E_iR (0 for the last block).
template <class T, int BT, int V, int NTK, bool TAB = false, bool FS = false, bool LT = false>
__device__ __forceinline__ void offdiag_cols(const KdaChunkSmem<T, BT, V>& s, float (&ca)[NTK][4], int wm, int ck,
                                             int g, int tq, const DecayTab& tb = DecayTab{}) {
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) ca[nt][e] = 0.f;
  const int j0 = 16 * wm, R1 = j0 + 16, r0 = j0 + g;
  if (R1 >= BT) return;
  float pc[NTK];  // prod_{R1 <= t < br} a_t at channel ck + 8 nt + g
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt) pc[nt] = 1.f;
  for (int br = R1; br < BT; br += 8) {
    Tf32x2 fq[4], fl[4];  // A[m = j][k = i] = daqk[i][j] (transposed read)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int row = br + tq + 4 * (x >> 1), col = r0 + 8 * (x & 1);
      fq[x] = split_tf32_t<FS, LT>(s.u.in.daqk[row][col]);
      fl[x] = split_tf32_t<FS, LT>(s.u.in.dL[row][col]);
    }
    const float sq1 = s.rq[br + tq], sq2 = s.rq[br + tq + 4];
    const float sk1 = s.beta[br + tq] * s.rk[br + tq], sk2 = s.beta[br + tq + 4] * s.rk[br + tq + 4];
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int d = ck + 8 * nt + g;
      float e1, e2;
      decay_pair_t<false, TAB>(s.a, tb, br, d, tq, pc[nt], e1, e2);
      mma_3xtf32(ca[nt], fq, split_tf32_t<FS, LT>(sq1 * MmaType<T>::to_float(s.q[br + tq][d]) * e1),
                 split_tf32_t<FS, LT>(sq2 * MmaType<T>::to_float(s.q[br + tq + 4][d]) * e2));
      mma_3xtf32(ca[nt], fl, split_tf32_t<FS, LT>(sk1 * MmaType<T>::to_float(s.k[br + tq][d]) * e1),
                 split_tf32_t<FS, LT>(sk2 * MmaType<T>::to_float(s.k[br + tq + 4][d]) * e2));
    }
  }
  float ej[NTK][4];  // E_Rj = prod_{j < t < R1} a_t, columns j = r0 (e 0, 1), r0 + 8 (e 2, 3)
  if constexpr (TAB) {  // r0 in the group starting at j0, r0 + 8 in the one at j0 + 8 (ending at R1 - 1)
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int col = ck + nt * 8 + 2 * tq;
      const float2 s0 = *reinterpret_cast<const float2*>(&tb.suf[r0][col]);
      const float2 pg = *reinterpret_cast<const float2*>(&tb.pre[R1 - 1][col]);
      const float2 s1 = *reinterpret_cast<const float2*>(&tb.suf[r0 + 8][col]);
      ej[nt][0] = s0.x * pg.x;
      ej[nt][1] = s0.y * pg.y;
      ej[nt][2] = s1.x;
      ej[nt][3] = s1.y;
    }
  }
#pragma unroll
  for (int nt = 0; nt < NTK && !TAB; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) ej[nt][e] = 1.f;
#pragma unroll 4
  for (int t = j0 + 1; t < R1 && !TAB; ++t) {
    const bool lo = t > r0, hi = t > r0 + 8;
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const float2 av = *reinterpret_cast<const float2*>(&s.a[t][ck + nt * 8 + 2 * tq]);
      if (lo) {
        ej[nt][0] *= av.x;
        ej[nt][1] *= av.y;
      }
      if (hi) {
        ej[nt][2] *= av.x;
        ej[nt][3] *= av.y;
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) ca[nt][e] *= ej[nt][e];
}

}  // namespace kda_bwd
}  // namespace linattn::cuda
