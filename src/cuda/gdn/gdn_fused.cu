// Fused head-level GDN / KDA forward (ARCHITECTURE.md section 2, tier 1/2): one CTA per
// (V-slice of VS columns, value head j, sequence n) walks the sequence's chunks in order with the
// fp32 state slice S[K=128][VS] in registers. Per chunk, with the prep kernel's Ab, P, gam, rq, rk
// (gdn_prep.cu):
//   X   = V - diag(e^gam rk) K S                      (K S on tensor cores, S staged as bf16/fp16)
//   V^  = Ab X                                        (= (I+L)^-1 diag(beta) (V - e^gam K_n S))
//   O   = diag(scale e^gam rq) Q S + P V^             (each warp stores its tile, 16 B writes)
//   S  <- e^gam_L S + K^T diag(e^(gam_L - gam) rk) V^
// Inputs of chunk c+1 are fetched with cp.async while chunk c computes (two stages). Rows past the
// chunk end are zero-filled, never stored, and never reach the state. NW warps (16 for BT = 64,
// 8 for BT = 32): state tiles are 16 K-rows x VS / (NW / 8) columns per warp; for the token x VS
// products warp (wm, wn) owns token rows 16 wm.. and VS / WN columns. Only o and the final state
// are written to global memory.
// Gate policy (template KDA): the scalar GDN gate scales rows of the products (e^gam rk above);
// the per-channel KDA gate cannot leave the contraction, so the KDA prep (kda/kda_fwd_prep.cu)
// hands over gated operands instead of q and k: kg = rk k (.) 2^gam for K S, qg = rq q (.) 2^gam for
// Q S, kgl = rk k (.) 2^(gam_L - gam) for the state update, and the state's key row d decays by
// gl_d = 2^gam_L,d. The same pipeline, tiles and mma code run for both; KDA takes VS <= 64 (its
// extra kgl tile does not fit next to VS = 128).
// Tier-3 state pass (p.seg_M set, cuda/seg/seg_pass.h): the grid gains K / VS "transition" CTAs
// per head whose v is zero-filled and whose initial state is the identity slice, so their final
// state is the K x K transition M; the V-column CTAs start from zero (S_loc). Q S, P V^ and o are
// skipped (uniform branches); outputs go to seg_S / seg_M instead of ht.
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/common/mma.cuh"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {
namespace {

constexpr int kK = 128, kLdK = kK + 8;

template <class T, int BT, int VS, bool KDA>
struct FusedSmem {
  static constexpr int kLdV = VS + 8, kLdA = BT + 8;
  struct Stage {
    T q[BT][kLdK];   // KDA: qg
    T k[BT][kLdK];   // KDA: kg
    T kl[KDA ? BT : 1][kLdK];  // KDA: kgl
    T v[BT][kLdV];
    T a[BT][kLdA];
    T p[BT][kLdA];
    float gam[BT], rq[BT], rk[BT];
    float gl[KDA ? kK : 4];  // KDA: 2^gam_L per key row
  };
  Stage st[2];
  T sb[kK][kLdV];  // state as the B operand
  T x[BT][kLdV];   // X, later each warp's output tile
  T vh[BT][kLdV];  // V^
  T vhs[KDA ? 1 : BT][kLdV]; // e^(gam_L - gam) rk V^ (GDN only: KDA's kgl carries the decay)
};

template <int BT, int VS>
struct Tiling {
  static constexpr int NW = BT == 64 ? 16 : 8;       // warps
  static constexpr int NT = NW * 32;
  static constexpr int WM = BT / 16, WN = NW / WM;   // token x VS products
  static constexpr int CW = VS / WN, NTW = CW / 8;
  static constexpr int SWN = NW / 8;                 // state: 8 row blocks x SWN column groups
  static constexpr int SC = VS / SWN, NS = SC / 8;
  static_assert(NTW >= 1 && NS >= 2 && NS % 2 == 0, "V-slice too narrow for this chunk size");
};

// acc[NTW] += A[rows m0.., 0..KD) * B[0..KD, cols n0..n0 + 8 NTW); A row-major, B [k][n].
template <class T, int NTW, int KD>
__device__ __forceinline__ void mma_rows_kn(float (&acc)[NTW][4], const T* a, int lda, int m0,
                                            const T* b, int ldb, int n0, int lane) {
#pragma unroll
  for (int kt = 0; kt < KD / 16; ++kt) {
    uint32_t fa[4];
    ldsm_x4(fa, a_addr_rowmajor(a, lda, m0, 16 * kt, lane));
#pragma unroll
    for (int np = 0; np < NTW / 2; ++np) {
      uint32_t fb[4];
      ldsm_x4_t(fb, b_addr_kn(b, ldb, 16 * kt, n0 + 16 * np, lane));
      mma16816<T>(acc[2 * np], fa, fb[0], fb[1]);
      mma16816<T>(acc[2 * np + 1], fa, fb[2], fb[3]);
    }
    if constexpr (NTW % 2 == 1) {
      uint32_t fb[2];
      ldsm_x2_t(fb, b_addr_kn(b, ldb, 16 * kt, n0 + 16 * (NTW / 2), lane));
      mma16816<T>(acc[NTW - 1], fa, fb[0], fb[1]);
    }
  }
}

// cp.async of one chunk's inputs; offsets are 32-bit relative to per-chunk 64-bit bases.
// `gl_row`: KDA chunk row of ws.gl (unused for GDN).
template <class T, int BT, int VS, bool KDA>
__device__ __forceinline__ void load_stage(typename FusedSmem<T, BT, VS, KDA>::Stage& st,
                                           const GdnFwdParams& p, const GdnChunkWs& ws, int64_t t0,
                                           int len, int h, int j, int v0, int tid, int64_t gl_row,
                                           bool vzero) {
  constexpr int NT = Tiling<BT, VS>::NT;
  const int64_t gbase = (int64_t(j) * ws.T_cap + t0) * kK;
  const T* q = KDA ? static_cast<const T*>(ws.qg) + gbase : static_cast<const T*>(p.q) + (t0 * p.H + h) * kK;
  const T* k = KDA ? static_cast<const T*>(ws.kg) + gbase : static_cast<const T*>(p.k) + (t0 * p.H + h) * kK;
  const T* v = static_cast<const T*>(p.v) + (t0 * p.HV + j) * int64_t(p.V) + v0;
  const int qstride = KDA ? kK : p.H * kK, vstride = p.HV * p.V;
#pragma unroll
  for (int idx = tid; idx < BT * (kK / 8); idx += NT) {
    const int row = idx / (kK / 8), ch = idx % (kK / 8);
    const bool valid = row < len;
    const int off = valid ? row * qstride + ch * 8 : 0;
    cp_async16(&st.q[row][ch * 8], q + off, valid);
    cp_async16(&st.k[row][ch * 8], k + off, valid);
    if constexpr (KDA) cp_async16(&st.kl[row][ch * 8], static_cast<const T*>(ws.kgl) + gbase + off, valid);
  }
  if constexpr (KDA) {
    if (tid < kK / 4) cp_async16(&st.gl[4 * tid], ws.gl + (gl_row * p.HV + j) * kK + 4 * tid, true);
  }
#pragma unroll
  for (int idx = tid; idx < BT * (VS / 8); idx += NT) {
    const int row = idx / (VS / 8), ch = idx % (VS / 8);
    const bool valid = row < len && !vzero;  // vzero: transition CTA (v = 0)
    cp_async16(&st.v[row][ch * 8], v + (valid ? row * vstride + ch * 8 : 0), valid);
  }
  const int64_t abase = (j * ws.T_cap + t0) * BT;
  const T* A = static_cast<const T*>(ws.Ab) + abase;
  const T* P = static_cast<const T*>(ws.P) + abase;
#pragma unroll
  for (int idx = tid; idx < BT * (BT / 8); idx += NT) {
    const int row = idx / (BT / 8), ch = idx % (BT / 8);
    const bool valid = row < len;
    const int off = valid ? row * BT + ch * 8 : 0;
    cp_async16(&st.a[row][ch * 8], A + off, valid);
    cp_async16(&st.p[row][ch * 8], P + off, valid);
  }
  if (!KDA && tid < 3 * BT) {
    const int which = tid / BT, row = tid % BT;
    const bool valid = row < len;
    const float* src = which == 0 ? ws.gam + j * ws.T_cap : (which == 1 ? ws.rq : ws.rk) + h * ws.T_cap;
    float* dst = which == 0 ? st.gam : (which == 1 ? st.rq : st.rk);
    cp_async4(dst + row, src + (valid ? t0 + row : 0), valid);
  }
}

template <class T, int BT, int VS, bool KDA>
__global__ void __launch_bounds__(Tiling<BT, VS>::NT, 1) gdn_fused_kernel(GdnFwdParams p, GdnChunkWs ws) {
  using Smem = FusedSmem<T, BT, VS, KDA>;
  using Tl = Tiling<BT, VS>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const bool seg = p.seg_M != nullptr;
  const bool trans = seg && int(blockIdx.x) >= p.V / VS;  // tier-3 transition CTA
  const int v0 = (trans ? int(blockIdx.x) - p.V / VS : int(blockIdx.x)) * VS, j = blockIdx.y, h = j / (p.HV / p.H);
  const int vload0 = trans ? 0 : v0;  // v columns fetched (zero-filled for a transition CTA)
  const int64_t n = ws_sequence(ws, blockIdx.z);
  if (seg && p.seg_flags && (p.seg_flags[n] & p.seg_skip)) return;  // uniform: before any barrier
  int64_t bos, eos;
  seq_bounds(p, n, bos, eos);
  const int64_t nchunks = (eos - bos + BT - 1) / BT;
  // KDA: chunk c of sequence n is row r0c + c of the prep grid (ws.gl's first index).
  const int64_t r0c = !KDA ? 0 : (p.cu_seqlens ? int64_t(ws.chunk_offsets[n]) : n * ((p.T_seq + BT - 1) / BT));
  const int srow = 16 * (warp % 8), scol = (warp / 8) * Tl::SC;  // this warp's state tile

  float S[Tl::NS][4];
#pragma unroll
  for (int nt = 0; nt < Tl::NS; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = srow + g + 8 * (e >> 1), col = v0 + scol + nt * 8 + 2 * tq + (e & 1);
      S[nt][e] = seg ? (trans && row == col ? 1.f : 0.f)
                     : (p.h0 ? load_elem(p.h0, p.h0_type, state_index(p, n, j, row, col)) : 0.f);
    }

  if (nchunks > 0)
    load_stage<T, BT, VS, KDA>(s.st[0], p, ws, bos, static_cast<int>(min(int64_t(BT), eos - bos)), h, j, vload0,
                               tid, r0c, trans);
  cp_async_commit();
  const int wm = warp % Tl::WM, wn = warp / Tl::WM, cbase = wn * Tl::CW, r0 = 16 * wm + g;
  T* o_base = seg ? nullptr : static_cast<T*>(p.o) + int64_t(j) * p.V + v0 + cbase;
  for (int64_t c = 0; c < nchunks; ++c) {
    cp_async_wait<0>();
    __syncthreads();
    if (c + 1 < nchunks) {
      const int64_t t1 = bos + (c + 1) * BT;
      load_stage<T, BT, VS, KDA>(s.st[(c + 1) & 1], p, ws, t1, static_cast<int>(min(int64_t(BT), eos - t1)),
                                 h, j, vload0, tid, r0c + c + 1, trans);
    }
    cp_async_commit();
    auto& st = s.st[c & 1];
    const int64_t t0 = bos + c * BT;
    const int len = static_cast<int>(min(int64_t(BT), eos - t0));

#pragma unroll
    for (int nt = 0; nt < Tl::NS; ++nt) {
      const int col = scol + nt * 8 + 2 * tq;
      *reinterpret_cast<uint32_t*>(&s.sb[srow + g][col]) = MmaType<T>::pack(S[nt][0], S[nt][1]);
      *reinterpret_cast<uint32_t*>(&s.sb[srow + g + 8][col]) = MmaType<T>::pack(S[nt][2], S[nt][3]);
    }
    __syncthreads();

    float ks[Tl::NTW][4] = {}, os[Tl::NTW][4] = {};
    mma_rows_kn<T, Tl::NTW, kK>(ks, &st.k[0][0], kLdK, 16 * wm, &s.sb[0][0], Smem::kLdV, cbase, lane);
    if (!seg) mma_rows_kn<T, Tl::NTW, kK>(os, &st.q[0][0], kLdK, 16 * wm, &s.sb[0][0], Smem::kLdV, cbase, lane);
    float erk[2], oscale[2];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = r0 + 8 * hf;
      if constexpr (KDA) {  // the gate and row scales are inside qg / kg
        erk[hf] = 1.f;
        oscale[hf] = p.scale;
      } else {
        const float eg = exp2f(st.gam[r]);
        erk[hf] = eg * st.rk[r];
        oscale[hf] = p.scale * eg * st.rq[r];
      }
    }
#pragma unroll
    for (int nt = 0; nt < Tl::NTW; ++nt) {
      const int col = cbase + nt * 8 + 2 * tq;
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int r = r0 + 8 * hf;
        const uint32_t vw = *reinterpret_cast<const uint32_t*>(&st.v[r][col]);
        const T* vp = reinterpret_cast<const T*>(&vw);
        *reinterpret_cast<uint32_t*>(&s.x[r][col]) =
            MmaType<T>::pack(MmaType<T>::to_float(vp[0]) - erk[hf] * ks[nt][2 * hf],
                             MmaType<T>::to_float(vp[1]) - erk[hf] * ks[nt][2 * hf + 1]);
        os[nt][2 * hf] *= oscale[hf];
        os[nt][2 * hf + 1] *= oscale[hf];
      }
    }
    __syncthreads();

