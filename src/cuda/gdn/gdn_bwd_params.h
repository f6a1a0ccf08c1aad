// POD parameters of the CUDA GDN backward (built by src/api from a validated ChunkAttnDesc).
// The forward inputs and options travel in `f` (f.o / f.ht unused); the cotangents and the
// gradients are dense row-major device buffers, each with its own float type (any of fp32 /
// fp16 / bf16, as the public API allows). A gradient with a null pointer is not wanted.
// Per-token gradients of padding rows (>= cu_seqlens[N], varlen only) are written as zeros.
// KDA (f.kda: the per-key-channel gate policy, gate width K) reuses the same struct: f.g is then
// [T_total, HV, K], f.dt_bias [HV, K], dg [T_total, HV, K] and ddt_bias [HV, K]; f.A_log may be null
// in the lower-bound form.
#pragma once
#include "cuda/gdn/gdn_params.h"

namespace linattn::cuda {

struct GradOut {
  void* p = nullptr;
  ElemType t = ElemType::kF32;
};

// Gate values per (token, value head): 1 (GDN, scalar gate) or K (KDA, per key channel). Host and
// device (this header is also read by src/api, without CUDA).
#if defined(__CUDACC__)
__host__ __device__
#endif
inline int bwd_gate_width(const GdnFwdParams& f) { return f.kda ? f.K : 1; }

struct GdnBwdParams {
  GdnFwdParams f;                       // inputs and options
  const void* d_o = nullptr;            // [T_total, HV, V]
  ElemType do_type = ElemType::kF32;
  const void* dht = nullptr;            // like h0 (state layout of f), optional
  ElemType dht_type = ElemType::kF32;
  GradOut dq, dk;                       // [T_total, H, K]
  GradOut dv;                           // [T_total, HV, V]
  GradOut dg, dbeta;                    // [T_total, HV(, K)] (w.r.t. the raw gate / logit when in kernel)
  GradOut dA_log, ddt_bias;             // [HV], [HV(, K)]
  GradOut dh0;                          // like h0
};

}  // namespace linattn::cuda
