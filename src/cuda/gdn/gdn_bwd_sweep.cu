// Head-level sweeps of the chunked GDN backward, both in one launch (they are independent):
// CTA (2 * slice + role, value head j, sequence n) owns V-columns [slice * VS, +VS) of one head.
// Role 0, forward state sweep (chunks in order, fp32 state S[K=128][VS] in registers):
//   store S_c (io type) -> hS[r];  X = V - diag(e^gam rk) K S;  V^ = Ab X -> vh;
//   S <- e^gam_L S + K^T diag(e^(gam_L - gam) rk) V^.
// Role 1, reverse dS sweep (chunks in reverse, fp32 dS in registers, from d_final_state or 0):
//   store dS (= d state leaving chunk c) -> hdS[r];
//   dV^ = diag(e^(gam_L - gam) rk) K dS + P^T dO -> dvh;   dv = Ab^T dV^ (the v gradient);
//   dS <- e^gam_L dS + Q^T diag(scale e^gam rq) dO - K^T diag(e^gam rk) dv;  dh0 = dS at the end.
// (ALGORITHMS.md 4.1 steps 1-3 with W^T dV^ = K^ diag(e^gam) Ab^T dV^.) Inputs of the next chunk
// are prefetched with cp.async (two stages). Rows past the chunk end are zero-filled and never
// stored. Warp tiling as the forward's fused kernel: NW warps (16 for BT = 64, 8 for BT = 32);
// state tiles 16 K-rows x VS / (NW / 8) columns; token x VS products 16 rows x VS / 4 columns.
// w.dstate_only (tier 3's local state gradients): only role 1, one CTA per (slice, head, sequence).
// KDA policy (template KDA, per-key-channel gate; as the forward's fused kernel): the prep's gated
// operands replace the row-scaled q / k: X = V - kg S, S <- diag(gl) S + kgl^T V^;
// dV^ = kgl dS + P^T dO, dS <- diag(gl) dS + qg^T (scale dO) - kg^T dv (row d of the state decays
// by gl_d, every factor <= 1). Its stages hold one more K-wide tile, so it takes V-slices 32 / 64.
// LINATTN_CUDA_GDN_BWD_SWEEP=wg: GDN at BT 64 takes the wgmma variant (gdn_bwd_sweep_wg.cu) instead;
// LINATTN_CUDA_KDA_SWEEP=wg (opt-in): KDA at BT 64 takes kda/kda_bwd_sweep_wg.cu.
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_bwd_load.cuh"
#include "cuda/gdn/gdn_bwd_sweep_wg.h"
#include "cuda/kda/kda_bwd_sweep_wg.h"

