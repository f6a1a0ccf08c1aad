// The state warpgroup's (WG0) input ring of the pipelined GDN forward filled by TMA instead of
// per-thread cp.async (gdn_fused_wgp.cu, chain mode kChainTma; LINATTN_CUDA_GDN_CHAIN=tma):
// thread 0 of WG0 issues four 2-D tensor boxes per chunk (k keys 0-63 / 64-127, the v slice, Ab;
// 64 rows x 128 bytes each, 128-byte swizzle: the layouts the wgmma descriptors already read) that
// complete on the stage's mbarrier; every thread still cp.asyncs its own copies of gam / rk / gl
// (the per-token scales, as before). Why: by ncu's per-instruction samples (3d3a678) WG0 spent ~29%
// of its chunk step issuing the 19 per-thread cp.asyncs and their 64-bit address arithmetic.
// TMA reads whole boxes: rows past the chunk end (the next sequence, or padding) are zeroed by WG0
// after the mbarrier wait (partial chunks only), so the tiles hold exactly what cp.async's zero-fill
// gave. The v tile is the 8 KB swizzled box at Stage0::v's (1024-aligned) offset instead of the
// padded [64][72] layout; its ldmatrix.trans addresses follow the swizzle.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "cuda/common/tma.cuh"
#include "cuda/gdn/gdn_fused_wgp_common.cuh"

