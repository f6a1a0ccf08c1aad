// GDN prep v7 / v8 / v10 (v10 the default at BT 64 unsplit since session 15, v8 at BT 32 / with the split and under
// LINATTN_CUDA_GDN_PREP=v8, v7 the one before; gdn_prep_v7.h).
// Grid, front half (q / k
// copies, gate scans, row scales, tma3 records, K K^T and Q K^T: prep_front, gdn_prep_parts.cuh) as v6; then per
// value head j one phase of three warp-uniform roles (BT 64: warps 0-1; 2, 3, 6; 4, 5, 7):
//   diagonal items (row i, its diagonal 16-column segment): head j-1's Ab, then head j's L and P with one decay
//     2^(gam_i - gam_c) per element, then (warp barrier: the block's rows are the warp's own) the 16x16 diagonal
//     inverse of head j's L (solve_diag_blocks);
//   off-diagonal items (i, segment b < i / 16, row-major): head j's L and P (no masks);
//   the same off-diagonal items for head j-1's Ab, and two upper 8-column chunks each: zeros of Ab / Ai (head j-1)
//     and P (head j), consecutive lanes on consecutive chunks of a row (coalesced);
// CTA barrier, the merges by column chains (one warp per column block), CTA barrier: 2 per value head (v6 3).
// v6 formed every decay twice (P of all heads first, from Q K^T in the union, then L per head) over every
// segment with per-element masks: ~half of its 41k warp instructions per CTA (ncu 082dba2). Here L, X and Q K^T
// are the packed lower 16x16 blocks (X's and P's upper blocks are exact zeros, never stored in shared memory), so
// Q K^T stays resident through the value heads at v6's 4 CTAs per SM (~52 KB at G 4).
// Every value is v6's expression in v6's order: bitwise v6's Ab, Ai, gam, rq, rk and records; P too except the
// sign of its upper-triangle zeros (+0 here; v6 stored scale 0 qk_ij).
// Split (opt-in LINATTN_CUDA_GDN_PREP_SPLIT, gdn_prep_v7.h, perf-notes "Prep split"): the SPLIT instances, grid
// (chunk rows, H, S), G / S value heads per CTA (front half recomputed): the unsplit bits.
#include "cuda/gdn/gdn_prep_v7.h"

#include <atomic>
#include <functional>
#include <type_traits>

#include "core/env.h"
#include "core/util.h"
#include "cuda/common/barrier.cuh"
#include "cuda/common/device_info.h"
#include "cuda/common/launch.h"
#include "cuda/common/pdl.cuh"
#include "cuda/gdn/gdn_prep_parts.cuh"

