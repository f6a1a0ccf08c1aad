// chunked12 (kdagate, session 12; opt-in LINATTN_CUDA_KDA_BWD=chunked12): the per-channel gate work of the KDA chunk
// kernel (chunked11 + GC12 of kda_bwd_chunk2_kernel.cuh) with fewer instructions per (token, channel), the same
// expressions in the same order (bitwise chunked11):
//  - the gate form (no in-kernel gate / softplus default / lower bound) is dispatched once per pass, not per element:
//    chunked11's rolled loops branch on gate_in_kernel / has_lower_bound and, in the chain, on dg's null / dtype,
//    with a 64-bit index per element (~76 SASS instructions per element in the chain, ~56 in the staging);
//  - the element loops in blocks of rows (2 staging, 4 chain): their exponentials issued together, and where every
//    division of a block is in the fast range of nvcc's IEEE division (the common case) its fast path without the
//    branch / call to the slow path (rcp_fast: the same instructions, the same value);
//  - the chain's gate constants (dt_bias, e^A_log) loaded before its first barrier;
//  - dg: the walk leaves dg in the raw-gate scratch (in place), and after the next barrier every thread stores
//    8-channel pieces (one 16-byte store for bf16 / fp16), the dtype switch once per piece.
#pragma once
#include <cstdint>
#include <type_traits>

#include "cuda/kda/kda_bwd_chunk5_parts.cuh"

