// The chunk-gradient kernel of the chunked KDA backward (chunked7, the one kernel since session 10; the older
// modes chunked .. chunked6, chunked8, chunked9 were removed, last in 154ad2a: docs/perf-notes.md "CUDA KDA
// backward"), instantiated in kda_bwd_chunk5.cu. Grid (chunk row, q/k head), KTiling<BT, V>::NT threads,
// KdaChunk2Smem; one CTA walks the G value heads of its q/k head (dq / dk group sums in registers).
// Per-channel gates: the decays a = e^g staged element-parallel, the 16-row block products (blk) for the
// eg / egl walks, the <S, dS'> row dots on every thread, the off-diagonal 16 x 16 intra blocks on 3xTF32
// mma.sync (mma_3xtf32; at V = 128 their decay factors from DecayTab), the diagonal blocks per element,
// the reverse cumsum + gate chain as row groups per channel; code rolled where that keeps the values
// (kda_bwd_chunk5_parts.cuh: tile loads, gate formula, dq / dk through shared memory, mma k-steps).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>

#include "cuda/common/launch.h"
#include "cuda/kda/kda_bwd_chunk11_parts.cuh"
#include "cuda/kda/kda_bwd_chunk12_parts.cuh"
#include "cuda/kda/kda_bwd_chunk13_parts.cuh"
#include "cuda/kda/kda_bwd_chunk14_parts.cuh"
#include "cuda/kda/kda_bwd_chunk15_parts.cuh"
#include "cuda/kda/kda_bwd_chunk17_parts.cuh"
#include "cuda/kda/kda_bwd_chunk5_parts.cuh"

