// Device helpers of the wgmma GDN backward chunk kernel (gdn_bwd_chunk_wg.cu): tiles in the
// 128-byte-swizzled layout of wgmma.cuh (rows of 64 columns = 128 bytes, panels of 64 columns,
// each panel ROWS x 128 bytes, every tile 1024-byte aligned), their cp.async loaders and element
// accessor, and a warpgroup product m64 x N (N = 16 or 32) whose fp32 accumulator fragment is
// exactly the mma.sync one of gdn_bwd_chunk.cu (float acc[N / 8][4]: warp w of the warpgroup
// holds rows 16w + g (+8), columns 8 nt + 2q (+1)), so the epilogues carry over unchanged.
// Operands: K-major = stored [m or n][k]; MN-major = stored [k][m or n] (wgmma transpose).
#pragma once
#include <type_traits>

#include "cuda/common/wgmma.cuh"
#include "cuda/gdn/gdn_bwd_load.cuh"

namespace linattn::cuda {
namespace gdn_bwd_chunk_wg_detail {

// Byte offset of element (r, c) of a swizzled tile with ROWS rows.
template <int ROWS>
__device__ __forceinline__ uint32_t sw_off(int r, int c) {
  return uint32_t(c >> 6) * uint32_t(ROWS) * 128u + sw128_offset(uint32_t(r), uint32_t(c & 63));
}
template <class T, int ROWS>
__device__ __forceinline__ T* sw_at(uint8_t* tile, int r, int c) {
  return reinterpret_cast<T*>(tile + sw_off<ROWS>(r, c));
}
template <class T, int ROWS>
__device__ __forceinline__ const T* sw_at(const uint8_t* tile, int r, int c) {
  return reinterpret_cast<const T*>(tile + sw_off<ROWS>(r, c));
}

// dst rows [0, ROWS) x columns [0, COLS) <- src[row * stride + col] for row < len, zeros beyond.
template <class T, int ROWS, int COLS, int NT>
__device__ __forceinline__ void load_sw(uint8_t* dst, const T* src, int64_t stride, int len, int tid) {
  constexpr int P = COLS / 8;
#pragma unroll
  for (int idx = tid; idx < ROWS * P; idx += NT) {
    const int row = idx / P, ch = idx % P;
    const bool valid = row < len;
    cp_async16(dst + sw_off<ROWS>(row, ch * 8), src + (valid ? row * stride + ch * 8 : 0), valid);
  }
}

// d_o rows of value head j in the io type (converted on the fly when not direct).
template <class T, int ROWS, int COLS, int NT>
__device__ __forceinline__ void load_do_sw(uint8_t* dst, const GdnBwdParams& p, bool direct, int64_t t0, int len,
                                           int j, int tid) {
  const int64_t stride = int64_t(p.f.HV) * p.f.V;
  const int64_t base = (t0 * p.f.HV + j) * int64_t(p.f.V);
  if (direct) {
    load_sw<T, ROWS, COLS, NT>(dst, static_cast<const T*>(p.d_o) + base, stride, len, tid);
    return;
  }
  constexpr int P = COLS / 8;
  for (int idx = tid; idx < ROWS * P; idx += NT) {
    const int row = idx / P, ch = idx % P;
    uint32_t v[4] = {0u, 0u, 0u, 0u};
    if (row < len) {
      const int64_t i = base + row * stride + ch * 8;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        v[e] = MmaType<T>::pack(load_elem(p.d_o, p.do_type, i + 2 * e), load_elem(p.d_o, p.do_type, i + 2 * e + 1));
    }
    *reinterpret_cast<uint4*>(dst + sw_off<ROWS>(row, ch * 8)) = make_uint4(v[0], v[1], v[2], v[3]);
  }
}

// m64nNk16, both operands from descriptors, D += A B (N = 16: 8 registers, N = 32: 16).
#define LINATTN_WGB_SS(SHAPE, TY, REGS, A_, B_, ONE_, TA_, TB_, DOPS)                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " ONE_ ", 0;\nwgmma.mma_async.sync.aligned." SHAPE ".f32." TY \
               "." TY " " REGS ", " A_ ", " B_ ", p, 1, 1, " TA_ ", " TB_ ";\n}\n"                              \
               : DOPS                                                                                          \
               : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB))
