// Chunk-parallel prep of the chunked KDA forward (ALGORITHMS.md 3.1, per-channel gate), one CTA per
// (chunk, value head j): the per-channel gate varies per value head, so nothing is shared over GVA.
//   gam  [BT][K] chunk-local cumsum of the per-channel log-decay (gate in kernel applied), log2
//   Ab   (I + L)^-1 diag(beta), L_ij = beta_i sum_d k_id k_jd 2^(gam_id - gam_jd)      (i > j)
//   P    scale sum_d q_id k_jd 2^(gam_id - gam_jd)                                   (i >= j)
//   qg = q (.) 2^gam, kg = k (.) 2^gam, kgl = k (.) 2^(gam_L - gam), gl = 2^gam_L (fused operands)
//   Ai   (I + L)^-1 unscaled, only when ws.Ai is set (the chunked backward)
// (q, k l2-normalised when asked.) Stable intra-chunk step, 16-row sub-chunks: off-diagonal block
// (row block a > column block b) uses the reference row n = 16a: A_i = x_i 2^(gam_i - gam_n) and
// B_j = k_j 2^(gam_n - gam_j), both exponents <= 0 (gam decreases), one TF32 tensor-core product
// [A_q; A_k] B^T per (row block, column block), all blocks in one pass. The diagonal 16x16 blocks
// are summed per element with 2^(gam_i - gam_j), j <= i, as running products of per-token decays
// (diagonal_blocks_exact): no factor e^{+gam} is ever formed, so no term overflows and nothing is
// NaN at any gate value (-1000, lower_bound = -5, ...); safe_gate needs no other path.
// 512 threads = 16 warps; K = 128; ~206 KB shared memory at BT 64 (one CTA per SM). This is prep v3:
// the default at BT = 32 and with LINATTN_KDA_PREP=v3; at BT = 64 kda_fwd_prep_v6.cu runs otherwise
// (LINATTN_KDA_PREP=v7: kda_fwd_prep_v7.cu, =v8: kda_fwd_prep_v8.cu) (preps v4 / v5 were removed when
// v6 became the default: git history at 239ab91; perf-notes "Prep v4" / "Prep v5").
#include <cuda_runtime.h>

#include <string>

#include "core/env.h"
#include "core/util.h"
#include "cuda/common/launch.h"
#include "cuda/common/mma.cuh"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/gdn/gdn_kernels.h"
#include "cuda/gdn/gdn_prep_common.cuh"
#include "cuda/kda/kda_fwd_prep_v6.cuh"
#include "cuda/kda/kda_fwd_prep_v7.cuh"
#include "cuda/kda/kda_fwd_prep_v8.cuh"

