// Prep v4 of the chunked KDA forward, BT = 64, K = 128: the outputs of kda_fwd_prep.cu (gam-gated
// qg / kg / kgl / gl, P, Ab, Ai) with every intra-chunk Gram term on TF32 tensor cores.
// Binary hierarchy of reference rows: at level l (32, 16, 8, 4, 2, 1) a token i is "right" when bit
// l of i is set, else "left"; the reference of its 2l-block is n = (i & ~(2l - 1)) | l. Pairs
// (i right, j left, same block) are exactly the pairs whose highest differing bit is l, so every
// i > j belongs to one level. Right rows carry x_i 2^(gam_i - gam_n), left rows k_j 2^(gam_n - gam_j):
// both exponents <= 0 (gam is non-increasing), every factor <= 1, the product is the exact term
// and underflows only when the term is below 2^-126 (gates -1000, lower_bound -5: no Inf / NaN).
// The diagonal of P (i = j, factor 1) is a plain fp32 dot product. Operands are staged per 16-
// channel slice for all six levels at once (8 rounds), 40 m16n8 tiles (5 per warp) accumulate in
// registers. 256 threads, ~106 KB shared memory: two CTAs per SM.
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/common/mma.cuh"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/gdn/gdn_prep_common.cuh"
#include "cuda/kda/kda_fwd_prep_v4.cuh"

namespace linattn::cuda {
namespace {

constexpr int kK = 128, kBT = 64, kThreads = 256, kLdK = kK + 8, kLdG = kK + 4, kLd = kBT + 4;
constexpr int kLevels = 6, kSlice = 16, kRounds = kK / kSlice, kLdS = kLevels * kSlice + 4;
constexpr int kStRows = kBT + kBT / 2;  // Kop rows of all 64 tokens, then Qop rows of a level's 32 right tokens
constexpr int kTilesPerWarp = 5;        // 40 tiles: level 32: 16, level 16: 8, levels 8..1: 4 each

template <class T>
struct V4Smem {
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
    uint32_t st[kStRows][kLdS];  // TF32 operands of one channel slice, level lv in columns [16 lv, +16)
    float tscr[kBT / 16 - 1][16][20];
  } w;
  float beta[kBT], rq[kBT], rk[kBT], pd[kBT];  // pd: q_i . k_i (raw)
};

__device__ __forceinline__ float ex2_ftz(float x) {  // every x here is <= 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// kda_gate_value (gdn_common.cuh) with softplus(x) = max(x, 0) + ln2 lg2(1 + 2^(-|x| log2 e)) on
// the MUFU ex2 / lg2 units (~1e-7 absolute, ~6 instructions instead of expf + log1pf's ~35).
__device__ __forceinline__ float gate_value_fast(const GdnFwdParams& p, float raw, float dtb, float ea) {
  const float x = raw + dtb;
  if (p.has_lower_bound) return p.lower_bound / (1.f + expf(-ea * x));
  float l2;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(l2) : "f"(1.f + ex2_ftz(-fabsf(x) * kLog2e)));
  return -ea * (x > 20.f ? x : fmaxf(x, 0.f) + 0.6931471805599453f * l2);
}

// Index of right token i among the 32 right tokens of level l.
__device__ __forceinline__ int compact_right(int i, int l) { return ((i >> 1) & ~(l - 1)) | (i & (l - 1)); }

__device__ __forceinline__ int tile_level(int tt) { return tt < 16 ? 0 : tt < 24 ? 1 : 2 + ((tt - 24) >> 2); }

// Row r (0..15) of tile tt: token i, version (0: q, 1: k), block (a row and a column pair only
// when their blocks match). Levels 32 and 16: plain 16-row tiles; levels l <= 8: 8 / l blocks
// packed per tile, each [q of its l right tokens; k of them]. Shifts only (l = 2^(5 - lv)).
__device__ __forceinline__ void tile_row(int tt, int r, int& i, int& ver, int& blk) {
  if (tt < 16) {
    ver = tt >> 3;
    i = 32 + 16 * ((tt >> 2) & 1) + r;
    blk = 0;
  } else if (tt < 24) {
    const int u = tt - 16;
    ver = u >> 2;
    i = 32 * ((u >> 1) & 1) + 16 + r;
    blk = 0;
  } else {
    const int lv = tile_level(tt), lg = 5 - lv, l = 1 << lg, tau = (tt - 24) & 3;
    const int bb = (tau << (lv - 2)) + (r >> (lg + 1)), rr = r & (2 * l - 1);
    ver = rr >> lg;
    i = (bb << (lg + 1)) + l + (rr & (l - 1));
    blk = bb;
  }
}

// Column n (0..7) of tile tt: left token j and its block.
__device__ __forceinline__ void tile_col(int tt, int n, int& j, int& blk) {
  if (tt < 16) {
    j = 8 * (tt & 3) + n;
    blk = 0;
  } else if (tt < 24) {
    const int u = tt - 16;
    j = 32 * ((u >> 1) & 1) + 8 * (u & 1) + n;
    blk = 0;
  } else {
    const int lv = tile_level(tt), lg = 5 - lv, tau = (tt - 24) & 3;
    const int bb = (tau << (lv - 2)) + (n >> lg);
    j = (bb << (lg + 1)) + (n & ((1 << lg) - 1));
    blk = bb;
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

__device__ __forceinline__ void store8u(uint32_t* dst, const uint32_t (&v)[8]) {
  reinterpret_cast<uint4*>(dst)[0] = make_uint4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<uint4*>(dst)[1] = make_uint4(v[4], v[5], v[6], v[7]);
}

template <class T>
__global__ void __launch_bounds__(kThreads, 2) kda_prep_v4_kernel(GdnFwdParams p, GdnChunkWs ws,
                                                                  const int32_t* chunk_indices, int nts) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using M = MmaType<T>;
  auto& s = *reinterpret_cast<V4Smem<T>*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t r = blockIdx.x;
  const int j = blockIdx.y, h = j / (p.HV / p.H);
  int64_t t0;
  int len;
  if (!chunk_span(p, chunk_indices, nts, r, kBT, t0, len)) return;  // sentinel row / empty chunk: touch nothing
  load_qk_rows<kThreads, kBT>(p, t0, h, len, s.r.in.q, s.r.in.k, tid);
  cp_async_commit();

  // Per-channel cumsum while the copies fly: thread (half, channel) scans rows [32 half, +32), all
  // gate loads issued first. Rows past the chunk end add nothing and never read their gate.
  constexpr int RH = kBT / 2;
  const int ch = tid & (kK - 1), hr = tid >> 7;
  {
    float gv[RH], dtb, ea;
    load_gate_rows(p, t0, j, ch, hr * RH, len, gv, dtb, ea);
    float acc = 0.f;
#pragma unroll
    for (int e = 0; e < RH; ++e) {
      const int i = hr * RH + e;
      const float v = i < len ? (p.gate_in_kernel ? gate_value_fast(p, gv[e], dtb, ea) : gv[e]) : 0.f;
      acc += v;
      s.r.in.gam[i][ch] = acc;
    }
  }
  if (tid < kBT) s.beta[tid] = tid < len ? gdn_beta(p, t0 + tid, j) : 0.f;
  __syncthreads();
  {
    const float base = hr ? s.r.in.gam[RH - 1][ch] : 0.f;
    __syncthreads();
#pragma unroll 4
    for (int i = hr * RH; i < hr * RH + RH; ++i) s.r.in.gam[i][ch] = (s.r.in.gam[i][ch] + base) * kLog2e;
  }
  cp_async_wait<0>();
  __syncthreads();

  // l2-norm scales and the raw diagonal q_i . k_i: lane (part p, token 8 warp + lane % 8) sums
  // channels 32 m + 8 p (m < 4; the 8 lanes of a part hit 8 distinct bank quads), then 2 shuffles.
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
      s.rq[i] = p.l2norm ? rsqrtf(sq + 1e-6f) : 1.f;
      s.rk[i] = p.l2norm ? rsqrtf(sk + 1e-6f) : 1.f;
      s.pd[i] = d;
    }
  }
  __syncthreads();