namespace linattn::cuda {
namespace wgp {

// The state chain's modes (bits; gdn_fused_wgp.cu's state_warpgroup MODE): kChainTma1 = WG1's q / P
// ring by TMA as well (output_warpgroup's TM1, gdn_fused_wgp_common.cuh); kChainSc (with both TMA rings;
// "tma3") = the per-token scales from the prep's records (gdn_chain_scales.cuh), bulk-copied beside the tiles;
// kChainSplit (with tma3's bits; "tma4") = the state update issued as two key halves at the top of the next chunk,
// so K S^T's first half starts while the update's second half runs (gdn_fused_wgp.cu's state_warpgroup);
// kChainOst (with tma3's bits; "tma4" has it too) = WG1's full output chunks leave a swizzled staging box by one
// TMA tensor store (output_warpgroup's BS, gdn_fused_wgp_common.cuh).
constexpr int kChainIl = 1, kChainTma = 2, kChainTma1 = 4, kChainSc = 8, kChainSplit = 16, kChainOst = 32;
// WG0's refill barrier of the split chain (warps 1-3 arrive, warp 0 waits before thread 0 refills a stage).
constexpr int kBarRefill = 7;

// Tensor maps of one launch (built on the host per call, passed by value).
struct StateMaps {
  CUtensorMap k;   // [T_total, H * 128], box 64 x 64
  CUtensorMap v;   // [T_total, HV * V], box 64 x 64
  CUtensorMap ab;  // [HV * T_cap, 64], box 64 x 64
  CUtensorMap q;   // [T_total, H * 128] (kChainTma1 only)
  CUtensorMap p;   // [HV * T_cap, 64] (kChainTma1 only)
  CUtensorMap o;   // [T_total, HV * V], box 64 x 64 (kChainOst only: WG1's output box stores)
};

constexpr uint32_t kTmaStageBytes = 4u * kBT * 128u;  // k (2 panels), v slice, Ab

template <class T>
__device__ __forceinline__ uint8_t* v_tile(typename WgpSmem<T>::Stage0& st) {
  return reinterpret_cast<uint8_t*>(&st.v[0][0]);
}

// Thread 0 of WG0: chunk rows [t0, t0 + 64) of k (key head h), v (value head j, columns v0..),
// Ab (value head j) into stage st, completing on bar; extra_tx: bytes of further copies the caller
// issues on bar for the same phase (kChainSc: the record's WG0 part). with_v false (the tier-3 state
// pass's transition columns, which read no v): no v box.
template <class T>
__device__ __forceinline__ void tma_state_tiles(typename WgpSmem<T>::Stage0& st, const StateMaps& m, uint64_t* bar,
                                                int64_t t0, int64_t t_cap, int h, int j, int v0,
                                                uint32_t extra_tx = 0, bool with_v = true) {
  mbar_arrive_expect_tx(bar, kTmaStageBytes - (with_v ? 0u : uint32_t(kBT) * 128u) + extra_tx);
  const int row = static_cast<int>(t0);
  tma_load_2d(st.k, &m.k, h * kK, row, bar);
  tma_load_2d(st.k + kBT * 128, &m.k, h * kK + 64, row, bar);
  if (with_v) tma_load_2d(v_tile<T>(st), &m.v, v0, row, bar);  // v0 = j * V + slice start (the caller's column)
  tma_load_2d(st.a, &m.ab, 0, static_cast<int>(j * t_cap + t0), bar);
}

// The per-token inputs of the scales (thread t: token t % 64), as load_state_inputs copies them.
template <class T>
__device__ __forceinline__ void load_state_scalars(typename WgpSmem<T>::Stage0& st, const GdnChunkWs& ws, int64_t t0,
                                                   int len, int h, int j, int t) {
  const int tok = t & 63;
  const bool valid = tok < len;
  cp_async4(st.gam + t, ws.gam + j * ws.T_cap + (valid ? t0 + tok : 0), valid);
  cp_async4(st.rk + t, ws.rk + h * ws.T_cap + (valid ? t0 + tok : 0), valid);
  if (t >= 64) cp_async4(st.gl + tok, ws.gam + j * ws.T_cap + t0 + len - 1, true);
}

// Rows [len, 64) of the four boxes set to zero (all 128 threads of WG0; partial chunks only). The
// boxes are the stage's first 32 KB, 8 KB each (k panel 0, k panel 1, Ab, v; asserted below), a
// row 128 contiguous bytes of each (the swizzle permutes 16-byte chunks within a row).
template <class T>
__device__ __forceinline__ void zero_tail_rows(typename WgpSmem<T>::Stage0& st, int len, int t) {
  for (int idx = t; idx < (kBT - len) * 32; idx += 128) {
    const int row = len + (idx >> 5), part = idx & 31;
    *reinterpret_cast<uint4*>(st.k + (part >> 3) * 8192 + row * 128 + (part & 7) * 16) = make_uint4(0u, 0u, 0u, 0u);
  }
}

// kChainSc, thread 0 of WG0 after tma_state_tiles(..., chain_sc::kBytes0): the record's WG0 part into the
// stage's erk, wsc, decay (+ 12 bytes of the stage's padding; asserted below).
template <class T>
__device__ __forceinline__ void tma_state_record(typename WgpSmem<T>::Stage0& st, const float* rec, uint64_t* bar) {
  bulk_load_1d(st.erk, rec, chain_sc::kBytes0, bar);
}

template <class T>
constexpr bool stage_records_fit() {
  using S0 = typename WgpSmem<T>::Stage0;
  using S1 = typename WgpSmem<T>::Stage1;
  return offsetof(S0, erk) % 16 == 0 && offsetof(S0, wsc) == offsetof(S0, erk) + 4 * chain_sc::kWsc &&
         offsetof(S0, decay) == offsetof(S0, erk) + 4 * chain_sc::kDecay &&
         offsetof(S0, erk) + chain_sc::kBytes0 <= sizeof(S0) && offsetof(S1, qsc) % 16 == 0 &&
         sizeof(S1::qsc) == chain_sc::kBytes1;
}
static_assert(stage_records_fit<__nv_bfloat16>() && stage_records_fit<__half>(),
              "gdn fused (tma3): the scale records' parts must land on Stage0's erk / wsc / decay and Stage1's qsc");

template <class T>
constexpr bool stage0_boxes_contiguous() {
  using S = typename WgpSmem<T>::Stage0;
  return offsetof(S, k) == 0 && offsetof(S, a) == 16384 && offsetof(S, v) == 24576 && sizeof(S::k) == 16384 &&
         sizeof(S::a) == 8192 && sizeof(S::v) >= 8192;
}
// kChainOst: the output staging holds a 64 x 128-byte swizzled box at a 1024-aligned offset.
template <class T>
constexpr bool output_box_fits() {
  using S = WgpSmem<T>;
  return offsetof(S, o) % 1024 == 0 && sizeof(S::o) >= kBT * 128;
}
static_assert(output_box_fits<__nv_bfloat16>() && output_box_fits<__half>(),
              "gdn fused (tma4 / ost): the output staging must hold a 1024-aligned 8 KB box");

static_assert(stage0_boxes_contiguous<__nv_bfloat16>() && stage0_boxes_contiguous<__half>(),
              "gdn fused (TMA ring): Stage0's k / Ab / v boxes must be the stage's first 32 KB");

}  // namespace wgp
}  // namespace linattn::cuda
