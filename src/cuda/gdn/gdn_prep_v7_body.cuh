// GDN prep v7 / v8 / v9's kernel body, kernels and launchers (gdn_prep_v7.cu: v7 / v8; gdn_prep_v9.cu: v9, in its own
// translation unit: its instances in gdn_prep_v7.cu moved a few of v8's FMUL operand orders and load widths, a
// module-wide effect, and the default's SASS must stay v8's). Included by those two files only (anonymous namespace:
// each gets its own instances). The design notes are at the top of gdn_prep_v7.cu and in perf-notes "Prep v7" ..
// "Prep v9".
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "core/util.h"
#include "cuda/common/device_info.h"
#include "cuda/common/launch.h"
#include "cuda/common/pdl.cuh"
#include "cuda/gdn/gdn_prep_parts.cuh"
#include "cuda/gdn/gdn_prep_v7.h"

namespace linattn::cuda {

void note_gdn_prep_split_launch();  // gdn_prep_v7.cu: gdn_prep_split_launches() counts it

namespace {

// L, X: the lower 16x16 blocks (a >= b) at index a (a + 1) / 2 + b, rows of 20 floats (the TF32 fragment loads of
// the merges hit 32 distinct banks, as v6's 68-float rows did), blocks 324 floats apart; kk and qk: v6's packed kk
// layout (rows of 16 floats, blocks 260 apart: a quarter warp's float4 loads of two rows x four blocks on distinct
// bank groups).
// V8 (prep v8): kk / qk rows keep their 16 floats, the 4-float groups of row r XOR-swizzled by (r / 2) % 4, so
// lp_item's float4 loads (a quarter warp: 8 rows of one block, or rows x segments) hit distinct bank groups (v7: 4-way
// conflicts on the diagonal items, 16 wavefronts per load instead of 4); gram_products stores pairs (kPairs).
// V9 (prep v9, BT 64 only: kPipe): V8's layout; the merges need no scratch (merge_finish in place), so tscr holds the
// second buffer of the diagonal X blocks (value head j's X_aa at parity j % 2, Xd): 54.4 KB at G 4, 4 CTAs per SM
// up to G 8.
template <class T, int BT, bool WP, bool V8 = false, bool V9 = false>
struct PrepSmemV7 {
  static constexpr int kNB = BT / 16, kNBlk = kNB * (kNB + 1) / 2, kKkBlk = 16 * 16 + 4, kLs = 20;
  static constexpr int kBlk = 16 * kLs + 4;  // L / X block stride: a row's segments (b, b + 1) 4 banks apart
  static constexpr bool kPacked = true, kQkPacked = true;  // gram_products writes the lower blocks only
  static constexpr bool kV8 = V8, kPairs = V8;
  static constexpr bool kPipe = V9 && BT == 64;
  static constexpr int kXd2 = (kNB - 1) * kBlk + 16 * kLs;  // kPipe: the second diagonal buffer (blocks kBlk apart)
  static_assert(!V9 || V8, "v9 is v8's layout");
  static_assert(kPacked && kQkPacked, "the v7 loop reads kk / qk as packed lower blocks");
  union {
    struct { T q[BT][kLdK]; T k[BT][kLdK]; } in;  // until the Gram products
    struct {
      float L[kNBlk * kBlk];
      float X[kNBlk * kBlk];
      alignas(16) float qkb[WP ? kNBlk * kKkBlk : 4];
    } sv;
  } u;
  // per-chain 16x16 scratch of the merges (kPipe: the second buffer of the diagonal X blocks)
  std::conditional_t<kPipe, float[kXd2], float[kNB > 1 ? kNB - 1 : 1][16][20]> tscr;
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
  // Diagonal block X_aa of the value head at parity par (kPipe; otherwise always X_aa)
  __device__ __forceinline__ float (*Xd(int a, int par))[kLs] {
    if constexpr (kPipe)
      if (par) return reinterpret_cast<float (*)[kLs]>(&tscr[a * kBlk]);
    return reinterpret_cast<float (*)[kLs]>(&u.sv.X[blk(a, a) * kBlk]);
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
template <bool WP, bool Diag, class Smem>
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
    const float d = exp2f(gi - gv[e]);
    const float dp = (!Diag || jc <= i) ? d : 0.f;
    const float dl = live ? dp : 0.f;
    lv[e] = (!Diag || jc < i) ? bi * dl * kkv[e] : 0.f;
    if constexpr (WP) pv[e4 + e] = p.scale * dp * qkv[e];
  }
}

// Row i, segment b (b <= i / 16) of value head j: L into shared memory (rows >= len: v6's zeros), P stored (rows
// < len), by lp_group. v7: each group's L stored before the next group's loads (the compiler cannot tell L from kk /
// qk / gam, so those loads wait behind the store); V8: every load of the item first, then the four L stores.
template <class T, int BT, bool WP, bool Diag, class Smem>
__device__ __forceinline__ void lp_item(const GdnFwdParams& p, const GdnChunkWs& ws, Smem& s, const float* gam,
                                        const float* beta, int j, int64_t t0, int len, int i, int b) {
  const float gi = gam[i], bi = beta[i];
  const bool live = i < len;
  const int c0 = 16 * b;
  float* Lr = s.Lb(i >> 4, b)[i & 15];
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

// Row i, segment b <= i / 16 of value head j's Ab = X diag(beta) (and Ai = X) from the packed X (v9: XdView).
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
// v9: ab_item's view of the diagonal X blocks of the value head at parity par (Xb(a, a) = Xd(a, par)).
template <class Smem>
struct XdView {
  Smem& s;
  int par;
  __device__ __forceinline__ const float (*Xb(int a, int) const)[Smem::kLs] { return s.Xd(a, par); }
};

// The upper 8-column chunk (row i, columns c..c+7) of value head j's Ab (v6: its zeroed upper X times beta), Ai
// (zeros) and, for head jp (< 0: none), P (zeros: v6 stored scale 0 qk, zeros of either sign).
template <class T, int BT>
__device__ __forceinline__ void zero_item(const GdnChunkWs& ws, const float* beta, int j, int jp, int64_t t0, int len,
                                          int i, int c) {
  if (i >= len) return;
  if (j >= 0) {
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

// X_aB = -X_aa acc from the finished sum acc = sum_m L_am X_mB (merge_block_packed's second half).
// kIn (v9): acc staged in X_aB itself instead of the scratch tw (read back by the product before the warp barrier,
// then overwritten: the same values), X_aa the diagonal block at parity par (Xd).
template <bool kIn = false, class Smem>
__device__ __forceinline__ void merge_finish(Smem& s, float (*tw)[20], const float (&acc)[2][4], int a, int b,
                                             int lane, int par = 0) {
  constexpr int LS = Smem::kLs;
  const int g = lane >> 2, t = lane & 3;
  if constexpr (kIn) tw = s.Xb(a, b);
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    tw[g][8 * nt + 2 * t] = acc[nt][0];
    tw[g][8 * nt + 2 * t + 1] = acc[nt][1];
    tw[g + 8][8 * nt + 2 * t] = acc[nt][2];
    tw[g + 8][8 * nt + 2 * t + 1] = acc[nt][3];
  }
  __syncwarp();
  float res[2][4] = {};
  mma16x16_tf32<LS, 20>(res, kIn ? s.Xd(a, par) : s.Xb(a, a), 0, 0, tw, 0, 0, lane);
  if constexpr (kIn) __syncwarp();  // every lane's reads of the staged sum before X_aB is overwritten
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
// kIn (v9): merge_finish in place, the diagonal blocks at parity par.
template <int NB, int B, bool kIn = false, class Smem>
__device__ __forceinline__ void merge_column_packed(Smem& s, float (*tw)[20], int lane, int par = 0) {
  constexpr int LS = Smem::kLs, NA = NB - 1 - B;
  float acc[NA][2][4] = {};
#pragma unroll
  for (int k = 0; k < NA; ++k)
    mma16x16_tf32<LS, LS>(acc[k], s.Lb(B + 1 + k, B), 0, 0, kIn ? s.Xd(B, par) : s.Xb(B, B), 0, 0, lane);
#pragma unroll
  for (int k = 0; k < NA; ++k) {
    merge_finish<kIn>(s, tw, acc[k], B + 1 + k, B, lane, par);
    __syncwarp();  // X_(B+1+k)B visible to the warp's lanes; tw free again
#pragma unroll
    for (int k2 = k + 1; k2 < NA; ++k2)
      mma16x16_tf32<LS, LS>(acc[k2], s.Lb(B + 1 + k2, B + 1 + k), 0, 0, s.Xb(B + 1 + k, B), 0, 0, lane);
  }
}
template <int NB, int B = 0, bool kIn = false, class Smem>
__device__ __forceinline__ void merge_column_any(Smem& s, int chain, int lane, int par = 0) {
  if constexpr (B < NB - 1) {
    if (chain == B) {
      if constexpr (kIn) merge_column_packed<NB, B, true>(s, nullptr, lane, par);
      else merge_column_packed<NB, B>(s, s.tscr[B], lane);
    } else {
      merge_column_any<NB, B + 1, kIn>(s, chain, lane, par);
    }
  }
}

// v9: solve_diag_blocks' 16x16 diagonal inverse of one block (lane col of a half warp: column col), row by row with
// L's row read as float4s (36 LDS.128 per lane instead of 120 scalar LDS). x_r -= L_rc x_c for c = 0 .. r - 1 in
// order, as there (each x_r's FFMAs in the same order on the same operands): the same bits.
template <int LD>
__device__ __forceinline__ void solve_diag_rows(const float (*L)[LD], float (*X)[LD], int col) {
  static_assert(LD % 4 == 0, "16-byte rows");
  float x[16];
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    x[r] = r == col ? 1.f : 0.f;
#pragma unroll
    for (int c4 = 0; c4 < r; c4 += 4) {
      const float4 l4 = *reinterpret_cast<const float4*>(&L[r][c4]);
      const float lv[4] = {l4.x, l4.y, l4.z, l4.w};
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (c4 + e < r) x[r] -= lv[e] * x[c4 + e];
    }
  }
#pragma unroll
  for (int r = 0; r < 16; ++r) X[r][col] = x[r];
}

// v9, role 0: value head jd's diagonal L / P items and 16x16 solves (X_aa into the buffer at parity jd % 2).
template <class T, int BT, bool WP, class Smem>
__device__ __forceinline__ void diag_v9(const GdnFwdParams& p, const GdnChunkWs& ws, Smem& s, const float* gam_all,
                                        const float* beta_all, int j0, int jd, int64_t t0, int len, int lt, int a,
                                        int b, int i) {
  lp_item<T, BT, WP, true>(p, ws, s, gam_all + jd * BT, beta_all + jd * BT, j0 + jd, t0, len, i, b);
  __syncwarp();  // the diagonal block's 16 rows of L are this warp's
  solve_diag_rows<Smem::kLs>(s.Lb(a, a), s.Xd(a, jd & 1), lt & 15);
}

// SPLIT (LINATTN_CUDA_GDN_PREP_SPLIT, opt-in): grid (chunk rows, H, S); the CTA does the front half as unsplit
// and the loop below for its G / S value heads hv G' .. (prep_front), same expressions: the unsplit bits.
// kPdl (LINATTN_CUDA_PDL=1, the unsplit tma3 instances): launched with PDL; waits for the chunk / segment tables
// (and, for ws, the previous kernels' reads) before anything else.
// V8 (gdn_prep_v8_kernel): PrepSmemV7's V8 layout and stores, the same values.
// V9 (gdn_prep_v9_kernel, BT 64): V8 with value head j + 1's diagonal items and solves in head j's merge phase
// (kPipe below), the same values.
template <class T, int BT, bool WP, bool SC, bool SPLIT, bool kPdl, bool V8, bool V9 = false>
__device__ __forceinline__ void prep_v7_body(GdnFwdParams p, GdnChunkWs ws, const int32_t* chunk_indices, int nts) {
  pdl_wait<kPdl>();
  pdl_launch_dependents<kPdl>();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using Smem = PrepSmemV7<T, BT, WP, V8, V9>;
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
  if (!prep_front<T, BT, WP, WP, SC, true, SPLIT>(p, ws, chunk_indices, nts, s, gam_all, beta_all, t0, len)) return;

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
  // V9 (kPipe, BT 64): v8's critical paths per value head are phase 1's role 0 (the diagonal L / P items and 16x16
  // solves; roles 1 / 2 ~2.5x shorter) and phase 2's chain 0 (role 0 idle but for its diagonal Ab rows). L_aa is read
  // by the solves only (the merges read L's off-diagonal blocks), so role 0 forms head j + 1's diagonal items (L_aa
  // in place) and solves while the chains merge head j; X_aa alternates between two buffers (Xd, parity j % 2: head
  // j's merges and diagonal Ab rows read head j's). Phase 1 of head j: role 0 head j - 1's diagonal Ab rows (head 0:
  // its diagonal items and solves, as v8), roles 1 / 2 as v8; phase 2: the chains merge head j in place (no
  // scratch), role 0 head j + 1's diagonal items and solves. Every value by v8's expression in v8's order.
  constexpr bool kPipe = Smem::kPipe;
  for (int jj = 0; jj <= G; ++jj) {
    const int j = h * G + jj;
    const float* gam = gam_all + jj * BT;
    const float* beta = beta_all + jj * BT;
    if (role == 0) {
      if constexpr (kPipe) {
        if (jj > 0) ab_item<T, BT>(ws, XdView<Smem>{s, (jj - 1) & 1}, beta - BT, j - 1, t0, len, i, b);
        if (jj == G) break;
        if (jj == 0) diag_v9<T, BT, WP>(p, ws, s, gam_all, beta_all, h * G, 0, t0, len, lt, a, b, i);
      } else {
        if constexpr (!kAbLate)
          if (jj > 0) ab_item<T, BT>(ws, s, beta - BT, j - 1, t0, len, i, b);  // X_aa of head j - 1: this warp's rows
        if (jj == G) break;
        lp_item<T, BT, WP, true>(p, ws, s, gam, beta, j, t0, len, i, b);
        __syncwarp();  // the diagonal block's 16 rows of L are this warp's
        solve_diag_blocks<16, Smem::kLs>(s.Lb(a, a), s.Xb(a, a), lt & 15);
      }
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
    if constexpr (kPipe) {
      if (chain >= 0) merge_column_any<NB, 0, true>(s, chain, lane, jj & 1);
      else if (role == 0 && jj + 1 < G)
        diag_v9<T, BT, WP>(p, ws, s, gam_all, beta_all, h * G, jj + 1, t0, len, lt, a, b, i);
    } else if constexpr (V8) {
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
// Prep v9 (opt-in LINATTN_CUDA_GDN_PREP=v9; perf-notes "Prep v9"; BT 64 only): v8 with kPipe.
template <class T, int BT, bool WP, bool SC, bool SPLIT = false, bool kPdl = false>
__global__ void __launch_bounds__(kThreads, 4) gdn_prep_v9_kernel(GdnFwdParams p, GdnChunkWs ws,
                                                                  const int32_t* chunk_indices, int nts) {
  static_assert(BT == 64, "v9 pipelines role 0 (not a chain at BT 64 only)");
  prep_v7_body<T, BT, WP, SC, SPLIT, kPdl, true, true>(p, ws, chunk_indices, nts);
}

// Resident CTAs per SM of a kernel at `bytes` of dynamic shared memory (after the carveout / opt-in launch() sets).
int ctas_per_sm(const void* kernel, size_t bytes) {
  prefer_max_shared_carveout(kernel);
  if (bytes > 48 * 1024) ensure_dynamic_smem(kernel, bytes);
  int n = 0;
  LINATTN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, bytes));
  return n;
}

// The kernel instance of prep v7, v8 or v9 (Ver), and its shared layout.
template <int Ver, class T, int BT, bool WP, bool SC, bool SPLIT = false, bool kPdl = false>
constexpr auto prep_kernel() {
  if constexpr (Ver == 9) return gdn_prep_v9_kernel<T, BT, WP, SC, SPLIT, kPdl>;
  else if constexpr (Ver == 8) return gdn_prep_v8_kernel<T, BT, WP, SC, SPLIT, kPdl>;
  else return gdn_prep_v7_kernel<T, BT, WP, SC, SPLIT, kPdl>;
}
template <int Ver, class T, int BT, bool WP>
using PrepSmemOf = PrepSmemV7<T, BT, WP, Ver >= 8, Ver == 9>;

template <class T, int BT, bool WP, bool SC, int Ver>
void launch_v7_t(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* ci, int64_t nt_cap,
                 cudaStream_t stream) {
  using Sm = PrepSmemOf<Ver, T, BT, WP>;
  const int nts = p.cu_seqlens ? 0 : static_cast<int>((p.T_seq + BT - 1) / BT);
  const int G = p.HV / p.H;
  const GdnPrepSplit sw = gdn_prep_split_env();
  if (sw.value != 1) {  // opt-in: the value heads of a (chunk, q/k head) over S CTAs
    auto ks = prep_kernel<Ver, T, BT, WP, SC, true>();
    const int S = gdn_prep_split_pick(sw, G, nt_cap * p.H, [&](int s) {
      static std::atomic<int> occ[9] = {};  // per instance and G / s <= 8: queried once
      const int gs = G / s;
      int n = gs <= 8 ? occ[gs].load() : 0;
      if (n == 0) n = ctas_per_sm(reinterpret_cast<const void*>(ks), Sm::bytes(gs));
      if (gs <= 8) occ[gs].store(n);
      return n;
    });
    if (S > 1) {
      note_gdn_prep_split_launch();
      prefer_max_shared_carveout(reinterpret_cast<const void*>(ks));
      launch(ks, dim3(static_cast<unsigned>(nt_cap), p.H, S), dim3(kThreads), Sm::bytes(G / S),
             stream, p, ws, ci, nts);
      return;
    }
  }
  auto kernel = prep_kernel<Ver, T, BT, WP, SC>();
  if constexpr (SC) {
    if (pdl_enabled()) {
      auto kp = prep_kernel<Ver, T, BT, WP, SC, false, true>();
      prefer_max_shared_carveout(reinterpret_cast<const void*>(kp));
      launch_pdl(true, kp, dim3(static_cast<unsigned>(nt_cap), p.H), dim3(kThreads), Sm::bytes(G),
                 stream, p, ws, ci, nts);
      return;
    }
  }
  prefer_max_shared_carveout(reinterpret_cast<const void*>(kernel));
  launch(kernel, dim3(static_cast<unsigned>(nt_cap), p.H), dim3(kThreads), Sm::bytes(G),
         stream, p, ws, ci, nts);
}

template <class T, int BT, int Ver>
void launch_v7_bt(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* ci, int64_t nt_cap,
                  cudaStream_t stream) {
  if constexpr (BT == chain_sc::kTok) {
    if (ws.sc) {
      ws.P ? launch_v7_t<T, BT, true, true, Ver>(p, ws, ci, nt_cap, stream)
           : launch_v7_t<T, BT, false, true, Ver>(p, ws, ci, nt_cap, stream);
      return;
    }
  }
  ws.P ? launch_v7_t<T, BT, true, false, Ver>(p, ws, ci, nt_cap, stream)
       : launch_v7_t<T, BT, false, false, Ver>(p, ws, ci, nt_cap, stream);
}

}  // namespace
}  // namespace linattn::cuda
