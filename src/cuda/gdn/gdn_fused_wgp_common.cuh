// Shared pieces of the pipelined wgmma GDN forward kernel (gdn_fused_wgp.cu: step 3, the state
// chain K S^T -> X -> Ab X -> update per chunk; kept apart so a state-chain variant can reuse them,
// as the look-ahead chain measured in perf-notes "Step 4" did): the
// shared-memory layout (WG0's 3-stage k / v / Ab ring with per-token scales, WG1's 2-stage q / P
// ring, the S^T / V^T fragment hand-off double buffer, the output staging), the cp.async loaders,
// the per-token scales and the output warpgroup (WG1; its TM1 instance takes q / P by TMA boxes,
// load_output_tma, for gdn_fused_wgp.cu's tma2 chain mode).
// Layouts and thread mapping: see gdn_fused_wgp.cu's header. bf16 / fp16, BT 64, K 128, V-slice 64.
// Gate policy (template KDA, as in gdn_fused.cu): GDN reads q / k and the per-token gam / rq / rk;
// KDA reads the KDA prep's gated qg / kg ([HV, T_cap, K]) in their place, kgl ([HV, T_cap, K], the
// update's operand, an extra tile per WG0 stage) and gl (2^gam_L per key), no per-token scales.
// KDA's WG0 ring has 2 stages (one chunk ahead): a third 48 KB stage does not fit.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/mma.cuh"
#include "cuda/common/tma.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/gdn/gdn_chain_scales.cuh"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {
namespace wgp {

constexpr int kBT = 64, kK = 128, kVS = 64, kThreads = 256, kLdV = kVS + 8;
constexpr int kStages1 = 2;
// WG0's ring depth per gate policy: GDN loads two chunks ahead, KDA one.
template <bool KDA>
constexpr int kStages0 = KDA ? 2 : 3;
// Named barriers (0 is __syncthreads): per-warpgroup, and the two hand-off buffers' full / empty.
constexpr int kBarWg0 = 1, kBarWg1 = 2, kBarFull = 3, kBarEmpty = 5;

// KDA's extra inputs of one WG0 stage (GDN: none).
template <bool KDA>
struct KdaStage0 {};
template <>
struct KdaStage0<true> {
  alignas(1024) uint8_t kl[kBT * kK * 2];  // kgl [token][key] K-major like k (read MN-major: the update's B)
  float gk[kK];                            // 2^gam_L per key (the state's per-key decay)
};

// The hand-off buffer of one chunk per V-slice width. VS 64: S^T / V^T as bf16 A fragments in fragment
// order. VS 32 (gdn_fused_wgp_vs32.cuh): S^T [32 v][128 keys] and V^T [32 v][64 tokens] as K-major
// 128-byte-swizzled B tiles (WG1's Q S and P V^ read them by descriptor), and w, WG0's own scratch tile
// [32 v][64 tokens] for X^T and then H^T of the chunk (the B operands of Ab X and of the update).
template <int VS>
struct WgpXch;
template <>
struct WgpXch<64> {  // bf16 A fragments of chunk c in fragment order: [register / 4][thread]
  uint4 s[8][128];   // S^T (K = 128 keys)
  uint4 v[4][128];   // V^T (K = 64 tokens)
};
template <>
struct WgpXch<32> {
  alignas(1024) uint8_t s[2 * 32 * 128];  // S^T [v][key], 2 panels of 64 keys
  alignas(1024) uint8_t v[32 * 128];      // V^T [v][token]
  alignas(1024) uint8_t w[32 * 128];      // X^T, then H^T [v][token] (WG0 only)
};

// VS: the V-slice (columns of v / o per CTA), 64 (the default kernel) or 32 (the VS-32 instance).
template <class T, bool KDA, int VS>
struct WgpSmemT {
  static_assert(VS == 64 || VS == 32, "gdn fused (pipelined): V-slice 64 or 32");
  struct alignas(1024) Stage0 {  // WG0's inputs of one chunk
    alignas(1024) uint8_t k[kBT * kK * 2];   // [token][key] K-major, panels of 64 keys
    alignas(1024) uint8_t a[kBT * kBT * 2];  // Ab [t][s]
    T v[kBT][VS + 8];                        // [token][v]
    // Raw per-token inputs, one private copy per thread (thread t: token t % 64), so each thread
    // turns its own cp.async copies into a scale without a barrier: threads 0-63 e^gam rk,
    // threads 64-127 e^(gam_L - gam) rk (gl: gam of the chunk's last valid row).
    float gam[2 * kBT], rk[2 * kBT], gl[kBT];
    float erk[kBT], wsc[kBT];  // e^gam rk, e^(gam_L - gam) rk (0 past the chunk end): per token
    float decay;               // e^gam_L
    KdaStage0<KDA> kda;        // KDA only, after every GDN field (GDN's layout is unchanged)
  };
  struct alignas(1024) Stage1 {  // WG1's inputs of one chunk
    alignas(1024) uint8_t q[kBT * kK * 2];
    alignas(1024) uint8_t p[kBT * kBT * 2];  // P [t][s]
    float gam[kBT], rq[kBT];  // raw inputs, thread t < 64 copies token t
    float qsc[kBT];           // scale e^gam rq per token
  };
  using Xch = WgpXch<VS>;
  Stage0 st0[kStages0<KDA>];
  Stage1 st1[kStages1];
  Xch xch[2];
  T o[kBT][VS + 8];  // output staging [token][v]
};
template <class T, bool KDA = false>
using WgpSmem = WgpSmemT<T, KDA, 64>;

__device__ __forceinline__ uint32_t kmaj(int row, int col, int rows) {
  return uint32_t(col >> 6) * uint32_t(rows) * 128u + sw128_offset(row, col & 63);
}
// Descriptors are built once per tile of stage 0 and advanced by byte offsets (stage, k16 step):
// the start-address field is the low 14 bits of the low word and shared addresses stay below
// 256 KB, so an offset is one 32-bit add with no carry into the other fields.
__device__ __forceinline__ uint64_t desc_at(uint64_t d, uint32_t bytes) {
  return (d & 0xFFFFFFFF00000000ull) | uint32_t(uint32_t(d) + (bytes >> 4));
}
// K-major operand (rows along M / N, K contiguous): descriptor of stage 0 and k16 step kk's offset.
__device__ __forceinline__ uint64_t desc_kmaj0(const uint8_t* base) { return wgmma_desc_sw128(smem_u32(base), 16u, 1024u); }
__host__ __device__ constexpr uint32_t kmaj_step(int kk, int rows) {
  return uint32_t(kk >> 2) * uint32_t(rows) * 128u + uint32_t(kk & 3) * 32u;
}
// MN-major operand (rows along K, MN contiguous in blocks of 64); a k16 step is 2048 bytes.
__device__ __forceinline__ uint64_t desc_mnmaj0(const uint8_t* base, int krows) {
  return wgmma_desc_sw128(smem_u32(base), uint32_t(krows) * 128u, 1024u);
}

// cp.async of rows row0 + u * row_step (u < kN) of a tile, one 16-byte chunk per row: source
// src + u * src_step (elements), destination dst + u * dst_step (bytes); rows at or past len are
// zero-filled from the always-valid row-0 address src0. Full chunks take the unpredicated path.
template <int kN, class T>
__device__ __forceinline__ void copy_rows(uint8_t* dst, uint32_t dst_step, const T* src, int64_t src_step, const T* src0,
                                          int row0, int row_step, int len) {
  if (len == kBT) {
#pragma unroll
    for (int u = 0; u < kN; ++u) cp_async16(dst + u * dst_step, src + u * src_step, true);
  } else {
#pragma unroll
    for (int u = 0; u < kN; ++u) {
      const bool valid = row0 + u * row_step < len;
      cp_async16(dst + u * dst_step, valid ? src + u * src_step : src0, valid);
    }
  }
}
// Token (N index) of accumulator register pair slot e = 2 * (reg / 4) + reg % 2 of thread t.
__device__ __forceinline__ int slot_col(int t, int e) { return 8 * (e >> 1) + 2 * (t & 3) + (e & 1); }
__device__ __forceinline__ int reg_slot(int i) { return 2 * (i >> 2) + (i & 1); }

template <class T>
__device__ __forceinline__ T lo_half(uint32_t u) {
  const uint16_t b = uint16_t(u & 0xFFFFu);
  return *reinterpret_cast<const T*>(&b);
}
template <class T>
__device__ __forceinline__ T hi_half(uint32_t u) {
  const uint16_t b = uint16_t(u >> 16);
  return *reinterpret_cast<const T*>(&b);
}

template <class T, int R>
__device__ __forceinline__ void acc_to_frag(uint32_t (&f)[R / 2], const float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R / 2; ++i) f[i] = MmaType<T>::pack(d[2 * i], d[2 * i + 1]);
}