namespace linattn::cuda {
namespace {

constexpr int kK = 128, kThreads = 512, kWarps = kThreads / 32, kLdK = kK + 8, kLdG = kK + 4;

template <class T, int BT>
struct KdaPrepSmem {
  static constexpr int kLd = BT + 4;
  T q[BT][kLdK];
  T k[BT][kLdK];
  float gam[BT][kLdG];
  static constexpr int kPairs = (BT / 16) * (BT / 16 - 1) / 2;  // off-diagonal blocks (a > b)
  static constexpr int kRowsA = 32 * (BT / 16 - 1), kRowsB = 16 * kPairs;
  union {
    float dec[BT][kLdG];  // first: per-token decays 2^(gam_t - gam_{t-1}) (<= 1) of the diagonal sums
    struct { float a[kRowsA][kLdG]; float b[kRowsB][kLdG]; } op;  // then the Gram operands of all
    struct { float L[BT][kLd]; float X[BT][kLd]; } sv;            // row blocks; then L and X
  } u;
  float kk[BT][kLd];  // sum_d k_id k_jd 2^(gam_id - gam_jd) rk_i rk_j (lower blocks)
  float qk[BT][kLd];  // sum_d q_id k_jd 2^(gam_id - gam_jd) rq_i rk_j
  float tscr[4][16][20];  // merge scratch of invert_unit_lower (<= BT/16 - 1 warps)
  float beta[BT], rq[BT], rk[BT];
};

// acc (16x16) += A[16 rows a0.., k0..k0+16) * B[16 rows n0.., k0..k0+16)^T; both fp32 [row][k].
__device__ __forceinline__ void mma16x16_nt_tf32(float (&acc)[2][4], const float (*A)[kLdG], int a0,
                                                 const float (*B)[kLdG], int n0, int k0, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
    const int kc = k0 + 8 * ks + t;
    uint32_t fa[4];
    fa[0] = to_tf32(A[a0 + g][kc]);
    fa[1] = to_tf32(A[a0 + g + 8][kc]);
    fa[2] = to_tf32(A[a0 + g][kc + 4]);
    fa[3] = to_tf32(A[a0 + g + 8][kc + 4]);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
      mma1688_tf32(acc[nt], fa, to_tf32(B[n0 + 8 * nt + g][kc]), to_tf32(B[n0 + 8 * nt + g][kc + 4]));
  }
}

// The 16x16 diagonal blocks, per element: qk_ij and kk_ij (j <= i in one sub-chunk) as
// sum_d x_id k_jd 2^(gam_id - gam_jd), every factor <= 1 at any gate value. Thread (block a, row
// pair (p, 15 - p), channel slice cs) sums its 2 x 4 channels {64 q + 4 cs ..} over the 17 pairs
// (16-p of row 15-p, then p+1 of row p: every thread does the same work); the 16 slices of a row
// pair are adjacent lanes and reduce by shuffles. 128 threads per diagonal block. The decay factor
// is a running product walking j down from i (as kda_bwd_chunk2 does): 2^(gam_i - gam_j) =
// prod_{j < t <= i} dec_t with dec_t = 2^(gam_t - gam_{t-1}) <= 1 from the gate itself, one FMUL
// per term instead of one exp2 of a cumsum difference (exact to ~15 ulp, underflows only to 0).
template <class T, int BT>
__device__ __forceinline__ void diagonal_blocks_exact(KdaPrepSmem<T, BT>& s, int tid) {
  using M = MmaType<T>;
  static_assert(BT / 16 * 128 <= kThreads, "128 threads per diagonal block");
  if (tid >= BT / 16 * 128) return;
  const int a = tid >> 7, pp = (tid >> 4) & 7, cs = tid & 15;
  const int iA = 16 * a + pp, iB = 16 * a + 15 - pp;
  float aq[17] = {}, ak[17] = {};
  auto load4 = [](const T* x, float (&v)[4]) {
    const uint2 w = *reinterpret_cast<const uint2*>(x);
    const T* h = reinterpret_cast<const T*>(&w);
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = M::to_float(h[e]);
  };
#pragma unroll
  for (int cq = 0; cq < kK / 64; ++cq) {
    const int cc = 64 * cq + 4 * cs;
    float qA[4], kA[4], qB[4], kB[4], ex[4] = {1.f, 1.f, 1.f, 1.f}, dprev[4] = {1.f, 1.f, 1.f, 1.f};
    load4(&s.q[iA][cc], qA);
    load4(&s.k[iA][cc], kA);
    load4(&s.q[iB][cc], qB);
    load4(&s.k[iB][cc], kB);
    // Slot idx > pp: row iB, j = 16a + idx - pp - 1 (idx 16: j = iB); slot idx <= pp: row iA,
    // j = 16a + idx (idx pp: j = iA). Walking idx down walks j down from i within each row.
#pragma unroll
    for (int idx = 16; idx >= 0; --idx) {
      const bool ra = idx <= pp, first = idx == 16 || idx == pp;
      const int jr = 16 * a + (ra ? idx : idx - pp - 1);
      const float4 dj = *reinterpret_cast<const float4*>(&s.u.dec[jr][cc]);
      float kj[4];
      load4(&s.k[jr][cc], kj);
      float sq = 0.f, sk = 0.f;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        ex[e] = first ? 1.f : ex[e] * dprev[e];
        const float t = ex[e] * kj[e];
        sq += (ra ? qA[e] : qB[e]) * t;
        sk += (ra ? kA[e] : kB[e]) * t;
      }
      dprev[0] = dj.x;
      dprev[1] = dj.y;
      dprev[2] = dj.z;
      dprev[3] = dj.w;
      aq[idx] += sq;
      ak[idx] += sk;
    }
  }
#pragma unroll
  for (int idx = 0; idx < 17; ++idx)
#pragma unroll
    for (int m = 1; m < 16; m <<= 1) {
      aq[idx] += __shfl_xor_sync(0xffffffffu, aq[idx], m);
      ak[idx] += __shfl_xor_sync(0xffffffffu, ak[idx], m);
    }
#pragma unroll
  for (int idx = 0; idx < 17; ++idx) {
    if ((idx & 15) != cs) continue;
    const bool ra = idx <= pp;
    const int i = ra ? iA : iB, jr = 16 * a + (ra ? idx : idx - pp - 1);
    s.qk[i][jr] = aq[idx] * s.rq[i] * s.rk[jr];
    s.kk[i][jr] = ak[idx] * s.rk[i] * s.rk[jr];
  }
}

