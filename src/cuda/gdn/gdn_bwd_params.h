// POD parameters of the CUDA GDN backward (built by src/api from a validated ChunkAttnDesc).
// The forward inputs and options travel in `f` (f.o / f.ht unused); the cotangents and the
// gradients are dense row-major device buffers, each with its own float type (any of fp32 /
// fp16 / bf16, as the public API allows). A gradient with a null pointer is not wanted.
// Per-token gradients of padding rows (>= cu_seqlens[N], varlen only) are written as zeros.
// KDA (gate.width = K) reuses the same struct: f.g is then [T_total, HV, K], f.dt_bias [HV, K],
// dg [T_total, HV, K] and ddt_bias [HV, K]; f.A_log may be null in the lower-bound form.
#pragma once
#include "cuda/gdn/gdn_params.h"

namespace linattn::cuda {

struct GradOut {
  void* p = nullptr;
  ElemType t = ElemType::kF32;
};

// Gate policy of the backward: scalar (GDN, width 1) or per key channel (KDA, width K), and the
// KDA in-kernel gate form (ALGORITHMS.md section 1). The GDN in-kernel gate is the default form.
struct BwdGate {
  int width = 1;                  // gate values per (token, value head)
  bool lower_bound_form = false;  // KDA: g = lower_bound * sigmoid(a * x), a = exp(A_log) or 1
  float lower_bound = 0.f;
};

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
  BwdGate gate;
};

}  // namespace linattn::cuda
