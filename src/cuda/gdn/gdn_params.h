// POD parameters of the CUDA GDN forward (built by src/api from a validated ChunkAttnDesc; the
// kernels never see TensorViews). All tensors are dense row-major device buffers.
// Sequences: with cu_seqlens, sequence n is rows [clamp(cu[n]), clamp(cu[n+1])) of the packed
// [T_total, ...] tensors, clamped into [0, T_total] (graph mode never validates cu_seqlens on the
// host, so the kernels clamp); without it, sequence n is rows [n*T_seq, (n+1)*T_seq).
// The same struct describes KDA (kda = true): the gate is then per key channel, g [T_total, HV, K],
// dt_bias [HV, K], and the gate-in-kernel form follows lower_bound (ALGORITHMS.md section 1).
#pragma once
#include <cstdint>

namespace linattn::cuda {

enum class ElemType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

struct GdnFwdParams {
  int64_t T_total = 0;   // packed rows (B * T); in graph mode the token capacity T_max
  int64_t T_seq = 0;     // rows per sequence when cu_seqlens is null
  int N = 0;             // sequences (N_max in graph mode)
  int H = 0, HV = 0, K = 0, V = 0;
  int BT = 64;
  float scale = 1.f;
  ElemType io = ElemType::kBF16;    // q, k, v, o
  ElemType g_type = ElemType::kF32;
  ElemType beta_type = ElemType::kF32;
  ElemType h0_type = ElemType::kF32;
  bool l2norm = false, gate_in_kernel = false, beta_sigmoid = false, neg_eigval = false;
  bool state_v_first = false;
  bool cu_i64 = false;
  bool kda = false;                 // per-key-channel gate (KDA); false: scalar gate (GDN)
  bool has_lower_bound = false;     // KDA gate in kernel: lower_bound * sigmoid(...) form
  float lower_bound = 0.f;

  const void* q = nullptr;          // [T_total, H, K]
  const void* k = nullptr;          // [T_total, H, K]
  const void* v = nullptr;          // [T_total, HV, V]
  const void* g = nullptr;          // [T_total, HV] (KDA [T_total, HV, K]) log-decay, raw if gate_in_kernel
  const void* beta = nullptr;       // [T_total, HV] (logit if beta_sigmoid)
  const float* A_log = nullptr;     // [HV], gate_in_kernel only (KDA lower_bound form: optional)
  const float* dt_bias = nullptr;   // [HV] (KDA [HV, K]), optional
  const void* h0 = nullptr;         // [N, HV, K, V] ([N, HV, V, K] if state_v_first), optional
  const void* cu_seqlens = nullptr; // [N + 1] int32 / int64, optional
  void* o = nullptr;                // [T_total, HV, V], io type
  float* ht = nullptr;              // like h0, fp32, optional

  // Tier-3 state pass (cuda/seg/seg_pass.h), set only there: with seg_M the fused kernel writes
  // no o / ht and ignores h0; per sequence n (a segment) and value head j, CTAs x < V / VS write
  // the local final state from a zero initial state to seg_S, CTAs x >= V / VS the K x K
  // transition (the same recurrence with v = 0 from the identity) to seg_M. Sequences whose
  // seg_flags[n] & seg_skip is nonzero are skipped (their outputs are left unwritten).
  float* seg_S = nullptr;           // [N, HV, K, V] fp32 K-major
  float* seg_M = nullptr;           // [N, HV, K, K] fp32 K-major (row = output key row)
  const int32_t* seg_flags = nullptr;  // [N] (cuda/seg/seg_pass.h kSeg* bits), optional
  int seg_skip = 0;
};

}  // namespace linattn::cuda