  // Gated operands of the fused kernel (every exponent <= 0), before the Gram phase: q, k and gam
  // are overwritten by qk / kk afterwards.
  const int lr = len - 1;
  for (int item = tid; item < kBT * (kK / 8); item += kThreads) {
    const int i = item / (kK / 8), c0 = (item % (kK / 8)) * 8;
    if (i >= len) continue;
    float gi[8], gl8[8], xq[8], xk[8], vq[8], vk[8], vl[8];
    load8f(&s.r.in.gam[i][c0], gi);
    load8f(&s.r.in.gam[lr][c0], gl8);
    load8<T>(&s.r.in.q[i][c0], xq);
    load8<T>(&s.r.in.k[i][c0], xk);
    const float ri = s.rq[i], rki = s.rk[i];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float eg = ex2_ftz(gi[e]), el = ex2_ftz(gl8[e] - gi[e]), kx = xk[e] * rki;
      vq[e] = xq[e] * ri * eg;
      vk[e] = kx * eg;
      vl[e] = kx * el;
    }
    const int64_t off = (int64_t(j) * ws.T_cap + t0 + i) * kK + c0;
    store8<T>(static_cast<T*>(ws.qg) + off, vq);
    store8<T>(static_cast<T*>(ws.kg) + off, vk);
    store8<T>(static_cast<T*>(ws.kgl) + off, vl);
  }
  if (tid < kK) ws.gl[(r * p.HV + j) * kK + tid] = exp2f(s.r.in.gam[lr][tid]);

  // Gram phase. Staging thread: token si, 8-channel group scg of the slice, levels 3 sh .. 3 sh + 2.
  const int si = tid & (kBT - 1), scg = (tid >> 6) & 1, sh = tid >> 7;
  // MMA lane offsets into st (flattened) of the warp's tiles tt = warp + 8 u.
  const int g = lane >> 2, t = lane & 3;
  int offa0[kTilesPerWarp], offa1[kTilesPerWarp], offb[kTilesPerWarp];
