// Kernel body of KDA prep v8 (kda_fwd_prep_v8.cu), BT = 64, K = 128: prep v6's body
// (kda_fwd_prep_v6_body.cuh; method, layouts and the Gram tile slots in kda_fwd_prep_v6.cu /
// kda_fwd_prep_v6_parts.cuh, whose helpers it uses) with fewer shared-memory passes per element, from
// the per-instruction ncu data of v6 (h200-ncu-deep-20261201-3d3a678; perf-notes "Prep v8"):
// - Staging: a thread stages one (token, 8 channels) item per round through all six levels and writes
//   all three fused operands qg / kg / kgl of it (v6: two items through three levels each, so every
//   item's gam / q / k loads, bf16 unpacking and fp16 normalisation ran twice, once per level half).
//   Warp w takes tokens 8 w .. 8 w + 7 (lane % 8) x the round's 32 channels (8 (lane / 8) ..): the
//   same conflict-free shared accesses and 8-row x 64-B global stores as v6. The row scalars are
//   loaded once, not per round.
// - L / P and Ab / Ai passes: float4 shared accesses, thread (row, 16-column segment) mapped so a
//   quarter-warp covers 4 rows x 2 segments = 8 distinct bank quads (v6: scalar accesses, 2-way
//   conflicts: 1.5k of v6's 3.1k excess wavefronts per CTA).
// - Staging rows permuted (kda_fwd_prep_v8_parts.cuh) so no ldmatrix matrix has a bank conflict
//   (v6: 0.5k excess wavefronts per CTA at the small levels).
// - Accumulators to qk / kk: float2 column pairs, and no multiplies by the unit row scales with l2norm.
// - Gate cumsum: the row quarters keep their raw running sums in registers over the barrier and store
//   gam once (v6 stored them raw, then reloaded and rewrote three quarters).
// - kPf (LINATTN_KDA_PREP=v8p): L2 prefetch of the inputs (g, q, k rows) of the CTA pf ahead in
//   dispatch order (pf = the SM count: about half a CTA lifetime ahead; across value heads),
//   so the CTA that runs it later finds them in L2 instead of DRAM (v6: 10% of the stall samples are
//   long scoreboard on the gate / table loads at the CTA start).
// Every product is formed from the same operands in the same order as v6: the outputs are expected to
// be bitwise equal to v6's (the tests print it).
#pragma once
#include "cuda/kda/kda_fwd_prep_v8_parts.cuh"
#include "cuda/kda/kda_fwd_prep_v9_parts.cuh"

namespace linattn::cuda {
namespace {

// Accumulators of tile slot U to qk (q rows) / kk (k rows), the values of v6's slot_store: with
// unit (l2norm: every row scale is 1) the scale loads and multiplies by 1 are skipped (exact), and the
// column pairs (2 t, 2 t + 1) of a row half go out as one float2 when they share their block, which
// holds on every slot but the level-1 one (slot 4 of warps 4..7: one column per block).
template <int U, class S>
__device__ __forceinline__ void slot_store_v8(S& s, int w, int g, int t, const float (&acc)[4], bool unit) {
  if (U < 4 || (w >> 2) == 0) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      int i, ver, bi, jj, bj;
      slot_row<U>(w, g + 8 * hh, i, ver, bi);
      slot_col<U>(w, 2 * t, jj, bj);
      if (bi != bj) continue;
      float* dst = ver ? &s.r.out.kk[i][jj] : &s.r.out.qk[i][jj];
      float2 v = make_float2(acc[2 * hh], acc[2 * hh + 1]);
      if (!unit) {
        const float ui = ver ? s.uk[i] : s.uq[i];
        v = make_float2(acc[2 * hh] * ui * s.uk[jj], acc[2 * hh + 1] * ui * s.uk[jj + 1]);
      }
      *reinterpret_cast<float2*>(dst) = v;
    }
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int i, ver, bi, jj, bj;
      slot_row<U>(w, g + 8 * (e >> 1), i, ver, bi);
      slot_col<U>(w, 2 * t + (e & 1), jj, bj);
      if (bi != bj) continue;
      float* dst = ver ? &s.r.out.kk[i][jj] : &s.r.out.qk[i][jj];
      *dst = unit ? acc[e] : acc[e] * (ver ? s.uk[i] : s.uq[i]) * s.uk[jj];
    }
  }
}