// The v tile [token][VS + 8] of one chunk at VS 32 (v: the slice's row-0 source, vstride elements per
// token): thread t copies chunk t % 4 of rows t / 4 + 32u (VS 64: load_state_inputs' own copy).
template <class T, int VS>
__device__ __forceinline__ void copy_v_rows(T (*dst)[VS + 8], const T* v, int64_t vstride, int t, int len) {
  constexpr int kCh = VS / 8, kShift = VS == 64 ? 3 : 2, kStep = 128 / kCh;  // 16-byte chunks per row
  const int vr = t >> kShift, vc = (t & (kCh - 1)) * 8;
  copy_rows<kBT / kStep>(reinterpret_cast<uint8_t*>(&dst[vr][vc]), uint32_t(kStep) * (VS + 8) * sizeof(T),
                         v + vr * vstride + vc, kStep * vstride, v, vr, kStep, len);
}

// The chunk's v tile, for both gate policies: VS 64 copies chunk vc / 8 of rows vr + 16u (the caller's mapping,
// shared with its Ab tile), VS 32 copy_v_rows' own mapping.
template <class T, int VS, class Dst>
__device__ __forceinline__ void copy_v_tile(Dst& dst, const T* v, int64_t vstride, int t, int vr, int vc, int len) {
  if constexpr (VS == 64)
    copy_rows<4>(reinterpret_cast<uint8_t*>(&dst[vr][vc]), 16u * kLdV * sizeof(T), v + vr * vstride + vc, 16 * vstride, v,
                 vr, 16, len);
  else
    copy_v_rows<T, VS>(dst, v, vstride, t, len);
}