    float vh[Tl::NTW][4] = {};
    mma_rows_kn<T, Tl::NTW, BT>(vh, &st.a[0][0], Smem::kLdA, 16 * wm, &s.x[0][0], Smem::kLdV, cbase, lane);
    const float gl = KDA ? 0.f : st.gam[len - 1];
    float wsc[2];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = r0 + 8 * hf;
      wsc[hf] = (KDA || r >= len) ? 0.f : exp2f(gl - st.gam[r]) * st.rk[r];
    }
#pragma unroll
    for (int nt = 0; nt < Tl::NTW; ++nt) {
      const int col = cbase + nt * 8 + 2 * tq;
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int r = r0 + 8 * hf;
        *reinterpret_cast<uint32_t*>(&s.vh[r][col]) = MmaType<T>::pack(vh[nt][2 * hf], vh[nt][2 * hf + 1]);
        if constexpr (!KDA)
          *reinterpret_cast<uint32_t*>(&s.vhs[r][col]) =
              MmaType<T>::pack(wsc[hf] * vh[nt][2 * hf], wsc[hf] * vh[nt][2 * hf + 1]);
      }
    }
    __syncthreads();

    if (!seg) {
      mma_rows_kn<T, Tl::NTW, BT>(os, &st.p[0][0], Smem::kLdA, 16 * wm, &s.vh[0][0], Smem::kLdV, cbase, lane);
      // This warp's 16 x CW output tile -> its own rows of s.x (X is dead: every warp passed the
      // barrier above after its last read of it) -> 16-byte global stores of the valid rows.
#pragma unroll
      for (int nt = 0; nt < Tl::NTW; ++nt) {
        const int col = cbase + nt * 8 + 2 * tq;
        *reinterpret_cast<uint32_t*>(&s.x[r0][col]) = MmaType<T>::pack(os[nt][0], os[nt][1]);
        *reinterpret_cast<uint32_t*>(&s.x[r0 + 8][col]) = MmaType<T>::pack(os[nt][2], os[nt][3]);
      }
    }

    float decay[2];  // key rows srow + g and srow + g + 8
    if constexpr (KDA) {
      decay[0] = st.gl[srow + g];
      decay[1] = st.gl[srow + g + 8];
    } else {
      decay[0] = decay[1] = exp2f(gl);
    }
