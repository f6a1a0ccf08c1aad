// Pipelined wgmma GDN forward with a look-ahead state chain (sm_90a, bf16; LINATTN_CUDA_WGMMA=2):
// the inputs, grid, output warpgroup (WG1) and hand-off of gdn_fused_wgp.cu (gdn_fused_wgp_common.cuh),
// but WG0 no longer waits for the state update before the next chunk's K S^T. With Y_{c+1} =
// S_c^T K_{c+1}^T (computed during chunk c, off the chain) and the 64 x 64 key Gram
// G_c = K_{c+1} K_c^T (bf16, shared memory, K-major [token c+1][token c]):
//   KS_{c+1}^T = S_{c+1}^T K_{c+1}^T = e^gam_L Y_{c+1} + H_c G_c^T,  H_c = V^_c^T diag(e^(gam_L - gam) rk)
// so the chain per chunk is two 4-step wgmma groups (H G, then X Ab^T) instead of three groups of
// 8 + 4 + 4 (N 128) steps; the state update (4 x N 128), Y (8) and G (8) run beside it. Per chunk
// (wgmma groups in issue order): H_{c-1} G_{c-1} -> X_c -> X_c Ab_c^T | Y_{c+1} = S_c^T K_{c+1}^T |
// V^_c, H_c -> S_{c+1} = e^gam_L S_c + H_c K_c | G_c = K_{c+1} K_c^T -> shared memory.
// k tiles of chunks c-1 .. c+1 are live, so chunk c+2's inputs are issued at the top of chunk c, once
// chunk c-1's readers are done (about one chunk ahead, was two). bf16 only: G of raw fp16 keys
// could overflow (|k|^2 > 65504); fp16 keeps gdn_fused_wgp.cu. Extra shared memory: G, 8 KB (221 KB per CTA).
// Opt-in: measured 3-8% slower than gdn_fused_wgp.cu on the H200 (the state warp issues ~760 instead
// of ~634 instructions per chunk and the chunk time follows that count), one fwd test case over the
// precision bar and racecheck reports on the hand-off (docs/perf-notes.md, CUDA GDN forward, Step 4).
#include <cuda_runtime.h>

#include "core/check.h"
#include "cuda/common/launch.h"
#include "cuda/gdn/gdn_fused_wg.h"
#include "cuda/gdn/gdn_fused_wgp_common.cuh"