// gl_row (KDA): the chunk's row of ws.gl (the prep grid's chunk row). load_v false (the tier-3
// state pass's transition columns, v = 0): no v tile.
template <class T, bool KDA = false, int VS = 64>
__device__ __forceinline__ void load_state_inputs(typename WgpSmemT<T, KDA, VS>::Stage0& st, const GdnFwdParams& p,
                                                  const GdnChunkWs& ws, int64_t t0, int len, int h, int j, int v0,
                                                  int t, int64_t gl_row = 0, bool load_v = true) {
  if constexpr (KDA) {  // kg / kgl [HV, T_cap, K] in place of k; gl instead of the per-token inputs
    const int64_t gbase = (j * ws.T_cap + t0) * kK;
    const T* k = static_cast<const T*>(ws.kg) + gbase;
    const T* kl = static_cast<const T*>(ws.kgl) + gbase;
    const T* v = static_cast<const T*>(p.v) + (t0 * p.HV + j) * int64_t(p.V) + v0;
    const T* A = static_cast<const T*>(ws.Ab) + (j * ws.T_cap + t0) * kBT;
    const int64_t vstride = int64_t(p.HV) * p.V;
    const int kr = t >> 4, kc = (t & 15) * 8, vr = t >> 3, vc = (t & 7) * 8;  // as for GDN below
    copy_rows<8>(st.k + kmaj(kr, kc, kBT), 1024u, k + kr * kK + kc, 8 * kK, k, kr, 8, len);
    copy_rows<8>(st.kda.kl + kmaj(kr, kc, kBT), 1024u, kl + kr * kK + kc, 8 * kK, kl, kr, 8, len);
    if (load_v) copy_v_tile<T, VS>(st.v, v, vstride, t, vr, vc, len);
    copy_rows<4>(st.a + sw128_offset(vr, vc), 2048u, A + vr * kBT + vc, 16 * kBT, A, vr, 16, len);
    if (t < kK / 4) cp_async16(&st.kda.gk[4 * t], ws.gl + (gl_row * p.HV + j) * kK + 4 * t, true);
    return;
  }
  const T* k = static_cast<const T*>(p.k) + (t0 * p.H + h) * kK;
  const T* v = static_cast<const T*>(p.v) + (t0 * p.HV + j) * int64_t(p.V) + v0;
  const T* A = static_cast<const T*>(ws.Ab) + (j * ws.T_cap + t0) * kBT;
  const int64_t kstride = int64_t(p.H) * kK, vstride = int64_t(p.HV) * p.V;
  // k: thread t copies chunk t % 16 of rows t / 16 + 8u; v, Ab: chunk t % 8 of rows t / 8 + 16u.
  const int kr = t >> 4, kc = (t & 15) * 8, vr = t >> 3, vc = (t & 7) * 8;
  copy_rows<8>(st.k + kmaj(kr, kc, kBT), 1024u, k + kr * kstride + kc, 8 * kstride, k, kr, 8, len);
  if (load_v) copy_v_tile<T, VS>(st.v, v, vstride, t, vr, vc, len);
  copy_rows<4>(st.a + sw128_offset(vr, vc), 2048u, A + vr * kBT + vc, 16 * kBT, A, vr, 16, len);
  const int tok = t & 63;
  const bool valid = tok < len;
  cp_async4(st.gam + t, ws.gam + j * ws.T_cap + (valid ? t0 + tok : 0), valid);
  cp_async4(st.rk + t, ws.rk + h * ws.T_cap + (valid ? t0 + tok : 0), valid);
  if (t >= 64) cp_async4(st.gl + tok, ws.gam + j * ws.T_cap + t0 + len - 1, true);
}