namespace linattn::cuda {
namespace {

// L, X: the lower 16x16 blocks (a >= b) at index a (a + 1) / 2 + b, rows of 20 floats (the TF32 fragment loads of
// the merges hit 32 distinct banks, as v6's 68-float rows did), blocks 324 floats apart; kk and qk: v6's packed kk
// layout (rows of 16 floats, blocks 260 apart: a quarter warp's float4 loads of two rows x four blocks on distinct
// bank groups).
// V8 (prep v8): kk / qk rows keep their 16 floats, the 4-float groups of row r XOR-swizzled by (r / 2) % 4, so
// lp_item's float4 loads (a quarter warp: 8 rows of one block, or rows x segments) hit distinct bank groups (v7: 4-way
// conflicts on the diagonal items, 16 wavefronts per load instead of 4); gram_products stores pairs (kPairs).
template <class T, int BT, bool WP, bool V8 = false>
struct PrepSmemV7 {
  static constexpr int kNB = BT / 16, kNBlk = kNB * (kNB + 1) / 2, kKkBlk = 16 * 16 + 4, kLs = 20;
  static constexpr int kBlk = 16 * kLs + 4;  // L / X block stride: a row's segments (b, b + 1) 4 banks apart
  static constexpr bool kPacked = true, kQkPacked = true;  // gram_products writes the lower blocks only
  static constexpr bool kV8 = V8, kPairs = V8;
  static_assert(kPacked && kQkPacked, "the v7 loop reads kk / qk as packed lower blocks");
  union {
    struct { T q[BT][kLdK]; T k[BT][kLdK]; } in;  // until the Gram products
    struct {
      float L[kNBlk * kBlk];
      float X[kNBlk * kBlk];
      alignas(16) float qkb[WP ? kNBlk * kKkBlk : 4];
    } sv;
  } u;
  float tscr[kNB > 1 ? kNB - 1 : 1][16][20];  // per-chain 16x16 scratch of the merges
  float rq[BT], rk[BT];
  alignas(16) float kkb[kNBlk * kKkBlk];
  // followed by gam[G][BT], beta[G][BT] (dynamic)
  static size_t bytes(int G) { return sizeof(PrepSmemV7) + size_t(G) * BT * 2 * sizeof(float); }
  static __device__ __forceinline__ int blk(int a, int b) { return a * (a + 1) / 2 + b; }
  __device__ __forceinline__ float (*Lb(int a, int b))[kLs] {
    return reinterpret_cast<float (*)[kLs]>(&u.sv.L[blk(a, b) * kBlk]);
  }
  __device__ __forceinline__ float (*Xb(int a, int b))[kLs] {
    return reinterpret_cast<float (*)[kLs]>(&u.sv.X[blk(a, b) * kBlk]);
  }
  __device__ __forceinline__ const float (*Xb(int a, int b) const)[kLs] {
    return reinterpret_cast<const float (*)[kLs]>(&u.sv.X[blk(a, b) * kBlk]);
  }
  // V8: kk / qk element (i, c) at the swizzled column (its 4-float group XOR (i / 2) % 4)
  static __device__ __forceinline__ int pk8(int i, int c) {
    return blk(i >> 4, c >> 4) * kKkBlk + (i & 15) * 16 + ((((c & 15) >> 2) ^ ((i >> 1) & 3)) << 2) + (c & 3);
  }
  __device__ __forceinline__ float* kk_at(int i, int c) {
    if constexpr (V8) return &kkb[pk8(i, c)];
    return &kkb[blk(i >> 4, c >> 4) * kKkBlk + (i & 15) * 16 + (c & 15)];
  }
  __device__ __forceinline__ float* qk_at(int i, int c) {
    if constexpr (V8) return &u.sv.qkb[pk8(i, c)];
    return &u.sv.qkb[blk(i >> 4, c >> 4) * kKkBlk + (i & 15) * 16 + (c & 15)];
  }
};

// Off-diagonal lower item u (0 <= u < 8 NB (NB - 1)): row block a, segment b < a, row i; row-major inside a block
// row (consecutive lanes take consecutive segments of a row: fewer 128-byte lines per warp store).
template <int NB>
__device__ __forceinline__ void off_item(int u, int& a, int& b, int& i) {
  a = 1;
#pragma unroll
  for (int q = 1; q < NB - 1; ++q)
    if (u >= 16 * a) u -= 16 * a++;
  b = u % a;
  i = 16 * a + u / a;
}

// Upper (all-zero) 8-column chunk q (0 <= q < 16 NB (NB - 1)) of Ab / P, row-major: row i, first column c.
template <int NB>
__device__ __forceinline__ void zero_chunk(int q, int& i, int& c) {
  int a = 0;
#pragma unroll
  for (int t = 0; t < NB - 2; ++t)
    if (q >= 32 * (NB - 1 - a)) q -= 32 * (NB - 1 - a++);
  const int nc = 2 * (NB - 1 - a);  // chunks per row of block row a
  i = 16 * a + q / nc;
  c = 16 * (a + 1) + 8 * (q % nc);
}

// Columns c0 + e4 .. + 3 of row i (segment b = c0 / 16 <= i / 16) of value head j: lv[0..4) (L) and pv[e4..e4+4)
// (P). One decay per element, v6's expressions: P = scale d qk, L = beta_i d kk (d = 0 past len), masks only in the
// diagonal segment.
// Fast (prep v10): the row is live and every exponent of the item is >= -126 (or NaN), so exp2f is its plain MUFU op:
// ex2.approx.ftz (the same op without exp2f's denormal fix-up) and no live select: the same values.
template <bool WP, bool Diag, bool Fast = false, class Smem>
__device__ __forceinline__ void lp_group(const GdnFwdParams& p, Smem& s, const float* gam, float gi, float bi,
                                         bool live, int i, int c0, int e4, float (&lv)[4], float (&pv)[kSeg]) {
  const float4 g4 = *reinterpret_cast<const float4*>(gam + c0 + e4);
  const float4 kk4 = *reinterpret_cast<const float4*>(s.kk_at(i, c0 + e4));
  float4 qk4 = make_float4(0.f, 0.f, 0.f, 0.f);
  if constexpr (WP) qk4 = *reinterpret_cast<const float4*>(s.qk_at(i, c0 + e4));
  const float gv[4] = {g4.x, g4.y, g4.z, g4.w}, kkv[4] = {kk4.x, kk4.y, kk4.z, kk4.w},
              qkv[4] = {qk4.x, qk4.y, qk4.z, qk4.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int jc = c0 + e4 + e;
    float d;
    if constexpr (Fast) d = ex2_ftz(gi - gv[e]);
    else d = exp2f(gi - gv[e]);
    const float dp = (!Diag || jc <= i) ? d : 0.f;
    const float dl = (Fast || live) ? dp : 0.f;
    lv[e] = (!Diag || jc < i) ? bi * dl * kkv[e] : 0.f;
    if constexpr (WP) pv[e4 + e] = p.scale * dp * qkv[e];
  }
}

// Row i, segment b (b <= i / 16) of value head j: L into shared memory (rows >= len: v6's zeros), P stored (rows
// < len), by lp_group. v7: each group's L stored before the next group's loads (the compiler cannot tell L from kk /
// qk / gam, so those loads wait behind the store); V8: every load of the item first, then the four L stores.
// V10 (prep v10, V8's layout): gmx = the largest gam of segment b (fmaxf, NaNs skipped); when the row is live and gi -
// gmx >= -126, every exponent gi - gam_c of the item is >= -126 or NaN (gam_c <= gmx, rounding is monotone): lp_group's
// Fast path, else v8's.
template <class T, int BT, bool WP, bool Diag, bool V10 = false, class Smem>
__device__ __forceinline__ void lp_item(const GdnFwdParams& p, const GdnChunkWs& ws, Smem& s, const float* gam,
                                        const float* beta, int j, int64_t t0, int len, int i, int b,
                                        float gmx = 0.f) {
  const float gi = gam[i], bi = beta[i];
  const bool live = i < len;
  const int c0 = 16 * b;
  float* Lr = s.Lb(i >> 4, b)[i & 15];
  if constexpr (V10) {  // each path with its own stores (a join would hold 32 values live: spills)
    static_assert(Smem::kV8, "v10 runs on v8's layout");
    auto item = [&](auto fast) {
      float lv[kSeg / 4][4], pv[kSeg];
#pragma unroll
      for (int e4 = 0; e4 < kSeg; e4 += 4)
        lp_group<WP, Diag, decltype(fast)::value>(p, s, gam, gi, bi, live, i, c0, e4, lv[e4 / 4], pv);
#pragma unroll
      for (int e4 = 0; e4 < kSeg; e4 += 4)
        *reinterpret_cast<float4*>(Lr + e4) = make_float4(lv[e4 / 4][0], lv[e4 / 4][1], lv[e4 / 4][2], lv[e4 / 4][3]);
      if constexpr (WP)
        if (live) store16<T>(static_cast<T*>(ws.P) + (j * ws.T_cap + t0 + i) * BT + c0, pv);
    };
    if (live && gi - gmx >= -126.f) item(std::true_type{});
    else item(std::false_type{});
    return;
  }
  float pv[kSeg];
  if constexpr (Smem::kV8) {
    float lv[kSeg / 4][4];
#pragma unroll
    for (int e4 = 0; e4 < kSeg; e4 += 4) lp_group<WP, Diag>(p, s, gam, gi, bi, live, i, c0, e4, lv[e4 / 4], pv);
#pragma unroll
    for (int e4 = 0; e4 < kSeg; e4 += 4)
      *reinterpret_cast<float4*>(Lr + e4) = make_float4(lv[e4 / 4][0], lv[e4 / 4][1], lv[e4 / 4][2], lv[e4 / 4][3]);
  } else {  // v7: each group's L stored before the next group's loads (opt-in since session 13; through lp_group
            // its SASS moved: 8 fewer instructions, other scheduling; the same values)
#pragma unroll
    for (int e4 = 0; e4 < kSeg; e4 += 4) {
      float lv[4];
      lp_group<WP, Diag>(p, s, gam, gi, bi, live, i, c0, e4, lv, pv);
      *reinterpret_cast<float4*>(Lr + e4) = make_float4(lv[0], lv[1], lv[2], lv[3]);
    }
  }
  if constexpr (WP)
    if (live) store16<T>(static_cast<T*>(ws.P) + (j * ws.T_cap + t0 + i) * BT + c0, pv);
}

// Row i, segment b <= i / 16 of value head j's Ab = X diag(beta) (and Ai = X) from the packed X.
template <class T, int BT, class Smem>
__device__ __forceinline__ void ab_item(const GdnChunkWs& ws, const Smem& s, const float* beta, int j, int64_t t0,
                                        int len, int i, int b) {
  if (i >= len) return;
  const int c0 = 16 * b;
  const float* xr = s.Xb(i >> 4, b)[i & 15];
  float av[kSeg];
#pragma unroll
  for (int e = 0; e < kSeg; ++e) av[e] = xr[e] * beta[c0 + e];
  const int64_t off = (j * ws.T_cap + t0 + i) * BT + c0;
  store16<T>(static_cast<T*>(ws.Ab) + off, av);
  if (ws.Ai) {  // the backward also needs the unscaled inverse
#pragma unroll
    for (int e = 0; e < kSeg; ++e) av[e] = xr[e];
    store16<T>(static_cast<T*>(ws.Ai) + off, av);
  }
}

// The upper 8-column chunk (row i, columns c..c+7) of value head j's Ab (v6: its zeroed upper X times beta), Ai
// (zeros) and, for head jp (< 0: none), P (zeros: v6 stored scale 0 qk, zeros of either sign).
// V10 (prep v10): zb = every beta of head j is a non-negative finite, so 0 beta_c = +0: Ab's zeros stored directly.
template <class T, int BT, bool V10 = false>
__device__ __forceinline__ void zero_item(const GdnChunkWs& ws, const float* beta, int j, int jp, int64_t t0, int len,
                                          int i, int c, bool zb = false) {
  if (i >= len) return;
  if (V10 && zb && j >= 0) {
    const int64_t off = (j * ws.T_cap + t0 + i) * BT + c;
    *reinterpret_cast<uint4*>(static_cast<T*>(ws.Ab) + off) = make_uint4(0u, 0u, 0u, 0u);
    if (ws.Ai) *reinterpret_cast<uint4*>(static_cast<T*>(ws.Ai) + off) = make_uint4(0u, 0u, 0u, 0u);
  } else if (j >= 0) {
    float av[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) av[e] = 0.f * beta[c + e];
    const int64_t off = (j * ws.T_cap + t0 + i) * BT + c;
    store8<T>(static_cast<T*>(ws.Ab) + off, av);
    if (ws.Ai) *reinterpret_cast<uint4*>(static_cast<T*>(ws.Ai) + off) = make_uint4(0u, 0u, 0u, 0u);
  }
  if (jp >= 0) *reinterpret_cast<uint4*>(static_cast<T*>(ws.P) + (jp * ws.T_cap + t0 + i) * BT + c) =
      make_uint4(0u, 0u, 0u, 0u);
}

// mma16x16_tf32 (a0 = ka = kb = nb = 0) with the A fragments by ldmatrix (prep v10): an 8x8 b16 matrix of 32-bit
// elements gives thread T element T % 4 of row T / 4, i.e. A[g][t]; matrices (rows 0-7 | 8-15) x (columns 0-3 | 4-7)
// are fa[0..3]. Same fragments, TF32 roundings and products: the same bits; 2 LDSM.x4 instead of 8 LDS per lane.
template <int LDA, int LDB>
__device__ __forceinline__ void mma16x16_tf32_ldsm(float (&acc)[2][4], const float (*A)[LDA], const float (*B)[LDB],
                                                   int lane) {
  const int g = lane >> 2, t = lane & 3;
  const float* arow = &A[(lane & 7) + (lane & 8)][4 * (lane >> 4)];  // rows 16-byte aligned
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
    uint32_t r[4], fa[4];
    ldsm_x4(r, arow + 8 * ks);
#pragma unroll
    for (int q = 0; q < 4; ++q) fa[q] = to_tf32(__uint_as_float(r[q]));
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
      mma1688_tf32(acc[nt], fa, to_tf32(B[8 * ks + t][8 * nt + g]), to_tf32(B[8 * ks + t + 4][8 * nt + g]));
  }
}

// X_aB = -X_aa acc from the finished sum acc = sum_m L_am X_mB (merge_block_packed's second half).
// LDA (prep v10): the A fragments (X_aa here, L blocks in merge_column_packed) by ldmatrix (mma16x16_tf32_ldsm).
template <bool LDA = false, class Smem>
__device__ __forceinline__ void merge_finish(Smem& s, float (*tw)[20], const float (&acc)[2][4], int a, int b,
                                             int lane) {
  constexpr int LS = Smem::kLs;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    tw[g][8 * nt + 2 * t] = acc[nt][0];
    tw[g][8 * nt + 2 * t + 1] = acc[nt][1];
    tw[g + 8][8 * nt + 2 * t] = acc[nt][2];
    tw[g + 8][8 * nt + 2 * t + 1] = acc[nt][3];
  }
  __syncwarp();
  float res[2][4] = {};
  if constexpr (LDA) mma16x16_tf32_ldsm<LS, 20>(res, s.Xb(a, a), tw, lane);
  else mma16x16_tf32<LS, 20>(res, s.Xb(a, a), 0, 0, tw, 0, 0, lane);
  float (*X)[LS] = s.Xb(a, b);
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const int c = 8 * nt + 2 * t;
    X[g][c] = -res[nt][0];
    X[g][c + 1] = -res[nt][1];
    X[g + 8][c] = -res[nt][2];
    X[g + 8][c + 1] = -res[nt][3];
  }
}