#define LINATTN_WGB_R8 "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define LINATTN_WGB_R16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define LINATTN_WGB_D8 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define LINATTN_WGB_D16                                                                                       \
  LINATTN_WGB_D8, "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), \
      "+f"(d[15])

template <class T, int N, int TA, int TB>
__device__ __forceinline__ void wgmma_small(float (&d)[N / 2], uint64_t da, uint64_t db) {
  [[maybe_unused]] constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  static_assert(N == 16 || N == 32, "wgmma_small: N = 16 or 32");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (N == 16 && kBf16)
    LINATTN_WGB_SS("m64n16k16", "bf16", LINATTN_WGB_R8, "%8", "%9", "%10", "%11", "%12", LINATTN_WGB_D8);
  else if constexpr (N == 16)
    LINATTN_WGB_SS("m64n16k16", "f16", LINATTN_WGB_R8, "%8", "%9", "%10", "%11", "%12", LINATTN_WGB_D8);
  else if constexpr (kBf16)
    LINATTN_WGB_SS("m64n32k16", "bf16", LINATTN_WGB_R16, "%16", "%17", "%18", "%19", "%20", LINATTN_WGB_D16);
  else
    LINATTN_WGB_SS("m64n32k16", "f16", LINATTN_WGB_R16, "%16", "%17", "%18", "%19", "%20", LINATTN_WGB_D16);
#else
  __trap();
#endif
}

// Issues (no fence / commit / wait) acc += A[64 x KD] B[KD x n0 .. n0 + N) for one warpgroup.
// A: 64 x KD tile a (K-major: stored [64][KD]; MN-major: stored [KD][64]); B: tile b with b_rows
// rows (K-major: stored [n][KD], n < b_rows; MN-major: stored [KD][n], b_rows = KD). n0 % N == 0.
template <class T, int N, int KD, bool A_MN, bool B_MN, int B_ROWS>
__device__ __forceinline__ void wg_issue(float (&acc)[N / 8][4], const uint8_t* a, const uint8_t* b, int n0) {
  float(&d)[N / 2] = reinterpret_cast<float(&)[N / 2]>(acc);
  const uint32_t sa = smem_u32(a), sb = smem_u32(b);
#pragma unroll
  for (int kk = 0; kk < KD / 16; ++kk) {
    const uint32_t oa = A_MN ? uint32_t(kk) * 2048u : uint32_t(kk >> 2) * 64u * 128u + uint32_t(kk & 3) * 32u;
    const uint32_t ob = B_MN ? uint32_t(n0 >> 6) * uint32_t(B_ROWS) * 128u + uint32_t(kk) * 2048u + uint32_t(n0 & 63) * 2u
                             : uint32_t(kk >> 2) * uint32_t(B_ROWS) * 128u + uint32_t(n0) * 128u + uint32_t(kk & 3) * 32u;
    const uint64_t da = wgmma_desc_sw128(sa + oa, A_MN ? uint32_t(KD) * 128u : 16u, 1024u);
    const uint64_t db = wgmma_desc_sw128(sb + ob, B_MN ? uint32_t(B_ROWS) * 128u : 16u, 1024u);
    wgmma_small<T, N, A_MN ? 1 : 0, B_MN ? 1 : 0>(d, da, db);
  }
}