namespace linattn::cuda {
namespace {

using namespace kda_bwd;

// The decay tables live in shared memory that is dead during the intra-chunk phase: pre in dS' (dead
// after dk_inter), suf across the adjacent y and dO tiles (dead after pm / lm). Both fit only for V = 128;
// V = 64 walks the decays per fragment (decay_pair).
template <class T, int BT, int V>
constexpr bool tables_fit() {
  using S0 = KdaChunkSmem<T, BT, V>;
  constexpr size_t tab = sizeof(float) * BT * kLdT, ds = sizeof(T) * kK * S0::kLdV, y = sizeof(T) * BT * S0::kLdV;
  return V == 128 && ds >= tab && 2 * y >= tab && offsetof(S0, dO) == offsetof(S0, y) + y;
}

// SPLIT (chunked11, kda_bwd_chunk11_parts.cuh): the diagonal blocks as two walked triangles + one mma square.
// GC12 (chunked12, kda_bwd_chunk12_parts.cuh): the gate staging and chain per gate form, dg in 8-channel pieces.
// C13 (chunked13, kda_bwd_chunk13_parts.cuh; with SPLIT and GC12): the gates as a cp.async tile ahead of the head's
// tiles, the formula pass while they stream; the split-TF32 hi parts without cvt's non-finite test; dq / dk stored in
// 8-channel pieces.
// C14 (chunked14, kda_bwd_chunk14_parts.cuh; with C13): eg / egl in 8 row steps each (the rows r0 / r0 + 8 through a
// shared 8-row window), the split-TF32 lo parts truncated by the mask instead of cvt.rna (split_tf32_t's LT): not
// bitwise chunked13; and S / dS loaded last as a cp.async group of their own, Y = Ai^T dV^, Y.v and blk computed while
// they stream (the same values).
// C15 (chunked15, kda_bwd_chunk15_parts.cuh; with C14): dt_bias / A_log, beta, the Y.v rows of v and the gate tile as
// one cp.async group ahead of the head's tiles (head 0: ahead of q / k); the beta draw of the dbeta store formed with
// beta at the head start (shared memory) instead of loaded in the chain's tail. The same values.
// C17 (chunked17, kda_bwd_chunk17_parts.cuh; with C15): the row scales batched (8 rows per warp at once), bf16 pairs
// unpacked by shift / mask (diagonal walks, row dots, Y.v, the L2-norm tail), eg / egl steps by selects instead of
// divergent branches. The same values.
template <class T, int BT, int V, bool SPLIT, bool GC12 = false, bool C13 = false, bool C14 = false, bool C15 = false,
          bool C17 = false>
__global__ void __launch_bounds__(KTiling<BT, V>::NT, 1) kda_bwd_chunk2_kernel(GdnBwdParams p, GdnBwdWs w) {
  using Sm = std::conditional_t<C15, KdaChunk15Smem<T, BT, V>, KdaChunk2Smem<T, BT, V>>;
  using Tl = KTiling<BT, V>;
  static_assert(sizeof(KdaChunkSmem<T, BT, V>) % 8 == 0, "blk rows 8-byte aligned (float2 reads)");
  constexpr int NTK = Tl::NTK;
  constexpr bool TAB = tables_fit<T, BT, V>();
  static_assert(TAB == (V == 128), "the decay tables fit at V = 128");
  static_assert(!C13 || (SPLIT && GC12), "chunked13 is chunked12's kernel");
  static_assert(!C14 || C13, "chunked14 is chunked13's kernel");
  static_assert(!C15 || C14, "chunked15 is chunked14's kernel");
  static_assert(!C17 || C15, "chunked17 is chunked15's kernel");
  static_assert(!C15 || (sizeof(Sm) <= 227 * 1024 && sizeof(KdaChunk2Smem<T, BT, V>) % 16 == 0),
                "chunked15's tiles fit; its v tile 16-byte aligned");
  using S0 = KdaChunkSmem<T, BT, V>;
  static_assert(offsetof(S0, a) % 16 == 0, "gate tile rows 16-byte aligned (pitch 528 B)");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Sm& s = *reinterpret_cast<Sm*>(smem_raw);
  const GdnFwdParams& f = p.f;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const int64_t r = blockIdx.x;
  const int h = blockIdx.y, G = f.HV / f.H;
  int64_t t0;
  int len;
  if (!chunk_span(f, w.chunk_indices, w.nts, r, BT, t0, len)) return;  // sentinel row / empty chunk
  const int wm = warp % Tl::WM, wn = warp / Tl::WM, r0 = 16 * wm + g;
  const int ck = wn * Tl::CK, cv = wn * Tl::CV, cb = wn * Tl::CB;

  [[maybe_unused]] const bool vtile = C15 && v_tile_ok<V>(f);  // uniform
  if constexpr (C15) {  // head 0's row scalars / v rows / gate tile ahead of every tile
    load_pre15<T, BT, V, Tl::NT>(s, f, t0, len, h * G, tid, gate_tile_ok(f), vtile);
    cp_async_commit();
  }
  const int64_t qoff = (t0 * f.H + h) * kK, qstride = int64_t(f.H) * kK;
  load_rows_async_r<T, BT, kK, kLdK, Tl::NT>(s.q, static_cast<const T*>(f.q) + qoff, qstride, len, tid);
  load_rows_async_r<T, BT, kK, kLdK, Tl::NT>(s.k, static_cast<const T*>(f.k) + qoff, qstride, len, tid);
  cp_async_commit();
  const auto row_scales_r = [&] {  // the forward prep's formula, one row per step
#pragma unroll 1
    for (int i = warp; i < 2 * BT; i += Tl::NW) {
      const T* row = i < BT ? &s.q[i][0] : &s.k[i - BT][0];
      const float ss = row_sumsq_warp<T, kK>(row, lane);
      if (lane == 0) (i < BT ? s.rq : s.rk)[i < BT ? i : i - BT] = f.l2norm ? rsqrtf(ss + 1e-6f) : 1.f;
    }
  };

  float dqA[NTK][4] = {}, dkA[NTK][4] = {};
  [[maybe_unused]] const bool gtile = C13 && gate_tile_ok(f);  // uniform
  for (int jj = 0; jj < G; ++jj) {
    const int j = h * G + jj;
    if constexpr (C15) {
      if (jj > 0) {  // ahead of the head's tiles (a, vt, the scalars: their last readers were the previous head's)
        load_pre15<T, BT, V, Tl::NT>(s, f, t0, len, j, tid, gtile, vtile);
        cp_async_commit();
      }
    } else if (C13 && gtile) {  // the gates first (a is free: its last reader was the previous head's chain)
      load_gate_tile13<BT, Tl::NT>(s.a, f, t0, len, j, tid);
      cp_async_commit();
    }
    // one copy of the tile loads; the first head's stream while the row scales run (C14: S / dS a group of their own)
    load_head<T, BT, V, C14>(s, p, w, r, t0, len, j, tid);
    cp_async_commit();
    if (jj == 0) {
      if constexpr (C15) {
        cp_async_wait<2>();  // head 0's pre group and q / k (the head's two groups in flight)
      } else {
        if (C13 && gtile) cp_async_wait<C14 ? 3 : 2>();  // q / k (the gate tile and the head's tiles still in flight)
        else cp_async_wait<C14 ? 2 : 1>();
      }
      __syncthreads();
      if constexpr (C17) row_scales17<T, BT, Tl::NW>(s.rq, s.rk, s.q, s.k, f.l2norm, warp, lane);
      else row_scales_r();
    }
    if constexpr (!C15) {
      if (tid < BT) s.beta[tid] = tid < len ? gdn_beta(f, t0 + tid, j) : 0.f;
    }
    if constexpr (C15) {
      if (jj > 0) {  // the head's pre group
        cp_async_wait<2>();
        __syncthreads();
      }
      if (tid < BT) beta15(s, f, t0, len, j, tid);
      if (!gtile) stage_gate_loads12<BT, Tl::NT>(s.a, p, t0, len, j, tid);
      stage_formula12<BT, Tl::NT>(s.a, p, len, tid, gate_const15(f, s, tid % kK));
    } else if constexpr (C13) {  // the formula pass (one copy) on the gate tile while the head's tiles stream
      if (gtile) {
        cp_async_wait<C14 ? 2 : 1>();
        __syncthreads();
      } else {
        stage_gate_loads12<BT, Tl::NT>(s.a, p, t0, len, j, tid);  // chunked12's loads (16-bit / unaligned gates)
      }
      stage_formula12<BT, Tl::NT>(s.a, p, len, j, tid);
    } else if constexpr (GC12) {
      stage_decays12<BT, Tl::NT>(s.a, p, t0, len, j, tid);
    } else {
      stage_decays_r<BT, Tl::NT>(s.a, p, t0, len, j, tid);  // every thread; rows past the end read no gate
    }
    cp_async_wait<C14 ? 1 : 0>();  // C14: Y, dbeta's Y.v and blk while S / dS stream
    __syncthreads();

    float dgam[NTK][4], dbp[2] = {0.f, 0.f}, xh[NTK][4], eg[NTK][4];
    {  // Y = Ai^T dV^ (registers until every warp has read dV^); Y.v
      float Y[Tl::NTV][4] = {};
      mma_tile_r<T, Tl::NTV, BT, true, false>(Y, &s.ai[0][0], Sm::kLdA, 16 * wm, &s.y[0][0], Sm::kLdV, cv, lane);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int rr = r0 + 8 * hf;
        if (rr >= len) continue;
        const T* vrow = static_cast<const T*>(f.v) + ((t0 + rr) * f.HV + j) * int64_t(V);
#pragma unroll
        for (int nt = 0; nt < Tl::NTV; ++nt) {
          float2 vv;
          if constexpr (C15)  // the v tile (landed with the pre group) where v is 16-byte aligned
            vv = vtile ? ld_pair_x<C17>(&s.vt[rr][cv + nt * 8 + 2 * tq]) : ld_pair_x<C17>(vrow + cv + nt * 8 + 2 * tq);
          else
            vv = ld_pair(vrow + cv + nt * 8 + 2 * tq);
          dbp[hf] += Y[nt][2 * hf] * vv.x + Y[nt][2 * hf + 1] * vv.y;
        }
      }
      {  // blk[b][c]: decay product of row block b (rows < len), thread (c, b)
        static_assert(Tl::NT / kK == BT / 16, "one thread per (channel, row block)");
        const int cc = tid % kK, b = tid / kK;
        float pr = 1.f;
#pragma unroll
        for (int u = 0; u < 16; ++u) pr *= 16 * b + u < len ? s.a[16 * b + u][cc] : 1.f;
        s.blk[b][cc] = pr;
      }
      if constexpr (C14) {  // S / dS
        cp_async_wait<0>();
        __syncthreads();
      }
      {  // <S_d, dS'_d> per key row on every thread: NT / K adjacent lanes per row, interleaved column
         // pairs (conflict-free: row stride 68 words), then a lane-group sum
        constexpr int TPR = Tl::NT / kK;
        const int d = tid / TPR, qq = tid % TPR;
        float acc = 0.f;
#pragma unroll 4
        for (int cc = 2 * qq; cc < V; cc += 2 * TPR) {
          const float2 a = ld_pair_x<C17>(&s.u.st.S[d][cc]), b = ld_pair_x<C17>(&s.u.st.dS[d][cc]);
          acc += a.x * b.x + a.y * b.y;
        }
#pragma unroll
        for (int o = 1; o < TPR; o <<= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (qq == 0) s.sd[d] = acc;
      }
      __syncthreads();
#pragma unroll
      for (int hf = 0; hf < 2; ++hf)
#pragma unroll
        for (int nt = 0; nt < Tl::NTV; ++nt)
          st_pair(&s.y[r0 + 8 * hf][cv + nt * 8 + 2 * tq], Y[nt][2 * hf], Y[nt][2 * hf + 1]);
    }
    if constexpr (C14) frag_eg14<BT, NTK, C17>(eg, s.a, s.blk, wm, r0, ck, tq);
    else frag_eg_blk_r<BT, NTK>(eg, s.a, s.blk, wm, r0, ck, tq);
    {  // dq_inter = eg (.) scale (dO S^T)
      float t[NTK][4] = {};
      mma_tile_r<T, NTK, V, false, true>(t, &s.dO[0][0], Sm::kLdV, 16 * wm, &s.u.st.S[0][0], Sm::kLdV, ck, lane);
      frag_rows<T, NTK>(xh, s.q, s.rq, r0, ck, tq);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float v = f.scale * eg[nt][e] * t[nt][e];
          dqA[nt][e] += v;
          dgam[nt][e] = xh[nt][e] * v;
        }
    }
    frag_rows<T, NTK>(xh, s.k, s.rk, r0, ck, tq);  // k^ from here on
    {  // dk_inter = egl (.) (V^ dS'^T); its column sums of k^ (.) dk_inter feed the last row
      float t[NTK][4] = {}, egl[NTK][4];
      mma_tile_r<T, NTK, V, false, true>(t, &s.vh[0][0], Sm::kLdV, 16 * wm, &s.u.st.dS[0][0], Sm::kLdV, ck, lane);
      if constexpr (C14) frag_egl14<BT, NTK, C17>(egl, s.a, s.blk, wm, r0, ck, tq, len);
      else frag_egl_blk_r<BT, NTK>(egl, s.a, s.blk, wm, r0, ck, tq, len);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt) {
        float z[2] = {0.f, 0.f};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float v = egl[nt][e] * t[nt][e];
          dkA[nt][e] += v;
          dgam[nt][e] -= xh[nt][e] * v;
          z[e & 1] += xh[nt][e] * v;
        }
#pragma unroll
        for (int x = 0; x < 2; ++x) {
          float v = z[x];
          v += __shfl_xor_sync(0xffffffffu, v, 4);
          v += __shfl_xor_sync(0xffffffffu, v, 8);
          v += __shfl_xor_sync(0xffffffffu, v, 16);
          if (g == 0) s.zsum[wm][ck + nt * 8 + 2 * tq + x] = v;
        }
      }
    }
    __syncthreads();  // Y visible to every warp