namespace linattn::cuda {
namespace {

constexpr int kK = 128, kLdK = kK + 8;

template <int BT, int VS>
struct Tiling {
  static constexpr int NW = BT == 64 ? 16 : 8;
  static constexpr int NT = NW * 32;
  static constexpr int WM = BT / 16, WN = NW / WM;
  static constexpr int CW = VS / WN, NTW = CW / 8;
  static constexpr int SWN = NW / 8;
  static constexpr int SC = VS / SWN, NS = SC / 8;
  static_assert(NTW >= 1 && NS >= 2 && NS % 2 == 0, "V-slice too narrow for this chunk size");
};

template <class T, int BT, int VS, bool KDA = false>
struct SweepSmem {
  static constexpr int kLdV = VS + 8, kLdA = BT + 8;
  struct FwdStage {
    T k[BT][kLdK];               // k (KDA: kg)
    T kl[KDA ? BT : 1][kLdK];    // KDA: kgl
    T v[BT][kLdV];
    T a[BT][kLdA];
    float gam[BT], rk[BT];
    float gl[KDA ? kK : 4];      // KDA: 2^gam_L per key row
  };
  struct BwdStage {
    T q[BT][kLdK];               // q (KDA: qg)
    T k[BT][kLdK];               // k (KDA: kg)
    T kl[KDA ? BT : 1][kLdK];    // KDA: kgl
    T d[BT][kLdV];  // dO slice
    T a[BT][kLdA];  // Ab
    T p[BT][kLdA];  // P
    float gam[BT], rq[BT], rk[BT];
    float gl[KDA ? kK : 4];
  };
  struct Fwd {
    FwdStage st[2];
    T sb[kK][kLdV];   // S as the B operand
    T x[BT][kLdV];    // X
    T vhs[BT][kLdV];  // e^(gam_L - gam) rk V^
  };
  struct Bwd {
    BwdStage st[2];
    T sb[kK][kLdV];   // dS as the B operand
    T dvh[BT][kLdV];  // dV^
    T dop[BT][kLdV];  // scale e^gam rq dO
    T dvp[BT][kLdV];  // -e^gam rk dv
  };
  static constexpr size_t bytes = sizeof(Fwd) > sizeof(Bwd) ? sizeof(Fwd) : sizeof(Bwd);
  static_assert(bytes <= 232448, "sweep shared memory exceeds the 227 KB opt-in limit");
};

// S / dS tile (registers, fp32) <-> bf16 / fp16 B operand in shared memory.
template <class T, int NS, int LD>
__device__ __forceinline__ void stage_state(T (*sb)[LD], const float (&S)[NS][4], int srow, int scol, int g,
                                            int tq) {
#pragma unroll
  for (int nt = 0; nt < NS; ++nt) {
    const int col = scol + nt * 8 + 2 * tq;
    st_pair(&sb[srow + g][col], S[nt][0], S[nt][1]);
    st_pair(&sb[srow + g + 8][col], S[nt][2], S[nt][3]);
  }
}

// sb [K][VS] -> dst [nt_cap, HV, K, V] at chunk row r, head j, columns v0.. (16-byte pieces).
template <class T, int VS, int LD, int NT>
__device__ __forceinline__ void store_state_rows(const T (*sb)[LD], void* dst, int64_t r, int HV, int j,
                                                 int V, int v0, int tid) {
  T* base = static_cast<T*>(dst) + ((r * HV + j) * int64_t(kK)) * V + v0;
  constexpr int P = VS / 8;
#pragma unroll
  for (int idx = tid; idx < kK * P; idx += NT) {
    const int row = idx / P, ch = idx % P;
    *reinterpret_cast<uint4*>(base + int64_t(row) * V + ch * 8) = *reinterpret_cast<const uint4*>(&sb[row][ch * 8]);
  }
}

// Applies `decay` to S and adds A^T B over the chunk's BT tokens: A = [BT][K] tile (used as
// K x BT through ldmatrix.trans), B = [BT][VS] tile.
template <class T, int BT, int NS, int LDB>
__device__ __forceinline__ void state_update(float (&S)[NS][4], const T (*a)[kLdK], const T (*b)[LDB],
                                             int srow, int scol, int lane) {
#pragma unroll
  for (int kt = 0; kt < BT / 16; ++kt) {
    uint32_t fa[4];
    ldsm_x4_t(fa, a_addr_colmajor(&a[0][0], kLdK, srow, 16 * kt, lane));
#pragma unroll
    for (int np = 0; np < NS / 2; ++np) {
      uint32_t fb[4];
      ldsm_x4_t(fb, b_addr_kn(&b[0][0], LDB, 16 * kt, scol + 16 * np, lane));
      mma16816<T>(S[2 * np], fa, fb[0], fb[1]);
      mma16816<T>(S[2 * np + 1], fa, fb[2], fb[3]);
    }
  }
}

// KDA: the chunk's 2^gam_L row of the prep (chunk row r), zeros past the capacity.
template <bool KDA, class Stage>
__device__ __forceinline__ void load_gl_async(Stage& st, const GdnBwdWs& w, int64_t r, int HV, int j, int tid) {
  if constexpr (KDA) {
    const bool ok = r < w.nt_cap;
    if (tid < kK) cp_async4(&st.gl[tid], w.c.gl + ((ok ? r : 0) * HV + j) * kK + tid, ok);
  }
}

template <class T, int BT, int VS, bool KDA>
__device__ __forceinline__ void load_fwd_stage(typename SweepSmem<T, BT, VS, KDA>::FwdStage& st, const GdnBwdParams& p,
                                               const GdnBwdWs& w, int64_t t0, int len, int h, int j, int v0,
                                               int tid, int64_t r) {
  constexpr int NT = Tiling<BT, VS>::NT;
  constexpr int kLdV = SweepSmem<T, BT, VS, KDA>::kLdV, kLdA = SweepSmem<T, BT, VS, KDA>::kLdA;
  const GdnFwdParams& f = p.f;
  if constexpr (KDA) {
    const int64_t off = (j * w.c.T_cap + t0) * kK;
    load_rows_async<T, BT, kK, kLdK, NT>(st.k, static_cast<const T*>(w.c.kg) + off, kK, len, tid);
    load_rows_async<T, BT, kK, kLdK, NT>(st.kl, static_cast<const T*>(w.c.kgl) + off, kK, len, tid);
    load_gl_async<KDA>(st, w, r, f.HV, j, tid);
  } else {
    load_rows_async<T, BT, kK, kLdK, NT>(st.k, static_cast<const T*>(f.k) + (t0 * f.H + h) * kK,
                                        int64_t(f.H) * kK, len, tid);
  }
  load_rows_async<T, BT, VS, kLdV, NT>(st.v, static_cast<const T*>(f.v) + (t0 * f.HV + j) * int64_t(f.V) + v0,
                                      int64_t(f.HV) * f.V, len, tid);
  load_rows_async<T, BT, BT, kLdA, NT>(st.a, static_cast<const T*>(w.c.Ab) + (j * w.c.T_cap + t0) * BT, BT, len,
                                      tid);
  if constexpr (!KDA) {
    load_scalars_async<BT>(st.gam, w.c.gam + j * w.c.T_cap + t0, len, tid);
    load_scalars_async<BT>(st.rk, w.c.rk + h * w.c.T_cap + t0, len, tid - BT);
  }
}

template <class T, int BT, int VS, bool KDA>
__device__ __forceinline__ void load_bwd_stage(typename SweepSmem<T, BT, VS, KDA>::BwdStage& st, const GdnBwdParams& p,
                                               const GdnBwdWs& w, int64_t t0, int len, int h, int j, int v0,
                                               int tid, int64_t r) {
  constexpr int NT = Tiling<BT, VS>::NT;
  constexpr int kLdV = SweepSmem<T, BT, VS, KDA>::kLdV, kLdA = SweepSmem<T, BT, VS, KDA>::kLdA;
  const GdnFwdParams& f = p.f;
  if constexpr (KDA) {
    const int64_t off = (j * w.c.T_cap + t0) * kK;
    load_rows_async<T, BT, kK, kLdK, NT>(st.q, static_cast<const T*>(w.c.qg) + off, kK, len, tid);
    load_rows_async<T, BT, kK, kLdK, NT>(st.k, static_cast<const T*>(w.c.kg) + off, kK, len, tid);
    load_rows_async<T, BT, kK, kLdK, NT>(st.kl, static_cast<const T*>(w.c.kgl) + off, kK, len, tid);
    load_gl_async<KDA>(st, w, r, f.HV, j, tid);
  } else {
    const int64_t qoff = (t0 * f.H + h) * kK, qstride = int64_t(f.H) * kK;
    load_rows_async<T, BT, kK, kLdK, NT>(st.q, static_cast<const T*>(f.q) + qoff, qstride, len, tid);
    load_rows_async<T, BT, kK, kLdK, NT>(st.k, static_cast<const T*>(f.k) + qoff, qstride, len, tid);
    load_scalars_async<BT>(st.gam, w.c.gam + j * w.c.T_cap + t0, len, tid);
    load_scalars_async<BT>(st.rq, w.c.rq + h * w.c.T_cap + t0, len, tid - BT);
    load_scalars_async<BT>(st.rk, w.c.rk + h * w.c.T_cap + t0, len, tid - 2 * BT);
  }
  const int64_t aoff = (j * w.c.T_cap + t0) * BT;
  load_rows_async<T, BT, BT, kLdA, NT>(st.a, static_cast<const T*>(w.c.Ab) + aoff, BT, len, tid);
  load_rows_async<T, BT, BT, kLdA, NT>(st.p, static_cast<const T*>(w.c.P) + aoff, BT, len, tid);
  load_do_rows<T, BT, VS, kLdV, NT>(st.d, p, w.do_direct, t0, len, j, v0, tid);
}

// Thread / warp coordinates and the sequence of one sweep CTA (both roles), and the initial
// register state (h0 or d_final_state, zeros when absent) in the caller's state layout.
template <int BT, int VS>
struct SweepIds {
  using Tl = Tiling<BT, VS>;
  int tid, warp, lane, g, tq, v0, j, h, srow, scol, wm, wn, cbase, r0;
  int64_t n, bos, eos, nchunks, rbase;
  __device__ SweepIds(const GdnBwdParams& p, const GdnBwdWs& w, int slice) {
    tid = threadIdx.x;
    warp = tid >> 5;
    lane = tid & 31;
    g = lane >> 2;
    tq = lane & 3;
    v0 = slice * VS;
    j = blockIdx.y;
    h = j / (p.f.HV / p.f.H);
    n = ws_sequence(w.c, blockIdx.z);
    seq_bounds(p.f, n, bos, eos);
    nchunks = (eos - bos + BT - 1) / BT;
    rbase = chunk_row_base(w.chunk_offsets, w.nts, n);
    srow = 16 * (warp % 8);
    scol = (warp / 8) * Tl::SC;
    wm = warp % Tl::WM;
    wn = warp / Tl::WM;
    cbase = wn * Tl::CW;
    r0 = 16 * wm + g;
  }
  // Element e of state tile nt of this thread: (row, column) in the full state.
  __device__ int row(int e) const { return srow + g + 8 * (e >> 1); }
  __device__ int col(int nt, int e) const { return v0 + scol + nt * 8 + 2 * tq + (e & 1); }
  __device__ void load_state(float (&S)[Tl::NS][4], const void* src, ElemType t, const GdnFwdParams& f) const {
#pragma unroll
    for (int nt = 0; nt < Tl::NS; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) S[nt][e] = src ? load_elem(src, t, state_index(f, n, j, row(e), col(nt, e))) : 0.f;
  }
};

// S (registers) *= per-key-row decay: the scalar 2^gam_L (GDN) or gl[row] (KDA).
template <bool KDA, int NS>
__device__ __forceinline__ void decay_state(float (&S)[NS][4], float gl_scalar, const float* gl, int srow, int g) {
  float d0 = gl_scalar, d1 = gl_scalar;
  if constexpr (KDA) {
    d0 = gl[srow + g];
    d1 = gl[srow + g + 8];
  }
#pragma unroll
  for (int nt = 0; nt < NS; ++nt) {
    S[nt][0] *= d0;
    S[nt][1] *= d0;
    S[nt][2] *= d1;
    S[nt][3] *= d1;
  }
}

template <class T, int BT, int VS, bool KDA>
__device__ void fwd_sweep(const GdnBwdParams& p, const GdnBwdWs& w, int slice, unsigned char* smem_raw) {
  using Sm = SweepSmem<T, BT, VS, KDA>;
  using Tl = Tiling<BT, VS>;
  auto& s = *reinterpret_cast<typename Sm::Fwd*>(smem_raw);
  const GdnFwdParams& f = p.f;
  const SweepIds<BT, VS> id(p, w, slice);
  const int tid = id.tid, lane = id.lane, g = id.g, tq = id.tq, v0 = id.v0, j = id.j, h = id.h;
  const int srow = id.srow, scol = id.scol, wm = id.wm, cbase = id.cbase, r0 = id.r0;
  const int64_t bos = id.bos, eos = id.eos, nchunks = id.nchunks, rbase = id.rbase;
  float S[Tl::NS][4];
  id.load_state(S, f.h0, f.h0_type, f);
  if (nchunks > 0)
    load_fwd_stage<T, BT, VS, KDA>(s.st[0], p, w, bos, static_cast<int>(min(int64_t(BT), eos - bos)), h, j, v0, tid,
                                   rbase);
  cp_async_commit();
  T* vh_base = static_cast<T*>(w.vh) + int64_t(j) * w.c.T_cap * f.V + v0;
  for (int64_t c = 0; c < nchunks; ++c) {
    cp_async_wait<0>();
    __syncthreads();
    if (c + 1 < nchunks) {
      const int64_t t1 = bos + (c + 1) * BT;
      load_fwd_stage<T, BT, VS, KDA>(s.st[(c + 1) & 1], p, w, t1, static_cast<int>(min(int64_t(BT), eos - t1)), h,
                                     j, v0, tid, rbase + c + 1);
    }
    cp_async_commit();
    auto& st = s.st[c & 1];
    const int64_t t0 = bos + c * BT, r = rbase + c;
    const int len = static_cast<int>(min(int64_t(BT), eos - t0));

    stage_state<T, Tl::NS, Sm::kLdV>(s.sb, S, srow, scol, g, tq);
    __syncthreads();
    if (r < w.nt_cap) store_state_rows<T, VS, Sm::kLdV, Tl::NT>(s.sb, w.hS, r, f.HV, j, f.V, v0, tid);

    float ks[Tl::NTW][4] = {};
    mma_tile<T, Tl::NTW, kK, false, false>(ks, &st.k[0][0], kLdK, 16 * wm, &s.sb[0][0], Sm::kLdV, cbase, lane);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int rr = r0 + 8 * hf;
      const float erk = KDA ? 1.f : exp2f(st.gam[rr]) * st.rk[rr];
#pragma unroll
      for (int nt = 0; nt < Tl::NTW; ++nt) {
        const int col = cbase + nt * 8 + 2 * tq;
        const float2 vv = ld_pair(&st.v[rr][col]);
        st_pair(&s.x[rr][col], vv.x - erk * ks[nt][2 * hf], vv.y - erk * ks[nt][2 * hf + 1]);
      }
    }
    __syncthreads();

    float vh[Tl::NTW][4] = {};
    mma_tile<T, Tl::NTW, BT, false, false>(vh, &st.a[0][0], Sm::kLdA, 16 * wm, &s.x[0][0], Sm::kLdV, cbase, lane);
    const float gl = KDA ? 0.f : st.gam[len - 1];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int rr = r0 + 8 * hf;
      const float wsc = rr < len ? (KDA ? 1.f : exp2f(gl - st.gam[rr]) * st.rk[rr]) : 0.f;
#pragma unroll
      for (int nt = 0; nt < Tl::NTW; ++nt) {
        const int col = cbase + nt * 8 + 2 * tq;
        const float a = vh[nt][2 * hf], b = vh[nt][2 * hf + 1];
        st_pair(&s.vhs[rr][col], wsc * a, wsc * b);
        if (rr < len) st_pair(vh_base + (t0 + rr) * int64_t(f.V) + col, a, b);
      }
    }
    __syncthreads();