// X_ab = -X_aa sum_{m = b}^{a-1} L_am X_mb on the packed blocks, one warp: merge_block's products in its order (the
// shared merge_block over block views changed the address code of every KDA / GDN prep kernel that inverts, so it
// stays as it is); the finish is v8's merge_finish (session 13: v7 is no longer the default, so its SASS may move;
// the same products in the same order, bitwise v8 as the prep tests assert).
template <class Smem>
__device__ __forceinline__ void merge_block_packed(Smem& s, float (*tw)[20], int a, int b, int lane) {
  constexpr int LS = Smem::kLs;
  float acc[2][4] = {};
  for (int m = b; m < a; ++m)
    mma16x16_tf32<LS, LS>(acc, s.Lb(a, m), 0, 0, s.Xb(m, b), 0, 0, lane);
  merge_finish(s, tw, acc, a, b, lane);
}

// V8: column chain B with the sums of all its blocks in registers. merge_block_packed finishes X_(B+1)B, then forms
// X_(B+2)B's whole sum, ...: chain 0 is (NB - 1) NB / 2 + NB - 1 dependent 16x16 products (9 at BT 64), the other
// chains and warps waiting at the CTA barrier (ncu 13: ~25% of v7's stall samples). Here the products L_aB X_BB of
// every block first (independent), then per block a its finish and the term L_a'a X_aB of every later block a': each
// sum gets merge_block_packed's terms in its order (m = B, B + 1, ..: the same bits), 2 (NB - 1 - B) deep (6 at BT 64).
template <int NB, int B, bool LDA = false, class Smem>
__device__ __forceinline__ void merge_column_packed(Smem& s, float (*tw)[20], int lane) {
  constexpr int LS = Smem::kLs, NA = NB - 1 - B;
  float acc[NA][2][4] = {};
#pragma unroll
  for (int k = 0; k < NA; ++k) {
    if constexpr (LDA) mma16x16_tf32_ldsm<LS, LS>(acc[k], s.Lb(B + 1 + k, B), s.Xb(B, B), lane);
    else mma16x16_tf32<LS, LS>(acc[k], s.Lb(B + 1 + k, B), 0, 0, s.Xb(B, B), 0, 0, lane);
  }
#pragma unroll
  for (int k = 0; k < NA; ++k) {
    merge_finish<LDA>(s, tw, acc[k], B + 1 + k, B, lane);
    __syncwarp();  // X_(B+1+k)B visible to the warp's lanes; tw free again
#pragma unroll
    for (int k2 = k + 1; k2 < NA; ++k2) {
      if constexpr (LDA)
        mma16x16_tf32_ldsm<LS, LS>(acc[k2], s.Lb(B + 1 + k2, B + 1 + k), s.Xb(B + 1 + k, B), lane);
      else mma16x16_tf32<LS, LS>(acc[k2], s.Lb(B + 1 + k2, B + 1 + k), 0, 0, s.Xb(B + 1 + k, B), 0, 0, lane);
    }
  }
}
template <int NB, int B = 0, class Smem>
__device__ __forceinline__ void merge_column_any(Smem& s, int chain, int lane) {
  if constexpr (B < NB - 1) {
    if (chain == B) merge_column_packed<NB, B>(s, s.tscr[B], lane);
    else merge_column_any<NB, B + 1>(s, chain, lane);
  }
}

