// V-slice 32 of the pipelined wgmma fused forward (gdn_fused_wgp.cu; opt-in LINATTN_CUDA_WGP_VS=32,
// gdn_fused_wg.h): one CTA per (32 columns of v, value head j, sequence n), so a forward whose
// N * HV * V / 64 CTAs leave SMs idle gets twice the CTAs. wgmma's M is 64, so a 32-row S^T cannot
// be the A operand of the VS-64 chain; here the state is held the other way round, S [key][v]
// (two m64n32 fp32 accumulators of WG0, keys 0-63 / 64-127, 32 registers per thread), and every
// product has the v slice as its N = 32 (m64n32k16):
//   WG0:  KS = K S (A = the k tile, B = S^T's bf16 tile),  X = V - diag(e^gam rk) KS,
//         V^ = Ab X (B = X^T's tile),  S <- e^gam_L S + K^T diag(e^(gam_L - gam) rk) V^
//         (A = the k tile MN-major, per key panel; B = H^T's tile)
//   WG1:  O = diag(scale e^gam rq) Q S + P V^ (A = the q / P tiles, B = WG0's S^T / V^T tiles)
// The B operands come from shared memory, so S, X and H cross it (bf16, stmatrix.trans into K-major
// 128-byte-swizzled [v][key] / [v][token] tiles, two per thread each) with a WG0 barrier before
// the product that reads them; S^T's and V^T's tiles are also the hand-off to WG1 (the same
// double buffer and full / empty named barriers as VS 64). Inputs: the cp.async rings of VS 64
// (load_state_inputs / load_output_inputs with VS 32: the v tile is [64][40]). Gate policy KDA as
// VS 64: kg / kgl / qg in place of k / q, no per-token scales, the decay per key = per row of S.
// Per element the arithmetic is VS 64's (same bf16 roundings of S, X, V^, H, same scale products);
// only the fp32 accumulation order inside the wgmmas differs (other shapes), so not bitwise.
#pragma once
#include <cuda_runtime.h>

#include <type_traits>

#include "cuda/common/wgmma.cuh"
#include "cuda/gdn/gdn_fused_wgp_common.cuh"

namespace linattn::cuda {
namespace wgp {

template <class T, bool KDA = false>
using WgpSmem32 = WgpSmemT<T, KDA, 32>;

#define LINATTN_WGP32_R16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define LINATTN_WGP32_D16                                                                                   \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),         \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])

// D (+)= A B, m64n32k16, A [64 x 16] and B [16 x 32] from descriptors (TA / TB 1: MN-major);
// scale_d 0 overwrites D.
template <class T, int TA, int TB>
__device__ __forceinline__ void wgmma_n32(float (&d)[16], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  static_assert(kBf16 || std::is_same_v<T, __half>, "wgmma: bf16 or fp16 operands");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kBf16)
    LINATTN_WGMMA_SS("m64n32k16", "bf16", LINATTN_WGP32_R16, "%16", "%17", "%18", "%19", "%20", LINATTN_WGP32_D16);
  else
    LINATTN_WGMMA_SS("m64n32k16", "f16", LINATTN_WGP32_R16, "%16", "%17", "%18", "%19", "%20", LINATTN_WGP32_D16);
#else
  __trap();
#endif
}

// An m64n32 accumulator d (rows row0 + 0..63, columns = the 32 v) as bf16 into the K-major tile
// [v][row] (32 rows, 128-byte swizzle, panels of 64 row indices): two stmatrix.x4.trans per thread;
// matrix m of half hf holds rows 16w + 8 (m % 2) .., columns 8 (2 hf + m / 2) ...
template <class T>
__device__ __forceinline__ void store_acc_t(uint8_t* tile, const float (&d)[16], int row0, int t) {
  const int lane = t & 31, m = lane >> 3, w = t >> 5;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const uint32_t r[4] = {MmaType<T>::pack(d[8 * hf], d[8 * hf + 1]), MmaType<T>::pack(d[8 * hf + 2], d[8 * hf + 3]),
                           MmaType<T>::pack(d[8 * hf + 4], d[8 * hf + 5]), MmaType<T>::pack(d[8 * hf + 6], d[8 * hf + 7])};
    const int vrow = 16 * hf + 8 * (m >> 1) + (lane & 7), row = row0 + 16 * w + 8 * (m & 1);
    stmatrix_x4_trans(tile + kmaj(vrow, row, 32), r);
  }
}