namespace linattn::cuda {
namespace kda_bwd {

// 0: gates outside the kernel; 1: the softplus form; 2: the lower-bound form (gate_deriv_raw's branches).
template <class Fn>
__device__ __forceinline__ void with_gate_form(const GdnFwdParams& f, Fn&& fn) {
  if (!f.gate_in_kernel) fn(std::integral_constant<int, 0>{});
  else if (!f.has_lower_bound) fn(std::integral_constant<int, 1>{});
  else fn(std::integral_constant<int, 2>{});
}

// 1.f / d for d in the range where nvcc's IEEE division takes its fast path (the exponent test of its expansion:
// d normal, neither tiny nor huge): that path's instructions (MUFU.RCP, one Newton step), the same value, no
// branch and no call to the slow path. rcp_fast_ok is the expansion's own test.
__device__ __forceinline__ bool rcp_fast_ok(float d) {
  return ((__float_as_uint(d) + 0x1800000u) & 0x7f800000u) > 0x1ffffffu;
}
__device__ __forceinline__ float rcp_fast(float d) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  const float t = __fmaf_rn(d, r, -1.f);
  return __fmaf_rn(r, -t, r);
}
template <bool FAST>
__device__ __forceinline__ float recip(float d) {
  if constexpr (FAST) return rcp_fast(d);
  else return 1.f / d;
}

// gate_deriv_raw for form F split at its exponentials: pre (x, the expf calls and the division's denominator, no
// branch) and post (the rest), so a block of rows issues its MUFU chains together; post<true> (every denominator
// of the block in rcp_fast_ok's range, the common case) divides without a branch. The same expressions, so the
// same values (G_ONLY: the log-decay g alone, the staging's need).
template <int F, bool G_ONLY>
struct GateEval {
  float x, e1, e2, den;
  __device__ __forceinline__ void pre(float raw, GateConst k) {
    x = raw + k.dtb;
    den = 1.f;
    if constexpr (F == 1) {
      e1 = expf(x);  // log1pf's argument (used where x <= 20)
      if constexpr (!G_ONLY) {
        e2 = expf(-x);
        den = 1.f + e2;
      }
    } else if constexpr (F == 2) {
      e1 = expf(-k.ea * x);
      den = 1.f + e1;
    }
  }
  __device__ __forceinline__ bool fast() const { return rcp_fast_ok(den); }
  template <bool FAST>
  __device__ __forceinline__ GateDeriv post(const GdnFwdParams& f, float raw, GateConst k) const {
    if constexpr (F == 0) {
      return {raw, 1.f, 0.f};
    } else if constexpr (F == 1) {
      const float sp = x > 20.f ? x : log1pf(e1);
      const float g = -k.ea * sp;
      if constexpr (G_ONLY) return {g, 0.f, 0.f};
      const float sg = recip<FAST>(den);
      return {g, -k.ea * sg, g};
    } else {
      const float s = recip<FAST>(den);
      if constexpr (G_ONLY) return {f.lower_bound * s, 0.f, 0.f};
      const float ds = f.lower_bound * s * (1.f - s);
      return {f.lower_bound * s, ds * k.ea, f.A_log ? ds * k.ea * x : 0.f};
    }
  }
};

// post for a block of N rows: branch-free when every denominator is in the fast range.
template <int N, int F, bool G_ONLY>
__device__ __forceinline__ void post_blk(GateDeriv (&gd)[N], const GateEval<F, G_ONLY> (&ev)[N],
                                         const float (&raw)[N], const GdnFwdParams& f, GateConst k) {
  bool fast = true;
#pragma unroll
  for (int m = 0; m < N; ++m) fast = fast && ev[m].fast();
  if (fast) {
#pragma unroll
    for (int m = 0; m < N; ++m) gd[m] = ev[m].template post<true>(f, raw[m], k);
  } else {
#pragma unroll
    for (int m = 0; m < N; ++m) gd[m] = ev[m].template post<false>(f, raw[m], k);
  }
}

// Rows per block: staging 2, chain 4 (bf16 BT 64 V 128, ptxas -v spill st / ld: staging 4 -> 296 / 276 B, chain 8
// -> 308 / 276 B, 2 / 4 -> 228 / 216 B, chunked11 244 / 240 B).
constexpr int kStageBlk = 2, kChainBlk = 4;

// The formula pass of the staging: a[i][c] holds the raw gate (0 past len), becomes e^g (0 past len). Thread (c =
// tid % K, rows tid / K + (NT / K) m), the form dispatched once, rows in blocks of kStageBlk.
// gc: gate_const(p.f, j, tid % kK) (chunked15 forms it from inputs loaded ahead of the head's tiles).
template <int BT, int NT>
__device__ __forceinline__ void stage_formula12(float (*a)[kLdF], const GdnBwdParams& p, int len, int tid,
                                                const GateConst gc) {
  constexpr int PER = BT * kK / NT, RG = NT / kK;
  const int c = tid % kK, i0 = tid / kK;
  with_gate_form(p.f, [&](auto form) {
    constexpr int F = decltype(form)::value;
#pragma unroll 1
    for (int m0 = 0; m0 < PER; m0 += kStageBlk) {
      GateEval<F, true> ev[kStageBlk];
      float rw[kStageBlk];
      GateDeriv gd[kStageBlk];
#pragma unroll
      for (int m = 0; m < kStageBlk; ++m) {
        rw[m] = a[i0 + RG * (m0 + m)][c];
        ev[m].pre(rw[m], gc);
      }
      post_blk(gd, ev, rw, p.f, gc);
#pragma unroll
      for (int m = 0; m < kStageBlk; ++m) {
        const int i = i0 + RG * (m0 + m);
        a[i][c] = i < len ? expf(gd[m].g) : 0.f;
      }
    }
  });
}

template <int BT, int NT>
__device__ __forceinline__ void stage_formula12(float (*a)[kLdF], const GdnBwdParams& p, int len, int j, int tid) {
  stage_formula12<BT, NT>(a, p, len, tid, gate_const(p.f, j, tid % kK));
}

// The raw gates into a[i][c] (0 past len), batches of 8 loads in flight, each thread its own elements of the
// formula pass (so no barrier between the two).
template <int BT, int NT>
__device__ __forceinline__ void stage_gate_loads12(float (*a)[kLdF], const GdnBwdParams& p, int64_t t0, int len,
                                                   int j, int tid) {
  constexpr int PER = BT * kK / NT, B = 8, RG = NT / kK;
  static_assert(PER * NT == BT * kK && PER % B == 0 && RG * kK == NT, "whole tile per pass");
  const int c = tid % kK, i0 = tid / kK;
#pragma unroll 1
  for (int m0 = 0; m0 < PER; m0 += B) {
    float v[B];
    load_gate_raw_r<B, RG>(v, p.f, t0, i0 + RG * m0, len, j, c);
#pragma unroll
    for (int m = 0; m < B; ++m) a[i0 + RG * (m0 + m)][c] = v[m];
  }
}

// stage_decays_r with the form dispatched once and the evaluation in blocks of rows (the same values).
template <int BT, int NT>
__device__ __forceinline__ void stage_decays12(float (*a)[kLdF], const GdnBwdParams& p, int64_t t0, int len, int j,
                                               int tid) {
  stage_gate_loads12<BT, NT>(a, p, t0, len, j, tid);
  stage_formula12<BT, NT>(a, p, len, j, tid);
}

// dg[o .. o + 8) <- x[0 .. 8) in dg's dtype (the conversions of store_out); VEC: 16-byte stores.
__device__ __forceinline__ void store8_out(void* p, ElemType t, int64_t o, const float (&x)[8], bool vec) {
  if (!vec) {
#pragma unroll
    for (int e = 0; e < 8; ++e) store_out(p, t, o + e, x[e]);
    return;
  }
  if (t == ElemType::kBF16) {
    uint32_t w[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const __nv_bfloat162 b = __floats2bfloat162_rn(x[2 * e], x[2 * e + 1]);
      w[e] = *reinterpret_cast<const uint32_t*>(&b);
    }
    *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p) + o) = make_uint4(w[0], w[1], w[2], w[3]);
  } else if (t == ElemType::kF16) {
    uint32_t w[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const __half2 h = __floats2half2_rn(x[2 * e], x[2 * e + 1]);
      w[e] = *reinterpret_cast<const uint32_t*>(&h);
    }
    *reinterpret_cast<uint4*>(static_cast<__half*>(p) + o) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
    float4* q = reinterpret_cast<float4*>(static_cast<float*>(p) + o);
    q[0] = make_float4(x[0], x[1], x[2], x[3]);
    q[1] = make_float4(x[4], x[5], x[6], x[7]);
  }
}

