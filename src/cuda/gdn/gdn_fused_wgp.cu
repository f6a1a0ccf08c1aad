// Pipelined wgmma fused GDN forward (sm_90a), the step after gdn_fused_wg.cu: same inputs and math
// (prep kernel's Ab, P, gam, rq, rk; one CTA per (V-slice of 64 columns, value head j, sequence n)),
// but the state is held transposed, S^T [v][key] (fp32 wgmma accumulator, 64 registers per thread of
// one warpgroup), so every product with the state or with V^ takes its A operand from registers and
// nothing on the state's critical path goes through shared memory or a CTA-wide barrier:
//   WG0 (state):  KS^T = S^T K^T,  X^T = V^T - KS^T diag(e^gam rk),  V^T = X^T Ab^T,
//                 S^T <- e^gam_L S^T + V^T diag(e^(gam_L - gam) rk) K       (A = S^T, X^T, V^T regs)
//   WG1 (output): O^T = S^T Q^T diag(scale e^gam rq) + V^T P^T, staged [token][v], 16-byte stores
// WG0 hands S^T and V^T (bf16 A fragments, fragment order, 24 KB) to WG1 through a double buffer
// guarded by named barriers (full: WG0 arrives / WG1 syncs; empty: the reverse), so WG1 computes the
// output of chunk c while WG0 runs the state chain of chunk c+1. Each warpgroup streams its own
// inputs by cp.async (WG0: k, v, Ab, 3 stages; WG1: q, P, 2 stages; rows past the chunk end
// zero-filled). Scope: as gdn_fused_wg.cu but V % 64 == 0 (the V-slice is always 64).
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/common/mma.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/gdn/gdn_fused_wg.h"