// B descriptor of a K-major [32][K] tile and its k16 step's offset.
__host__ __device__ constexpr uint32_t kmaj32_step(int kk) { return kmaj_step(kk, 32); }

// WG0 at V-slice 32: the state chain on S [key][v] (columns v0..v0 + 31).
template <class T, bool KDA>
__device__ void state_warpgroup_vs32(WgpSmem32<T, KDA>& s, const GdnFwdParams& p, const GdnChunkWs& ws, int64_t n,
                                     int64_t bos, int64_t eos, int nchunks, int h, int j, int v0, int t) {
  using Smem = WgpSmem32<T, KDA>;
  using Stage0 = typename Smem::Stage0;
  constexpr int kSt = kStages0<KDA>, kAhead = kSt - 1;
  constexpr uint32_t kXsz = sizeof(typename Smem::Xch);
  Stage0* const ring = s.st0;
  int64_t r0c = 0;  // KDA: chunk c of sequence n is row r0c + c of the prep grid
  if constexpr (KDA) r0c = p.cu_seqlens ? int64_t(ws.chunk_offsets[n]) : n * ((p.T_seq + kBT - 1) / kBT);
  float S[2][16];  // S [key][v]: keys 64 mb + acc_row, columns acc_col
#pragma unroll
  for (int mb = 0; mb < 2; ++mb)
#pragma unroll
    for (int i = 0; i < 16; ++i)
      S[mb][i] = p.h0 ? load_elem(p.h0, p.h0_type, state_index(p, n, j, 64 * mb + acc_row(t, i), v0 + acc_col(t, i)))
                      : 0.f;
  for (int c = 0; c < kAhead; ++c) {
    if (c < nchunks)
      load_state_inputs<T, KDA, 32>(ring[c], p, ws, bos + c * kBT, chunk_len(bos, eos, c), h, j, v0, t, r0c + c);
    cp_async_commit();
  }
  if constexpr (!KDA) {
    cp_async_wait<1>();
    if (nchunks > 0) state_scales<T, 32>(ring[0], chunk_len(bos, eos, 0), t);
  }
  store_acc_t<T>(s.xch[0].s, S[0], 0, t);  // S_0's tile (the top-of-chunk barrier publishes it)
  store_acc_t<T>(s.xch[0].s, S[1], 64, t);
  const int lane = t & 31, rlo = 16 * (t >> 5) + (lane >> 2);  // this thread's accumulator rows rlo, rlo + 8
  const uint8_t* upd0;  // the update's A tile (K^T, MN-major): GDN the k tile, KDA kgl
  if constexpr (KDA) upd0 = ring[0].kda.kl;
  else upd0 = ring[0].k;
  const uint64_t dk0 = desc_kmaj0(ring[0].k), da0 = desc_kmaj0(ring[0].a), du0 = desc_mnmaj0(upd0, kBT);
  const uint64_t ds0 = desc_kmaj0(s.xch[0].s), dw0 = desc_kmaj0(s.xch[0].w);
  for (int c = 0, stage = 0; c < nchunks; ++c, stage = stage == kSt - 1 ? 0 : stage + 1) {
    Stage0& st = ring[stage];
    auto& x = s.xch[c & 1];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(Stage0)), xoff = uint32_t(c & 1) * kXsz;
    cp_async_wait<kAhead - 1>();  // chunk c's group
    fence_view_async_shared();
    named_barrier(kBarWg0, 128);  // chunk c's inputs, scales and S_c's tile; all of WG0 is past chunk c-1

    float acc[16];  // KS = K S [token][v]
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_n32<T, 0, 0>(acc, desc_at(dk0, soff + kmaj_step(kk, kBT)), desc_at(ds0, xoff + kmaj32_step(kk)), kk > 0);
    wgmma_commit();
    const int ld_stage = stage == 0 ? kSt - 1 : stage - 1;  // chunk c-1's, whose readers all finished
    if (c + kAhead < nchunks)
      load_state_inputs<T, KDA, 32>(ring[ld_stage], p, ws, bos + int64_t(c + kAhead) * kBT,
                                    chunk_len(bos, eos, c + kAhead), h, j, v0, t, r0c + c + kAhead);
    cp_async_commit();
    uint32_t vv[8];  // V pairs (same token, adjacent v) at this thread's accumulator positions
#pragma unroll
    for (int e = 0; e < 8; ++e) vv[e] = *reinterpret_cast<const uint32_t*>(&st.v[acc_row(t, 2 * e)][acc_col(t, 2 * e)]);
    float erk[2] = {1.f, 1.f};  // KDA: inside kg
    if constexpr (!KDA) erk[0] = st.erk[rlo], erk[1] = st.erk[rlo + 8];
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    float xv[16];  // X = V - diag(e^gam rk) KS
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      xv[2 * e] = MmaType<T>::to_float(lo_half<T>(vv[e])) - erk[e & 1] * acc[2 * e];
      xv[2 * e + 1] = MmaType<T>::to_float(hi_half<T>(vv[e])) - erk[e & 1] * acc[2 * e + 1];
    }
    store_acc_t<T>(x.w, xv, 0, t);
    fence_view_async_shared();
    named_barrier(kBarWg0, 128);  // X^T's tile complete
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_n32<T, 0, 0>(acc, desc_at(da0, soff + kmaj_step(kk, kBT)), desc_at(dw0, xoff + kmaj32_step(kk)), kk > 0);
    wgmma_commit();
    float wsc[2] = {1.f, 1.f};  // KDA: inside kgl
    if constexpr (KDA) {        // per-key decay: row rlo (+ 8) of key block mb
#pragma unroll
      for (int mb = 0; mb < 2; ++mb) {
        const float g0 = st.kda.gk[64 * mb + rlo], g1 = st.kda.gk[64 * mb + rlo + 8];
#pragma unroll
        for (int i = 0; i < 16; ++i) S[mb][i] *= (i & 2) ? g1 : g0;
      }
    } else {
      wsc[0] = st.wsc[rlo], wsc[1] = st.wsc[rlo + 8];
      const float decay = st.decay;
#pragma unroll
      for (int mb = 0; mb < 2; ++mb)
#pragma unroll
        for (int i = 0; i < 16; ++i) S[mb][i] *= decay;
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    store_acc_t<T>(x.v, acc, 0, t);  // V^T for WG1
    float hv[16];                    // H = diag(e^(gam_L - gam) rk) V^
#pragma unroll
    for (int i = 0; i < 16; ++i) hv[i] = acc[i] * wsc[(i >> 1) & 1];
    store_acc_t<T>(x.w, hv, 0, t);  // X^T's readers (Ab X) are done
    fence_view_async_shared();
    named_barrier_arrive(kBarFull + (c & 1), 256);  // S_c's and V^T's tiles for WG1
    named_barrier(kBarWg0, 128);                    // H^T's tile complete
    wgmma_fence();
#pragma unroll
    for (int mb = 0; mb < 2; ++mb)
#pragma unroll
      for (int kk = 0; kk < kBT / 16; ++kk)
        wgmma_n32<T, 1, 0>(S[mb], desc_at(du0, soff + uint32_t(mb) * uint32_t(kBT * 128) + uint32_t(kk) * 2048u),
                           desc_at(dw0, xoff + kmaj32_step(kk)), 1);
    wgmma_commit();
    // While the update runs: chunk c+1's scales (its group is the older of the two in flight).
    if constexpr (!KDA) {
      cp_async_wait<1>();
      if (c + 1 < nchunks) state_scales<T, 32>(ring[stage == kSt - 1 ? 0 : stage + 1], chunk_len(bos, eos, c + 1), t);
    }
    wgmma_wait<0>();
    wgmma_fence_operands(S[0]);
    wgmma_fence_operands(S[1]);
    if (c + 1 < nchunks) {  // S_{c+1}'s tile, once WG1 has read chunk c-1's
      if (c + 1 >= 2) named_barrier(kBarEmpty + ((c + 1) & 1), 256);
      store_acc_t<T>(s.xch[(c + 1) & 1].s, S[0], 0, t);
      store_acc_t<T>(s.xch[(c + 1) & 1].s, S[1], 64, t);
    }
  }
  cp_async_wait<0>();
  if (p.ht) {
#pragma unroll
    for (int mb = 0; mb < 2; ++mb)
#pragma unroll
      for (int i = 0; i < 16; ++i) p.ht[state_index(p, n, j, 64 * mb + acc_row(t, i), v0 + acc_col(t, i))] = S[mb][i];
  }
}