// SPLIT (LINATTN_CUDA_GDN_PREP_SPLIT, opt-in): grid (chunk rows, H, S); the CTA does the front half as unsplit
// and the loop below for its G / S value heads hv G' .. (prep_front), same expressions: the unsplit bits.
// kPdl (LINATTN_CUDA_PDL=1, the unsplit tma3 instances): launched with PDL; waits for the chunk / segment tables
// (and, for ws, the previous kernels' reads) before anything else.
// V8 (gdn_prep_v8_kernel): PrepSmemV7's V8 layout and stores, the same values.
// V10 (gdn_prep_v10_kernel, with V8; BT 64 unsplit): v8 on an instruction diet, the same values (perf-notes "Prep
// v10"): prep_front's V10 row scales and per-head facts (kAuxPerHead floats per head after beta_all), lp_item's
// Fast path, zero_item's direct zeros, the merges' A fragments by ldmatrix.
template <class T, int BT, bool WP, bool SC, bool SPLIT, bool kPdl, bool V8, bool V10 = false>
__device__ __forceinline__ void prep_v7_body(GdnFwdParams p, GdnChunkWs ws, const int32_t* chunk_indices, int nts) {
  pdl_wait<kPdl>();
  pdl_launch_dependents<kPdl>();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using Smem = PrepSmemV7<T, BT, WP, V8>;
  constexpr int NB = Smem::kNB, kOff = 8 * NB * (NB - 1);  // diagonal items: BT; off-diagonal and upper: kOff each
  static_assert(BT + 2 * kOff <= kThreads, "one item per thread and role");
  auto& s = *reinterpret_cast<Smem*>(smem_raw);
  const int G = SPLIT ? p.HV / p.H / static_cast<int>(gridDim.z) : p.HV / p.H;  // this CTA's value heads
  float* gam_all = reinterpret_cast<float*>(smem_raw + sizeof(Smem));  // [G][BT]
  float* beta_all = gam_all + G * BT;                                   // [G][BT]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int h = SPLIT ? static_cast<int>(blockIdx.y * gridDim.z + blockIdx.z) : static_cast<int>(blockIdx.y);
  int64_t t0;
  int len;
  if (!prep_front<T, BT, WP, WP, SC, true, SPLIT, V10>(p, ws, chunk_indices, nts, s, gam_all, beta_all, t0, len))
    return;
  const float* aux = beta_all + G * BT;  // V10: [G][kAuxPerHead]

  // This thread's items by its logical index lt (roles warp-uniform at BT 64): 0: the diagonal segment of row lt;
  // 1: an off-diagonal lower item (L and P); 2: an off-diagonal lower item (Ab) and two upper 8-column chunks (Ab /
  // Ai / P zeros). BT 64 spreads the roles and the merge chains over the four schedulers (warp % 4; per value head
  // ~560 / 210 / 120 instructions per role-0 / 1 / 2 warp, chains ~330 / 220 / 110): role 0 on warps 0, 1, role 1
  // on 2, 3, 6, role 2 on 4, 5, 7, chains 0 / 1 / 2 on warps 6 / 3 / 7 (v6's order, all on warps 0-2, gave
  // scheduler 0 ~3x scheduler 3's share).
  const int lt = BT == 64 ? 32 * ((0x74653210 >> (4 * warp)) & 15) + lane : tid;  // logical warps 0,1,2,3,5,6,4,7
  const int chain = BT == 64 ? (warp == 6 ? 0 : warp == 3 ? 1 : warp == 7 ? 2 : -1) : (warp < NB - 1 ? warp : -1);
  int a = 0, b = 0, i = lt, zi[2] = {BT, BT}, zc[2] = {0, 0};
  const int role = lt < BT ? 0 : lt < BT + kOff ? 1 : lt < BT + 2 * kOff ? 2 : 3;
  if (role == 0) {
    a = b = lt >> 4;
  } else if (role <= 2) {
    const int u = lt - BT - (role == 2 ? kOff : 0);
    off_item<NB>(u, a, b, i);
    if (role == 2)
#pragma unroll
      for (int k = 0; k < 2; ++k) zero_chunk<NB>(u + k * kOff, zi[k], zc[k]);
  }
  // V8 at BT 64: role 0 writes head j's diagonal Ab rows in head j's merge phase (its warps are no chain there: they
  // waited at the barrier) instead of at the start of head j + 1's phase, on that phase's critical path (ncu 13: the
  // barrier after the L / P phase holds ~17% of v7's samples). X_aa is final after the solve; the chains only read it.
  constexpr bool kAbLate = V8 && BT == 64;
  if constexpr (V10) {  // v8's phases in v8's order, one loop per role (v8's shared loop rematerialised the roles,
    static_assert(BT == 64 && kAbLate, "v10: BT 64");  // the chain and the head pointers after every barrier); every
    // role passes the same 2 G CTA barriers, each role at its own program locations: barrier.sync without .aligned
    // (cta_barrier_nonaligned; __syncthreads here failed compute-sanitizer synccheck, session 16)
    if (role == 0) {
      for (int jj = 0; jj < G; ++jj) {
        const int j = h * G + jj;
        lp_item<T, BT, WP, true, true>(p, ws, s, gam_all + jj * BT, beta_all + jj * BT, j, t0, len, i, b,
                                       aux[jj * kAuxPerHead + b]);
        __syncwarp();  // the diagonal block's 16 rows of L are this warp's
        solve_diag_blocks<16, Smem::kLs>(s.Lb(a, a), s.Xb(a, a), lt & 15);
        cta_barrier_nonaligned();
        ab_item<T, BT>(ws, s, beta_all + jj * BT, j, t0, len, i, b);  // kAbLate
        cta_barrier_nonaligned();
      }
    } else if (role == 1) {  // warps 2, 3, 6: chains 1 (warp 3) and 0 (warp 6)
      for (int jj = 0; jj < G; ++jj) {
        lp_item<T, BT, WP, false, true>(p, ws, s, gam_all + jj * BT, beta_all + jj * BT, h * G + jj, t0, len, i, b,
                                        aux[jj * kAuxPerHead + b]);
        cta_barrier_nonaligned();
        if (chain == 0) merge_column_packed<NB, 0, true>(s, s.tscr[0], lane);
        else if (chain == 1) merge_column_packed<NB, 1, true>(s, s.tscr[1], lane);
        cta_barrier_nonaligned();
      }
    } else {  // role 2, warps 4, 5, 7: chain 2 (warp 7)
      for (int jj = 0;; ++jj) {
        const int j = h * G + jj;
        const float* betap = beta_all + (jj - 1) * BT;
        if (jj > 0) ab_item<T, BT>(ws, s, betap, j - 1, t0, len, i, b);
        const bool zb = jj > 0 && aux[(jj - 1) * kAuxPerHead + 4] != 0.f;
#pragma unroll
        for (int k = 0; k < 2; ++k)
          zero_item<T, BT, true>(ws, betap, jj > 0 ? j - 1 : -1, WP && jj < G ? j : -1, t0, len, zi[k], zc[k], zb);
        if (jj == G) break;
        cta_barrier_nonaligned();
        if (chain == 2) merge_column_packed<NB, 2, true>(s, s.tscr[2], lane);
        cta_barrier_nonaligned();
      }
    }
  } else {  // v7 / v8
    for (int jj = 0; jj <= G; ++jj) {
      const int j = h * G + jj;
      const float* gam = gam_all + jj * BT;
      const float* beta = beta_all + jj * BT;
      if (role == 0) {
        if constexpr (!kAbLate)
          if (jj > 0) ab_item<T, BT>(ws, s, beta - BT, j - 1, t0, len, i, b);  // X_aa of head j - 1: this warp's rows
        if (jj == G) break;
        lp_item<T, BT, WP, true>(p, ws, s, gam, beta, j, t0, len, i, b);
        __syncwarp();  // the diagonal block's 16 rows of L are this warp's
        solve_diag_blocks<16, Smem::kLs>(s.Lb(a, a), s.Xb(a, a), lt & 15);
      } else if (role == 1) {
        if (jj == G) break;
        lp_item<T, BT, WP, false>(p, ws, s, gam, beta, j, t0, len, i, b);
      } else if (role == 2) {
        if (jj > 0) ab_item<T, BT>(ws, s, beta - BT, j - 1, t0, len, i, b);
#pragma unroll
        for (int k = 0; k < 2; ++k)
          zero_item<T, BT>(ws, beta - BT, jj > 0 ? j - 1 : -1, WP && jj < G ? j : -1, t0, len, zi[k], zc[k]);
        if (jj == G) break;
      } else if (jj == G) {
        break;
      }
      __syncthreads();
      if constexpr (V8) {
        if (kAbLate && role == 0) ab_item<T, BT>(ws, s, beta, j, t0, len, i, b);
        if (chain >= 0) merge_column_any<NB>(s, chain, lane);
      } else if (chain >= 0) {  // column chain b: X_(b+1)b, X_(b+2)b, ... (merge order as v6)
        for (int aa = chain + 1; aa < NB; ++aa) {
          merge_block_packed(s, s.tscr[chain], aa, chain, lane);
          __syncwarp();
        }
      }
      __syncthreads();
    }
  }
}

