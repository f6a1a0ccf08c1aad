// Chunk-parallel prep of the chunked GDN forward (ALGORITHMS.md 3.1), one CTA per (chunk, q/k head):
//   rq, rk  row scales of q and k (1/sqrt(sum x^2 + 1e-6) with in-kernel l2norm, else 1)
//   gam     chunk-local inclusive cumsum of the log-decay (gate in kernel applied), log2 units
//   Ab      (I + L)^-1 diag(beta), L_ij = beta_i e^(gam_i - gam_j) k_i . k_j  (i > j, normalised k)
//   P       scale * e^(gam_i - gam_j) q_i . k_j                              (i >= j, normalised q, k)
// K K^T and Q K^T (fp32 accumulators, mma.sync) are shared by the G value heads of the q/k head;
// per value head the CTA builds L, inverts the 16x16 diagonal blocks by forward substitution (one
// thread per column) and merges the off-diagonal blocks by distance (X_ab = -X_aa sum L_am X_mb),
// all in fp32. Rows past the chunk's end are zero-filled and never written back; upper triangles
// are written as exact zeros. 256 threads = 8 warps; K = 128.
#include <cuda_runtime.h>

#include "cuda/common/launch.h"
#include "cuda/common/mma.cuh"
#include "cuda/gdn/gdn_common.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {
namespace {

constexpr int kK = 128, kThreads = 256, kLdK = kK + 8;

template <class T, int BT>
struct PrepSmem {
  T q[BT][kLdK];
  T k[BT][kLdK];
  float kk[BT][BT + 1];  // (k_i . k_j) rk_i rk_j
  float qk[BT][BT + 1];  // (q_i . k_j) rq_i rk_j
  float L[BT][BT + 1];
  float X[BT][BT + 1];   // (I + L)^-1
  float tmp[3][16][17];
  float rq[BT], rk[BT], gam[BT], beta[BT];
};

// KK^T and QK^T of the staged rows into s.kk / s.qk (row scales folded in).
template <class T, int BT>
__device__ __forceinline__ void gram_products(PrepSmem<T, BT>& s, int warp, int lane) {
  constexpr int WM = BT / 16, WN = 8 / WM, CW = BT / WN, NTW = CW / 8;
  const int wm = warp % WM, wn = warp / WM;
  float ak[NTW][4] = {}, aq[NTW][4] = {};
#pragma unroll
  for (int kt = 0; kt < kK / 16; ++kt) {
    uint32_t fk[4], fq[4];
    ldsm_x4(fk, a_addr_rowmajor(&s.k[0][0], kLdK, 16 * wm, 16 * kt, lane));
    ldsm_x4(fq, a_addr_rowmajor(&s.q[0][0], kLdK, 16 * wm, 16 * kt, lane));
#pragma unroll
    for (int np = 0; np < NTW / 2; ++np) {
      uint32_t b[4];
      ldsm_x4(b, b_addr_nk(&s.k[0][0], kLdK, 16 * kt, wn * CW + 16 * np, lane));
      mma16816<T>(ak[2 * np], fk, b[0], b[1]);
      mma16816<T>(ak[2 * np + 1], fk, b[2], b[3]);
      mma16816<T>(aq[2 * np], fq, b[0], b[1]);
      mma16816<T>(aq[2 * np + 1], fq, b[2], b[3]);
    }
    if constexpr (NTW % 2 == 1) {
      uint32_t b[2];
      ldsm_x2(b, b_addr_nk(&s.k[0][0], kLdK, 16 * kt, wn * CW + 16 * (NTW / 2), lane));
      mma16816<T>(ak[NTW - 1], fk, b[0], b[1]);
      mma16816<T>(aq[NTW - 1], fq, b[0], b[1]);
    }
  }
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NTW; ++nt) {
    const int col = wn * CW + nt * 8 + 2 * t;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = 16 * wm + g + 8 * half;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s.kk[row][col + e] = ak[nt][2 * half + e] * s.rk[row] * s.rk[col + e];
        s.qk[row][col + e] = aq[nt][2 * half + e] * s.rq[row] * s.rk[col + e];
      }
    }
  }
}