    {  // xn = Y S^T: dk^ -= beta eg xn; dgam -= beta eg k^ xn; dbeta -= eg k^ . xn
      float t[NTK][4] = {};
      mma_tile_r<T, NTK, V, false, true>(t, &s.y[0][0], Sm::kLdV, 16 * wm, &s.u.st.S[0][0], Sm::kLdV, ck, lane);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float bi = s.beta[r0 + 8 * (e >> 1)];
          const float kex = eg[nt][e] * t[nt][e];
          dkA[nt][e] -= bi * kex;
          dgam[nt][e] -= bi * xh[nt][e] * kex;
          dbp[e >> 1] -= xh[nt][e] * kex;
        }
    }
    float pm[Tl::NTB][4] = {}, lm[Tl::NTB][4] = {};
    mma_tile_r<T, Tl::NTB, V, false, true>(pm, &s.dO[0][0], Sm::kLdV, 16 * wm, &s.vh[0][0], Sm::kLdV, cb, lane);
    mma_tile_r<T, Tl::NTB, V, false, true>(lm, &s.y[0][0], Sm::kLdV, 16 * wm, &s.vh[0][0], Sm::kLdV, cb, lane);
    __syncthreads();  // S, dS' dead: the union takes daqk / dL
    [[maybe_unused]] const DecayTab tab{reinterpret_cast<float(*)[kLdT]>(&s.u.st.dS[0][0]),
                                        reinterpret_cast<float(*)[kLdT]>(&s.y[0][0])};
    if constexpr (TAB) build_decay_tab<BT, Tl::NT>(tab, s.a, tid);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i = r0 + 8 * hf;