template <class T, int BT, bool WP, bool SC, bool SPLIT = false, bool kPdl = false>
__global__ void __launch_bounds__(kThreads, BT == 64 ? 4 : 3) gdn_prep_v7_kernel(GdnFwdParams p, GdnChunkWs ws,
                                                                                const int32_t* chunk_indices, int nts) {
  prep_v7_body<T, BT, WP, SC, SPLIT, kPdl, false>(p, ws, chunk_indices, nts);
}
// Prep v8 (opt-in LINATTN_CUDA_GDN_PREP=v8; perf-notes "Prep v8"): v7's body on the V8 layout.
template <class T, int BT, bool WP, bool SC, bool SPLIT = false, bool kPdl = false>
__global__ void __launch_bounds__(kThreads, BT == 64 ? 4 : 3) gdn_prep_v8_kernel(GdnFwdParams p, GdnChunkWs ws,
                                                                                const int32_t* chunk_indices, int nts) {
  prep_v7_body<T, BT, WP, SC, SPLIT, kPdl, true>(p, ws, chunk_indices, nts);
}

// Prep v10 (the default since session 15, BT 64 unsplit; perf-notes "Prep v10"): v8's body on an instruction diet.
template <class T, int BT, bool WP, bool SC, bool SPLIT = false, bool kPdl = false>
__global__ void __launch_bounds__(kThreads, BT == 64 ? 4 : 3)
    gdn_prep_v10_kernel(GdnFwdParams p, GdnChunkWs ws, const int32_t* chunk_indices, int nts) {
  static_assert(BT == 64 && !SPLIT, "v10: BT 64, unsplit");
  prep_v7_body<T, BT, WP, SC, SPLIT, kPdl, true, true>(p, ws, chunk_indices, nts);
}