// The per-token scales of one chunk, computed once (one value per thread) from the thread's own
// copies: the caller has waited for the chunk's cp.async group; a later WG0 barrier publishes them.
template <class T, int VS = 64>
__device__ __forceinline__ void state_scales(typename WgpSmemT<T, false, VS>::Stage0& st, int len, int t) {
  const int tok = t & 63;
  const float g = st.gam[t], r = st.rk[t];
  if (t < 64) {
    st.erk[tok] = chain_sc::erk(g, r);
  } else {
    const float gl = st.gl[tok];
    st.wsc[tok] = tok < len ? chain_sc::wsc(gl, g, r) : 0.f;
    if (tok == 0) st.decay = chain_sc::decay(gl);
  }
}

template <class T, bool KDA = false, int VS = 64>
__device__ __forceinline__ void load_output_inputs(typename WgpSmemT<T, KDA, VS>::Stage1& st, const GdnFwdParams& p,
                                                   const GdnChunkWs& ws, int64_t t0, int len, int h, int j, int t) {
  const T* q = KDA ? static_cast<const T*>(ws.qg) + (j * ws.T_cap + t0) * kK : static_cast<const T*>(p.q) + (t0 * p.H + h) * kK;
  const T* P = static_cast<const T*>(ws.P) + (j * ws.T_cap + t0) * kBT;
  const int64_t qstride = KDA ? int64_t(kK) : int64_t(p.H) * kK;
  const int kr = t >> 4, kc = (t & 15) * 8, vr = t >> 3, vc = (t & 7) * 8;  // as in load_state_inputs
  copy_rows<8>(st.q + kmaj(kr, kc, kBT), 1024u, q + kr * qstride + kc, 8 * qstride, q, kr, 8, len);
  copy_rows<4>(st.p + sw128_offset(vr, vc), 2048u, P + vr * kBT + vc, 16 * kBT, P, vr, 16, len);
  if (!KDA && t < 64) {
    const bool valid = t < len;
    cp_async4(st.gam + t, ws.gam + j * ws.T_cap + (valid ? t0 + t : 0), valid);
    cp_async4(st.rq + t, ws.rq + h * ws.T_cap + (valid ? t0 + t : 0), valid);
  }
}

