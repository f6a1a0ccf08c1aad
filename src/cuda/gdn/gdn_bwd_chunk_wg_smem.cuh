// Shared-memory layout, row-dot partial buffers and tile loaders of the wgmma GDN backward chunk kernel
// (gdn_bwd_chunk_wg.cu, the only includer: everything here is in that file's anonymous namespace).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/gdn/gdn_bwd_chunk_common.cuh"
#include "cuda/gdn/gdn_bwd_chunk_wg.cuh"

namespace linattn::cuda {
namespace {
using namespace gdn_bwd_chunk_detail;
using namespace gdn_bwd_chunk_wg_detail;

constexpr int kK = 128, kBT = 64, kNW = 16, kNT = kNW * 32;

template <int V>
struct WgSmem {
  alignas(1024) uint8_t q[kBT * kK * 2];   // raw q rows [t][key]
  alignas(1024) uint8_t k[kBT * kK * 2];   // raw k rows [t][key]
  alignas(1024) uint8_t S[kK * V * 2];     // S_c [key][v] of value head j
  alignas(1024) uint8_t dS[kK * V * 2];    // dS' [key][v]
  alignas(1024) uint8_t vh[kBT * V * 2];   // V^ [t][v]
  alignas(1024) uint8_t dvh[kBT * V * 2];  // dV^ [t][v]
  alignas(1024) uint8_t y[kBT * V * 2];    // Y [t][v]
  alignas(1024) uint8_t dO[kBT * V * 2];   // [t][v]
  alignas(1024) uint8_t ai[kBT * kBT * 2];  // Ai [i][j]
  alignas(1024) uint8_t pk[kBT * kBT * 2], pq[kBT * kBT * 2], rm[kBT * kBT * 2], rb[kBT * kBT * 2];
  float rq[kBT], rk[kBT], gam[kBT], beta[kBT];
  float red[6][kBT][kWN];  // row-dot partials per column warp
  float redc[kBT][kBT / 16];
  float wred[kNW];
};

// wg2 only (placed after WgSmem): the row scalars of two value heads (parity jj & 1), written at
// the head's start by warps 2-3 with the gate / beta draws of finish_rows precomputed, so warp 0's
// finish has no global loads and the next head's start needs no barrier after it.
struct WgRows {
  float gam[2][kBT], beta[2][kBT], gate[2][kBT], dA[2][kBT], bdraw[2][kBT];
};

// wg6 only (placed after WgRows): the work items of a persistent CTA, slot k & 1 for its k-th item
// (slot 0 by thread 0 before the first barrier; slot k + 1 by thread 32 before item k's first
// barrier, read from it on). len 0: no item left.
struct WgItem {
  int64_t i, r, t0;  // item index r + nt_cap h, chunk row, first token
  int h, len;        // q/k head, valid rows
};
struct WgPer {
  WgItem nx[2];
};

// wg7 only (placed after WgPer): the row-dot partials of odd value heads (even heads: WgSmem's), so
// warp 0's finish of head jj runs under head jj + 1's Y while that head writes the other set.
struct WgRed {
  float red[6][kBT][kWN];
  float redc[kBT][kBT / 16];
  float wred[kNW];
};
// What finish_rows_core reads of the partials and row norms (one WgRed-or-WgSmem set).
struct WgRedView {
  float (*red)[kBT][kWN];
  float (*redc)[kBT / 16];
  float* wred;
  const float* rq;
  const float* rk;
};

template <int V, bool V2, bool PER = false>
constexpr size_t wg_smem_bytes() {
  return sizeof(WgSmem<V>) + (V2 ? sizeof(WgRows) : 0) + (PER ? sizeof(WgPer) : 0) + 1024;
}
static_assert(wg_smem_bytes<128, true, true>() <= 227 * 1024, "one CTA per SM must fit");
template <int V>
constexpr size_t wg7_smem_bytes() {
  return wg_smem_bytes<V, true, true>() + sizeof(WgRed);
}
static_assert(wg7_smem_bytes<128>() <= 227 * 1024, "wg7: one CTA per SM must fit");
// wg6 stages dq / dk in pk + pq and rm + rb (each pair one 64 x 128 swizzled tile, like q / k)
static_assert(offsetof(WgSmem<128>, pq) == offsetof(WgSmem<128>, pk) + kBT * kBT * 2 &&
                  offsetof(WgSmem<128>, rb) == offsetof(WgSmem<128>, rm) + kBT * kBT * 2 &&
                  2 * kBT * kBT * 2 == kBT * kK * 2,
              "wg6 staging tiles");

// wg3: pull what value head j reads with plain loads right at its start (nothing else to wait on
// there) into L2 while the current head computes: its v rows (the Y.v row dot after the head's
// first barrier; V / 64 lines of 128 B per row, one prefetch per line on threads < 64 V / 64) and
// its gam row (warps 2-3 before that barrier; elements 0, 32, len - 1 cover its <= 3 lines).
template <int V>
__device__ __forceinline__ void prefetch_head_l2(const GdnFwdParams& f, const GdnBwdWs& w, int64_t t0, int len, int j,
                                                 int tid) {
  constexpr int LPR = V / 64;
  const int row = tid / LPR;
  if (row < len && row < kBT) {
    const char* a = reinterpret_cast<const char*>(f.v) + (((t0 + row) * f.HV + j) * int64_t(V) + (tid % LPR) * 64) * 2;
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
  }
  const int e = tid - kNT + 3;  // the last three threads
  if (e >= 0) {
    const float* a = w.c.gam + j * w.c.T_cap + t0 + (e == 0 ? 0 : e == 1 ? min(32, len - 1) : len - 1);
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
  }
}

template <class T, int V, bool V2, bool V3 = false>
__device__ __forceinline__ void load_head_wg(WgSmem<V>& s, const GdnBwdParams& p, const GdnBwdWs& w, int64_t r,
                                             int64_t t0, int len, int j, int tid_) {
  // An opaque copy of tid: the per-thread tile offsets are recomputed here rather than hoisted
  // out of the head loop into registers that live through every product (spills).
  int tid;
  asm volatile("mov.b32 %0, %1;" : "=r"(tid) : "r"(tid_));
  const GdnFwdParams& f = p.f;
  const int64_t soff = (r * f.HV + j) * int64_t(kK) * V;
  const int64_t toff = (j * w.c.T_cap + t0) * V;
  if constexpr (V2) {
    load_sw2<T, kK, V, kNT>(s.S, static_cast<const T*>(w.hS) + soff, V, kK, tid);
    load_sw2<T, kK, V, kNT>(s.dS, static_cast<const T*>(w.hdS) + soff, V, kK, tid);
    load_sw2<T, kBT, V, kNT>(s.vh, static_cast<const T*>(w.vh) + toff, V, len, tid);
    load_sw2<T, kBT, V, kNT>(s.dvh, static_cast<const T*>(w.dvh) + toff, V, len, tid);
    load_sw2<T, kBT, kBT, kNT>(s.ai, static_cast<const T*>(w.c.Ai) + (j * w.c.T_cap + t0) * kBT, kBT, len, tid);
  } else {
    load_sw<T, kK, V, kNT>(s.S, static_cast<const T*>(w.hS) + soff, V, kK, tid);
    load_sw<T, kK, V, kNT>(s.dS, static_cast<const T*>(w.hdS) + soff, V, kK, tid);
    load_sw<T, kBT, V, kNT>(s.vh, static_cast<const T*>(w.vh) + toff, V, len, tid);
    load_sw<T, kBT, V, kNT>(s.dvh, static_cast<const T*>(w.dvh) + toff, V, len, tid);
    load_sw<T, kBT, kBT, kNT>(s.ai, static_cast<const T*>(w.c.Ai) + (j * w.c.T_cap + t0) * kBT, kBT, len, tid);
  }
  load_do_sw<T, kBT, V, kNT>(s.dO, p, w.do_direct, t0, len, j, tid);
  if constexpr (V3) prefetch_head_l2<V>(f, w, t0, len, j, tid);
}

// wg7: head j's tiles as two cp.async groups' worth (not committed). PART 0: what Y = Ai^T dV^
// reads (Ai, dV^: 24 KB) and the L2 prefetches of load_head_wg; PART 1: S, dS', V^, dO (96 KB).
template <class T, int V, int PART>
__device__ __forceinline__ void load_head_part(WgSmem<V>& s, const GdnBwdParams& p, const GdnBwdWs& w, int64_t r,
                                               int64_t t0, int len, int j, int tid_) {
  int tid;  // opaque, as in load_head_wg
  asm volatile("mov.b32 %0, %1;" : "=r"(tid) : "r"(tid_));
  const int64_t toff = (j * w.c.T_cap + t0) * V;
  if constexpr (PART == 0) {
    load_sw2<T, kBT, kBT, kNT>(s.ai, static_cast<const T*>(w.c.Ai) + (j * w.c.T_cap + t0) * kBT, kBT, len, tid);
    load_sw2<T, kBT, V, kNT>(s.dvh, static_cast<const T*>(w.dvh) + toff, V, len, tid);
    prefetch_head_l2<V>(p.f, w, t0, len, j, tid);
  } else {
    const int64_t soff = (r * p.f.HV + j) * int64_t(kK) * V;
    load_sw2<T, kK, V, kNT>(s.S, static_cast<const T*>(w.hS) + soff, V, kK, tid);
    load_sw2<T, kK, V, kNT>(s.dS, static_cast<const T*>(w.hdS) + soff, V, kK, tid);
    load_sw2<T, kBT, V, kNT>(s.vh, static_cast<const T*>(w.vh) + toff, V, len, tid);
    load_do_sw<T, kBT, V, kNT>(s.dO, p, w.do_direct, t0, len, j, tid);
  }
}

// wg8d: the decays d = (i < len && c <= i) ? exp2f(gam_i - gam_c) : 0 of a thread's M elements (rows
// r0, r0 + 8; columns c0 + 8 nt + e, c0 = cb + 2 tq), the same expression as wg7's element loops.
// (An ex2.approx.ftz fast path where every exponent of the thread is >= -126, bitwise the same, was
// tried: with its branch ptxas spilled 36 / 36 B with 5 local accesses per head; without, 12 / 12 and 1.)
template <int NTB>
__device__ __forceinline__ void decay_frag(float (&dd)[2][NTB][2], const float* gam, int r0, int c0, int len) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int i = r0 + 8 * hf;
    const float gi = gam[i];
#pragma unroll
    for (int nt = 0; nt < NTB; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int jc = c0 + 8 * nt + e;
        dd[hf][nt][e] = (i < len && jc <= i) ? exp2f(gi - gam[jc]) : 0.f;
      }
  }
}