#pragma unroll
      for (int nt = 0; nt < Tl::NTB; ++nt)
#pragma unroll
        for (int x = 0; x < 2; ++x) {
          const int jc = cb + nt * 8 + 2 * tq + x;
          s.u.in.daqk[i][jc] = (i < len && jc <= i) ? f.scale * pm[nt][2 * hf + x] : 0.f;
          s.u.in.dL[i][jc] = (i < len && jc < i) ? -lm[nt][2 * hf + x] : 0.f;
        }
    }
    __syncthreads();

    {  // row side: dq^ += dq2; r = beta rp into dk^; dbeta += k^ . rp
      float dq2[NTK][4], rp[NTK][4];
      // blocks left of the diagonal
      offdiag_rows<T, BT, V, NTK, TAB, C13, C14>(s, dq2, rp, wm, ck, g, tq, tab);
      if constexpr (SPLIT) diag_rows_split<T, BT, V, NTK, TAB, C13, C14, C17>(s, dq2, rp, wm, ck, g, tq, tab);
      else intra_rows<T, BT, V, NTK>(s, dq2, rp, r0, ck, tq, 16 * wm, false);  // + the diagonal block
      float qh[NTK][4];
      frag_rows<T, NTK>(qh, s.q, s.rq, r0, ck, tq);
      if constexpr (SPLIT) frag_rows<T, NTK>(xh, s.k, s.rk, r0, ck, tq);  // reloaded: xh dead across the walks
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float bi = s.beta[r0 + 8 * (e >> 1)];
          dqA[nt][e] += dq2[nt][e];
          dkA[nt][e] += bi * rp[nt][e];
          dgam[nt][e] += qh[nt][e] * dq2[nt][e] + xh[nt][e] * bi * rp[nt][e];
          dbp[e >> 1] += xh[nt][e] * rp[nt][e];
        }
    }
    {  // column side: dk^ += dka; dgam -= k^ (.) dka
      float ca[NTK][4];
      // blocks below the diagonal
      offdiag_cols<T, BT, V, NTK, TAB, C13, C14>(s, ca, wm, ck, g, tq, tab);
      if constexpr (SPLIT) diag_cols_horner<T, BT, V, NTK, TAB, C13, C14, C17>(s, ca, wm, ck, g, tq, tab);
      else intra_cols<T, BT, V, NTK>(s, ca, r0, ck, tq, len, min(len, 16 * wm + 16), false);  // + the diagonal block
      if constexpr (SPLIT) frag_rows<T, NTK>(xh, s.k, s.rk, r0, ck, tq);  // the same values, 16 registers free
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          dkA[nt][e] += ca[nt][e];
          dgam[nt][e] -= xh[nt][e] * ca[nt][e];
        }
    }
    __syncthreads();  // every read of a / daqk / dL done: a takes dgam
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i = r0 + 8 * hf;
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt) {
        const int col = ck + nt * 8 + 2 * tq;
        s.a[i][col] = i < len ? dgam[nt][2 * hf] : 0.f;
        s.a[i][col + 1] = i < len ? dgam[nt][2 * hf + 1] : 0.f;
      }
    }
    flush_rowdot<BT>(s.red, 0, dbp, r0, wn, tq);
    __syncthreads();

    if constexpr (C15) gate_chain12<T, BT, V, Tl::NT>(s, p, w, r, t0, len, j, tid, s.bdraw);
    else if constexpr (GC12) gate_chain12<T, BT, V, Tl::NT>(s, p, w, r, t0, len, j, tid);
    else gate_chain_r<T, BT, V, Tl::NT>(s, p, w, r, t0, len, j, tid);
    __syncthreads();
  }

  // L2-norm backward of the group sums: dx = r dy - r^3 (dy . x) x (x raw, y = r x); store.
  float pq2[2] = {}, pk2[2] = {};
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int rr = r0 + 8 * hf, col = ck + nt * 8 + 2 * tq;
      const float2 qv = ld_pair_x<C17>(&s.q[rr][col]), kv = ld_pair_x<C17>(&s.k[rr][col]);
      pq2[hf] += dqA[nt][2 * hf] * qv.x + dqA[nt][2 * hf + 1] * qv.y;
      pk2[hf] += dkA[nt][2 * hf] * kv.x + dkA[nt][2 * hf + 1] * kv.y;
    }
  flush_rowdot<BT>(s.red, 1, pq2, r0, wn, tq);
  flush_rowdot<BT>(s.red, 2, pk2, r0, wn, tq);
  __syncthreads();
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int rr = r0 + 8 * hf;
    if (rr >= len) continue;
    float fq = 1.f, cq = 0.f, fk = 1.f, cpk = 0.f;
    if (f.l2norm) {
      const float sq = ((s.red[1][rr][0] + s.red[1][rr][1]) + s.red[1][rr][2]) + s.red[1][rr][3];
      const float sk = ((s.red[2][rr][0] + s.red[2][rr][1]) + s.red[2][rr][2]) + s.red[2][rr][3];
      fq = s.rq[rr];
      fk = s.rk[rr];
      cq = fq * fq * fq * sq;
      cpk = fk * fk * fk * sk;
    }
    // the finished values through shared memory (a, u: dead), stored below
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int col = ck + nt * 8 + 2 * tq;
      const float2 qv = ld_pair_x<C17>(&s.q[rr][col]), kv = ld_pair_x<C17>(&s.k[rr][col]);
      float* oq = &s.a[rr][col];
      float* ok = stage_dk(s) + rr * kLdF + col;
      oq[0] = fq * dqA[nt][2 * hf] - cq * qv.x;
      oq[1] = fq * dqA[nt][2 * hf + 1] - cq * qv.y;
      ok[0] = fk * dkA[nt][2 * hf] - cpk * kv.x;
      ok[1] = fk * dkA[nt][2 * hf + 1] - cpk * kv.y;
    }
  }
  if constexpr (C13) store_dqdk13<T, BT, V, Tl::NT>(s, p, t0, len, h, tid);
  else store_dqdk_r<T, BT, V, Tl::NT>(s, p, t0, len, h, tid);
}