template <class T, int BT>
__global__ void __launch_bounds__(kThreads) kda_prep_kernel(GdnFwdParams p, GdnChunkWs ws,
                                                            const int32_t* chunk_indices, int nts) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using Smem = KdaPrepSmem<T, BT>;
  using M = MmaType<T>;
  constexpr int RQ = BT / 4;
  auto& s = *reinterpret_cast<Smem*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t r = blockIdx.x;
  const int j = blockIdx.y, h = j / (p.HV / p.H);
  int64_t t0;
  int len;
  if (!chunk_span(p, chunk_indices, nts, r, BT, t0, len)) return;  // sentinel row / empty chunk: touch nothing
  load_qk_rows<kThreads, BT>(p, t0, h, len, s.q, s.k, tid);
  cp_async_commit();

  // Per-channel cumsum while the copies fly: thread (quarter, channel) scans rows [qr RQ, +RQ);
  // all its gate loads are issued first. Rows past the chunk end add nothing (their gates are
  // never read: they may be garbage).
  const int ch = tid & (kK - 1), qr = tid >> 7;
  {
    float gv[RQ], dtb, ea;
    load_gate_rows(p, t0, j, ch, qr * RQ, len, gv, dtb, ea);
    float acc = 0.f;
#pragma unroll
    for (int e = 0; e < RQ; ++e) {
      const int i = qr * RQ + e;
      const float v = i < len ? (p.gate_in_kernel ? kda_gate_value(p, gv[e], dtb, ea) : gv[e]) : 0.f;
      acc += v;
      s.gam[i][ch] = acc;
      s.u.dec[i][ch] = ex2_ftz(v * kLog2e);  // the token's own decay, <= 1 (1 past the chunk end)
    }
  }
  if (tid < BT) s.beta[tid] = tid < len ? gdn_beta(p, t0 + tid, j) : 0.f;
  __syncthreads();
  {
    float base = 0.f;
    for (int q2 = 0; q2 < qr; ++q2) base += s.gam[q2 * RQ + RQ - 1][ch];
    __syncthreads();
    for (int i = qr * RQ; i < qr * RQ + RQ; ++i) s.gam[i][ch] = (s.gam[i][ch] + base) * kLog2e;
  }
  cp_async_wait<0>();
  __syncthreads();

  for (int i = warp; i < 2 * BT; i += kWarps) {
    const T* row = i < BT ? &s.q[i][0] : &s.k[i - BT][0];
    const float ss = row_sumsq_warp<T, kK>(row, lane);
    if (lane == 0) (i < BT ? s.rq : s.rk)[i < BT ? i : i - BT] = p.l2norm ? rsqrtf(ss + 1e-6f) : 1.f;
  }
  __syncthreads();

  diagonal_blocks_exact<T, BT>(s, tid);
  __syncthreads();  // u.dec is dead from here: the Gram operands take its place

  // Off-diagonal blocks (row block a > column block nb, all pairs at once): reference row n = 16a,
  // A_i = x_i 2^(gam_i - gam_n) (rows of block a; q then k), B_j = k_j 2^(gam_n - gam_j) (j < n),
  // both exponents <= 0. op.a holds block a's [A_q; A_k] at rows 32 (a - 1); op.b holds block a's
  // B at rows 8 a (a - 1). One warp per (pair, q/k): one TF32 product A B^T of 16 x 16 x K.
  constexpr int kRowsA = Smem::kRowsA, kRowsB = Smem::kRowsB;
  for (int idx = tid; idx < (kRowsA / 2 + kRowsB) * kK; idx += kThreads) {
    const int row = idx / kK, cc = idx % kK;  // row is warp-uniform (kK = 4 x 32)
    if (row < kRowsA / 2) {  // token i of block a: its q row and its k row share the factor
      const int a = row / 16 + 1, rr = row % 16, i = 16 * a + rr;
      const float e = ex2_ftz(s.gam[i][cc] - s.gam[16 * a][cc]);
      s.u.op.a[32 * (a - 1) + rr][cc] = M::to_float(s.q[i][cc]) * s.rq[i] * e;
      s.u.op.a[32 * (a - 1) + 16 + rr][cc] = M::to_float(s.k[i][cc]) * s.rk[i] * e;
    } else {
      const int rb = row - kRowsA / 2;
      int a = 1;
      while (rb >= 8 * a * (a + 1)) ++a;
      const int jr = rb - 8 * a * (a - 1);
      s.u.op.b[rb][cc] = M::to_float(s.k[jr][cc]) * s.rk[jr] * ex2_ftz(s.gam[16 * a][cc] - s.gam[jr][cc]);
    }
  }
  __syncthreads();
  static_assert(2 * Smem::kPairs <= kWarps, "one warp per off-diagonal block and q/k");
  if (warp < 2 * Smem::kPairs) {
    const int mt = warp & 1, pr = warp >> 1, g = lane >> 2, t = lane & 3;
    int a = 1;
    while (pr >= a * (a + 1) / 2) ++a;
    const int nb = pr - a * (a - 1) / 2, n0 = 16 * a;
    float acc[2][4] = {};
#pragma unroll
    for (int kt = 0; kt < kK / 16; ++kt)
      mma16x16_nt_tf32(acc, s.u.op.a, 32 * (a - 1) + 16 * mt, s.u.op.b, 8 * a * (a - 1) + 16 * nb, 16 * kt, lane);
    float (*dst)[Smem::kLd] = mt == 0 ? s.qk : s.kk;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        dst[n0 + g + 8 * (e >> 1)][16 * nb + 8 * nt + 2 * t + (e & 1)] = acc[nt][e];
  }
  __syncthreads();

  constexpr int kSeg = 16, kSegs = BT / kSeg;
  T* Ab = static_cast<T*>(ws.Ab);
  T* P = static_cast<T*>(ws.P);
  for (int item = tid; item < BT * kSegs; item += kThreads) {
    const int i = item / kSegs, c0 = (item % kSegs) * kSeg;
    const float bi = s.beta[i];
    float pv[kSeg];
#pragma unroll
    for (int e = 0; e < kSeg; ++e) {
      const int jc = c0 + e;
      s.u.sv.L[i][jc] = (jc < i && i < len) ? bi * s.kk[i][jc] : 0.f;
      pv[e] = (jc <= i && i < len) ? p.scale * s.qk[i][jc] : 0.f;
      if ((i >> 4) < (c0 >> 4)) s.u.sv.X[i][jc] = 0.f;
    }
    if (i < len) store16<T>(P + (j * ws.T_cap + t0 + i) * BT + c0, pv);
  }
  __syncthreads();
  invert_unit_lower<BT, Smem::kLd>(s.u.sv.L, s.u.sv.X, s.tscr, tid);
  for (int item = tid; item < BT * kSegs; item += kThreads) {
    const int i = item / kSegs, c0 = (item % kSegs) * kSeg;
    if (i >= len) continue;
    float av[kSeg];
#pragma unroll
    for (int e = 0; e < kSeg; ++e) av[e] = s.u.sv.X[i][c0 + e] * s.beta[c0 + e];
    store16<T>(Ab + (j * ws.T_cap + t0 + i) * BT + c0, av);
    if (ws.Ai) {  // the backward's unscaled (I + L)^-1
#pragma unroll
      for (int e = 0; e < kSeg; ++e) av[e] = s.u.sv.X[i][c0 + e];
      store16<T>(static_cast<T*>(ws.Ai) + (j * ws.T_cap + t0 + i) * BT + c0, av);
    }
  }

  // Gated operands of the fused kernel; every exponent is <= 0.
  const int lr = len - 1;
  for (int item = tid; item < BT * (kK / 8); item += kThreads) {
    const int i = item / (kK / 8), c0 = (item % (kK / 8)) * 8;
    if (i >= len) continue;
    float vq[8], vk[8], vl[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float gi = s.gam[i][c0 + e], eg = ex2_ftz(gi), el = ex2_ftz(s.gam[lr][c0 + e] - gi);
      const float kx = M::to_float(s.k[i][c0 + e]) * s.rk[i];
      vq[e] = M::to_float(s.q[i][c0 + e]) * s.rq[i] * eg;
      vk[e] = kx * eg;
      vl[e] = kx * el;
    }
    const int64_t off = (int64_t(j) * ws.T_cap + t0 + i) * kK + c0;
    store8<T>(static_cast<T*>(ws.qg) + off, vq);
    store8<T>(static_cast<T*>(ws.kg) + off, vk);
    store8<T>(static_cast<T*>(ws.kgl) + off, vl);
  }
  if (tid < kK) ws.gl[(r * p.HV + j) * kK + tid] = exp2f(s.gam[lr][tid]);
}