// WG1 at V-slice 32: O [token][v] of chunk c from WG0's S^T / V^T tiles, one chunk behind WG0.
template <class T, bool KDA>
__device__ void output_warpgroup_vs32(WgpSmem32<T, KDA>& s, const GdnFwdParams& p, const GdnChunkWs& ws, int64_t bos,
                                      int64_t eos, int nchunks, int h, int j, int v0, int t) {
  using Smem = WgpSmem32<T, KDA>;
  using Stage1 = typename Smem::Stage1;
  constexpr uint32_t kXsz = sizeof(typename Smem::Xch);
  if (nchunks > 0) load_output_inputs<T, KDA, 32>(s.st1[0], p, ws, bos, chunk_len(bos, eos, 0), h, j, t);
  cp_async_commit();
  T* o_base = static_cast<T*>(p.o) + int64_t(j) * p.V + v0;
  const int64_t ostride = int64_t(p.HV) * p.V;
  const int lane = t & 31, m = lane >> 3, w = t >> 5, rlo = 16 * w + (lane >> 2);
  const uint64_t dq0 = desc_kmaj0(s.st1[0].q), dp0 = desc_kmaj0(s.st1[0].p);
  const uint64_t ds0 = desc_kmaj0(s.xch[0].s), dv0 = desc_kmaj0(s.xch[0].v);
  for (int c = 0; c < nchunks; ++c) {
    const int stage = c & 1;
    Stage1& st = s.st1[stage];
    const uint32_t soff = uint32_t(stage) * uint32_t(sizeof(Stage1)), xoff = uint32_t(c & 1) * kXsz;
    const int64_t t0 = bos + int64_t(c) * kBT;
    const int len = chunk_len(bos, eos, c);
    cp_async_wait<0>();
    if (!KDA && t < 64) st.qsc[t] = chain_sc::qsc(p.scale, st.gam[t], st.rq[t]);  // own copies
    fence_view_async_shared();
    named_barrier(kBarWg1, 128);  // chunk c's inputs and scales visible; all of WG1 is past chunk c-1
    if (c + 1 < nchunks)
      load_output_inputs<T, KDA, 32>(s.st1[stage ^ 1], p, ws, t0 + kBT, chunk_len(bos, eos, c + 1), h, j, t);
    cp_async_commit();

    named_barrier(kBarFull + (c & 1), 256);  // WG0 has written chunk c's tiles
    float acc[16];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      wgmma_n32<T, 0, 0>(acc, desc_at(dq0, soff + kmaj_step(kk, kBT)), desc_at(ds0, xoff + kmaj32_step(kk)), kk > 0);
    wgmma_commit();
    float qsc[2] = {p.scale, p.scale};  // KDA: the gate and rq are inside qg
    if constexpr (!KDA) qsc[0] = st.qsc[rlo], qsc[1] = st.qsc[rlo + 8];
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
#pragma unroll
    for (int i = 0; i < 16; ++i) acc[i] *= qsc[(i >> 1) & 1];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBT / 16; ++kk)
      wgmma_n32<T, 0, 0>(acc, desc_at(dp0, soff + kmaj_step(kk, kBT)), desc_at(dv0, xoff + kmaj32_step(kk)), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    if (c + 2 < nchunks) named_barrier_arrive(kBarEmpty + (c & 1), 256);  // WG0 may refill this buffer

    // O's accumulator rows are tokens: staged [token][v] by stmatrix (no transpose).
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const uint32_t r[4] = {MmaType<T>::pack(acc[8 * hf], acc[8 * hf + 1]), MmaType<T>::pack(acc[8 * hf + 2], acc[8 * hf + 3]),
                             MmaType<T>::pack(acc[8 * hf + 4], acc[8 * hf + 5]), MmaType<T>::pack(acc[8 * hf + 6], acc[8 * hf + 7])};
      stmatrix_x4(&s.o[16 * w + 8 * (m & 1) + (lane & 7)][8 * (2 * hf + (m >> 1))], r);
    }
    named_barrier(kBarWg1, 128);
    const int orow = t >> 2, och = (t & 3) * 8;  // rows t / 4 + 32u, 16-byte chunk t % 4
    T* out = o_base + (t0 + orow) * ostride + och;
#pragma unroll
    for (int u = 0; u < kBT / 32; ++u)
      if (orow + 32 * u < len)
        *reinterpret_cast<uint4*>(out + 32 * u * ostride) = *reinterpret_cast<const uint4*>(&s.o[orow + 32 * u][och]);
  }
  cp_async_wait<0>();
}

#undef LINATTN_WGP32_R16
#undef LINATTN_WGP32_D16

}  // namespace wgp
}  // namespace linattn::cuda