__device__ __forceinline__ int chunk_len(int64_t bos, int64_t eos, int c) {
  return static_cast<int>(min(int64_t(kBT), eos - (bos + int64_t(c) * kBT)));
}

// TM1 (GDN; gdn_fused_wgp_tma.cuh): WG1's q tile (2 boxes of map qm) and P tile (pm) by TMA from thread 0
// on bar; the per-token gam / rq as load_output_inputs. Rows past the chunk end are not zeroed: they
// reach only O's columns of those tokens (column t of S^T Q^T and of V^T P^T reads q / P row t only),
// which are never stored. SC (chain mode tma3): no gam / rq; thread 0 bulk-copies the qsc part of the
// chunk's scale record rec (gdn_chain_scales.cuh) into st.qsc on the same barrier.
template <class T, bool SC = false>
__device__ __forceinline__ void load_output_tma(typename WgpSmem<T>::Stage1& st, const GdnFwdParams& p,
                                                const GdnChunkWs& ws, const CUtensorMap* qm, const CUtensorMap* pm,
                                                uint64_t* bar, int64_t t0, int len, int h, int j, int t,
                                                const float* rec = nullptr) {
  if (t == 0) {
    mbar_arrive_expect_tx(bar, 3u * kBT * 128u + (SC ? chain_sc::kBytes1 : 0u));
    tma_load_2d(st.q, qm, h * kK, static_cast<int>(t0), bar);
    tma_load_2d(st.q + kBT * 128, qm, h * kK + 64, static_cast<int>(t0), bar);
    tma_load_2d(st.p, pm, 0, static_cast<int>(j * ws.T_cap + t0), bar);
    if constexpr (SC) bulk_load_1d(st.qsc, rec + chain_sc::kQsc, chain_sc::kBytes1, bar);
  }
  if (!SC && t < 64) {
    const bool valid = t < len;
    cp_async4(st.gam + t, ws.gam + j * ws.T_cap + (valid ? t0 + t : 0), valid);
    cp_async4(st.rq + t, ws.rq + h * ws.T_cap + (valid ? t0 + t : 0), valid);
  }
}