std::atomic<int64_t> g_v7_launches{0}, g_v8_launches{0}, g_v10_launches{0}, g_split_launches{0};

// Resident CTAs per SM of a kernel at `bytes` of dynamic shared memory (after the carveout / opt-in launch() sets).
int ctas_per_sm(const void* kernel, size_t bytes) {
  prefer_max_shared_carveout(kernel);
  if (bytes > 48 * 1024) ensure_dynamic_smem(kernel, bytes);
  int n = 0;
  LINATTN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, bytes));
  return n;
}

// The kernel instance of prep v7, v8 or v10 (V), and its dynamic shared memory at G value heads.
template <int V, class T, int BT, bool WP, bool SC, bool SPLIT = false, bool kPdl = false>
constexpr auto prep_kernel() {
  if constexpr (V == 10) return gdn_prep_v10_kernel<T, BT, WP, SC, SPLIT, kPdl>;
  else if constexpr (V == 8) return gdn_prep_v8_kernel<T, BT, WP, SC, SPLIT, kPdl>;
  else return gdn_prep_v7_kernel<T, BT, WP, SC, SPLIT, kPdl>;
}
template <int V, class T, int BT, bool WP>
size_t prep_bytes(int G) {
  return PrepSmemV7<T, BT, WP>::bytes(G) + (V == 10 ? size_t(G) * kAuxPerHead * sizeof(float) : 0);
}