namespace linattn::cuda {
namespace {

constexpr int kBT = 64, kK = 128, kVS = 64, kThreads = 256, kLdV = kVS + 8;
constexpr int kStages0 = 3, kStages1 = 2;
// Named barriers (0 is __syncthreads): per-warpgroup, and the two hand-off buffers' full / empty.
constexpr int kBarWg0 = 1, kBarWg1 = 2, kBarFull = 3, kBarEmpty = 5;

template <class T>
struct WgpSmem {
  struct alignas(1024) Stage0 {  // WG0's inputs of one chunk
    alignas(1024) uint8_t k[kBT * kK * 2];   // [token][key] K-major, panels of 64 keys
    alignas(1024) uint8_t a[kBT * kBT * 2];  // Ab [t][s]
    T v[kBT][kLdV];                          // [token][v]
    // Raw per-token inputs, one private copy per thread (thread t: token t % 64), so each thread
    // turns its own cp.async copies into a scale without a barrier: threads 0-63 e^gam rk,
    // threads 64-127 e^(gam_L - gam) rk (gl: gam of the chunk's last valid row).
    float gam[2 * kBT], rk[2 * kBT], gl[kBT];
    float erk[kBT], wsc[kBT];  // e^gam rk, e^(gam_L - gam) rk (0 past the chunk end): per token
    float decay;               // e^gam_L
  };
  struct alignas(1024) Stage1 {  // WG1's inputs of one chunk
    alignas(1024) uint8_t q[kBT * kK * 2];
    alignas(1024) uint8_t p[kBT * kBT * 2];  // P [t][s]
    float gam[kBT], rq[kBT];  // raw inputs, thread t < 64 copies token t
    float qsc[kBT];           // scale e^gam rq per token
  };
  struct Xch {     // bf16 A fragments of chunk c in fragment order: [register / 4][thread]
    uint4 s[8][128];  // S^T (K = 128 keys)
    uint4 v[4][128];  // V^T (K = 64 tokens)
  };
  Stage0 st0[kStages0];
  Stage1 st1[kStages1];
  Xch xch[2];
  T o[kBT][kLdV];  // output staging [token][v]
};

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

template <class T>
__device__ __forceinline__ void load_state_inputs(typename WgpSmem<T>::Stage0& st, const GdnFwdParams& p,
                                                  const GdnChunkWs& ws, int64_t t0, int len, int h, int j, int v0,
                                                  int t) {
  const T* k = static_cast<const T*>(p.k) + (t0 * p.H + h) * kK;
  const T* v = static_cast<const T*>(p.v) + (t0 * p.HV + j) * int64_t(p.V) + v0;
  const T* A = static_cast<const T*>(ws.Ab) + (j * ws.T_cap + t0) * kBT;
  const int64_t kstride = int64_t(p.H) * kK, vstride = int64_t(p.HV) * p.V;
  // k: thread t copies chunk t % 16 of rows t / 16 + 8u; v, Ab: chunk t % 8 of rows t / 8 + 16u.
  const int kr = t >> 4, kc = (t & 15) * 8, vr = t >> 3, vc = (t & 7) * 8;
  copy_rows<8>(st.k + kmaj(kr, kc, kBT), 1024u, k + kr * kstride + kc, 8 * kstride, k, kr, 8, len);
  copy_rows<4>(reinterpret_cast<uint8_t*>(&st.v[vr][vc]), 16u * kLdV * sizeof(T), v + vr * vstride + vc, 16 * vstride, v,
               vr, 16, len);
  copy_rows<4>(st.a + sw128_offset(vr, vc), 2048u, A + vr * kBT + vc, 16 * kBT, A, vr, 16, len);
  const int tok = t & 63;
  const bool valid = tok < len;
  cp_async4(st.gam + t, ws.gam + j * ws.T_cap + (valid ? t0 + tok : 0), valid);
  cp_async4(st.rk + t, ws.rk + h * ws.T_cap + (valid ? t0 + tok : 0), valid);
  if (t >= 64) cp_async4(st.gl + tok, ws.gam + j * ws.T_cap + t0 + len - 1, true);
}

// The per-token scales of one chunk, computed once (one value per thread) from the thread's own
// copies: the caller has waited for the chunk's cp.async group; a later WG0 barrier publishes them.
template <class T>
__device__ __forceinline__ void state_scales(typename WgpSmem<T>::Stage0& st, int len, int t) {
  const int tok = t & 63;
  const float g = st.gam[t], r = st.rk[t];
  if (t < 64) {
    st.erk[tok] = exp2f(g) * r;
  } else {
    const float gl = st.gl[tok];
    st.wsc[tok] = tok < len ? exp2f(gl - g) * r : 0.f;
    if (tok == 0) st.decay = exp2f(gl);
  }
}

template <class T>
__device__ __forceinline__ void load_output_inputs(typename WgpSmem<T>::Stage1& st, const GdnFwdParams& p,
                                                   const GdnChunkWs& ws, int64_t t0, int len, int h, int j, int t) {
  const T* q = static_cast<const T*>(p.q) + (t0 * p.H + h) * kK;
  const T* P = static_cast<const T*>(ws.P) + (j * ws.T_cap + t0) * kBT;
  const int64_t qstride = int64_t(p.H) * kK;
  const int kr = t >> 4, kc = (t & 15) * 8, vr = t >> 3, vc = (t & 7) * 8;  // as in load_state_inputs
  copy_rows<8>(st.q + kmaj(kr, kc, kBT), 1024u, q + kr * qstride + kc, 8 * qstride, q, kr, 8, len);
  copy_rows<4>(st.p + sw128_offset(vr, vc), 2048u, P + vr * kBT + vc, 16 * kBT, P, vr, 16, len);
  if (t < 64) {
    const bool valid = t < len;
    cp_async4(st.gam + t, ws.gam + j * ws.T_cap + (valid ? t0 + t : 0), valid);
    cp_async4(st.rq + t, ws.rq + h * ws.T_cap + (valid ? t0 + t : 0), valid);
  }
}

__device__ __forceinline__ int chunk_len(int64_t bos, int64_t eos, int c) {
  return static_cast<int>(min(int64_t(kBT), eos - (bos + int64_t(c) * kBT)));
}

// WG0: the state chain. S^T rows v0 + acc_row (values), columns acc_col (keys).
template <class T>
__device__ void state_warpgroup(WgpSmem<T>& s, const GdnFwdParams& p, const GdnChunkWs& ws, int64_t n, int64_t bos,
                                int64_t eos, int nchunks, int h, int j, int v0, int t) {
  using Stage0 = typename WgpSmem<T>::Stage0;
  float S[64];
#pragma unroll
  for (int i = 0; i < 64; ++i)
    S[i] = p.h0 ? load_elem(p.h0, p.h0_type, state_index(p, n, j, acc_col(t, i), v0 + acc_row(t, i))) : 0.f;
  for (int c = 0; c < 2; ++c) {
    if (c < nchunks) load_state_inputs<T>(s.st0[c], p, ws, bos + c * kBT, chunk_len(bos, eos, c), h, j, v0, t);
    cp_async_commit();
  }
  cp_async_wait<1>();
  if (nchunks > 0) state_scales<T>(s.st0[0], chunk_len(bos, eos, 0), t);
  // ldmatrix.trans lane address of V^T's A fragments: matrix lane / 8 = (token + 8, value + 8) bits.
  const int lane = t & 31, mat = lane >> 3;
  const int ld_row = 8 * (mat >> 1) + (lane & 7), ld_col = 16 * (t >> 5) + 8 * (mat & 1);
  const uint64_t dk0 = desc_kmaj0(s.st0[0].k), da0 = desc_kmaj0(s.st0[0].a), dkt0 = desc_mnmaj0(s.st0[0].k, kBT);
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  for (int c = 0, stage = 0; c < nchunks; ++c, stage = stage == kStages0 - 1 ? 0 : stage + 1) {
    Stage0& st = s.st0[stage];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(Stage0));
    cp_async_wait<1>();  // chunk c's group (the newest, chunk c+1's, may still be in flight)
    fence_view_async_shared();
    named_barrier(kBarWg0, 128);  // ... for every thread's copies and scales; all of WG0 is past chunk c-1

    uint32_t sf[32];  // S^T as the A operand of K S^T (and, through the hand-off, of Q S^T)
    acc_to_frag<T, 64>(sf, S);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_at(dk0, soff + kmaj_step(kk, kBT)), kk > 0);
    wgmma_commit();

