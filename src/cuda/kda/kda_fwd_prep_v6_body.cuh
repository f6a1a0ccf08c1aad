// Kernel body of KDA preps v6 and v7 (BT = 64, K = 128; see kda_fwd_prep_v6.cu for the method and
// the thread mapping of each phase). kQkGlobal = false is v6: q / k rows copied to shared memory once
// (cp.async) and read there by the norm pass and the staging loop. kQkGlobal = true is v7: the chunk's
// q / k rows are prefetched to L2 at the start, the norm pass reads them from global memory, and each
// staging round reads its 2 x 16 B per thread from global memory one round ahead, so shared memory
// holds only gam (then qk / kk), the staging area and the row scalars: 73.5 KB, three CTAs per SM.
// Everything else (gate phase, Gram rounds, L / P, inverse, stores, masking) is the same code.
#pragma once
#include "cuda/kda/kda_fwd_prep_v6_parts.cuh"

namespace linattn::cuda {
namespace {

template <class T, bool kQkGlobal>
__device__ __forceinline__ void kda_prep_body(const GdnFwdParams& p, const GdnChunkWs& ws,
                                              const int32_t* chunk_indices, int nts, unsigned char* smem_raw) {
  auto& s = *reinterpret_cast<PrepSmem<T, kQkGlobal>*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t r = blockIdx.x;
  const int j = blockIdx.y, h = j / (p.HV / p.H);
  int64_t t0;
  int len;
  if (!chunk_span(p, chunk_indices, nts, r, kBT, t0, len)) return;  // sentinel row / empty chunk: touch nothing
  const int64_t rs = int64_t(p.H) * kK;  // q / k row stride (elements)
  const T* const qc = static_cast<const T*>(p.q) + (t0 * p.H + h) * kK;  // row 0 of the chunk, q / k head h
  const T* const kc = static_cast<const T*>(p.k) + (t0 * p.H + h) * kK;
  if constexpr (kQkGlobal) {  // v7: warm L2 with the chunk's q / k rows (one 128-B line per thread)
    const int row = (tid >> 1) & (kBT - 1);
    if (row < len) prefetch_l2((tid < 128 ? qc : kc) + row * rs + 64 * (tid & 1));
  } else {  // q / k rows: thread (row group, 8-element column), rows tid / 16 + 16 it; rows past len zero-filled
    const int c8 = (tid & 15) * 8, row0 = tid >> 4;
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
  if constexpr (!kQkGlobal) cp_async_commit();

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
  if constexpr (!kQkGlobal) cp_async_wait<0>();
  __syncthreads();

  // l2-norm scales, staging normalisers and the raw diagonal q_i . k_i: lane (part, token 8 warp +
  // lane % 8) sums channels 32 m + 8 part (m < 4), then 2 shuffles.
  {
    const int i = 8 * warp + (lane & 7), pt = lane >> 3;
    float sq = 0.f, sk = 0.f, d = 0.f;
#pragma unroll
    for (int m = 0; m < kK / 32; ++m) {
      float xq[8], xk[8];
      if constexpr (kQkGlobal) {  // rows past len: zeros (as v6's zero-filled copies)
        const int64_t o = (i < len ? i : 0) * rs + 32 * m + 8 * pt;
        const uint4 wq = ldg16_or_zero(qc + o, i < len), wk = ldg16_or_zero(kc + o, i < len);
        unpack8_sel<T>(true, wq, wq, xq);
        unpack8_sel<T>(true, wk, wk, xk);
      } else {
        load8<T>(&s.r.in.q[i][32 * m + 8 * pt], xq);
        load8<T>(&s.r.in.k[i][32 * m + 8 * pt], xk);
      }
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
  // v7: raw q / k of this thread's two staging items of a round, loaded one round ahead (the loads of
  // round rd + 1 fly during round rd's barrier and mma); rows past len are zeros.
  uint4 nq0, nq1, nk0, nk1;
  const bool v0 = si0 < len, v1 = si0 + 32 < len;
  const T* const qt0 = qc + (v0 ? si0 : 0) * rs + 8 * cg;  // the items' rows, clamped to row 0 past len
  const T* const kt0 = kc + (v0 ? si0 : 0) * rs + 8 * cg;
  const T* const qt1 = qc + (v1 ? si0 + 32 : 0) * rs + 8 * cg;
  const T* const kt1 = kc + (v1 ? si0 + 32 : 0) * rs + 8 * cg;
  if constexpr (kQkGlobal) {
    nq0 = ldg16_or_zero(qt0, v0), nk0 = ldg16_or_zero(kt0, v0);
    nq1 = ldg16_or_zero(qt1, v1), nk1 = ldg16_or_zero(kt1, v1);
  }
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
      if constexpr (kQkGlobal) {
        unpack8_sel<T>(it == 0, nq0, nq1, xq);
        unpack8_sel<T>(it == 0, nk0, nk1, xk);
      } else {
        load8<T>(&s.r.in.q[si][c0], xq);
        load8<T>(&s.r.in.k[si][c0], xk);
      }
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
    if constexpr (kQkGlobal) {
      if (rd + 1 < kRounds) {
        const int o = kSlice * (rd + 1);
        nq0 = ldg16_or_zero(qt0 + o, v0), nk0 = ldg16_or_zero(kt0 + o, v0);
        nq1 = ldg16_or_zero(qt1 + o, v1), nk1 = ldg16_or_zero(kt1 + o, v1);
      }
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

}  // namespace
}  // namespace linattn::cuda