template <class T, int BT, bool WP, bool SC, int V>
void launch_v7_t(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* ci, int64_t nt_cap,
                 cudaStream_t stream) {
  const int nts = p.cu_seqlens ? 0 : static_cast<int>((p.T_seq + BT - 1) / BT);
  const int G = p.HV / p.H;
  const GdnPrepSplit sw = gdn_prep_split_env();
  if (sw.value != 1) {  // opt-in: the value heads of a (chunk, q/k head) over S CTAs
    auto ks = prep_kernel<V == 10 ? 8 : V, T, BT, WP, SC, true>();  // v10 splits as v8
    const int S = gdn_prep_split_pick(sw, G, nt_cap * p.H, [&](int s) {
      static std::atomic<int> occ[9] = {};  // per instance and G / s <= 8: queried once
      const int gs = G / s;
      int n = gs <= 8 ? occ[gs].load() : 0;
      if (n == 0) n = ctas_per_sm(reinterpret_cast<const void*>(ks), PrepSmemV7<T, BT, WP>::bytes(gs));
      if (gs <= 8) occ[gs].store(n);
      return n;
    });
    if (S > 1) {
      g_split_launches.fetch_add(1);
      prefer_max_shared_carveout(reinterpret_cast<const void*>(ks));
      launch(ks, dim3(static_cast<unsigned>(nt_cap), p.H, S), dim3(kThreads), PrepSmemV7<T, BT, WP>::bytes(G / S),
             stream, p, ws, ci, nts);
      return;
    }
  }
  (V == 10 ? g_v10_launches : V == 8 ? g_v8_launches : g_v7_launches).fetch_add(1);  // unsplit launches only
  auto kernel = prep_kernel<V, T, BT, WP, SC>();
  if constexpr (SC) {
    if (pdl_enabled()) {
      auto kp = prep_kernel<V, T, BT, WP, SC, false, true>();
      prefer_max_shared_carveout(reinterpret_cast<const void*>(kp));
      launch_pdl(true, kp, dim3(static_cast<unsigned>(nt_cap), p.H), dim3(kThreads), prep_bytes<V, T, BT, WP>(G),
                 stream, p, ws, ci, nts);
      return;
    }
  }
  prefer_max_shared_carveout(reinterpret_cast<const void*>(kernel));
  launch(kernel, dim3(static_cast<unsigned>(nt_cap), p.H), dim3(kThreads), prep_bytes<V, T, BT, WP>(G),
         stream, p, ws, ci, nts);
}

template <class T, int BT, int V>
void launch_v7_bt(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* ci, int64_t nt_cap,
                  cudaStream_t stream) {
  if constexpr (BT == chain_sc::kTok) {
    if (ws.sc) {
      ws.P ? launch_v7_t<T, BT, true, true, V>(p, ws, ci, nt_cap, stream)
           : launch_v7_t<T, BT, false, true, V>(p, ws, ci, nt_cap, stream);
      return;
    }
  }
  ws.P ? launch_v7_t<T, BT, true, false, V>(p, ws, ci, nt_cap, stream)
       : launch_v7_t<T, BT, false, false, V>(p, ws, ci, nt_cap, stream);
}

}  // namespace

// v10 at BT 64 unsplit, else v8, unless LINATTN_CUDA_GDN_PREP names another prep ("v8", "v7", "v6", "v5", "v2"); v10
// the default since session 15 (gdn_prep_v10_env), v8 the default since the H200 A/B at
// ebf1299 (bitwise v7; 16/64 1x32768 1.248 / 1.258 -> 1.214 / 1.209 ms graph, 4096x8 1.306 -> 1.253 / 1.265, 16/32
// 1x32768 1.047 -> 1.014); v7 the default since 1ec4943 (16/64 1x32768 1.309 / 1.304 -> 1.292 / 1.295 ms graph).
std::string gdn_prep_switch() {
  std::string v = env_or("LINATTN_CUDA_GDN_PREP", "");
  choice_index("LINATTN_CUDA_GDN_PREP", v, {"v8", "v7", "v6", "v5", "v2", "v10"}, 0);
  return v;
}
bool gdn_prep_v7_env() {  // v8 and v10 run through launch_gdn_prep_v7 too
  const std::string v = gdn_prep_switch();
  return v.empty() || v == "v7" || v == "v8" || v == "v10";
}
bool gdn_prep_v10_env() {  // the default since session 15 at BT 64 unsplit (bitwise v8; H200 A/B at a438559: 16/64
  const std::string v = gdn_prep_switch();  // 1x32768 eager 1.181 / 1.184 -> 1.161 / 1.160 ms, graph 1.181 / 1.186 -> 1.172 / 1.171)
  return v.empty() || v == "v10";
}
bool gdn_prep_v10_runs(int G) {  // BT 64 unsplit: "v10" forces it; unset takes it where it keeps v8's CTAs per SM
  const std::string v = gdn_prep_switch();  // (v10's G * kAuxPerHead floats cost a CTA per SM at G = 12; same bits)
  if (v == "v10") return true;
  return v.empty() && gdn_prep_v10_ctas_per_sm(G) >= gdn_prep_v8_ctas_per_sm(G);
}
bool gdn_prep_v8_env() {  // the default since session 13 (bitwise v7; H200 A/B at ebf1299: 16/64 1x32768 -3.4%)
  const std::string v = gdn_prep_switch();
  return v.empty() || v == "v8";
}
int64_t gdn_prep_v7_launches() { return g_v7_launches.load(); }
int64_t gdn_prep_v8_launches() { return g_v8_launches.load(); }
int64_t gdn_prep_v10_launches() { return g_v10_launches.load(); }
int64_t gdn_prep_split_launches() { return g_split_launches.load(); }

