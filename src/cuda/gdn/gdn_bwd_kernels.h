// Internal launchers of the CUDA GDN backward kernels (host side, CUDA headers allowed; only
// src/cuda includes this). gdn_bwd.h is the interface src/api sees; gdn_bwd.cc carves the
// workspace and calls these in order.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/gdn/gdn_bwd_params.h"
#include "cuda/gdn/gdn_kernels.h"

namespace linattn::cuda {

// Intermediates of the chunked backward. Chunk row r (0 <= r < nt_cap) is the r-th chunk in
// sequence order: chunk_offsets[n] + c (varlen) or n * nts + c (fixed length).
struct GdnBwdWs {
  GdnChunkWs c;                          // prep outputs (gam, rq, rk, Ab, Ai, P; KDA: Ab, Ai, P, qg, kg, kgl, gl)
  int64_t nt_cap = 0;
  int nts = 0;                           // chunks per sequence (fixed length)
  const int32_t* chunk_indices = nullptr;  // [nt_cap, 2] (varlen) or null
  const int32_t* chunk_offsets = nullptr;  // [N + 1] (varlen) or null
  void* hS = nullptr;      // [nt_cap, HV, K, V] io type: state entering each chunk
  void* hdS = nullptr;     // [nt_cap, HV, K, V] io type: d(state leaving each chunk)
  void* vh = nullptr;      // [HV, T_cap, V] io type: V^ = Ab (V - e^gam K S)
  void* dvh = nullptr;     // [HV, T_cap, V] io type: dV^
  float* part = nullptr;   // [nt_cap, HV, 2] (KDA [nt_cap, HV, K, 2]): per-chunk dA_log / ddt_bias partial sums
  bool do_direct = true;   // d_o is in the io type and 16-byte aligned (cp.async); else converted on load
  bool dstate_only = false;  // tier 3 (cuda/seg): launch only the reverse dS sweeps (dh0 wanted)
};

// Chunked path (K = 128, V in {64, 128}, bf16 / fp16, BT in {32, 64}). Launch order:
// launch_gdn_prep (with c.Ai set) -> sweeps -> chunk gradients -> finish.
// Forward state sweep and reverse dS sweep in one launch (independent; CTA roles interleaved).
void launch_gdn_bwd_sweeps(const GdnBwdParams& p, const GdnBwdWs& w, int vs, cudaStream_t stream);
// dq, dk (group-summed, through the L2 norm), dg, dbeta and the gate partials; one CTA per
// (chunk row, q/k head).
void launch_gdn_bwd_chunk(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream);

// KDA (per-channel gate; kda/kda_bwd_chunk5.cu, chunked7): prep = launch_kda_prep with c.Ai set, the same
// sweeps (KDA policy), then this chunk kernel (dq, dk, dg [T, HV, K], dbeta, per-channel gate
// partials part [nt_cap, HV, K, 2]) and its reduction (dA_log [HV], ddt_bias [HV, K]).
void launch_kda_bwd_chunk5(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream);
// chunked11 (the session-12 default, LINATTN_CUDA_KDA_BWD=chunked11; kda/kda_bwd_chunk11.cu): the same outputs, the
// diagonal blocks split into walked triangles + an mma square (=chunked7 keeps chunk5).
void launch_kda_bwd_chunk11(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream);
// chunked12 (LINATTN_CUDA_KDA_BWD=chunked12; kda/kda_bwd_chunk12.cu): chunked11 with the gate work per form, bitwise.
void launch_kda_bwd_chunk12(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream);
// chunked13 (LINATTN_CUDA_KDA_BWD=chunked13, session 13's default; kda/kda_bwd_chunk13.cu): chunked12 with the gates
// as a cp.async
// tile ahead of the head's tiles and a cheaper split-TF32 hi part, bitwise chunked12.
void launch_kda_bwd_chunk13(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream);
// chunked14 (LINATTN_CUDA_KDA_BWD=chunked14; kda/kda_bwd_chunk14.cu): chunked13 with the split-TF32 lo parts
// truncated by the mask and eg / egl in 8 row steps (not bitwise chunked13).
void launch_kda_bwd_chunk14(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream);
// chunked15 (LINATTN_CUDA_KDA_BWD=chunked15, the default in session 14; kda/kda_bwd_chunk15.cu): chunked14 with the
// head's scalar / v loads ahead of its tiles, bitwise chunked14.
void launch_kda_bwd_chunk15(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream);
// chunked17 (the default since session 15, also "chunked" / "chunked17"; kda/kda_bwd_chunk17.cu): chunked15 with
// batched row scales, cheaper bf16 unpacks and eg / egl steps by selects (loop kept rolled), bitwise chunked15.
void launch_kda_bwd_chunk17(const GdnBwdParams& p, const GdnBwdWs& w, cudaStream_t stream);
void launch_kda_bwd_gate_reduce(const GdnBwdParams& p, const float* part, int64_t rows, const int32_t* count,
                                cudaStream_t stream);

// Shared finishing kernels.
// dA_log[j] / ddt_bias[j] = sum over rows r < count of part[r, j, 0 / 1], in row order (double).
// count: device pointer to the number of valid rows (chunk_offsets[N]) or null (all `rows`).
void launch_gdn_bwd_gate_reduce(const GdnBwdParams& p, const float* part, int64_t rows,
                                const int32_t* count, cudaStream_t stream);
// Zeroes every per-token gradient in rows [clamp(cu_seqlens[N]), T_total) (varlen only).
void launch_gdn_bwd_zero_padding(const GdnBwdParams& p, cudaStream_t stream);

// Token-by-token path (GDN / KDA fallback for any K <= 256, V <= 256, dtype, chunk size; KDA with
// LINATTN_CUDA_KDA_BWD=token). Workspace layout (ns = V-slices of 32 columns, gdn_bwd_token_slices):
struct GdnBwdTokenWs {
  int64_t nt_cap = 0;                     // checkpoints, one per chunk of BT tokens
  int nts = 0;
  int ns = 1;
  const int32_t* chunk_offsets = nullptr; // [N + 1] (varlen) or null
  float* ck = nullptr;     // [nt_cap, HV, K, V] fp32 state entering each chunk
  float* cache = nullptr;  // [N, HV, ns, BT, K, 32] fp32 states entering each token of a chunk
  float* dqh = nullptr;    // [T_total, HV, ns, K] per (value head, V-slice) dq^ (normalised q)
  float* dkh = nullptr;    // [T_total, HV, ns, K] dk^
  float* dgh = nullptr;    // [T_total, HV, ns, K] per key row gate gradient partials
  float* dbh = nullptr;    // [T_total, HV, ns] dbeta partials
  float* part = nullptr;   // [ceil(T_total / 64), HV, width, 2] per 64-token block gate partials
};
int gdn_bwd_token_slices(int V);
void launch_gdn_bwd_token(const GdnBwdParams& p, const GdnBwdTokenWs& w, cudaStream_t stream);
// dq / dk (group and slice sums, L2-norm backward), dg / dbeta (chains of the in-kernel gate and
// sigmoid), dA_log / ddt_bias (fixed-order reductions) of the token path.
void launch_gdn_bwd_token_finish(const GdnBwdParams& p, const GdnBwdTokenWs& w, cudaStream_t stream);

}  // namespace linattn::cuda