    const int ld_stage = stage == 0 ? kStages0 - 1 : stage - 1;  // chunk c-1's, whose readers all finished
    if (c + 2 < nchunks)
      load_state_inputs<T>(s.st0[ld_stage], p, ws, bos + int64_t(c + 2) * kBT, chunk_len(bos, eos, c + 2), h, j, v0, t);
    cp_async_commit();
    auto& x = s.xch[c & 1];
    if (c >= 2) named_barrier(kBarEmpty + (c & 1), 256);  // WG1 has read chunk c-2's fragments
#pragma unroll
    for (int i = 0; i < 8; ++i) x.s[i][t] = make_uint4(sf[4 * i], sf[4 * i + 1], sf[4 * i + 2], sf[4 * i + 3]);

    // Off the tensor pipe while K S^T runs: V^T (A fragments, by ldmatrix.trans from [token][v])
    // and the per-token scales of this thread's columns (pairs of adjacent tokens).
    uint32_t vv[16];  // V^T pairs (registers 2i, 2i + 1: same value row, adjacent tokens), packed
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk) {
      uint32_t r[4];
      ldsm_x4_t(r, &st.v[16 * kk + ld_row][ld_col]);
      vv[4 * kk] = r[0], vv[4 * kk + 1] = r[1], vv[4 * kk + 2] = r[2], vv[4 * kk + 3] = r[3];
    }
    float erk[16];
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const float2 e2 = *reinterpret_cast<const float2*>(&st.erk[slot_col(t, 2 * m)]);
      erk[2 * m] = e2.x, erk[2 * m + 1] = e2.y;
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_regs(sf);

    uint32_t xf[16];  // X^T = V^T - KS^T diag(e^gam rk)
#pragma unroll
    for (int i = 0; i < 16; ++i)
      xf[i] = MmaType<T>::pack(MmaType<T>::to_float(lo_half<T>(vv[i])) - erk[reg_slot(2 * i)] * acc[2 * i],
                               MmaType<T>::to_float(hi_half<T>(vv[i])) - erk[reg_slot(2 * i + 1)] * acc[2 * i + 1]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 64, 0>(acc, xf + 4 * kk, desc_at(da0, soff + kmaj_step(kk, kBT)), kk > 0);
    wgmma_commit();
    float wsc[16];  // e^(gam_L - gam) rk, zero past the chunk end
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const float2 w2 = *reinterpret_cast<const float2*>(&st.wsc[slot_col(t, 2 * m)]);
      wsc[2 * m] = w2.x, wsc[2 * m + 1] = w2.y;
    }
    const float decay = st.decay;
#pragma unroll
    for (int i = 0; i < 64; ++i) S[i] *= decay;
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_regs(xf);

    uint32_t vf[16], hf[16];  // V^T, and V^T diag(e^(gam_L - gam) rk) for the state update
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      vf[i] = MmaType<T>::pack(acc[2 * i], acc[2 * i + 1]);
      hf[i] = MmaType<T>::pack(acc[2 * i] * wsc[reg_slot(2 * i)], acc[2 * i + 1] * wsc[reg_slot(2 * i + 1)]);
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_m64k16_rs<T, 128, 1>(S, hf + 4 * kk, desc_at(dkt0, soff + uint32_t(kk) * 2048u), 1);
    wgmma_commit();
#pragma unroll
    for (int i = 0; i < 4; ++i) x.v[i][t] = make_uint4(vf[4 * i], vf[4 * i + 1], vf[4 * i + 2], vf[4 * i + 3]);
    named_barrier_arrive(kBarFull + (c & 1), 256);
    // While the update runs: chunk c+1's scales (its group, committed during chunk c-1, is the
    // older of the two in flight); the barrier at the top of chunk c+1 publishes them.
    cp_async_wait<1>();
    if (c + 1 < nchunks) state_scales<T>(s.st0[stage == kStages0 - 1 ? 0 : stage + 1], chunk_len(bos, eos, c + 1), t);
    wgmma_wait<0>();
    wgmma_fence_operands(S);
    wgmma_fence_regs(hf);
  }
  cp_async_wait<0>();
  if (p.ht) {
#pragma unroll
    for (int i = 0; i < 64; ++i) p.ht[state_index(p, n, j, acc_col(t, i), v0 + acc_row(t, i))] = S[i];
  }
}