// X = (I + L)^-1 for the strictly lower L in s.L (upper blocks of X already zeroed).
template <class T, int BT>
__device__ __forceinline__ void invert_unit_lower(PrepSmem<T, BT>& s, int tid) {
  constexpr int NB = BT / 16;
  if (tid < BT) {
    const int b = tid / 16, col = tid % 16, o = 16 * b;
    float x[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) x[r] = r == col ? 1.f : 0.f;
#pragma unroll
    for (int r = 1; r < 16; ++r) {
      float acc = x[r];
#pragma unroll
      for (int c = 0; c < r; ++c) acc -= s.L[o + r][o + c] * x[c];
      x[r] = acc;
    }
#pragma unroll
    for (int r = 0; r < 16; ++r) s.X[o + r][o + col] = x[r];
  }
  __syncthreads();
#pragma unroll
  for (int d = 1; d < NB; ++d) {
    const int nblk = NB - d;
    for (int idx = tid; idx < nblk * 256; idx += kThreads) {
      const int blk = idx >> 8, e = idx & 255, rr = e >> 4, cc = e & 15;
      const int a = blk + d, b = blk;
      float acc = 0.f;
      for (int m = b; m < a; ++m)
#pragma unroll
        for (int c = 0; c < 16; ++c) acc += s.L[16 * a + rr][16 * m + c] * s.X[16 * m + c][16 * b + cc];
      s.tmp[blk][rr][cc] = acc;
    }
    __syncthreads();
    for (int idx = tid; idx < nblk * 256; idx += kThreads) {
      const int blk = idx >> 8, e = idx & 255, rr = e >> 4, cc = e & 15;
      const int a = blk + d, b = blk;
      float acc = 0.f;
#pragma unroll
      for (int c = 0; c < 16; ++c) acc -= s.X[16 * a + rr][16 * a + c] * s.tmp[blk][c][cc];
      s.X[16 * a + rr][16 * b + cc] = acc;
    }
    __syncthreads();
  }
}