    decay_state<KDA, Tl::NS>(S, KDA ? 0.f : exp2f(gl), st.gl, srow, g);
    if constexpr (KDA) state_update<T, BT, Tl::NS, Sm::kLdV>(S, st.kl, s.vhs, srow, scol, lane);
    else state_update<T, BT, Tl::NS, Sm::kLdV>(S, st.k, s.vhs, srow, scol, lane);
  }
  cp_async_wait<0>();
}

template <class T, int BT, int VS, bool KDA>
__device__ void bwd_sweep(const GdnBwdParams& p, const GdnBwdWs& w, int slice, unsigned char* smem_raw) {
  using Sm = SweepSmem<T, BT, VS, KDA>;
  using Tl = Tiling<BT, VS>;
  auto& s = *reinterpret_cast<typename Sm::Bwd*>(smem_raw);
  const GdnFwdParams& f = p.f;
  const SweepIds<BT, VS> id(p, w, slice);
  const int tid = id.tid, lane = id.lane, g = id.g, tq = id.tq, v0 = id.v0, j = id.j, h = id.h;
  const int srow = id.srow, scol = id.scol, wm = id.wm, cbase = id.cbase, r0 = id.r0;
  const int64_t n = id.n, bos = id.bos, eos = id.eos, nchunks = id.nchunks, rbase = id.rbase;
  float dS[Tl::NS][4];
  id.load_state(dS, p.dht, p.dht_type, f);
  auto chunk_start = [&](int64_t c) { return bos + c * BT; };
  if (nchunks > 0) {
    const int64_t t1 = chunk_start(nchunks - 1);
    load_bwd_stage<T, BT, VS, KDA>(s.st[0], p, w, t1, static_cast<int>(eos - t1), h, j, v0, tid, rbase + nchunks - 1);
  }
  cp_async_commit();
  T* dvh_base = static_cast<T*>(w.dvh) + int64_t(j) * w.c.T_cap * f.V + v0;
  for (int64_t cc = 0; cc < nchunks; ++cc) {
    const int64_t c = nchunks - 1 - cc;
    cp_async_wait<0>();
    __syncthreads();
    if (c > 0) {
      const int64_t t1 = chunk_start(c - 1);  // a full chunk: only the last one is partial
      load_bwd_stage<T, BT, VS, KDA>(s.st[(cc + 1) & 1], p, w, t1, BT, h, j, v0, tid, rbase + c - 1);
    }
    cp_async_commit();
    auto& st = s.st[cc & 1];
    const int64_t t0 = chunk_start(c), r = rbase + c;
    const int len = static_cast<int>(min(int64_t(BT), eos - t0));

    stage_state<T, Tl::NS, Sm::kLdV>(s.sb, dS, srow, scol, g, tq);
    __syncthreads();
    if (r < w.nt_cap) store_state_rows<T, VS, Sm::kLdV, Tl::NT>(s.sb, w.hdS, r, f.HV, j, f.V, v0, tid);

    // dV^ = diag(e^(gam_L - gam) rk) K dS + P^T dO
    float acc[Tl::NTW][4] = {};
    mma_tile<T, Tl::NTW, kK, false, false>(acc, KDA ? &st.kl[0][0] : &st.k[0][0], kLdK, 16 * wm, &s.sb[0][0],
                                           Sm::kLdV, cbase, lane);
    const float gl = KDA ? 0.f : st.gam[len - 1];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int rr = r0 + 8 * hf;
      const bool valid = rr < len;
      const float wsc = valid ? (KDA ? 1.f : exp2f(gl - st.gam[rr]) * st.rk[rr]) : 0.f;
      const float osc = valid ? (KDA ? f.scale : f.scale * exp2f(st.gam[rr]) * st.rq[rr]) : 0.f;
#pragma unroll
      for (int nt = 0; nt < Tl::NTW; ++nt) {
        const int col = cbase + nt * 8 + 2 * tq;
        acc[nt][2 * hf] *= wsc;
        acc[nt][2 * hf + 1] *= wsc;
        const float2 d = ld_pair(&st.d[rr][col]);
        st_pair(&s.dop[rr][col], osc * d.x, osc * d.y);
      }
    }
    mma_tile<T, Tl::NTW, BT, true, false>(acc, &st.p[0][0], Sm::kLdA, 16 * wm, &st.d[0][0], Sm::kLdV, cbase, lane);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int rr = r0 + 8 * hf;
#pragma unroll
      for (int nt = 0; nt < Tl::NTW; ++nt) {
        const int col = cbase + nt * 8 + 2 * tq;
        st_pair(&s.dvh[rr][col], acc[nt][2 * hf], acc[nt][2 * hf + 1]);
        if (rr < len) st_pair(dvh_base + (t0 + rr) * int64_t(f.V) + col, acc[nt][2 * hf], acc[nt][2 * hf + 1]);
      }
    }
    __syncthreads();

    // dv = Ab^T dV^ (the gradient of v); B operand of the state update: -e^gam rk dv
    float dv[Tl::NTW][4] = {};
    mma_tile<T, Tl::NTW, BT, true, false>(dv, &st.a[0][0], Sm::kLdA, 16 * wm, &s.dvh[0][0], Sm::kLdV, cbase, lane);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int rr = r0 + 8 * hf;
      const bool valid = rr < len;
      const float esc = valid ? (KDA ? -1.f : -exp2f(st.gam[rr]) * st.rk[rr]) : 0.f;