// gate_chain_r (kda_bwd_chunk5_parts.cuh) with the same sums in the same order: the raw gates and the group sums
// as there, the gate constants loaded before the barrier, the reverse walk per form unrolled by 4 with dg left in
// the scratch, then the partials / dbeta as there and dg stored by every thread in 8-channel pieces.
// bdraw (chunked15): gdn_beta_draw of the rows, formed at the head start (nullptr: loaded here).
template <class T, int BT, int V, int NT>
__device__ __forceinline__ void gate_chain12(KdaChunk2Smem<T, BT, V>& s, const GdnBwdParams& p, const GdnBwdWs& w,
                                             int64_t r, int64_t t0, int len, int j, int tid,
                                             const float* bdraw = nullptr) {
  constexpr int RG = NT / kK, RPG = BT / RG, PC = kK / 8;
  static_assert(RG * kK == NT && RG * RPG == BT, "row groups tile the chunk");
  static_assert(RG * kK * 2 <= BT * (BT + 4), "scratch fits in daqk / dL");
  static_assert(RPG % kChainBlk == 0 && (BT * kK / NT) % kStageBlk == 0, "whole blocks of rows");
  const GdnFwdParams& f = p.f;
  const int c = tid % kK, grp = tid / kK, i0 = grp * RPG;
  float* gs = &s.u.in.daqk[0][0];  // [RG][kK] group sums of dgam
  float* gp = &s.u.in.dL[0][0];    // [RG][kK][2] group gate partials
  float (*graw)[kK] = gate_scratch(s);  // raw gates, then dg (rows < len)
  float raw[RPG];
  load_gate_raw_r<RPG, 1>(raw, f, t0, i0, len, j, c);
  const GateConst gc = gate_const(f, j, c);
  float ps = 0.f;
#pragma unroll
  for (int u = 0; u < RPG; ++u) ps += s.a[i0 + u][c];
  gs[grp * kK + c] = ps;
#pragma unroll
  for (int u = 0; u < RPG; ++u) graw[i0 + u][c] = raw[u];
  __syncthreads();
  float zs = 0.f;
#pragma unroll
  for (int m = 0; m < BT / 16; ++m) zs += s.zsum[m][c];
  float egL = 1.f;  // prod over the chunk's rows < len
#pragma unroll
  for (int b = 0; b < BT / 16; ++b) egL *= s.blk[b][c];
  float acc = egL * s.sd[c] + zs, pA = 0.f, pT = 0.f;
  for (int q = RG - 1; q > grp; --q) acc += gs[q * kK + c];
  with_gate_form(f, [&](auto form) {
    constexpr int F = decltype(form)::value;
#pragma unroll 1
    for (int u0 = RPG - kChainBlk; u0 >= 0; u0 -= kChainBlk) {  // blocks of rows, each walked down
      GateEval<F, false> ev[kChainBlk];
      float rw[kChainBlk];
#pragma unroll
      for (int m = kChainBlk - 1; m >= 0; --m) {
        rw[m] = graw[i0 + u0 + m][c];
        ev[m].pre(rw[m], gc);
      }
      GateDeriv gd[kChainBlk];
      post_blk(gd, ev, rw, f, gc);  // rows past len: finite, unused
#pragma unroll
      for (int m = kChainBlk - 1; m >= 0; --m) {
        const int i = i0 + u0 + m;
        if (i < len) {
          acc += s.a[i][c];
          const float dgo = acc * gd[m].draw;
          if constexpr (F != 0) {
            pA += acc * gd[m].dA;
            pT += dgo;
          }
          graw[i][c] = dgo;
        }
      }
    }
  });
  gp[(grp * kK + c) * 2] = pA;
  gp[(grp * kK + c) * 2 + 1] = pT;
  __syncthreads();
  if (grp == 0) {
    float sA = 0.f, sT = 0.f;
#pragma unroll
    for (int q = RG - 1; q >= 0; --q) {
      sA += gp[(q * kK + c) * 2];
      sT += gp[(q * kK + c) * 2 + 1];
    }
    float* o = w.part + ((r * f.HV + j) * kK + c) * 2;
    o[0] = sA;
    o[1] = sT;
  } else if (tid < kK + BT) {
    const int i = tid - kK;
    if (i < len && p.dbeta.p) {
      const float db = ((s.red[0][i][0] + s.red[0][i][1]) + s.red[0][i][2]) + s.red[0][i][3];
      store_out(p.dbeta.p, p.dbeta.t, (t0 + i) * f.HV + j, db * (bdraw ? bdraw[i] : gdn_beta_draw(f, t0 + i, j)));
    }
  }
  if (p.dg.p) {
    const bool vec = (reinterpret_cast<uintptr_t>(p.dg.p) & 15u) == 0;
#pragma unroll 1
    for (int idx = tid; idx < BT * PC; idx += NT) {
      const int i = idx / PC, c0 = (idx % PC) * 8;
      if (i >= len) continue;
      const float4 lo = *reinterpret_cast<const float4*>(&graw[i][c0]);
      const float4 hi = *reinterpret_cast<const float4*>(&graw[i][c0 + 4]);
      const float x[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      store8_out(p.dg.p, p.dg.t, ((t0 + i) * f.HV + j) * int64_t(kK) + c0, x, vec);
    }
  }
}

}  // namespace kda_bwd
}  // namespace linattn::cuda