#pragma unroll
    for (int nt = 0; nt < Tl::NS; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) S[nt][e] *= decay[e >> 1];
    const T* upd_a = KDA ? &st.kl[0][0] : &st.k[0][0];
    const T* upd_b = KDA ? &s.vh[0][0] : &s.vhs[0][0];
#pragma unroll
    for (int kt = 0; kt < BT / 16; ++kt) {
      uint32_t fa[4];
      ldsm_x4_t(fa, a_addr_colmajor(upd_a, kLdK, srow, 16 * kt, lane));
#pragma unroll
      for (int np = 0; np < Tl::NS / 2; ++np) {
        uint32_t fb[4];
        ldsm_x4_t(fb, b_addr_kn(upd_b, Smem::kLdV, 16 * kt, scol + 16 * np, lane));
        mma16816<T>(S[2 * np], fa, fb[0], fb[1]);
        mma16816<T>(S[2 * np + 1], fa, fb[2], fb[3]);
      }
    }
    __syncwarp();
    constexpr int kRowChunks = Tl::CW / 8;  // 16-byte pieces per tile row
#pragma unroll
    for (int idx = lane; idx < (seg ? 0 : 16 * kRowChunks); idx += 32) {
      const int rr = idx / kRowChunks, ch = idx % kRowChunks, row = 16 * wm + rr;
      if (row < len)
        *reinterpret_cast<uint4*>(o_base + (t0 + row) * int64_t(p.HV) * p.V + ch * 8) =
            *reinterpret_cast<const uint4*>(&s.x[row][cbase + ch * 8]);
    }
  }
  cp_async_wait<0>();
  if (seg) {
    const int64_t head = n * p.HV + j;
#pragma unroll
    for (int nt = 0; nt < Tl::NS; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = srow + g + 8 * (e >> 1), col = v0 + scol + nt * 8 + 2 * tq + (e & 1);
        if (trans) p.seg_M[(head * kK + row) * kK + col] = S[nt][e];
        else p.seg_S[(head * kK + row) * p.V + col] = S[nt][e];
      }
  } else if (p.ht) {
#pragma unroll
    for (int nt = 0; nt < Tl::NS; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = srow + g + 8 * (e >> 1), col = v0 + scol + nt * 8 + 2 * tq + (e & 1);
        p.ht[state_index(p, n, j, row, col)] = S[nt][e];
      }
  }
}