#pragma unroll
      for (int nt = 0; nt < Tl::NTW; ++nt) {
        const int col = cbase + nt * 8 + 2 * tq;
        st_pair(&s.dvp[rr][col], esc * dv[nt][2 * hf], esc * dv[nt][2 * hf + 1]);
        if (valid && p.dv.p) {
          const int64_t o = ((t0 + rr) * f.HV + j) * int64_t(f.V) + v0 + col;
          store_out(p.dv.p, p.dv.t, o, dv[nt][2 * hf]);
          store_out(p.dv.p, p.dv.t, o + 1, dv[nt][2 * hf + 1]);
        }
      }
    }
    __syncthreads();

    decay_state<KDA, Tl::NS>(dS, KDA ? 0.f : exp2f(gl), st.gl, srow, g);
    state_update<T, BT, Tl::NS, Sm::kLdV>(dS, st.q, s.dop, srow, scol, lane);
    state_update<T, BT, Tl::NS, Sm::kLdV>(dS, st.k, s.dvp, srow, scol, lane);
  }
  cp_async_wait<0>();
  if (p.dh0.p) {
#pragma unroll
    for (int nt = 0; nt < Tl::NS; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) store_out(p.dh0.p, p.dh0.t, state_index(f, n, j, id.row(e), id.col(nt, e)), dS[nt][e]);
  }
}