// wg2 (the instruction diet): the same products with each operand's descriptor built once per
// product and advanced by one 32-bit add per k16 step (the start-address field is the low 14 bits
// and shared addresses stay below 256 KB, so the add never carries into LBO / SBO): the descriptors
// equal wg_issue's bit for bit.
__device__ __forceinline__ uint64_t desc_add(uint64_t d, uint32_t bytes) {
  return (d & 0xFFFFFFFF00000000ull) | uint32_t(uint32_t(d) + (bytes >> 4));
}
template <class T, int N, int KD, bool A_MN, bool B_MN, int B_ROWS>
__device__ __forceinline__ void wg_issue2(float (&acc)[N / 8][4], const uint8_t* a, const uint8_t* b, int n0) {
  float(&d)[N / 2] = reinterpret_cast<float(&)[N / 2]>(acc);
  const uint32_t nb = B_MN ? uint32_t(n0 >> 6) * uint32_t(B_ROWS) * 128u + uint32_t(n0 & 63) * 2u : uint32_t(n0) * 128u;
  const uint64_t da0 = wgmma_desc_sw128(smem_u32(a), A_MN ? uint32_t(KD) * 128u : 16u, 1024u);
  const uint64_t db0 = wgmma_desc_sw128(smem_u32(b) + nb, B_MN ? uint32_t(B_ROWS) * 128u : 16u, 1024u);
#pragma unroll
  for (int kk = 0; kk < KD / 16; ++kk) {
    constexpr uint32_t kA = A_MN ? 2048u : 0u, kB = B_MN ? 2048u : 0u;
    const uint32_t oa = A_MN ? uint32_t(kk) * kA : uint32_t(kk >> 2) * 64u * 128u + uint32_t(kk & 3) * 32u;
    const uint32_t ob = B_MN ? uint32_t(kk) * kB : uint32_t(kk >> 2) * uint32_t(B_ROWS) * 128u + uint32_t(kk & 3) * 32u;
    wgmma_small<T, N, A_MN ? 1 : 0, B_MN ? 1 : 0>(d, desc_add(da0, oa), desc_add(db0, ob));
  }
}
template <bool V2, class T, int N, int KD, bool A_MN, bool B_MN, int B_ROWS>
__device__ __forceinline__ void wg_issue_v(float (&acc)[N / 8][4], const uint8_t* a, const uint8_t* b, int n0) {
  if constexpr (V2) wg_issue2<T, N, KD, A_MN, B_MN, B_ROWS>(acc, a, b, n0);
  else wg_issue<T, N, KD, A_MN, B_MN, B_ROWS>(acc, a, b, n0);
}

template <int NTW>
__device__ __forceinline__ void wg_sync(float (&acc)[NTW][4]) {
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_fence_operands(reinterpret_cast<float(&)[NTW * 4]>(acc));
}

// acc += A B, complete on return (see wg_issue).
template <class T, int N, int KD, bool A_MN, bool B_MN, int B_ROWS>
__device__ __forceinline__ void wg_tile(float (&acc)[N / 8][4], const uint8_t* a, const uint8_t* b, int n0) {
  wgmma_fence_operands(reinterpret_cast<float(&)[N / 2]>(acc));
  wgmma_fence();
  wg_issue<T, N, KD, A_MN, B_MN, B_ROWS>(acc, a, b, n0);
  wg_sync(acc);
}

// wg_tile with wg_issue2 when V2.
template <bool V2, class T, int N, int KD, bool A_MN, bool B_MN, int B_ROWS>
__device__ __forceinline__ void wg_tile_v(float (&acc)[N / 8][4], const uint8_t* a, const uint8_t* b, int n0) {
  wgmma_fence_operands(reinterpret_cast<float(&)[N / 2]>(acc));
  wgmma_fence();
  wg_issue_v<V2, T, N, KD, A_MN, B_MN, B_ROWS>(acc, a, b, n0);
  wg_sync(acc);
}

// wg2: the swizzled byte offset of accumulator element (r0 + 8 hf, cbase + 8 nt + 2 tq) of a tile
// with ROWS rows (r0 = 16 wm + g, cbase a multiple of 8 NTW) is frag_base(..) + 1024 hf with bits
// 4-5 XORed by nt: every row a thread touches has row & 7 = g and the chunk index of column
// cbase + 8 nt is (cbase / 8 & 7) | nt, so (chunk ^ g) = ((cbase / 8 & 7) ^ g) ^ nt.
template <int ROWS>
__device__ __forceinline__ uint32_t frag_base(int cbase, int wm, int g, int tq) {
  return uint32_t(cbase >> 6) * uint32_t(ROWS) * 128u + uint32_t(wm) * 2048u + uint32_t(g) * 128u +
         (uint32_t(((cbase >> 3) & 7) ^ g) << 4) + uint32_t(tq) * 4u;
}
__device__ __forceinline__ uint32_t frag_off(uint32_t fb, int hf, int nt) { return (fb ^ (uint32_t(nt) << 4)) + 1024u * hf; }

// rowdot_sw with the offsets of frag_base.
template <class T, int NTW>
__device__ __forceinline__ void rowdot_fb(float (&part)[2], const float (&x)[NTW][4], const uint8_t* m, uint32_t fb) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
#pragma unroll
    for (int nt = 0; nt < NTW; ++nt) {
      const float2 mv = ld_pair(reinterpret_cast<const T*>(m + frag_off(fb, hf, nt)));
      part[hf] += x[nt][2 * hf] * mv.x + x[nt][2 * hf + 1] * mv.y;
    }
}