namespace linattn::cuda {
namespace {
using namespace wgp;
using T = __nv_bfloat16;

struct LaSmem {
  WgpSmem<T> w;
  alignas(1024) uint8_t g[kBT * kBT * 2];  // G_c = K_{c+1} K_c^T, K-major [token c+1][token c]
};

struct Chain {  // loop-carried registers of the state warpgroup besides S and Y
  uint32_t hf[16];   // H_{c-1}: V^T diag(e^(gam_L - gam) rk) of the previous chunk (bf16 A fragments)
  float decay;       // e^gam_L of the previous chunk
};

struct Ctx {
  int64_t bos, eos;
  int nchunks, h, j, v0, t, ld_row, ld_col;
  uint64_t dk0, da0, dkt0, dg;
};

// One chunk c of the state chain. ya = Y_c (complete; for c = 0 already KS_0), yb = H G, then Y_{c+1}
// (ya: X Ab^T, then G_c). Stage indices: st (chunk c), nst (c + 1), pst (c - 1 = c + 2's slot).
__device__ __forceinline__ void la_chunk(LaSmem& ls, const GdnFwdParams& p, const GdnChunkWs& ws, const Ctx& x, int c,
                                         int st, float (&S)[64], float (&ya)[32], float (&yb)[32], Chain& ch) {
  using Stage0 = WgpSmem<T>::Stage0;
  WgpSmem<T>& s = ls.w;
  const int nst = st == kStages0 - 1 ? 0 : st + 1, pst = st == 0 ? kStages0 - 1 : st - 1;
  Stage0& sc = s.st0[st];
  const uint32_t soff = uint32_t(st) * uint32_t(sizeof(Stage0)), noff = uint32_t(nst) * uint32_t(sizeof(Stage0));
  const bool more = c + 1 < x.nchunks;
  fence_view_async_shared();
  named_barrier(kBarWg0, 128);  // G_{c-1} and chunk c's scales (written at the end of chunk c-1) visible

  // KS_c = e^gam_L Y_c + H_{c-1} G_{c-1}^T (chunk 0: KS_0 + 0 G with G zeroed, decay 1): H G into yb,
  // the decay applied in the X pass. Every wgmma of the chunk is issued unconditionally: ptxas
  // serializes wgmma on paths it cannot prove uniform.
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBT / 16; ++kk)
    wgmma_m64k16_rs<T, 64, 0>(yb, ch.hf + 4 * kk, desc_at(x.dg, kmaj_step(kk, kBT)), kk > 0);
  wgmma_commit();
  // Chunk c-1's slot is free: every thread waited for its last readers (update, G) at the end of
  // chunk c-1 before the barrier above. Refill it with chunk c+2.
  if (c + 2 < x.nchunks)
    load_state_inputs<T>(s.st0[pst], p, ws, x.bos + int64_t(c + 2) * kBT, chunk_len(x.bos, x.eos, c + 2), x.h, x.j,
                         x.v0, x.t);
  cp_async_commit();
  uint32_t vv[16];  // V^T pairs by ldmatrix.trans, and the scales of this thread's token columns
#pragma unroll
  for (int kk = 0; kk < kBT / 16; ++kk) {
    uint32_t r[4];
    ldsm_x4_t(r, &sc.v[16 * kk + x.ld_row][x.ld_col]);
    vv[4 * kk] = r[0], vv[4 * kk + 1] = r[1], vv[4 * kk + 2] = r[2], vv[4 * kk + 3] = r[3];
  }
  float erk[16];
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const float2 e2 = *reinterpret_cast<const float2*>(&sc.erk[slot_col(x.t, 2 * m)]);
    erk[2 * m] = e2.x, erk[2 * m + 1] = e2.y;
  }
  wgmma_wait<0>();  // H G
  wgmma_fence_operands(yb);
  wgmma_fence_regs(ch.hf);

  uint32_t xf[16];  // X^T = V^T - KS^T diag(e^gam rk), KS^T = e^gam_L Y + H G
#pragma unroll
  for (int i = 0; i < 16; ++i)
    xf[i] = MmaType<T>::pack(
        MmaType<T>::to_float(lo_half<T>(vv[i])) - erk[reg_slot(2 * i)] * fmaf(ch.decay, ya[2 * i], yb[2 * i]),
        MmaType<T>::to_float(hi_half<T>(vv[i])) - erk[reg_slot(2 * i + 1)] * fmaf(ch.decay, ya[2 * i + 1], yb[2 * i + 1]));
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBT / 16; ++kk) wgmma_m64k16_rs<T, 64, 0>(ya, xf + 4 * kk, desc_at(x.da0, soff + kmaj_step(kk, kBT)), kk > 0);
  wgmma_commit();

  // Chunk c+1's copies (the older group in flight) complete and visible to Y / G; every thread has
  // waited for H G, so G_{c-1} may be overwritten at the end of this chunk.
  cp_async_wait<1>();
  fence_view_async_shared();
  named_barrier(kBarWg0, 128);

  uint32_t sf[32];  // S_c^T: the hand-off to WG1 (Q S) and the A operand of Y_{c+1}
  acc_to_frag<T, 64>(sf, S);
  auto& xc = s.xch[c & 1];
  if (c >= 2) named_barrier(kBarEmpty + (c & 1), 256);  // WG1 has read chunk c-2's fragments