// kV9 (LINATTN_KDA_PREP=v9; perf-notes "Prep v9"): the same body with a shorter gate phase
// (kda_fwd_prep_v9_parts.cuh): gate form constants loaded before the chunk table chain, beta's load
// issued with the gate loads (v8: after the gate form, by 2 warps while 6 wait at the barrier), the gate
// loads issued before the q / k copies, the gate formed in log2 units (no rescale of the cumsum), and
// the q / k copies waited for before the first barrier, so the gam fix-up and the norm pass share one
// phase (one barrier fewer). Only the gate arithmetic differs from v8 (rounding level).
template <class T, bool kPf, bool kV9>
__device__ __forceinline__ void kda_prep_v8_body(const GdnFwdParams& p, const GdnChunkWs& ws,
                                                 const int32_t* chunk_indices, int nts, int pf,
                                                 unsigned char* smem_raw) {
  auto& s = *reinterpret_cast<PrepSmem<T, false>*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t r = blockIdx.x;
  const int j = blockIdx.y, h = j / (p.HV / p.H);
  constexpr int RQ = kBT / 4;
  const int cp = tid & (kK / 2 - 1), qr = tid >> 6;
  GateL2In gin{};
  if constexpr (kV9) gin = gate_l2_in(p, j, 2 * cp);
  int64_t t0;
  int len;
  if (!chunk_span(p, chunk_indices, nts, r, kBT, t0, len)) return;  // sentinel row / empty chunk: touch nothing
  const int64_t rs = int64_t(p.H) * kK;  // q / k row stride (elements)
  float ga[RQ], gb[RQ], braw = 0.f;
  if constexpr (kV9) {
    gate_pair_raw<RQ>(p, t0, j, 2 * cp, qr * RQ, len, ga, gb);
    if (tid < len) braw = load_elem(p.beta, p.beta_type, (t0 + tid) * p.HV + j);  // tid < len <= kBT
  }
  // v8p: the span of the CTA pf ahead in dispatch order (linear id r + gridDim.x j; the next value head's
  // rows after the last row of this one). Its table loads fly with this CTA's gate loads; the prefetches
  // are issued after the first barrier.
  int64_t pt0 = 0;
  int plen = 0, pj = 0;
  if constexpr (kPf) {
    const int64_t lin = r + int64_t(gridDim.x) * j + pf;
    pj = static_cast<int>(lin / gridDim.x);
    if (pj < p.HV && !chunk_span(p, chunk_indices, nts, lin % gridDim.x, kBT, pt0, plen)) plen = 0;
  }
  {  // q / k rows: thread (row group, 8-element column), rows tid / 16 + 16 it; rows past len zero-filled
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
  cp_async_commit();

  // Per-channel cumsum while the copies fly: thread (quarter, channel pair) scans rows [16 quarter,
  // +16) of channels 2 cp, 2 cp + 1 in registers; quarters 0..2 publish their raw totals (gtot, in the
  // staging area, unused until the Gram phase); after the barrier every quarter adds the totals of the
  // quarters before it and stores its 16 rows of gam (log2 units) once.
  if constexpr (kV9) gate_form_l2<RQ>(p, gin, ga, gb);  // log2 units already
  else gate_pairs<RQ>(p, t0, j, 2 * cp, qr * RQ, len, ga, gb);
  {
    float a0 = 0.f, a1 = 0.f;
#pragma unroll
    for (int e = 0; e < RQ; ++e) {
      a0 += ga[e];
      a1 += gb[e];
      ga[e] = a0;
      gb[e] = a1;
    }
    if (qr < 3) *reinterpret_cast<float2*>(&s.w.gtot[qr][2 * cp]) = make_float2(a0, a1);
  }
  if constexpr (kV9) {
    if (tid < kBT) s.beta[tid] = tid < len ? beta_form(p, braw) : 0.f;
    cp_async_wait<0>();  // q / k visible after this barrier: the norm pass joins the gam fix-up's phase
  } else {
    if (tid < kBT) s.beta[tid] = tid < len ? gdn_beta(p, t0 + tid, j) : 0.f;
  }
  __syncthreads();
  if constexpr (kPf) {  // one 128-B line of g and one of q / k per thread, rows of the CTA pf ahead
    const int row = tid >> 2, part = tid & 3;
    if (row < plen) {
      const int64_t t = pt0 + row;
      const int gbytes = p.g_type == ElemType::kF32 ? 4 * kK : 2 * kK, ph = pj / (p.HV / p.H);
      if (128 * part < gbytes)
        prefetch_l2(static_cast<const char*>(p.g) + (t * p.HV + pj) * int64_t(gbytes) + 128 * part);
      const T* x = static_cast<const T*>(part < 2 ? p.q : p.k) + (t * p.H + ph) * kK;
      prefetch_l2(reinterpret_cast<const char*>(x) + 128 * (part & 1));
    }
  }
  {
    float b0 = 0.f, b1 = 0.f;
    for (int q2 = 0; q2 < qr; ++q2) {
      const float2 tq = *reinterpret_cast<const float2*>(&s.w.gtot[q2][2 * cp]);
      b0 += tq.x, b1 += tq.y;
    }
    if constexpr (kV9) {  // log2 units already (b = 0 in quarter 0: a + 0 = a)
#pragma unroll
      for (int e = 0; e < RQ; ++e)
        *reinterpret_cast<float2*>(&s.r.in.gam[qr * RQ + e][2 * cp]) = make_float2(ga[e] + b0, gb[e] + b1);
    } else {
      b0 *= kLog2e, b1 *= kLog2e;
      // Quarter 0 as v6 (a kLog2e), the others fma(a, kLog2e, b): the values v6 stored.
#pragma unroll
      for (int e = 0; e < RQ; ++e)
        *reinterpret_cast<float2*>(&s.r.in.gam[qr * RQ + e][2 * cp]) =
            qr ? make_float2(fmaf(ga[e], kLog2e, b0), fmaf(gb[e], kLog2e, b1))
               : make_float2(ga[e] * kLog2e, gb[e] * kLog2e);
    }
  }
  if constexpr (!kV9) {
    cp_async_wait<0>();
    __syncthreads();
  }

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
  if constexpr (!kV9) {
    if (tid < kK) ws.gl[(r * p.HV + j) * kK + tid] = exp2f(s.r.in.gam[lr][tid]);
  }
  __syncthreads();
  if constexpr (kV9) {  // gam of row lr was fixed up by other threads in the phase before this barrier
    if (tid < kK) ws.gl[(r * p.HV + j) * kK + tid] = exp2f(s.r.in.gam[lr][tid]);
  }

  // Gram phase. Staging warp w: tokens 8 w + lane % 8 x the round's 32 channels (group cg = lane / 8:
  // channels 32 rd + 8 cg), all six levels; it also writes the fused kernel's operands qg / kg / kgl
  // of its (token, 8 channels), so each store instruction covers 8 rows x 64 contiguous bytes.
  const int cg = lane >> 3, si = 8 * warp + (lane & 7);
  const int g = lane >> 2, t = lane & 3;
  uint32_t offa[kTilesPerWarp], offb[kTilesPerWarp];  // ldmatrix byte addresses in shared memory
  slot_ldsm_v8<0>(warp, lane, offa[0], offb[0]);
  slot_ldsm_v8<1>(warp, lane, offa[1], offb[1]);
  slot_ldsm_v8<2>(warp, lane, offa[2], offb[2]);
  slot_ldsm_v8<3>(warp, lane, offa[3], offb[3]);
  slot_ldsm_v8<4>(warp, lane, offa[4], offb[4]);
  {
    const uint32_t stb = smem_u32(&s.w.st[0][0]);
#pragma unroll
    for (int u = 0; u < kTilesPerWarp; ++u) offa[u] += stb, offb[u] += stb;
  }
  float acc[kTilesPerWarp][4] = {};
  const bool vi = si < len;
  const float rqi = s.rq[si], rki = s.rk[si], sqi = s.sq[si], ski = s.sk[si];
  const int64_t orow = (int64_t(j) * ws.T_cap + t0 + si) * kK + 8 * cg;
  T* const qgo = static_cast<T*>(ws.qg) + orow;
  T* const kgo = static_cast<T*>(ws.kg) + orow;
  T* const klo = static_cast<T*>(ws.kgl) + orow;
#pragma unroll 1
  for (int rd = 0; rd < kRounds; ++rd) {
    const int c0 = kSlice * rd + 8 * cg;
    float gi[8], xq[8], xk[8];
    load8f(&s.r.in.gam[si][c0], gi);
    load8<T>(&s.r.in.q[si][c0], xq);
    load8<T>(&s.r.in.k[si][c0], xk);
    if (vi) {  // gated operands, every exponent <= 0 (the same products as v6)
      float gl8[8], va[8], vb[8];
      load8f(&s.r.in.gam[lr][c0], gl8);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float eg = ex2_ftz(gi[e]);
        va[e] = xq[e] * rqi * eg;
        vb[e] = xk[e] * rki * eg;
      }
      store8<T>(qgo + kSlice * rd, va);
      store8<T>(kgo + kSlice * rd, vb);
#pragma unroll
      for (int e = 0; e < 8; ++e) va[e] = xk[e] * rki * ex2_ftz(gl8[e] - gi[e]);
      store8<T>(klo + kSlice * rd, va);
    }
    __half2 hq[4], hk[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      hq[e] = __floats2half2_rn(xq[2 * e] * sqi, xq[2 * e + 1] * sqi);
      hk[e] = __floats2half2_rn(xk[2 * e] * ski, xk[2 * e + 1] * ski);
    }
    stage_levels_v8<0>(s.w.st, s.r.in.gam, si, c0, 4 * cg, gi, hq, hk);
    stage_levels_v8<3>(s.w.st, s.r.in.gam, si, c0, 4 * cg, gi, hq, hk);
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kTilesPerWarp; ++u) {  // 3 ldmatrix.x4 per tile
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
  slot_store_v8<0>(s, warp, g, t, acc[0], p.l2norm);
  slot_store_v8<1>(s, warp, g, t, acc[1], p.l2norm);
  slot_store_v8<2>(s, warp, g, t, acc[2], p.l2norm);
  slot_store_v8<3>(s, warp, g, t, acc[3], p.l2norm);
  slot_store_v8<4>(s, warp, g, t, acc[4], p.l2norm);
  if (tid < kBT) s.r.out.qk[tid][tid] = s.pd[tid] * s.rq[tid] * s.rk[tid];
  __syncthreads();

  // L (in place of kk), P (to global), upper blocks of X zeroed (in place of qk): one (row, 16-column
  // segment) item per thread, float4 accesses. Thread bits 0-1 / 3-4 / 6-7: row bits 0-1 / 2-3 / 4-5,
  // bits 2 / 5: segment bits 0 / 1, so a quarter-warp reads 4 rows x 2 segments = 8 distinct bank quads
  // (row stride kLd = 68 words = 1 quad mod 8, segment = 4 quads).
  constexpr int kSeg = 16;
  static_assert(kBT * (kBT / kSeg) == kThreads, "one (row, 16-column segment) item per thread");
  const int ri = (tid & 3) + 4 * ((tid >> 3) & 3) + 16 * (tid >> 6);
  const int sg = ((tid >> 2) & 1) + 2 * ((tid >> 5) & 1), rc0 = kSeg * sg;
  const bool rvalid = ri < len;
  T* Ab = static_cast<T*>(ws.Ab);
  T* P = static_cast<T*>(ws.P);
  {
    const float bi = s.beta[ri];
    float pv[kSeg];
#pragma unroll
    for (int m = 0; m < kSeg / 4; ++m) {
      float4* kp = reinterpret_cast<float4*>(&s.r.out.kk[ri][rc0 + 4 * m]);
      float4* qp = reinterpret_cast<float4*>(&s.r.out.qk[ri][rc0 + 4 * m]);
      const float4 k4 = *kp, q4 = *qp;
      const float kv[4] = {k4.x, k4.y, k4.z, k4.w}, qv[4] = {q4.x, q4.y, q4.z, q4.w};
      float lv[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int jc = rc0 + 4 * m + e;
        lv[e] = (jc < ri && rvalid) ? bi * kv[e] : 0.f;
        pv[4 * m + e] = (jc <= ri && rvalid) ? p.scale * qv[e] : 0.f;
      }
      *kp = make_float4(lv[0], lv[1], lv[2], lv[3]);
      if ((ri >> 4) < sg) *qp = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    if (rvalid) store16<T>(P + (j * ws.T_cap + t0 + ri) * kBT + rc0, pv);
  }
  __syncthreads();
  invert_unit_lower<kBT, kLd>(s.r.out.kk, s.r.out.qk, s.w.tscr, tid);
  if (rvalid) {
    float xv[kSeg], bv[kSeg];
#pragma unroll
    for (int m = 0; m < kSeg / 4; ++m) {
      const float4 x4 = *reinterpret_cast<const float4*>(&s.r.out.qk[ri][rc0 + 4 * m]);
      const float4 b4 = *reinterpret_cast<const float4*>(&s.beta[rc0 + 4 * m]);
      xv[4 * m] = x4.x, xv[4 * m + 1] = x4.y, xv[4 * m + 2] = x4.z, xv[4 * m + 3] = x4.w;
      bv[4 * m] = b4.x, bv[4 * m + 1] = b4.y, bv[4 * m + 2] = b4.z, bv[4 * m + 3] = b4.w;
    }
    float av[kSeg];
#pragma unroll
    for (int e = 0; e < kSeg; ++e) av[e] = xv[e] * bv[e];
    store16<T>(Ab + (j * ws.T_cap + t0 + ri) * kBT + rc0, av);
    if (ws.Ai) store16<T>(static_cast<T*>(ws.Ai) + (j * ws.T_cap + t0 + ri) * kBT + rc0, xv);  // unscaled
  }
}

}  // namespace
}  // namespace linattn::cuda