// WG1: the output of chunk c from WG0's S^T / V^T fragments, one chunk behind WG0.
template <class T>
__device__ void output_warpgroup(WgpSmem<T>& s, const GdnFwdParams& p, const GdnChunkWs& ws, int64_t bos,
                                 int64_t eos, int nchunks, int h, int j, int v0, int t) {
  using Stage1 = typename WgpSmem<T>::Stage1;
  if (nchunks > 0) load_output_inputs<T>(s.st1[0], p, ws, bos, chunk_len(bos, eos, 0), h, j, t);
  cp_async_commit();
  T* o_base = static_cast<T*>(p.o) + int64_t(j) * p.V + v0;
  const int64_t ostride = int64_t(p.HV) * p.V;
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  const int lane = t & 31, mat = lane >> 3;  // stmatrix.trans lane address, as in the state warpgroup
  const int st_row = 8 * (mat >> 1) + (lane & 7), st_col = 16 * (t >> 5) + 8 * (mat & 1);
  const uint64_t dq0 = desc_kmaj0(s.st1[0].q), dp0 = desc_kmaj0(s.st1[0].p);
  for (int c = 0; c < nchunks; ++c) {
    const int stage = c & 1;
    Stage1& st = s.st1[stage];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(Stage1));
    const int64_t t0 = bos + int64_t(c) * kBT;
    const int len = chunk_len(bos, eos, c);
    cp_async_wait<0>();
    if (t < 64) st.qsc[t] = p.scale * exp2f(st.gam[t]) * st.rq[t];  // own copies
    fence_view_async_shared();
    named_barrier(kBarWg1, 128);  // chunk c's inputs and scales visible; all of WG1 is past chunk c-1
    if (c + 1 < nchunks) load_output_inputs<T>(s.st1[stage ^ 1], p, ws, t0 + kBT, chunk_len(bos, eos, c + 1), h, j, t);
    cp_async_commit();

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
    float qsc[16];
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const float2 q2 = *reinterpret_cast<const float2*>(&st.qsc[slot_col(t, 2 * m)]);
      qsc[2 * m] = q2.x, qsc[2 * m + 1] = q2.y;
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
      stmatrix_x4_trans(&s.o[16 * kk + st_row][st_col], r);
    }
    named_barrier(kBarWg1, 128);
    const int orow = t >> 3, och = (t & 7) * 8;  // rows t / 8 + 16u, 16-byte chunk t % 8
    T* out = o_base + (t0 + orow) * ostride + och;
#pragma unroll
    for (int u = 0; u < kBT / 16; ++u)
      if (orow + 16 * u < len)
        *reinterpret_cast<uint4*>(out + 16 * u * ostride) = *reinterpret_cast<const uint4*>(&s.o[orow + 16 * u][och]);
  }
  cp_async_wait<0>();
}

template <class T>
__global__ void __launch_bounds__(kThreads, 1) gdn_fused_wgp_kernel(GdnFwdParams p, GdnChunkWs ws) {
  extern __shared__ unsigned char smem_raw[];
  // Aligned by pointer arithmetic on the __shared__ array (no integer round trip), so the compiler
  // keeps the shared address space: LDS / STS instead of generic loads and stores.
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  WgpSmem<T>& s = *reinterpret_cast<WgpSmem<T>*>(base);
  const int tid = threadIdx.x, t = tid & 127;
  const int v0 = blockIdx.x * kVS, j = blockIdx.y, h = j / (p.HV / p.H);
  const int64_t n = blockIdx.z;
  int64_t bos, eos;
  seq_bounds(p, n, bos, eos);
  const int nchunks = static_cast<int>((eos - bos + kBT - 1) / kBT);
  if (tid < 128) state_warpgroup<T>(s, p, ws, n, bos, eos, nchunks, h, j, v0, t);
  else output_warpgroup<T>(s, p, ws, bos, eos, nchunks, h, j, v0, t);
}

template <class T>
void launch_t(const GdnFwdParams& p, const GdnChunkWs& ws, cudaStream_t stream) {
  launch(gdn_fused_wgp_kernel<T>, dim3(p.V / kVS, p.HV, p.N), dim3(kThreads), sizeof(WgpSmem<T>) + 1024, stream, p, ws);
}

}  // namespace

void launch_gdn_fused_wgp(const GdnFwdParams& p, const GdnChunkWs& ws, cudaStream_t stream) {
  if (p.io == ElemType::kBF16) launch_t<__nv_bfloat16>(p, ws, stream);
  else launch_t<__half>(p, ws, stream);
}

}  // namespace linattn::cuda