#pragma unroll
  for (int i = 0; i < 8; ++i) xc.s[i][x.t] = make_uint4(sf[4 * i], sf[4 * i + 1], sf[4 * i + 2], sf[4 * i + 3]);
  // Y_{c+1} = S_c^T K_{c+1}^T (the last chunk: stale k, result unused)
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) wgmma_m64k16_rs<T, 64, 0>(yb, sf + 4 * kk, desc_at(x.dk0, noff + kmaj_step(kk, kBT)), kk > 0);
  wgmma_commit();
  float wsc[16];  // e^(gam_L - gam) rk, zero past the chunk end
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const float2 w2 = *reinterpret_cast<const float2*>(&sc.wsc[slot_col(x.t, 2 * m)]);
    wsc[2 * m] = w2.x, wsc[2 * m + 1] = w2.y;
  }
  wgmma_wait<1>();  // X Ab^T (Y may still run)
  wgmma_fence_operands(ya);
  wgmma_fence_regs(xf);

  uint32_t vf[16];  // V^_c^T, and H_c = V^T diag(e^(gam_L - gam) rk)
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    vf[i] = MmaType<T>::pack(ya[2 * i], ya[2 * i + 1]);
    ch.hf[i] = MmaType<T>::pack(ya[2 * i] * wsc[reg_slot(2 * i)], ya[2 * i + 1] * wsc[reg_slot(2 * i + 1)]);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) xc.v[i][x.t] = make_uint4(vf[4 * i], vf[4 * i + 1], vf[4 * i + 2], vf[4 * i + 3]);
  named_barrier_arrive(kBarFull + (c & 1), 256);
  ch.decay = sc.decay;
#pragma unroll
  for (int i = 0; i < 64; ++i) S[i] *= ch.decay;
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBT / 16; ++kk)  // S_{c+1}^T = e^gam_L S_c^T + H_c K_c (k tile MN-major)
    wgmma_m64k16_rs<T, 128, 1>(S, ch.hf + 4 * kk, desc_at(x.dkt0, soff + uint32_t(kk) * 2048u), 1);
  wgmma_commit();
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk)  // G_c = K_{c+1} K_c^T into ya (V^ is converted; last chunk: unused)
    wgmma_m64k16<T, 64, 0, 0>(ya, desc_at(x.dk0, noff + kmaj_step(kk, kBT)), desc_at(x.dk0, soff + kmaj_step(kk, kBT)),
                              kk > 0);
  wgmma_commit();
  if (more) state_scales<T>(s.st0[nst], chunk_len(x.bos, x.eos, c + 1), x.t);  // own copies, complete since the barrier
  wgmma_wait<0>();
  wgmma_fence_operands(S);
  wgmma_fence_regs(ch.hf);
  wgmma_fence_operands(ya);
  wgmma_fence_operands(yb);
  wgmma_fence_regs(sf);
  // G -> shared memory (bf16 pairs, conflict-free: the swizzle spreads the 8 rows of a warp).
  // Every reader of G_{c-1} has passed the barrier above, so it can be overwritten.
  if (more) {
#pragma unroll
    for (int i = 0; i < 32; i += 2)
      *reinterpret_cast<uint32_t*>(ls.g + sw128_offset(acc_row(x.t, i), acc_col(x.t, i))) = MmaType<T>::pack(ya[i], ya[i + 1]);
  }
}