template <class T, int BT>
void launch_t(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* ci, int64_t nt_cap,
              cudaStream_t stream) {
  const int nts = p.cu_seqlens ? 0 : static_cast<int>((p.T_seq + BT - 1) / BT);
  launch(kda_prep_kernel<T, BT>, dim3(static_cast<unsigned>(nt_cap), p.HV), dim3(kThreads),
         sizeof(KdaPrepSmem<T, BT>), stream, p, ws, ci, nts);
}

// v6 (kda_fwd_prep_v6.cu: fp16 Gram operands of normalised rows through reference rows, coalesced
// gated stores, half2 staging, ldmatrix fragments; H200 A/B in docs/perf-notes.md, "Prep v6") at BT 64;
// LINATTN_KDA_PREP=v3 selects this file's kernel, =v7 prep v7 (kda_fwd_prep_v7.cu: v6 with q / k read from
// global memory, three CTAs per SM; opt-in: 12% slower than v6 in the H200 A/B at d75c503), =v8 prep v8
// (kda_fwd_prep_v8.cu: v6 with fewer shared-memory passes per element; opt-in until its H200 A/B), =v8p
// v8 with an L2 prefetch of a later chunk's inputs, =v9 prep v9 (v8's body with a shorter gate phase:
// kda_fwd_prep_v9_parts.cuh, perf-notes "Prep v9"; opt-in until its H200 A/B) (read per
// call, as the fused kernel's switch, so a test can change it in a process).
int prep_version() {
  // Default v8 since the H200 A/B at 3d4b025 (bitwise equal to v6 on every tested case; KDA forward 32/32
  // 1x32768 2.283 -> 2.073 ms, 4096x8 1.954 -> 1.745, 1x4096 0.322 -> 0.295); "v6" keeps the previous prep.
  // 9: v8p, 10: v9.
  // v9 (10) is the default since the H200 A/B at accc55a (forward 32/32 1x32768 2.047 -> 1.973 / 1.984 ms,
  // 4096x8 1.736 -> 1.653; o within rel RMS 1e-3 of v8, fp64 bars on every case); "v8" keeps v8.
  // Any other value (the removed v4 / v5, a typo) is an error, no longer a silent v9.
  constexpr int kVersion[] = {10, 8, 9, 7, 6, 3};
  return kVersion[env_choice("LINATTN_KDA_PREP", {"v9", "v8", "v8p", "v7", "v6", "v3"}, 0)];
}

}  // namespace