// wg9: one part of row i of value head j's row scalars in WgRows buffer b, by role (64 threads each, warp-uniform):
// 0 gam, 1 beta, 2 the gate draws (gate, dA), 3 the beta draw; one dependent global round trip per thread (the V2
// head start makes four in a row on warps 2-3). Split in two so the loads can fly while the thread issues its
// cp.async share: row_scalar_load returns the raw inputs (16-bit inputs as their bits: nothing waits on the loads),
// row_scalar_store converts them as load_elem and forms the values with the expressions of gdn_beta, gdn_gate_deriv
// and gdn_beta_draw (gdn_common.cuh / gdn_bwd_common.cuh), so the values are the V2 head start's bit for bit.
struct RowRaw {
  uint32_t a;  // role 0: gam's bits; 1 / 3: the beta input's; 2: the gate input's
  float dtb, alog;  // role 2 with the in-kernel gate: dt_bias[j] (0 without), A_log[j]
};
__device__ __forceinline__ uint32_t load_bits(const void* p, ElemType t, int64_t i) {
  if (t == ElemType::kF16 || t == ElemType::kBF16) return static_cast<const uint16_t*>(p)[i];
  return static_cast<const uint32_t*>(p)[i];
}
__device__ __forceinline__ float bits_elem(uint32_t v, ElemType t) {  // load_elem's conversions
  switch (t) {
    case ElemType::kF16: return __half2float(__ushort_as_half(static_cast<unsigned short>(v)));
    case ElemType::kBF16: return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(v)));
    default: return __uint_as_float(v);
  }
}
__device__ __forceinline__ RowRaw row_scalar_load(const GdnBwdParams& p, const GdnBwdWs& w, int64_t t0, int len, int j,
                                                  int role, int i) {
  const GdnFwdParams& f = p.f;
  RowRaw r{0u, 0.f, 0.f};
  if (i >= len) return r;
  const int64_t e = (t0 + i) * f.HV + j;
  if (role == 0) {
    r.a = reinterpret_cast<const uint32_t*>(w.c.gam)[j * w.c.T_cap + t0 + i];
  } else if (role == 1 || (role == 3 && p.dbeta.p && f.beta_sigmoid)) {
    r.a = load_bits(f.beta, f.beta_type, e);
  } else if (role == 2) {
    r.a = load_bits(f.g, f.g_type, e);
    if (f.gate_in_kernel) {
      r.dtb = f.dt_bias ? f.dt_bias[j] : 0.f;
      r.alog = f.A_log[j];
    }
  }
  return r;
}
__device__ __forceinline__ void row_scalar_store(WgRows& rs, const GdnBwdParams& p, int len, int b, int role, int i,
                                                 const RowRaw& r) {
  const GdnFwdParams& f = p.f;
  const bool valid = i < len;
  if (role == 0) {
    rs.gam[b][i] = valid ? __uint_as_float(r.a) : 0.f;
  } else if (role == 1) {
    float v = bits_elem(r.a, f.beta_type);
    if (f.beta_sigmoid) {
      v = 1.f / (1.f + expf(-v));
      if (f.neg_eigval) v *= 2.f;
    }
    rs.beta[b][i] = valid ? v : 0.f;
  } else if (role == 2) {
    float draw = 0.f, dA = 0.f;
    if (valid && !f.gate_in_kernel) {
      draw = 1.f;
    } else if (valid) {
      const float x = bits_elem(r.a, f.g_type) + r.dtb;
      const float ea = expf(r.alog);
      const float sp = x > 20.f ? x : log1pf(expf(x));
      const float sg = x > 20.f ? 1.f : 1.f / (1.f + expf(-x));
      draw = -ea * sg;
      dA = -ea * sp;
    }
    rs.gate[b][i] = draw;
    rs.dA[b][i] = dA;
  } else {
    float v = 0.f;
    if (valid && p.dbeta.p) {
      v = 1.f;
      if (f.beta_sigmoid) {
        const float sb = 1.f / (1.f + expf(-bits_elem(r.a, f.beta_type)));
        v = (f.neg_eigval ? 2.f : 1.f) * sb * (1.f - sb);
      }
    }
    rs.bdraw[b][i] = v;
  }
}