template <class T, int BT, int VS, bool KDA>
__global__ void __launch_bounds__(Tiling<BT, VS>::NT, 1) gdn_bwd_sweep_kernel(GdnBwdParams p, GdnBwdWs w) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  if (w.dstate_only) return bwd_sweep<T, BT, VS, KDA>(p, w, blockIdx.x, smem_raw);  // grid x = V / VS
  const int slice = blockIdx.x >> 1;
  if (blockIdx.x & 1) bwd_sweep<T, BT, VS, KDA>(p, w, slice, smem_raw);
  else fwd_sweep<T, BT, VS, KDA>(p, w, slice, smem_raw);
}

template <class T, int BT, int VS, bool KDA = false>
void launch_t(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream) {
  launch(gdn_bwd_sweep_kernel<T, BT, VS, KDA>, dim3((w.dstate_only ? 1 : 2) * (p.f.V / VS), p.f.HV, p.f.N),
         dim3(Tiling<BT, VS>::NT),
         SweepSmem<T, BT, VS, KDA>::bytes, stream, p, w);
}

template <class T, int BT>
void launch_bt(const GdnBwdParams& p, const GdnBwdWs& w, int vs, cudaStream_t stream) {
  if (p.f.kda) {
    switch (vs) {
      case 32: return launch_t<T, BT, 32, true>(p, w, stream);
      case 64: return launch_t<T, BT, 64, true>(p, w, stream);
      default: LINATTN_UNSUPPORTED("kda bwd sweeps: V-slice ", vs, " (supported: 32, 64)");
    }
  }
  switch (vs) {
    case 32: return launch_t<T, BT, 32>(p, w, stream);
    case 64: return launch_t<T, BT, 64>(p, w, stream);
    case 128: return launch_t<T, BT, 128>(p, w, stream);
    default: LINATTN_UNSUPPORTED("gdn bwd sweeps: V-slice ", vs, " (supported: 32, 64, 128)");
  }
}

}  // namespace