// load_sw with the per-thread offsets hoisted: NT / P is a multiple of 8 rows, so every piece a
// thread copies has the same column chunk and row & 7, hence one swizzled offset plus u * NT / P rows.
template <class T, int ROWS, int COLS, int NT>
__device__ __forceinline__ void load_sw2(uint8_t* dst, const T* src, int64_t stride, int len, int tid) {
  constexpr int P = COLS / 8, RS = NT / P;
  static_assert(RS % 8 == 0 && (ROWS * P) % NT == 0, "load_sw2: whole passes of 8-row multiples");
  const int row0 = tid / P, ch = tid % P;
  uint8_t* d = dst + sw_off<ROWS>(row0, ch * 8);
  const T* s = src + row0 * stride + ch * 8;
#pragma unroll
  for (int u = 0; u < ROWS * P / NT; ++u) {
    const bool valid = row0 + u * RS < len;
    cp_async16(d + u * RS * 128, valid ? s + u * RS * stride : src, valid);
  }
}

// part[hf] += sum over this thread's columns of x * m (m: a swizzled tile with ROWS rows).
template <class T, int ROWS, int NTW>
__device__ __forceinline__ void rowdot_sw(float (&part)[2], const float (&x)[NTW][4], const uint8_t* m, int r0,
                                          int cbase, int tq) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
#pragma unroll
    for (int nt = 0; nt < NTW; ++nt) {
      const float2 mv = ld_pair(sw_at<T, ROWS>(m, r0 + 8 * hf, cbase + nt * 8 + 2 * tq));
      part[hf] += x[nt][2 * hf] * mv.x + x[nt][2 * hf + 1] * mv.y;
    }
}

template <bool V2, class T, int NTW>
__device__ __forceinline__ void rowdot_v(float (&part)[2], const float (&x)[NTW][4], const uint8_t* m, int r0, int cbase,
                                         int tq, uint32_t fb) {
  if constexpr (V2) rowdot_fb<T, NTW>(part, x, m, fb);
  else rowdot_sw<T, 64, NTW>(part, x, m, r0, cbase, tq);
}

// wg11: the two elements of a packed 16-bit pair as floats (ld_pair's values bit for bit; bf16 by a shift and a
// mask, the exact widening, instead of PRMT + shift for the high half).
template <class T>
__device__ __forceinline__ float2 pair_f2(uint32_t w) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  else return ld_pair(reinterpret_cast<const T*>(&w));
}

// wg11: a thread's fragment words of a swizzled tile (the pairs rowdot_fb reads), loaded ahead of a wgmma wait.
template <int NTW>
__device__ __forceinline__ void frag_words(uint32_t (&wd)[2][NTW], const uint8_t* m, uint32_t fb) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
#pragma unroll
    for (int nt = 0; nt < NTW; ++nt) wd[hf][nt] = *reinterpret_cast<const uint32_t*>(m + frag_off(fb, hf, nt));
}

// wg11: rowdot_fb on preloaded fragment words (same operations, same order).
template <class T, int NTW>
__device__ __forceinline__ void rowdot_words(float (&part)[2], const float (&x)[NTW][4], const uint32_t (&wd)[2][NTW]) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
#pragma unroll
    for (int nt = 0; nt < NTW; ++nt) {
      const float2 mv = pair_f2<T>(wd[hf][nt]);
      part[hf] += x[nt][2 * hf] * mv.x + x[nt][2 * hf + 1] * mv.y;
    }
}

// Dot product of 8 packed 16-bit pairs (W, wg11: the elements widened by pair_f2, the same values).
template <class T, bool W = false>
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
  const uint32_t av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
  float s = 0.f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    float2 x, y;
    if constexpr (W) {
      x = pair_f2<T>(av[e]);
      y = pair_f2<T>(bv[e]);
    } else {
      x = ld_pair(reinterpret_cast<const T*>(&av[e]));
      y = ld_pair(reinterpret_cast<const T*>(&bv[e]));
    }
    s += x.x * y.x + x.y * y.y;
  }
  return s;
}

}  // namespace gdn_bwd_chunk_wg_detail
}  // namespace linattn::cuda
