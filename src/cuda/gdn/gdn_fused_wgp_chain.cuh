// The state chain's device code of gdn_fused_wgp.cu (split out for the file-size limit; included by that file
// only, before its kernels): il_pin, the split state update, and the chain body template shared by the one-item
// kernels and the tier-3 state pass (see gdn_fused_wgp.cu's header for the modes).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/tma.h"
#include "cuda/gdn/gdn_fused_wg.h"
#include "cuda/gdn/gdn_fused_wgp_common.cuh"
#include "cuda/gdn/gdn_fused_wgp_pf.cuh"
#include "cuda/gdn/gdn_fused_wgp_tma.cuh"
#include "cuda/gdn/gdn_p_fused.h"

namespace linattn::cuda {
namespace {
using namespace wgp;


// Marks N registers as redefined here (no instruction): the interleaved chain's packs of step kk
// cannot be hoisted above step kk - 1's wgmma.
template <int N>
__device__ __forceinline__ void il_pin(float* r) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// kChainSplit: S^T <- S^T + H^T K of the previous chunk (the decay was applied in that chunk), as two groups:
// keys 0-63 (S[0, 32), B = key panel 0 of the k tile at stage offset soff) and keys 64-127 (panel 1, 8 KB on).
template <class T>
__device__ __forceinline__ void issue_split_update(float (&s_lo)[32], float (&s_hi)[32], const uint32_t (&hf)[16],
                                                   uint64_t dkt0, uint32_t soff) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBT / 16; ++kk)
    wgmma_m64k16_rs<T, 64, 1>(s_lo, hf + 4 * kk, desc_at(dkt0, soff + uint32_t(kk) * 2048u), 1);
  wgmma_commit();
#pragma unroll
  for (int kk = 0; kk < kBT / 16; ++kk)
    wgmma_m64k16_rs<T, 64, 1>(s_hi, hf + 4 * kk, desc_at(dkt0, soff + 8192u + uint32_t(kk) * 2048u), 1);
  wgmma_commit();
}

