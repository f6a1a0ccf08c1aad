// Internal launchers of the CUDA GDN forward kernels (host side, CUDA headers allowed; only
// src/cuda includes this). gdn_fwd.h is the interface src/api sees.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/gdn/gdn_params.h"

namespace linattn::cuda {

// The chunk-local intermediates written by the prep kernel and read by the fused kernel
// (GDN_CHUNKED; see gdn_prep.cu for their meaning). Row t of a [*, T_cap, ...] buffer is token t.
struct GdnChunkWs {
  int64_t T_cap = 0;
  float* gam = nullptr;   // [HV, T_cap] chunk-local cumsum of the log-decay, log2 units
  float* rq = nullptr;    // [H, T_cap] q row scale (1 / ||q|| with l2norm, else 1)
  float* rk = nullptr;    // [H, T_cap] k row scale
  void* Ab = nullptr;     // [HV, T_cap, BT] io type: row t of (I + L)^-1 diag(beta) of its chunk
  void* P = nullptr;      // [HV, T_cap, BT] io type: scale * (M o D o Q K^T) row of its chunk
  void* Ai = nullptr;     // [HV, T_cap, BT] io type: row t of (I + L)^-1; written only when set (backward)
  // KDA only (per-channel gate, gam unused): the gated q / k operands of the fused kernel.
  void* qg = nullptr;     // [HV, T_cap, K] io type: rq q (.) 2^gam
  void* kg = nullptr;     // [HV, T_cap, K] io type: rk k (.) 2^gam
  void* kgl = nullptr;    // [HV, T_cap, K] io type: rk k (.) 2^(gam_L - gam) (gam_L: last valid row)
  float* gl = nullptr;    // [nt_cap, HV, K] 2^gam_L of chunk r (r: row of chunk_indices / n * nts + c)
  const int32_t* chunk_offsets = nullptr;  // [N + 1] varlen: first chunk row of sequence n
  // [N] varlen, unless LINATTN_CUDA_SEQ_ORDER=0: sequences longest first (build_chunk_meta); the head-level
  // kernel's grid z walks this order so the longest sequences start in the first wave. Null: n = z.
  const int32_t* seq_order = nullptr;
  // GDN chain mode tma3 only (gdn_chain_scales.cuh): [nt_cap, HV] records of the per-token scales of the
  // pipelined fused kernel, written by the prep when set; varlen rows through chunk_offsets.
  float* sc = nullptr;
};

// Whether the varlen head-level kernels take the longest-first order: on by default since the H200
// A/B at f02af5e (mixed-length batches: GDN backward -9%, KDA forward -4%, a 512-token GDN forward
// +1 us); LINATTN_CUDA_SEQ_ORDER=0 keeps grid order (read per call; the workspace grows by N int32).
// Planned only where the head-level grid can exceed one wave (GdnFwdPlan / GdnBwdPlan::seq_order).
bool seq_order_env();  // gdn_fwd.cc
// The order can only matter when the largest head-level grid of the call (max_ctas) exceeds the SMs.
bool seq_order_useful(bool tables, int64_t n, int64_t max_ctas, int sm_count);

// The sequence a head-level CTA with grid index z works on (see GdnChunkWs::seq_order).
#ifdef __CUDACC__
__device__ __forceinline__ int64_t ws_sequence(const GdnChunkWs& ws, unsigned z) {
  return ws.seq_order ? ws.seq_order[z] : static_cast<int64_t>(z);
}
#endif

// Token-by-token fallback: any K <= 256, V, dtype. No workspace.
void launch_gdn_recurrent(const GdnFwdParams& p, cudaStream_t stream);

// Chunked path (K = 128, bf16 / fp16, BT in {32, 64}; GDN prep or KDA prep, then the fused kernel). chunk_indices: [NT_cap, 2] from
// build_chunk_meta when p.cu_seqlens is set, else null (fixed length: NT_cap = N * ceil(T_seq/BT)).
void launch_gdn_prep(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                     int64_t nt_cap, cudaStream_t stream);
void launch_gdn_fused(const GdnFwdParams& p, const GdnChunkWs& ws, int vs, cudaStream_t stream);

// KDA prep (kda/kda_fwd_prep.cu): Ab, P (per-channel decays inside the Gram products), qg, kg,
// kgl, gl. Same grid contract as launch_gdn_prep, one CTA per (chunk, value head).
void launch_kda_prep(const GdnFwdParams& p, const GdnChunkWs& ws, const int32_t* chunk_indices,
                     int64_t nt_cap, cudaStream_t stream);

}  // namespace linattn::cuda