void launch_gdn_bwd_sweeps(const GdnBwdParams& p, const GdnBwdWs& w, int vs, cudaStream_t stream) {
  if (gdn_bwd_sweep_wg_supported(p.f) && gdn_bwd_sweep_wg_enabled(p.f)) return launch_gdn_bwd_sweeps_wg(p, w, stream);
  if (kda_bwd_sweep_wg_supported(p.f) && kda_bwd_sweep_wg_enabled()) return launch_kda_bwd_sweeps_wg(p, w, stream);
  LINATTN_CHECK(p.f.K == kK, "gdn bwd sweeps: K must be ", kK, ", got ", p.f.K);
  LINATTN_CHECK(vs > 0 && p.f.V % vs == 0, "gdn bwd sweeps: V-slice ", vs, " must divide V = ", p.f.V);
  const bool bf = p.f.io == ElemType::kBF16;
  LINATTN_CHECK(bf || p.f.io == ElemType::kF16, "gdn bwd sweeps: io dtype must be bf16 or fp16");
  if (p.f.BT == 64) {
    bf ? launch_bt<__nv_bfloat16, 64>(p, w, vs, stream) : launch_bt<__half, 64>(p, w, vs, stream);
  } else if (p.f.BT == 32) {
    bf ? launch_bt<__nv_bfloat16, 32>(p, w, vs, stream) : launch_bt<__half, 32>(p, w, vs, stream);
  } else {
    LINATTN_UNSUPPORTED("gdn bwd sweeps: chunk_size ", p.f.BT, " (supported: 32, 64)");
  }
}

}  // namespace linattn::cuda
