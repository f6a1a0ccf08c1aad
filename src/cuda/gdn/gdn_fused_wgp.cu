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
    float gam[kBT], rk[kBT];
  };
  struct alignas(1024) Stage1 {  // WG1's inputs of one chunk
    alignas(1024) uint8_t q[kBT * kK * 2];
    alignas(1024) uint8_t p[kBT * kBT * 2];  // P [t][s]
    float gam[kBT], rq[kBT];
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
// K-major operand (rows along M / N, K contiguous), k16 step kk.
__device__ __forceinline__ uint64_t desc_kmaj(const uint8_t* base, int kk, int rows) {
  return wgmma_desc_sw128(smem_u32(base) + uint32_t(kk >> 2) * uint32_t(rows) * 128u + uint32_t(kk & 3) * 32u, 16u,
                          1024u);
}
// MN-major operand (rows along K, MN contiguous in blocks of 64), k16 step kk.
__device__ __forceinline__ uint64_t desc_mnmaj(const uint8_t* base, int kk, int krows) {
  return wgmma_desc_sw128(smem_u32(base) + uint32_t(kk) * 2048u, uint32_t(krows) * 128u, 1024u);
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
  const int kstride = p.H * kK, vstride = p.HV * p.V;
#pragma unroll
  for (int idx = t; idx < kBT * (kK / 8); idx += 128) {
    const int row = idx >> 4, ch = idx & 15;
    const bool valid = row < len;
    cp_async16(st.k + kmaj(row, ch * 8, kBT), k + (valid ? row * kstride + ch * 8 : 0), valid);
  }
  const T* A = static_cast<const T*>(ws.Ab) + (j * ws.T_cap + t0) * kBT;
#pragma unroll
  for (int idx = t; idx < kBT * (kBT / 8); idx += 128) {
    const int row = idx >> 3, ch = idx & 7;
    const bool valid = row < len;
    cp_async16(&st.v[row][ch * 8], v + (valid ? row * vstride + ch * 8 : 0), valid);
    cp_async16(st.a + sw128_offset(row, ch * 8), A + (valid ? row * kBT + ch * 8 : 0), valid);
  }
  const int row = t & 63;
  const bool valid = row < len;
  if (t < 64) cp_async4(st.gam + row, ws.gam + j * ws.T_cap + (valid ? t0 + row : 0), valid);
  else cp_async4(st.rk + row, ws.rk + h * ws.T_cap + (valid ? t0 + row : 0), valid);
}

template <class T>
__device__ __forceinline__ void load_output_inputs(typename WgpSmem<T>::Stage1& st, const GdnFwdParams& p,
                                                   const GdnChunkWs& ws, int64_t t0, int len, int h, int j, int t) {
  const T* q = static_cast<const T*>(p.q) + (t0 * p.H + h) * kK;
  const int qstride = p.H * kK;
#pragma unroll
  for (int idx = t; idx < kBT * (kK / 8); idx += 128) {
    const int row = idx >> 4, ch = idx & 15;
    const bool valid = row < len;
    cp_async16(st.q + kmaj(row, ch * 8, kBT), q + (valid ? row * qstride + ch * 8 : 0), valid);
  }
  const T* P = static_cast<const T*>(ws.P) + (j * ws.T_cap + t0) * kBT;
#pragma unroll
  for (int idx = t; idx < kBT * (kBT / 8); idx += 128) {
    const int row = idx >> 3, ch = idx & 7;
    const bool valid = row < len;
    cp_async16(st.p + sw128_offset(row, ch * 8), P + (valid ? row * kBT + ch * 8 : 0), valid);
  }
  const int row = t & 63;
  const bool valid = row < len;
  if (t < 64) cp_async4(st.gam + row, ws.gam + j * ws.T_cap + (valid ? t0 + row : 0), valid);
  else cp_async4(st.rq + row, ws.rq + h * ws.T_cap + (valid ? t0 + row : 0), valid);
}

__device__ __forceinline__ int chunk_len(int64_t bos, int64_t eos, int64_t c) {
  return static_cast<int>(min(int64_t(kBT), eos - (bos + c * kBT)));
}

// WG0: the state chain. S^T rows v0 + acc_row (values), columns acc_col (keys).
template <class T>
__device__ void state_warpgroup(WgpSmem<T>& s, const GdnFwdParams& p, const GdnChunkWs& ws, int64_t n, int64_t bos,
                                int64_t eos, int64_t nchunks, int h, int j, int v0, int t) {
  float S[64];
#pragma unroll
  for (int i = 0; i < 64; ++i)
    S[i] = p.h0 ? load_elem(p.h0, p.h0_type, state_index(p, n, j, acc_col(t, i), v0 + acc_row(t, i))) : 0.f;
  for (int64_t c = 0; c < 2; ++c) {
    if (c < nchunks) load_state_inputs<T>(s.st0[c], p, ws, bos + c * kBT, chunk_len(bos, eos, c), h, j, v0, t);
    cp_async_commit();
  }
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  for (int64_t c = 0; c < nchunks; ++c) {
    auto& st = s.st0[c % kStages0];
    const int len = chunk_len(bos, eos, c);
    cp_async_wait<1>();  // chunk c's group (the newest, chunk c+1's, may still be in flight)
    fence_view_async_shared();
    named_barrier(kBarWg0, 128);  // ... for every thread's copies; all of WG0 is past chunk c-1

    uint32_t sf[32];  // S^T as the A operand of K S^T (and, through the hand-off, of Q S^T)
    acc_to_frag<T, 64>(sf, S);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk) wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_kmaj(st.k, kk, kBT), kk > 0);
    wgmma_commit();

    if (c + 2 < nchunks)  // into the stage of chunk c-1, whose readers all finished
      load_state_inputs<T>(s.st0[(c + 2) % kStages0], p, ws, bos + (c + 2) * kBT, chunk_len(bos, eos, c + 2), h, j, v0, t);
    cp_async_commit();
    auto& x = s.xch[c & 1];
    if (c >= 2) named_barrier(kBarEmpty + (c & 1), 256);  // WG1 has read chunk c-2's fragments
#pragma unroll
    for (int i = 0; i < 8; ++i) x.s[i][t] = make_uint4(sf[4 * i], sf[4 * i + 1], sf[4 * i + 2], sf[4 * i + 3]);

    // Off the tensor pipe while K S^T runs: V^T and the per-token scales of this thread's columns.
    uint32_t vv[16];  // V^T pairs (registers 2i, 2i + 1: same value row, adjacent tokens), packed
    float erk[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const uint16_t* row0 = reinterpret_cast<const uint16_t*>(&st.v[acc_col(t, 2 * i)][0]);
      const uint16_t* row1 = reinterpret_cast<const uint16_t*>(&st.v[acc_col(t, 2 * i + 1)][0]);
      vv[i] = uint32_t(row0[acc_row(t, 2 * i)]) | (uint32_t(row1[acc_row(t, 2 * i + 1)]) << 16);
    }
#pragma unroll
    for (int e = 0; e < 16; ++e) {
      const int tok = slot_col(t, e);
      erk[e] = exp2f(st.gam[tok]) * st.rk[tok];
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
    for (int kk = 0; kk < kBT / 16; ++kk) wgmma_m64k16_rs<T, 64, 0>(acc, xf + 4 * kk, desc_kmaj(st.a, kk, kBT), kk > 0);
    wgmma_commit();
    const float gl = st.gam[len - 1];
    float wsc[16];  // e^(gam_L - gam) rk, zero past the chunk end
#pragma unroll
    for (int e = 0; e < 16; ++e) {
      const int tok = slot_col(t, e);
      wsc[e] = tok < len ? exp2f(gl - st.gam[tok]) * st.rk[tok] : 0.f;
    }
    const float decay = exp2f(gl);
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
    for (int kk = 0; kk < kBT / 16; ++kk) wgmma_m64k16_rs<T, 128, 1>(S, hf + 4 * kk, desc_mnmaj(st.k, kk, kBT), 1);
    wgmma_commit();
#pragma unroll
    for (int i = 0; i < 4; ++i) x.v[i][t] = make_uint4(vf[4 * i], vf[4 * i + 1], vf[4 * i + 2], vf[4 * i + 3]);
    named_barrier_arrive(kBarFull + (c & 1), 256);
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
                                 int64_t eos, int64_t nchunks, int h, int j, int v0, int t) {
  if (nchunks > 0) load_output_inputs<T>(s.st1[0], p, ws, bos, chunk_len(bos, eos, 0), h, j, t);
  cp_async_commit();
  T* o_base = static_cast<T*>(p.o) + int64_t(j) * p.V + v0;
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  for (int64_t c = 0; c < nchunks; ++c) {
    auto& st = s.st1[c % kStages1];
    const int64_t t0 = bos + c * kBT;
    const int len = chunk_len(bos, eos, c);
    cp_async_wait<0>();
    fence_view_async_shared();
    named_barrier(kBarWg1, 128);  // chunk c's inputs visible; all of WG1 is past chunk c-1
    if (c + 1 < nchunks)
      load_output_inputs<T>(s.st1[(c + 1) % kStages1], p, ws, t0 + kBT, chunk_len(bos, eos, c + 1), h, j, t);
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
    for (int kk = 0; kk < kK / 16; ++kk) wgmma_m64k16_rs<T, 64, 0>(acc, sf + 4 * kk, desc_kmaj(st.q, kk, kBT), kk > 0);
    wgmma_commit();
    float qsc[16];
#pragma unroll
    for (int e = 0; e < 16; ++e) {
      const int tok = slot_col(t, e);
      qsc[e] = p.scale * exp2f(st.gam[tok]) * st.rq[tok];
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_regs(sf);
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] *= qsc[reg_slot(i)];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk) wgmma_m64k16_rs<T, 64, 0>(acc, vf + 4 * kk, desc_kmaj(st.p, kk, kBT), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    wgmma_fence_regs(vf);
    if (c + 2 < nchunks) named_barrier_arrive(kBarEmpty + (c & 1), 256);  // WG0 may refill this buffer

#pragma unroll
    for (int i = 0; i < 32; ++i) s.o[acc_col(t, i)][acc_row(t, i)] = MmaType<T>::from_float(acc[i]);
    named_barrier(kBarWg1, 128);
#pragma unroll
    for (int idx = t; idx < kBT * (kVS / 8); idx += 128) {
      const int row = idx >> 3, ch = idx & 7;
      if (row < len)
        *reinterpret_cast<uint4*>(o_base + (t0 + row) * int64_t(p.HV) * p.V + ch * 8) =
            *reinterpret_cast<const uint4*>(&s.o[row][ch * 8]);
    }
  }
  cp_async_wait<0>();
}

template <class T>
__global__ void __launch_bounds__(kThreads, 1) gdn_fused_wgp_kernel(GdnFwdParams p, GdnChunkWs ws) {
  extern __shared__ unsigned char smem_raw[];
  WgpSmem<T>& s = *reinterpret_cast<WgpSmem<T>*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int tid = threadIdx.x, t = tid & 127;
  const int v0 = blockIdx.x * kVS, j = blockIdx.y, h = j / (p.HV / p.H);
  const int64_t n = blockIdx.z;
  int64_t bos, eos;
  seq_bounds(p, n, bos, eos);
  const int64_t nchunks = (eos - bos + kBT - 1) / kBT;
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