template <class T, int BT, int VS, bool KDA>
void launch_fused_t(const GdnFwdParams& p, const GdnChunkWs& ws, cudaStream_t stream) {
  const int ctas_x = p.V / VS + (p.seg_M ? kK / VS : 0);  // tier-3 state pass: + transition CTAs
  launch(gdn_fused_kernel<T, BT, VS, KDA>, dim3(ctas_x, p.HV, p.N), dim3(Tiling<BT, VS>::NT),
         sizeof(FusedSmem<T, BT, VS, KDA>), stream, p, ws);
}

template <class T, int BT>
void launch_fused_bt(const GdnFwdParams& p, const GdnChunkWs& ws, int vs, cudaStream_t stream) {
  if (p.kda) {
    switch (vs) {
      case 32: return launch_fused_t<T, BT, 32, true>(p, ws, stream);
      case 64: return launch_fused_t<T, BT, 64, true>(p, ws, stream);
      default: LINATTN_UNSUPPORTED("kda fused: V-slice ", vs, " (supported: 32, 64)");
    }
  }
  switch (vs) {
    case 32: return launch_fused_t<T, BT, 32, false>(p, ws, stream);
    case 64: return launch_fused_t<T, BT, 64, false>(p, ws, stream);
    case 128: return launch_fused_t<T, BT, 128, false>(p, ws, stream);
    default: LINATTN_UNSUPPORTED("gdn fused: V-slice ", vs, " (supported: 32, 64, 128)");
  }
}

}  // namespace

void launch_gdn_fused(const GdnFwdParams& p, const GdnChunkWs& ws, int vs, cudaStream_t stream) {
  LINATTN_CHECK(p.K == kK, "gdn fused: K must be ", kK, ", got ", p.K);
  LINATTN_CHECK(vs > 0 && p.V % vs == 0, "gdn fused: V-slice ", vs, " must divide V = ", p.V);
  const bool bf = p.io == ElemType::kBF16;
  LINATTN_CHECK(bf || p.io == ElemType::kF16, "gdn fused: io dtype must be bf16 or fp16");
  if (p.BT == 64) {
    bf ? launch_fused_bt<__nv_bfloat16, 64>(p, ws, vs, stream) : launch_fused_bt<__half, 64>(p, ws, vs, stream);
  } else if (p.BT == 32) {
    bf ? launch_fused_bt<__nv_bfloat16, 32>(p, ws, vs, stream) : launch_fused_bt<__half, 32>(p, ws, vs, stream);
  } else {
    LINATTN_UNSUPPORTED("gdn fused: chunk_size ", p.BT, " (supported: 32, 64)");
  }
}

}  // namespace linattn::cuda