void launch_kda_prep(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                     int64_t nt_cap, cudaStream_t stream) {
  LINATTN_CHECK(p.kda && p.K == kK, "kda prep: K must be ", kK, ", got ", p.K);
  LINATTN_CHECK(nt_cap < (int64_t(1) << 31), "kda prep: too many chunks: ", nt_cap);
  LINATTN_CHECK(ws.qg && ws.kg && ws.kgl && ws.gl && ws.Ab && ws.P, "kda prep: workspace not carved");
  const bool bf = p.io == ElemType::kBF16;
  LINATTN_CHECK(bf || p.io == ElemType::kF16, "kda prep: io dtype must be bf16 or fp16");
  const int version = p.BT == 64 ? prep_version() : 3;
  if (version == 6) {
    launch_kda_prep_v6(p, ws, chunk_indices, nt_cap, stream);
  } else if (version == 7) {
    launch_kda_prep_v7(p, ws, chunk_indices, nt_cap, stream);
  } else if (version == 8 || version == 9) {  // 9: v8p
    launch_kda_prep_v8(p, ws, chunk_indices, nt_cap, version == 9, stream);
  } else if (version == 10) {
    launch_kda_prep_v9(p, ws, chunk_indices, nt_cap, stream);
  } else if (p.BT == 64) {
    bf ? launch_t<__nv_bfloat16, 64>(p, ws, chunk_indices, nt_cap, stream)
       : launch_t<__half, 64>(p, ws, chunk_indices, nt_cap, stream);
  } else if (p.BT == 32) {
    bf ? launch_t<__nv_bfloat16, 32>(p, ws, chunk_indices, nt_cap, stream)
       : launch_t<__half, 32>(p, ws, chunk_indices, nt_cap, stream);
  } else {
    LINATTN_UNSUPPORTED("kda prep: chunk_size ", p.BT, " (supported: 32, 64)");
  }
}

}  // namespace linattn::cuda