// WG1: the output of chunk c from WG0's S^T / V^T fragments, one chunk behind WG0.
// TM1 (GDN only): q / P by TMA (load_output_tma; maps qm, pm; mbarriers mbar1[2], one per stage).
// SC (with TM1; chain mode tma3): qsc from the prep's scale records of sequence n, no cp.async at all.
// BS (with SC; chain mode tma4 / "ost"): O is staged in the first 8 KB of s.o as a 128-byte-swizzled 64 x 64 box
// (stmatrix at sw128 addresses: conflict-free like the padded rows) and a full chunk leaves by one TMA tensor store
// of map om from thread 0 (no LDS / STG round trip on 128 threads); partial chunks (rows past the end belong to the
// next sequence) keep the per-thread stores, from the swizzled box. Thread 0 waits for the store's smem reads
// (bulk_wait_read0) before the next chunk's top barrier and for its completion at the end.
template <class T, bool KDA = false, bool TM1 = false, bool SC = false, bool BS = false>
__device__ void output_warpgroup(WgpSmem<T, KDA>& s, const GdnFwdParams& p, const GdnChunkWs& ws, int64_t bos,
                                 int64_t eos, int nchunks, int h, int j, int v0, int t, const CUtensorMap* qm = nullptr,
                                 const CUtensorMap* pm = nullptr, uint64_t* mbar1 = nullptr, int64_t n = 0,
                                 const CUtensorMap* om = nullptr) {
  static_assert(!(TM1 && KDA), "WG1's TMA ring is GDN's");
  static_assert(!SC || TM1, "the scale records ride on the TMA ring");
  static_assert(!BS || SC, "the bulk-copy output is an instance of tma3");
  using Stage1 = typename WgpSmem<T, KDA>::Stage1;
  int r0 = 0, rlast = 0;  // SC: the record rows of sequence n
  if constexpr (SC) chain_sc::record_rows(p, ws, n, r0, rlast);
  if constexpr (TM1) {
    if (t == 0) {
      mbar_init(mbar1, 1);
      mbar_init(mbar1 + 1, 1);
      fence_barrier_init();
    }
    named_barrier(kBarWg1, 128);  // the barriers are initialised before anyone waits on them
    if (nchunks > 0)
      load_output_tma<T, SC>(s.st1[0], p, ws, qm, pm, mbar1, bos, chunk_len(bos, eos, 0), h, j, t,
                             SC ? chain_sc::record(ws, p.HV, j, r0, rlast, 0) : nullptr);
  } else {
    if (nchunks > 0) load_output_inputs<T, KDA>(s.st1[0], p, ws, bos, chunk_len(bos, eos, 0), h, j, t);
  }
  if constexpr (!SC) cp_async_commit();
  T* o_base = static_cast<T*>(p.o) + int64_t(j) * p.V + v0;
  const int64_t ostride = int64_t(p.HV) * p.V;
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  const int lane = t & 31, mat = lane >> 3;  // stmatrix.trans lane address, as in the state warpgroup
  const int st_row = 8 * (mat >> 1) + (lane & 7), st_col = 16 * (t >> 5) + 8 * (mat & 1);
  const uint64_t dq0 = desc_kmaj0(s.st1[0].q), dp0 = desc_kmaj0(s.st1[0].p);
  [[maybe_unused]] uint8_t* const o_box = reinterpret_cast<uint8_t*>(&s.o[0][0]);  // BS: 1024-aligned (asserted)
  for (int c = 0; c < nchunks; ++c) {
    const int stage = c & 1;
    Stage1& st = s.st1[stage];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(Stage1));
    const int64_t t0 = bos + int64_t(c) * kBT;
    const int len = chunk_len(bos, eos, c);
    if constexpr (!SC) cp_async_wait<0>();
    if constexpr (TM1) mbar_wait(mbar1 + stage, uint32_t(c >> 1) & 1u);  // stage c % 2's (c / 2)-th round
    if (!KDA && !SC && t < 64) st.qsc[t] = chain_sc::qsc(p.scale, st.gam[t], st.rq[t]);  // own copies
    if (BS && t == 0) bulk_wait_read0();  // chunk c-1's box has left the staging (long done: a chunk ago)
    // BS (SC: nothing generic is written for the async proxy before this barrier; q / P / qsc come by TMA and
    // the mbarrier): no proxy fence (a MEMBAR.ALL.CTA behind the previous chunk's stores).
    if constexpr (!BS) fence_view_async_shared();
    named_barrier(kBarWg1, 128);  // chunk c's inputs and scales visible; all of WG1 is past chunk c-1
    if (c + 1 < nchunks) {
      if constexpr (TM1)
        load_output_tma<T, SC>(s.st1[stage ^ 1], p, ws, qm, pm, mbar1 + (stage ^ 1), t0 + kBT, chunk_len(bos, eos, c + 1),
                               h, j, t, SC ? chain_sc::record(ws, p.HV, j, r0, rlast, c + 1) : nullptr);
      else
        load_output_inputs<T, KDA>(s.st1[stage ^ 1], p, ws, t0 + kBT, chunk_len(bos, eos, c + 1), h, j, t);
    }
    if constexpr (!SC) cp_async_commit();

    auto& x = s.xch[c & 1];
    named_barrier(kBarFull + (c & 1), 256);  // WG0 has written chunk c's fragments
    uint32_t sf[32], vf[16];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint4 u = x.s[i][t];
      sf[4 * i] = u.x, sf[4 * i + 1] = u.y, sf[4 * i + 2] = u.z, sf[4 * i + 3] = u.w;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 u = x.v[i][t];
      vf[4 * i] = u.x, vf[4 * i + 1] = u.y, vf[4 * i + 2] = u.z, vf[4 * i + 3] = u.w;
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_at(dq0, soff + kmaj_step(kk, kBT)), kk > 0);
    wgmma_commit();
    float qsc[16];  // KDA: the gate and rq are inside qg, only the scale is left
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      if constexpr (KDA) {
        qsc[2 * m] = qsc[2 * m + 1] = p.scale;
      } else {
        const float2 q2 = *reinterpret_cast<const float2*>(&st.qsc[slot_col(t, 2 * m)]);
        qsc[2 * m] = q2.x, qsc[2 * m + 1] = q2.y;
      }
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_regs(sf);
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] *= qsc[reg_slot(i)];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, vf + 4 * kk, desc_at(dp0, soff + kmaj_step(kk, kBT)), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_regs(vf);
    if (c + 2 < nchunks) named_barrier_arrive(kBarEmpty + (c & 1), 256);  // WG0 may refill this buffer

    // O^T's accumulator as A fragments, stored transposed ([token][v]) by stmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk) {
      const uint32_t r[4] = {MmaType<T>::pack(acc[8 * kk], acc[8 * kk + 1]), MmaType<T>::pack(acc[8 * kk + 2], acc[8 * kk + 3]),
                             MmaType<T>::pack(acc[8 * kk + 4], acc[8 * kk + 5]), MmaType<T>::pack(acc[8 * kk + 6], acc[8 * kk + 7])};
      if constexpr (BS) stmatrix_x4_trans(o_box + sw128_offset(16 * kk + st_row, st_col), r);
      else stmatrix_x4_trans(&s.o[16 * kk + st_row][st_col], r);
    }
    if constexpr (BS) fence_view_async_shared();  // the stmatrix writes, for the tensor store's (async proxy) reads
    named_barrier(kBarWg1, 128);
    if (BS && len == kBT) {
      if (t == 0) {
        tma_store_2d(om, o_box, j * p.V + v0, static_cast<int>(t0));
        bulk_commit();
      }
    } else {
      const int orow = t >> 3, och = (t & 7) * 8;  // rows t / 8 + 16u, 16-byte chunk t % 8
      T* out = o_base + (t0 + orow) * ostride + och;
#pragma unroll
      for (int u = 0; u < kBT / 16; ++u)
        if (orow + 16 * u < len)  // BS: a partial chunk, from the swizzled box
          *reinterpret_cast<uint4*>(out + 16 * u * ostride) = *reinterpret_cast<const uint4*>(
              BS ? o_box + sw128_offset(orow + 16 * u, och) : reinterpret_cast<uint8_t*>(&s.o[orow + 16 * u][och]));
    }
  }
  if (BS && t == 0) bulk_wait0();  // the staging stays valid until the last box is written
  cp_async_wait<0>();
}

}  // namespace wgp
}  // namespace linattn::cuda