__device__ void la_state_warpgroup(LaSmem& ls, const GdnFwdParams& p, const GdnChunkWs& ws, int64_t n, int64_t bos,
                                   int64_t eos, int nchunks, int h, int j, int v0, int t) {
  WgpSmem<T>& s = ls.w;
  float S[64];
#pragma unroll
  for (int i = 0; i < 64; ++i)
    S[i] = p.h0 ? load_elem(p.h0, p.h0_type, state_index(p, n, j, acc_col(t, i), v0 + acc_row(t, i))) : 0.f;
  for (int c = 0; c < 2; ++c) {
    if (c < nchunks) load_state_inputs<T>(s.st0[c], p, ws, bos + c * kBT, chunk_len(bos, eos, c), h, j, v0, t);
    cp_async_commit();
  }
  const int lane = t & 31, mat = lane >> 3;  // ldmatrix.trans lane address, as in gdn_fused_wgp.cu
  Ctx x{bos, eos, nchunks, h, j, v0, t, 8 * (mat >> 1) + (lane & 7), 16 * (t >> 5) + 8 * (mat & 1),
        desc_kmaj0(s.st0[0].k), desc_kmaj0(s.st0[0].a), desc_mnmaj0(s.st0[0].k, kBT), desc_kmaj0(ls.g)};
  float ya[32], yb[32];
  Chain ch;
#pragma unroll
  for (int i = 0; i < 32; ++i) ya[i] = yb[i] = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i) ch.hf[i] = 0u;
  ch.decay = 1.f;
  // G starts at zero: chunk 0's H G (H = 0) must not meet NaN bit patterns.
  reinterpret_cast<uint4*>(ls.g)[t] = make_uint4(0u, 0u, 0u, 0u);
  reinterpret_cast<uint4*>(ls.g)[t + 128] = make_uint4(0u, 0u, 0u, 0u);
  reinterpret_cast<uint4*>(ls.g)[t + 256] = make_uint4(0u, 0u, 0u, 0u);
  reinterpret_cast<uint4*>(ls.g)[t + 384] = make_uint4(0u, 0u, 0u, 0u);
  // KS_0 = S_0^T K_0^T directly (no chunks: stale shared memory, result unused).
  cp_async_wait<1>();
  state_scales<T>(s.st0[0], chunk_len(bos, eos, 0), t);
  fence_view_async_shared();
  named_barrier(kBarWg0, 128);
  {
    uint32_t sf[32];
    acc_to_frag<T, 64>(sf, S);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk) wgmma_m64k16_rs<T, 64, 0>(ya, sf + 4 * kk, desc_at(x.dk0, kmaj_step(kk, kBT)), kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(ya);
    wgmma_fence_regs(sf);
  }
  // Two chunks per trip so Y_c / Y_{c+1} swap roles without register copies.
  for (int c = 0, st = 0; c < nchunks;) {
    la_chunk(ls, p, ws, x, c, st, S, ya, yb, ch);
    st = st == kStages0 - 1 ? 0 : st + 1;
    if (++c >= nchunks) break;
    la_chunk(ls, p, ws, x, c, st, S, yb, ya, ch);
    st = st == kStages0 - 1 ? 0 : st + 1;
    ++c;
  }
  wgmma_wait<0>();  // the last chunk's update
  wgmma_fence_operands(S);
  wgmma_fence_regs(ch.hf);
  cp_async_wait<0>();
  if (p.ht) {
#pragma unroll
    for (int i = 0; i < 64; ++i) p.ht[state_index(p, n, j, acc_col(t, i), v0 + acc_row(t, i))] = S[i];
  }
}

static_assert(sizeof(LaSmem) + 1024 <= 227 * 1024, "look-ahead kernel: shared memory over the sm_90 limit");

__global__ void __launch_bounds__(kThreads, 1) gdn_fused_wgp_la_kernel(GdnFwdParams p, GdnChunkWs ws) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);  // as gdn_fused_wgp.cu
  LaSmem& s = *reinterpret_cast<LaSmem*>(base);
  const int tid = threadIdx.x, t = tid & 127;
  const int v0 = blockIdx.x * kVS, j = blockIdx.y, h = j / (p.HV / p.H);
  const int64_t n = blockIdx.z;
  int64_t bos, eos;
  seq_bounds(p, n, bos, eos);
  const int nchunks = static_cast<int>((eos - bos + kBT - 1) / kBT);
  if (tid < 128) la_state_warpgroup(s, p, ws, n, bos, eos, nchunks, h, j, v0, t);
  else output_warpgroup<T>(s.w, p, ws, bos, eos, nchunks, h, j, v0, t);
}

}  // namespace

void launch_gdn_fused_wgp_la(const GdnFwdParams& p, const GdnChunkWs& ws, cudaStream_t stream) {
  LINATTN_CHECK(p.io == ElemType::kBF16, "gdn fused (wgmma look-ahead): bf16 inputs only");
  launch(gdn_fused_wgp_la_kernel, dim3(p.V / kVS, p.HV, p.N), dim3(kThreads), sizeof(LaSmem) + 1024, stream, p, ws);
}

}  // namespace linattn::cuda