// Host side: the instantiation per (io type, BT, V).
template <class T, int BT, int V, bool SPLIT, bool GC12, bool C13, bool C14, bool C15, bool C17>
void launch_t(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  using Sm = std::conditional_t<C15, KdaChunk15Smem<T, BT, V>, KdaChunk2Smem<T, BT, V>>;
  launch(kda_bwd_chunk2_kernel<T, BT, V, SPLIT, GC12, C13, C14, C15, C17>, dim3(static_cast<unsigned>(w.nt_cap), p.f.H),
         dim3(KTiling<BT, V>::NT), sizeof(Sm), stream, p, w);
}

template <class T, int BT, bool SPLIT, bool GC12, bool C13, bool C14, bool C15, bool C17>
void launch_bt(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  if (p.f.V == 128) return launch_t<T, BT, 128, SPLIT, GC12, C13, C14, C15, C17>(p, w, stream);
  if (p.f.V == 64) return launch_t<T, BT, 64, SPLIT, GC12, C13, C14, C15, C17>(p, w, stream);
  LINATTN_UNSUPPORTED("kda bwd chunk2 kernel: V = ", p.f.V, " (supported: 64, 128)");
}

template <bool SPLIT, bool GC12 = false, bool C13 = false, bool C14 = false, bool C15 = false, bool C17 = false>
void launch_v(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  LINATTN_CHECK(p.f.kda && p.f.K == kK, "kda bwd chunk kernel: K must be ", kK, ", got ", p.f.K);
  LINATTN_CHECK(w.nt_cap < (int64_t(1) << 31), "kda bwd chunk kernel: too many chunks: ", w.nt_cap);
  const bool bf = p.f.io == ElemType::kBF16;
  LINATTN_CHECK(bf || p.f.io == ElemType::kF16, "kda bwd chunk2 kernel: io dtype must be bf16 or fp16");
  if (p.f.BT == 64) {
    bf ? launch_bt<__nv_bfloat16, 64, SPLIT, GC12, C13, C14, C15, C17>(p, w, stream)
       : launch_bt<__half, 64, SPLIT, GC12, C13, C14, C15, C17>(p, w, stream);
  } else if (p.f.BT == 32) {
    bf ? launch_bt<__nv_bfloat16, 32, SPLIT, GC12, C13, C14, C15, C17>(p, w, stream)
       : launch_bt<__half, 32, SPLIT, GC12, C13, C14, C15, C17>(p, w, stream);
  } else {
    LINATTN_UNSUPPORTED("kda bwd chunk2 kernel: chunk_size ", p.f.BT, " (supported: 32, 64)");
  }
}

}  // namespace
}  // namespace linattn::cuda