#pragma unroll
  for (int u = 0; u < kTilesPerWarp; ++u) {
    const int tt = warp + 8 * u, lv = tile_level(tt), l = 32 >> lv;
    int i0, v0, b0, i1, v1, b1, jj, bj;
    tile_row(tt, g, i0, v0, b0);
    tile_row(tt, g + 8, i1, v1, b1);
    tile_col(tt, g, jj, bj);
    offa0[u] = (v0 ? i0 : kBT + compact_right(i0, l)) * kLdS + lv * kSlice + t;
    offa1[u] = (v1 ? i1 : kBT + compact_right(i1, l)) * kLdS + lv * kSlice + t;
    offb[u] = jj * kLdS + lv * kSlice + t;
  }
  float acc[kTilesPerWarp][4] = {};
  const uint32_t* stf = &s.w.st[0][0];
#pragma unroll 1
  for (int rd = 0; rd < kRounds; ++rd) {
    {
      const int c0 = kSlice * rd + 8 * scg;
      float gi[8], xq[8], xk[8];
      load8f(&s.r.in.gam[si][c0], gi);
      load8<T>(&s.r.in.q[si][c0], xq);
      load8<T>(&s.r.in.k[si][c0], xk);
#pragma unroll
      for (int lvi = 0; lvi < 3; ++lvi) {
        const int lv = 3 * sh + lvi, l = 32 >> lv;
        const bool right = (si & l) != 0;
        const int nref = (si & ~(2 * l - 1)) | l;
        float gn[8];
        load8f(&s.r.in.gam[nref][c0], gn);
        uint32_t kv[8], qv[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          // gam_i - gam_n for a right token, gam_n - gam_i for a left one: both are -|gam_i - gam_n|
          // (gam is non-increasing), one FADD with the sign folded into the MUFU operand.
          const float f = ex2_ftz(-fabsf(gi[e] - gn[e]));
          kv[e] = to_tf32(xk[e] * f);
          qv[e] = to_tf32(xq[e] * f);
        }
        store8u(&s.w.st[si][lv * kSlice + 8 * scg], kv);
        if (right) store8u(&s.w.st[kBT + compact_right(si, l)][lv * kSlice + 8 * scg], qv);
      }
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kTilesPerWarp; ++u)
#pragma unroll
      for (int ks = 0; ks < 2; ++ks) {
        const int o = 8 * ks;
        const uint32_t fa[4] = {stf[offa0[u] + o], stf[offa1[u] + o], stf[offa0[u] + o + 4], stf[offa1[u] + o + 4]};
        mma1688_tf32(acc[u], fa, stf[offb[u] + o], stf[offb[u] + o + 4]);
      }
    if (rd + 1 < kRounds) __syncthreads();
  }
  // q, k and gam are dead (their last reads precede the last round's barrier): qk / kk take their place.
#pragma unroll
  for (int u = 0; u < kTilesPerWarp; ++u) {
    const int tt = warp + 8 * u;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int i, ver, bi, jj, bj;
      tile_row(tt, g + 8 * (e >> 1), i, ver, bi);
      tile_col(tt, 2 * t + (e & 1), jj, bj);
      if (bi != bj) continue;
      if (ver == 0) s.r.out.qk[i][jj] = acc[u][e] * s.rq[i] * s.rk[jj];
      else s.r.out.kk[i][jj] = acc[u][e] * s.rk[i] * s.rk[jj];
    }
  }
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

template <class T>
void launch_t(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* ci, int64_t nt_cap,
              cudaStream_t stream) {
  static bool carveout_set = false;  // a hint (max shared memory split, for two CTAs per SM)
  if (!carveout_set) {
    cudaFuncSetAttribute(kda_prep_v4_kernel<T>, cudaFuncAttributePreferredSharedMemoryCarveout,
                         cudaSharedmemCarveoutMaxShared);
    carveout_set = true;
  }
  const int nts = p.cu_seqlens ? 0 : static_cast<int>((p.T_seq + kBT - 1) / kBT);
  launch(kda_prep_v4_kernel<T>, dim3(static_cast<unsigned>(nt_cap), p.HV), dim3(kThreads),
         sizeof(V4Smem<T>), stream, p, ws, ci, nts);
}

}  // namespace

void launch_kda_prep_v4(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                        int64_t nt_cap, cudaStream_t stream) {
  if (p.io == ElemType::kBF16) launch_t<__nv_bfloat16>(p, ws, chunk_indices, nt_cap, stream);
  else launch_t<__half>(p, ws, chunk_indices, nt_cap, stream);
}

}  // namespace linattn::cuda