// An item's q / k rows and row norms (cp.async, not committed).
template <class T, int V, bool V2>
__device__ __forceinline__ void load_item_qk(WgSmem<V>& s, const GdnFwdParams& f, const GdnBwdWs& w, int64_t t0,
                                             int len, int h, int tid) {
  const int64_t qoff = (t0 * f.H + h) * kK, qstride = int64_t(f.H) * kK;
  if constexpr (V2) {
    load_sw2<T, kBT, kK, kNT>(s.q, static_cast<const T*>(f.q) + qoff, qstride, len, tid);
    load_sw2<T, kBT, kK, kNT>(s.k, static_cast<const T*>(f.k) + qoff, qstride, len, tid);
  } else {
    load_sw<T, kBT, kK, kNT>(s.q, static_cast<const T*>(f.q) + qoff, qstride, len, tid);
    load_sw<T, kBT, kK, kNT>(s.k, static_cast<const T*>(f.k) + qoff, qstride, len, tid);
  }
  load_scalars_async<kBT>(s.rq, w.c.rq + h * w.c.T_cap + t0, len, tid);
  load_scalars_async<kBT>(s.rk, w.c.rk + h * w.c.T_cap + t0, len, tid - kBT);
}

// wg6: the first item i, i + stride, ... (i = r + nt_cap h) that the plain kernel computes (it
// returns at sentinel rows and at chunks past their sequence's end); len 0 when none is left.
__device__ __forceinline__ WgItem find_item(const GdnBwdParams& p, const GdnBwdWs& w, int64_t i, int64_t stride) {
  const GdnFwdParams& f = p.f;
  for (const int64_t total = w.nt_cap * f.H; i < total; i += stride) {
    const int64_t r = i % w.nt_cap;
    int64_t n, c;
    if (w.chunk_indices) {
      n = w.chunk_indices[2 * r];
      c = w.chunk_indices[2 * r + 1];
      if (n < 0) continue;
    } else {
      n = r / w.nts;
      c = r % w.nts;
    }
    int64_t bos, eos;
    seq_bounds(f, n, bos, eos);
    const int64_t t0 = bos + c * kBT;
    const int len = static_cast<int>(min(int64_t(kBT), eos - t0));
    if (len > 0) return WgItem{i, r, t0, static_cast<int>(i / w.nt_cap), len};
  }
  return WgItem{i, 0, 0, 0, 0};
}

template <int NTW>
__device__ __forceinline__ void scale_rows(float (&t)[NTW][4], const float (&f)[2]) {
#pragma unroll
  for (int nt = 0; nt < NTW; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) t[nt][e] *= f[e >> 1];
}

}  // namespace
}  // namespace linattn::cuda