template <class T, int BT>
__global__ void __launch_bounds__(kThreads) gdn_prep_kernel(GdnFwdParams p, GdnChunkWs ws,
                                                            const int32_t* chunk_indices, int nts) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<PrepSmem<T, BT>*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t r = blockIdx.x;
  const int h = blockIdx.y, G = p.HV / p.H;
  int64_t n, c;
  if (chunk_indices) {
    n = chunk_indices[2 * r];
    c = chunk_indices[2 * r + 1];
    if (n < 0) return;  // sentinel row: touch nothing
  } else {
    n = r / nts;
    c = r % nts;
  }
  int64_t bos, eos;
  seq_bounds(p, n, bos, eos);
  const int64_t t0 = bos + c * BT;
  const int len = static_cast<int>(min(int64_t(BT), eos - t0));
  if (len <= 0) return;

  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  for (int idx = tid; idx < BT * (kK / 8); idx += kThreads) {
    const int row = idx / (kK / 8), ch = idx % (kK / 8);
    const bool valid = row < len;
    const int64_t off = valid ? ((t0 + row) * p.H + h) * kK + ch * 8 : 0;
    cp_async16(&s.q[row][ch * 8], q + off, valid);
    cp_async16(&s.k[row][ch * 8], k + off, valid);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  for (int i = warp; i < 2 * BT; i += kThreads / 32) {
    const T* row = i < BT ? &s.q[i][0] : &s.k[i - BT][0];
    float ss = 0.f;
#pragma unroll
    for (int e = 0; e < kK / 32; ++e) {
      const float x = MmaType<T>::to_float(row[lane * (kK / 32) + e]);
      ss += x * x;
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, d);
    const float rs = p.l2norm ? rsqrtf(ss + 1e-6f) : 1.f;
    if (lane == 0) {
      const int ri = i < BT ? i : i - BT;
      (i < BT ? s.rq : s.rk)[ri] = rs;
      if (ri < len) (i < BT ? ws.rq : ws.rk)[h * ws.T_cap + t0 + ri] = rs;
    }
  }
  __syncthreads();
  gram_products<T, BT>(s, warp, lane);
  __syncthreads();

  T* Ab = static_cast<T*>(ws.Ab);
  T* P = static_cast<T*>(ws.P);
  for (int jj = 0; jj < G; ++jj) {
    const int j = h * G + jj;
    if (warp == 0) {  // gate cumsum and beta: lane owns rows lane and lane + 32
      float gsum = 0.f;
#pragma unroll
      for (int half = 0; half < BT / 32; ++half) {
        const int i = lane + 32 * half;
        float gv = i < len ? gdn_gate(p, t0 + i, j) : 0.f;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
          const float o = __shfl_up_sync(0xffffffffu, gv, d);
          if (lane >= d) gv += o;
        }
        gv += gsum;
        gsum = __shfl_sync(0xffffffffu, gv, 31);
        s.gam[i] = gv * kLog2e;
        s.beta[i] = i < len ? gdn_beta(p, t0 + i, j) : 0.f;
        if (i < len) ws.gam[j * ws.T_cap + t0 + i] = gv * kLog2e;
      }
    }
    __syncthreads();
    const float scale = p.scale;
    for (int idx = tid; idx < BT * BT; idx += kThreads) {
      const int i = idx / BT, jc = idx % BT;
      const bool lower = i >= jc && i < len && jc < len;
      const float d = lower ? exp2f(s.gam[i] - s.gam[jc]) : 0.f;
      s.L[i][jc] = i > jc ? s.beta[i] * d * s.kk[i][jc] : 0.f;
      if ((i >> 4) < (jc >> 4)) s.X[i][jc] = 0.f;
      if (i < len) P[(j * ws.T_cap + t0 + i) * BT + jc] = MmaType<T>::from_float(scale * d * s.qk[i][jc]);
    }
    __syncthreads();
    invert_unit_lower<T, BT>(s, tid);
    for (int idx = tid; idx < BT * BT; idx += kThreads) {
      const int i = idx / BT, jc = idx % BT;
      if (i < len) Ab[(j * ws.T_cap + t0 + i) * BT + jc] = MmaType<T>::from_float(s.X[i][jc] * s.beta[jc]);
    }
    __syncthreads();
  }
}

template <class T, int BT>
void launch_prep_t(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* ci, int64_t nt_cap,
                   cudaStream_t stream) {
  const int nts = p.cu_seqlens ? 0 : static_cast<int>((p.T_seq + BT - 1) / BT);
  launch(gdn_prep_kernel<T, BT>, dim3(static_cast<unsigned>(nt_cap), p.H), dim3(kThreads),
         sizeof(PrepSmem<T, BT>), stream, p, ws, ci, nts);
}

}  // namespace

void launch_gdn_prep(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                     int64_t nt_cap, cudaStream_t stream) {
  LINATTN_CHECK(p.K == kK, "gdn prep: K must be ", kK, ", got ", p.K);
  LINATTN_CHECK(nt_cap < (int64_t(1) << 31), "gdn prep: too many chunks: ", nt_cap);
  const bool bf = p.io == ElemType::kBF16;
  LINATTN_CHECK(bf || p.io == ElemType::kF16, "gdn prep: io dtype must be bf16 or fp16");
  if (p.BT == 64) {
    bf ? launch_prep_t<__nv_bfloat16, 64>(p, ws, chunk_indices, nt_cap, stream)
       : launch_prep_t<__half, 64>(p, ws, chunk_indices, nt_cap, stream);
  } else if (p.BT == 32) {
    bf ? launch_prep_t<__nv_bfloat16, 32>(p, ws, chunk_indices, nt_cap, stream)
       : launch_prep_t<__half, 32>(p, ws, chunk_indices, nt_cap, stream);
  } else {
    LINATTN_UNSUPPORTED("gdn prep: chunk_size ", p.BT, " (supported: 32, 64)");
  }
}

}  // namespace linattn::cuda