int gdn_prep_v7_ctas_per_sm(int G) {  // as launch_v7_t and launch() set the carveout and the opt-in
  return ctas_per_sm(reinterpret_cast<const void*>(gdn_prep_v7_kernel<__nv_bfloat16, 64, true, false>),
                     PrepSmemV7<__nv_bfloat16, 64, true>::bytes(G));
}
constexpr int kOccCacheG = 64;  // occupancy queried once per value-head group size G <= 64 (host path of every call)
int gdn_prep_v8_ctas_per_sm(int G) {  // every default GDN forward asks (LINATTN_CUDA_PDL=auto): queried once per G
  static std::atomic<int> occ[kOccCacheG + 1] = {};
  int n = G >= 0 && G <= kOccCacheG ? occ[G].load() : 0;
  if (n == 0) n = ctas_per_sm(reinterpret_cast<const void*>(gdn_prep_v8_kernel<__nv_bfloat16, 64, true, false>),
                              PrepSmemV7<__nv_bfloat16, 64, true, true>::bytes(G));
  if (G >= 0 && G <= kOccCacheG) occ[G].store(n);
  return n;
}
int gdn_prep_v10_ctas_per_sm(int G) {  // as v8's: queried once per G (v10 has G * kAuxPerHead floats more)
  static std::atomic<int> occ[kOccCacheG + 1] = {};
  int n = G >= 0 && G <= kOccCacheG ? occ[G].load() : 0;
  if (n == 0) n = ctas_per_sm(reinterpret_cast<const void*>(gdn_prep_v10_kernel<__nv_bfloat16, 64, true, false>),
                              prep_bytes<10, __nv_bfloat16, 64, true>(G));
  if (G >= 0 && G <= kOccCacheG) occ[G].store(n);
  return n;
}
int gdn_prep_v7_split_ctas_per_sm(int Gs) {
  return ctas_per_sm(reinterpret_cast<const void*>(gdn_prep_v7_kernel<__nv_bfloat16, 64, true, false, true>),
                     PrepSmemV7<__nv_bfloat16, 64, true>::bytes(Gs));
}

GdnPrepSplit gdn_prep_split_env() {
  constexpr int kSplit[] = {1, 2, 4, 8, 0};  // 0: auto
  return {kSplit[env_choice("LINATTN_CUDA_GDN_PREP_SPLIT", {"1", "2", "4", "8", "auto"}, 0)]};
}

int gdn_prep_split_pick(GdnPrepSplit sw, int G, int64_t ctas, const std::function<int(int)>& ctas_per_sm_at,
                        int sm_count) {
  if (sw.value == 1 || G < 2) return 1;
  if (sw.value > 1) {  // forced: the largest divisor of G not above it
    int s = sw.value;
    while (s > 1 && G % s != 0) s /= 2;
    return s;
  }
  if (sm_count <= 0) sm_count = current_device_info().sm_count;
  for (int s = 8; s > 1; s /= 2)  // auto: the largest split whose grid fits in one wave of resident CTAs
    if (G % s == 0 && ctas * s <= int64_t(ctas_per_sm_at(s)) * sm_count) return s;
  return 1;
}

template <class T, int BT>
void launch_gdn_prep_v7(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices, int64_t nt_cap,
                        cudaStream_t stream) {
  if constexpr (BT == 64) {
    if (gdn_prep_v10_runs(p.HV / p.H)) {  // the default (and "v10"); BT 32, the split and a lost CTA per SM run v8
      launch_v7_bt<T, BT, 10>(p, ws, chunk_indices, nt_cap, stream);
      return;
    }
  }
  if (gdn_prep_v8_env() || gdn_prep_v10_env()) {
    launch_v7_bt<T, BT, 8>(p, ws, chunk_indices, nt_cap, stream);
    return;
  }
  launch_v7_bt<T, BT, 7>(p, ws, chunk_indices, nt_cap, stream);
}
template void launch_gdn_prep_v7<__nv_bfloat16, 64>(const GdnFwdParams&, const GdnChunkWs&, const int32_t*, int64_t,
                                                    cudaStream_t);
template void launch_gdn_prep_v7<__half, 64>(const GdnFwdParams&, const GdnChunkWs&, const int32_t*, int64_t,
                                             cudaStream_t);
template void launch_gdn_prep_v7<__nv_bfloat16, 32>(const GdnFwdParams&, const GdnChunkWs&, const int32_t*, int64_t,
                                                    cudaStream_t);
template void launch_gdn_prep_v7<__half, 32>(const GdnFwdParams&, const GdnChunkWs&, const int32_t*, int64_t,
                                             cudaStream_t);

}  // namespace linattn::cuda