// WG0: the state chain. S^T rows v0 + acc_row (values), columns acc_col (keys).
// SEG (tier-3 state pass, gdn_fused_wgp_seg_kernel): warpgroup wg runs the chain on its own ring
// (s.st0 + wg * kSt, barrier kBarWg0 + wg) for column v0 of [S | M]: v0 < V a slice of S_loc (zero
// initial state, the real v), v0 >= V a slice of M (identity columns v0 - V.., v = 0: no v loads);
// no hand-off, the final registers go to seg_S / seg_M.
// Smem: WgpSmem<T, KDA>, or WgpSmemPf<T> (GDN, P formed in WG1: the same Stage0 ring and hand-off).
// MODE (GDN only; LINATTN_CUDA_GDN_CHAIN, gdn_fused_wg.h; SEG: tma3's bits only, LINATTN_CUDA_SEG_CHAIN), bits:
// kChainIl: the register passes between the three products are interleaved with their wgmma issue,
//   one k16 step at a time (S^T's packs with K S^T's steps, X^T's with Ab X's into vacc, since the
//   K S^T accumulator is still being read, V^'s with the update's), each step its own commit group;
// kChainTma: k / v / Ab arrive by TMA boxes issued by thread 0 on the stage's mbarrier (maps, mbar;
//   gdn_fused_wgp_tma.cuh), chunk c + 2's right after the top-of-chunk barrier; the per-token
//   scalars stay per-thread cp.async.
// kChainSc (with kChainTma and kChainTma1; "tma3"): no per-token scalars and no scales formed here: thread 0
//   bulk-copies the WG0 part of the chunk's record (erk, wsc, decay; the prep's, gdn_chain_scales.cuh)
//   onto the stage's mbarrier beside the boxes, so WG0 issues no cp.async at all.
// kChainSplit (with tma3's bits; "tma4"): chunk c's state update is issued at the top of chunk c + 1, before its
//   mbarrier wait, as two m64n64 groups (keys 0-63: S[0, 32), keys 64-127: S[32, 64), B = the two key panels of
//   chunk c's k tile); the packs of S's first key half and K S^T's first four k16 steps run while the second
//   half is in the tensor pipe, then the second half's packs and steps. Chunk c + 2's boxes go into chunk c - 1's
//   stage once every warp has waited for chunk c - 1's update (warps 1-3 arrive at kBarRefill, warp 0 waits).
//   Chunk 0 adds a zero V^T diag(w) times the zeroed k tile of stage kSt - 1; the last chunk's update runs after
//   the loop. Per element the same products in the same order (an N split does not change a column's sum).
// Same products, same operands, same order: bitwise the MODE 0 chain's values.
template <class T, bool KDA, bool SEG = false, int MODE = 0, class Smem>
__device__ void state_warpgroup(Smem& s, const GdnFwdParams& p, const GdnChunkWs& ws, int64_t n, int64_t bos,
                                int64_t eos, int nchunks, int h, int j, int v0, int t, int wg = 0,
                                const StateMaps* maps = nullptr, uint64_t* mbar = nullptr) {
  constexpr bool IL = (MODE & kChainIl) != 0, TM = (MODE & kChainTma) != 0, SC = (MODE & kChainSc) != 0;
  constexpr bool SP = (MODE & kChainSplit) != 0;
  static_assert(MODE == 0 || (!KDA && (!SEG || MODE == (kChainTma | kChainSc))),
                "the chain modes are GDN's forward (the state pass: tma3's ring and records only)");
  static_assert(!SC || TM, "the scale records ride on the TMA ring");
  static_assert(!SP || (SC && !IL), "the split chain is an instance of tma3");
  using Stage0 = typename Smem::Stage0;
  constexpr int kSt = kStages0<KDA>, kAhead = kSt - 1;  // ring depth, chunks loaded ahead
  Stage0* const ring = s.st0 + wg * kSt;
  const int bar = kBarWg0 + wg;
  const bool mcols = SEG && v0 >= p.V;  // SEG: transition columns (v = 0, identity start)
  // KDA: chunk c of sequence n is row r0c + c of the prep grid (ws.gl's first index).
  int64_t r0c = 0;
  if constexpr (KDA) r0c = p.cu_seqlens ? int64_t(ws.chunk_offsets[n]) : n * ((p.T_seq + kBT - 1) / kBT);
  float S[64];
  if constexpr (SEG) {
#pragma unroll
    for (int i = 0; i < 64; ++i) S[i] = mcols && acc_col(t, i) == v0 - p.V + acc_row(t, i) ? 1.f : 0.f;
  } else {
#pragma unroll
    for (int i = 0; i < 64; ++i)
      S[i] = p.h0 ? load_elem(p.h0, p.h0_type, state_index(p, n, j, acc_col(t, i), v0 + acc_row(t, i))) : 0.f;
  }
  int r0 = 0, rlast = 0;  // SC: the record rows of sequence n
  if constexpr (SC) chain_sc::record_rows(p, ws, n, r0, rlast);
  if constexpr (TM) {
    if (t == 0) {
      for (int i = 0; i < kSt; ++i) mbar_init(mbar + i, 1);
      fence_barrier_init();
    }
    if constexpr (SP) {  // chunk 0's update operand (zero times zero): stage kSt - 1's k tile, refilled after it
      uint4* z = reinterpret_cast<uint4*>(ring[kSt - 1].k);
#pragma unroll
      for (int i = 0; i < int(sizeof(ring[0].k) / 16) / 128; ++i) z[i * 128 + t] = make_uint4(0u, 0u, 0u, 0u);
      fence_view_async_shared();
    }
    named_barrier(bar, 128);  // the barriers are initialised before anyone waits on them
    for (int c = 0; c < kAhead; ++c) {
      if (c < nchunks) {
        if (t == 0) {
          tma_state_tiles<T>(ring[c], *maps, mbar + c, bos + c * kBT, ws.T_cap, h, j, j * p.V + v0,
                             SC ? chain_sc::kBytes0 : 0u, !mcols);
          if constexpr (SC) tma_state_record<T>(ring[c], chain_sc::record(ws, p.HV, j, r0, rlast, c), mbar + c);
        }
        if constexpr (!SC) load_state_scalars<T>(ring[c], ws, bos + c * kBT, chunk_len(bos, eos, c), h, j, t);
      }
      if constexpr (!SC) cp_async_commit();
    }
  } else {
    for (int c = 0; c < kAhead; ++c) {
      if (c < nchunks)
        load_state_inputs<T, KDA>(ring[c], p, ws, bos + c * kBT, chunk_len(bos, eos, c), h, j, v0, t, r0c + c, !mcols);
      cp_async_commit();
    }
  }
  if constexpr (!KDA && !SC) {
    cp_async_wait<1>();
    if (nchunks > 0) state_scales<T>(ring[0], chunk_len(bos, eos, 0), t);
  }
  // ldmatrix.trans lane address of V^T's A fragments: matrix lane / 8 = (token + 8, value + 8) bits.
  const int lane = t & 31, mat = lane >> 3;
  const int ld_row = 8 * (mat >> 1) + (lane & 7), ld_col = 16 * (t >> 5) + 8 * (mat & 1);
  const uint8_t* upd0;  // the update's B tile (K^T): GDN the k tile itself, KDA kgl
  if constexpr (KDA) upd0 = ring[0].kda.kl;
  else upd0 = ring[0].k;
  const uint64_t dk0 = desc_kmaj0(ring[0].k), da0 = desc_kmaj0(ring[0].a), dkt0 = desc_mnmaj0(upd0, kBT);
  float acc[32], vacc[IL ? 32 : 1];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  if constexpr (IL) {
#pragma unroll
    for (int i = 0; i < 32; ++i) vacc[i] = 0.f;
  }
  uint32_t ph = 0;  // TM: parity of the current round of the stages' mbarriers
  // SP: S's key halves (the update's two accumulators), the previous chunk's V^T diag(w) and its stage.
  [[maybe_unused]] float(&s_lo)[32] = *reinterpret_cast<float(*)[32]>(S);
  [[maybe_unused]] float(&s_hi)[32] = *reinterpret_cast<float(*)[32]>(S + 32);
  [[maybe_unused]] uint32_t hfc[SP ? 16 : 1];
  [[maybe_unused]] uint32_t prev_soff = uint32_t(kSt - 1) * uint32_t(sizeof(Stage0));
  if constexpr (SP) {
#pragma unroll
    for (int i = 0; i < 16; ++i) hfc[i] = 0u;
  }
  for (int c = 0, stage = 0; c < nchunks; ++c, stage = stage == kSt - 1 ? 0 : stage + 1) {
    Stage0& st = ring[stage];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(Stage0));
    if constexpr (SP) issue_split_update<T>(s_lo, s_hi, hfc, dkt0, prev_soff);  // chunk c - 1's
    if constexpr (!SC) cp_async_wait<kAhead - 1>();  // chunk c's group (GDN: the newest, chunk c+1's, may still be in flight)
    if constexpr (TM) {
      mbar_wait(mbar + stage, ph);
      const int len = chunk_len(bos, eos, c);
      if (len < kBT) {
        zero_tail_rows<T>(st, len, t);  // rows past the chunk end: as cp.async's zero-fill
        if constexpr (SP) fence_view_async_shared();  // the zeros, for the wgmmas (async proxy)
      }
    }
    // SP: no proxy fence (a MEMBAR.ALL.CTA) on full chunks: the boxes and records arrive by the async proxy and are
    // visible to the mbarrier's waiters; nothing generic is written for a wgmma before this barrier.
    if constexpr (!SP) fence_view_async_shared();
    named_barrier(bar, 128);  // ... for every thread's copies and scales; all of WG0 is past chunk c-1

    uint32_t sf[32];  // S^T as the A operand of K S^T (and, through the hand-off, of Q S^T)
    if constexpr (SP) {  // each key half of S as soon as its update group is done
      wgmma_wait<1>();
      wgmma_fence_operands(s_lo);
#pragma unroll
      for (int i = 0; i < 16; ++i) sf[i] = MmaType<T>::pack(S[2 * i], S[2 * i + 1]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kK / 32; ++kk)
        wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_at(dk0, soff + kmaj_step(kk, kBT)), kk > 0);
      wgmma_commit();
      wgmma_wait<1>();  // the update's second half (the first half of K S^T may still run)
      wgmma_fence_operands(s_hi);
      wgmma_fence_regs(hfc);
#pragma unroll
      for (int i = 16; i < 32; ++i) sf[i] = MmaType<T>::pack(S[2 * i], S[2 * i + 1]);
      wgmma_fence();
#pragma unroll
      for (int kk = kK / 32; kk < kK / 16; ++kk)
        wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_at(dk0, soff + kmaj_step(kk, kBT)), 1);
      wgmma_commit();
      // Chunk c - 1's stage is refilled below: every warp has waited for its update.
      if (t < 32) named_barrier(kBarRefill, 128);
      else named_barrier_arrive(kBarRefill, 128);
    } else if constexpr (IL) {  // step kk's 4 packs, then its wgmma (the packs of step kk + 1 run beside it)
#pragma unroll
      for (int kk = 0; kk < kK / 16; ++kk) {
        il_pin<8>(S + 8 * kk);
#pragma unroll
        for (int i = 4 * kk; i < 4 * kk + 4; ++i) sf[i] = MmaType<T>::pack(S[2 * i], S[2 * i + 1]);
        wgmma_fence();
        wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_at(dk0, soff + kmaj_step(kk, kBT)), kk > 0);
        wgmma_commit();
      }
    } else {
      acc_to_frag<T, 64>(sf, S);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kK / 16; ++kk)
        wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_at(dk0, soff + kmaj_step(kk, kBT)), kk > 0);
      wgmma_commit();
    }

    const int ld_stage = stage == 0 ? kSt - 1 : stage - 1;  // chunk c-1's, whose readers all finished
    if constexpr (TM) {  // chunk c + 2: the boxes by thread 0, the scalars by every thread (SC: the record by thread 0)
      if (c + kAhead < nchunks) {
        const int64_t t0n = bos + int64_t(c + kAhead) * kBT;
        if (t == 0) {
          tma_state_tiles<T>(ring[ld_stage], *maps, mbar + ld_stage, t0n, ws.T_cap, h, j, j * p.V + v0,
                             SC ? chain_sc::kBytes0 : 0u, !mcols);
          if constexpr (SC)
            tma_state_record<T>(ring[ld_stage], chain_sc::record(ws, p.HV, j, r0, rlast, c + kAhead), mbar + ld_stage);
        }
        if constexpr (!SC) load_state_scalars<T>(ring[ld_stage], ws, t0n, chunk_len(bos, eos, c + kAhead), h, j, t);
      }
    } else if (c + kAhead < nchunks) {
      load_state_inputs<T, KDA>(ring[ld_stage], p, ws, bos + int64_t(c + kAhead) * kBT, chunk_len(bos, eos, c + kAhead),
                                h, j, v0, t, r0c + c + kAhead, !mcols);
    }
    if constexpr (!SC) cp_async_commit();
    auto& x = s.xch[c & 1];
    if constexpr (!SEG) {
      if (c >= 2) named_barrier(kBarEmpty + (c & 1), 256);  // WG1 has read chunk c-2's fragments
#pragma unroll
      for (int i = 0; i < 8; ++i) x.s[i][t] = make_uint4(sf[4 * i], sf[4 * i + 1], sf[4 * i + 2], sf[4 * i + 3]);
    }

    // Off the tensor pipe while K S^T runs: V^T (A fragments, by ldmatrix.trans from [token][v])
    // and the per-token scales of this thread's columns (pairs of adjacent tokens).
    uint32_t vv[16];  // V^T pairs (registers 2i, 2i + 1: same value row, adjacent tokens), packed
    if (mcols) {
#pragma unroll
      for (int i = 0; i < 16; ++i) vv[i] = 0u;
    } else {
#pragma unroll
      for (int kk = 0; kk < kBT / 16; ++kk) {
        uint32_t r[4];
        if constexpr (TM) ldsm_x4_t(r, v_tile<T>(st) + sw128_offset(16 * kk + ld_row, ld_col));  // swizzled box
        else ldsm_x4_t(r, &st.v[16 * kk + ld_row][ld_col]);
        vv[4 * kk] = r[0], vv[4 * kk + 1] = r[1], vv[4 * kk + 2] = r[2], vv[4 * kk + 3] = r[3];
      }
    }
    float erk[16];  // KDA: 1 (the gate and rk are inside kg)
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      if constexpr (KDA) {
        erk[2 * m] = erk[2 * m + 1] = 1.f;
      } else {
        const float2 e2 = *reinterpret_cast<const float2*>(&st.erk[slot_col(t, 2 * m)]);
        erk[2 * m] = e2.x, erk[2 * m + 1] = e2.y;
      }
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_regs(sf);

    uint32_t xf[16];  // X^T = V^T - KS^T diag(e^gam rk)
    if constexpr (IL) {  // V^T = X^T Ab^T into vacc, step kk as soon as X^T's tokens 16kk.. exist
#pragma unroll
      for (int kk = 0; kk < kBT / 16; ++kk) {
        il_pin<8>(acc + 8 * kk);
#pragma unroll
        for (int i = 4 * kk; i < 4 * kk + 4; ++i)
          xf[i] = MmaType<T>::pack(MmaType<T>::to_float(lo_half<T>(vv[i])) - erk[reg_slot(2 * i)] * acc[2 * i],
                                   MmaType<T>::to_float(hi_half<T>(vv[i])) - erk[reg_slot(2 * i + 1)] * acc[2 * i + 1]);
        wgmma_fence();
        wgmma_m64k16_rs<T, 64, 0>(vacc, xf + 4 * kk, desc_at(da0, soff + kmaj_step(kk, kBT)), kk > 0);
        wgmma_commit();
      }
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i)
        xf[i] = MmaType<T>::pack(MmaType<T>::to_float(lo_half<T>(vv[i])) - erk[reg_slot(2 * i)] * acc[2 * i],
                                 MmaType<T>::to_float(hi_half<T>(vv[i])) - erk[reg_slot(2 * i + 1)] * acc[2 * i + 1]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBT / 16; ++kk)
        wgmma_m64k16_rs<T, 64, 0>(acc, xf + 4 * kk, desc_at(da0, soff + kmaj_step(kk, kBT)), kk > 0);
      wgmma_commit();
    }
    float wsc[16];  // e^(gam_L - gam) rk, zero past the chunk end (KDA: 1; inside kgl, zero-filled rows)
    if constexpr (KDA) {
#pragma unroll
      for (int i = 0; i < 16; ++i) wsc[i] = 1.f;
      // Per-key decay: accumulator registers 4m + {0, 2} / {1, 3} hold keys 8m + 2 (t % 4) + 0 / 1.
#pragma unroll
      for (int m = 0; m < 16; ++m) {
        const float2 g2 = *reinterpret_cast<const float2*>(&st.kda.gk[8 * m + 2 * (t & 3)]);
        S[4 * m] *= g2.x, S[4 * m + 1] *= g2.y, S[4 * m + 2] *= g2.x, S[4 * m + 3] *= g2.y;
      }
    } else {
#pragma unroll
      for (int m = 0; m < 8; ++m) {
        const float2 w2 = *reinterpret_cast<const float2*>(&st.wsc[slot_col(t, 2 * m)]);
        wsc[2 * m] = w2.x, wsc[2 * m + 1] = w2.y;
      }
      const float decay = st.decay;
#pragma unroll
      for (int i = 0; i < 64; ++i) S[i] *= decay;
    }
    wgmma_wait<0>();
    uint32_t vf[16], hf[16];  // V^T, and V^T diag(e^(gam_L - gam) rk) for the state update
    if constexpr (IL) {  // the update's step kk as soon as its 4 registers of V^T diag(w) exist
      wgmma_fence_operands(vacc);
      wgmma_fence_regs(xf);
#pragma unroll
      for (int kk = 0; kk < kBT / 16; ++kk) {
        il_pin<8>(vacc + 8 * kk);
#pragma unroll
        for (int i = 4 * kk; i < 4 * kk + 4; ++i) {
          vf[i] = MmaType<T>::pack(vacc[2 * i], vacc[2 * i + 1]);
          hf[i] = MmaType<T>::pack(vacc[2 * i] * wsc[reg_slot(2 * i)], vacc[2 * i + 1] * wsc[reg_slot(2 * i + 1)]);
        }
        wgmma_fence();
        wgmma_m64k16_rs<T, 128, 1>(S, hf + 4 * kk, desc_at(dkt0, soff + uint32_t(kk) * 2048u), 1);
        wgmma_commit();
      }
    } else {
      wgmma_fence_operands(acc);
      wgmma_fence_regs(xf);
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        vf[i] = MmaType<T>::pack(acc[2 * i], acc[2 * i + 1]);
        hf[i] = MmaType<T>::pack(acc[2 * i] * wsc[reg_slot(2 * i)], acc[2 * i + 1] * wsc[reg_slot(2 * i + 1)]);
      }
      if constexpr (!SP) {  // SP: issued at the top of chunk c + 1
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBT / 16; ++kk)
          wgmma_m64k16_rs<T, 128, 1>(S, hf + 4 * kk, desc_at(dkt0, soff + uint32_t(kk) * 2048u), 1);
        wgmma_commit();
      }
    }
    if constexpr (!SEG) {
#pragma unroll
      for (int i = 0; i < 4; ++i) x.v[i][t] = make_uint4(vf[4 * i], vf[4 * i + 1], vf[4 * i + 2], vf[4 * i + 3]);
      named_barrier_arrive(kBarFull + (c & 1), 256);
    }
    // While the update runs: chunk c+1's scales (its group, committed during chunk c-1, is the
    // older of the two in flight); the barrier at the top of chunk c+1 publishes them.
    if constexpr (!KDA && !SC) {
      cp_async_wait<1>();
      if (c + 1 < nchunks) state_scales<T>(ring[stage == kSt - 1 ? 0 : stage + 1], chunk_len(bos, eos, c + 1), t);
    }
    if constexpr (SP) {
#pragma unroll
      for (int i = 0; i < 16; ++i) hfc[i] = hf[i];
      prev_soff = soff;
    } else {
      wgmma_wait<0>();
      wgmma_fence_operands(S);
      wgmma_fence_regs(hf);
    }
    if constexpr (TM) ph ^= stage == kSt - 1 ? 1u : 0u;
  }
  if constexpr (SP) {  // the last chunk's update (no chunk: zero times stage kSt - 1's zeroed k tile)
    issue_split_update<T>(s_lo, s_hi, hfc, dkt0, prev_soff);
    wgmma_wait<0>();
    wgmma_fence_operands(S);
  }
  cp_async_wait<0>();
  if constexpr (SEG) {  // fp32 K-major: seg_S [n, HV, K, V], seg_M [n, HV, K, K] (row = key)
    const int ld = mcols ? p.K : p.V, col0 = mcols ? v0 - p.V : v0;
    float* dst = (mcols ? p.seg_M : p.seg_S) + (n * p.HV + j) * int64_t(p.K) * ld + col0;
#pragma unroll
    for (int i = 0; i < 64; ++i) dst[acc_col(t, i) * ld + acc_row(t, i)] = S[i];
  } else if (p.ht) {
#pragma unroll
    for (int i = 0; i < 64; ++i) p.ht[state_index(p, n, j, acc_col(t, i), v0 + acc_row(t, i))] = S[i];
  }
}

}  // namespace
}  // namespace linattn::cuda
