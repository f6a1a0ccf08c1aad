// POD parameters of the CPU chunked GDN / KDA kernels (forward here; the backward wraps this
// struct with its gradient pointers). src/api builds one from a validated meta::ChunkAttnDesc and
// the public tensors; kernels never see a TensorView. Every tensor is dense row-major (the
// descriptor checks it) and lives in host memory. Rows are tokens of the packed [B*T] layout:
// sequence n covers rows [cu_seqlens[n], cu_seqlens[n+1]) when varlen, else [n*seq_len, (n+1)*seq_len).
// ChunkSchedule is the part of a plan the kernels execute (src/plan chooses it; cpu and plan are
// peers, so src/api copies the plan's fields in here).
#pragma once
#include <cstdint>

#include "linattn/tensor.h"

namespace linattn::cpu {

struct ChunkParams {
  bool kda = false;        // per-channel gate (KDA) instead of a per-token scalar gate (GDN)
  int64_t N = 0;           // sequences (N_max in fixed-capacity mode)
  int64_t rows = 0;        // B * T: rows of every [rows, heads, dim] tensor
  int64_t seq_len = 0;     // tokens per sequence when cu_seqlens == nullptr (fixed-length batch)
  int64_t H = 0, HV = 0, G = 1, K = 0, V = 0;  // G = HV / H: value head j reads q/k head j / G
  int BT = 64;             // chunk size: 16, 32 or 64

  DType qk_dtype = DType::kF32;    // q, k and o (o follows q)
  DType v_dtype = DType::kF32;
  DType g_dtype = DType::kF32;
  DType beta_dtype = DType::kF32;
  DType h0_dtype = DType::kF32;    // GDN accepts any float state; KDA fp32 (checked by meta)
  DType cu_dtype = DType::kI32;    // int32 or int64

  const void* q = nullptr;     // [rows, H, K]
  const void* k = nullptr;     // [rows, H, K]
  const void* v = nullptr;     // [rows, HV, V]
  const void* g = nullptr;     // GDN [rows, HV]; KDA [rows, HV, K]: log-decay, or raw gate if gate_in_kernel
  const void* beta = nullptr;  // [rows, HV]: beta, or its logit if beta_sigmoid
  const float* A_log = nullptr;    // [HV], optional (gate in kernel)
  const float* dt_bias = nullptr;  // GDN [HV]; KDA [HV, K]; optional (gate in kernel)
  const void* h0 = nullptr;        // [N, HV, K, V] ([N, HV, V, K] if state_v_first); null = zeros
  const void* cu_seqlens = nullptr;  // [N + 1]; null = fixed-length batch

  void* o = nullptr;       // [rows, HV, V], dtype qk_dtype
  float* ht = nullptr;     // like h0, fp32; null = not requested

  float scale = 1.0f;      // multiplies the query side of o only
  bool l2norm = false;           // q, k <- x / sqrt(sum x^2 + 1e-6)
  bool gate_in_kernel = false;   // g from A_log / dt_bias (ALGORITHMS.md section 1)
  bool beta_sigmoid = false;     // beta = sigmoid(logit) (x2 with neg_eigval)
  bool neg_eigval = false;
  bool state_v_first = false;    // h0 / ht layout [V, K]
  bool has_lower_bound = false;  // KDA gate: lower_bound * sigmoid(...)
  float lower_bound = 0.0f;
  // Fixed-capacity (graph) mode: sequence bounds are read from cu_seqlens when the kernel runs and
  // clamped to [0, rows]; nothing about the layout is known when the call is planned or recorded.
  bool fixed_capacity = false;
};

// What the CPU kernel executes (chosen by src/plan, see plan/chunk_plan.h).
struct ChunkSchedule {
  int num_threads = 1;   // workers used (the pool's, capped)
  int v_splits = 1;      // tier 2: each task owns V / v_splits state columns (1 = tier 1)
  int v_tile = 0;        // columns per split (multiple of 16 except the last), 0 = all of V
  // bf16 inputs: run the state and K K^T products as bf16 dot products (fp32 accumulation, the
  // state and V^ rounded to bf16 for the product only, as FLA does); ignored without AVX512-BF16.
  bool bf16_dot = false;
  // Compute chunk (16, 32 or 64; 0 = p.BT). The chunked form is exact for any chunk, so the
  // planner may run a different chunk than the caller's BT (results differ only by rounding).
  int bt = 0;
  // Tier 3 (chunk_fwd_seg.h): > 1 splits every sequence into up to `segments` segments of at
  // least min_segment tokens (multiples of the compute chunk), computed when the kernel runs.
  int segments = 1;
  int64_t min_segment = 0;
};

// Bounds [bos, eos) of sequence n, clamped to [0, p.rows] (fixed-capacity layouts are never
// validated on the host; a bad layout must not read or write out of bounds).
inline void seq_bounds(const ChunkParams& p, int64_t n, int64_t* bos, int64_t* eos) {
  int64_t b, e;
  if (p.cu_seqlens == nullptr) {
    b = n * p.seq_len;
    e = b + p.seq_len;
  } else if (p.cu_dtype == DType::kI64) {
    b = static_cast<const int64_t*>(p.cu_seqlens)[n];
    e = static_cast<const int64_t*>(p.cu_seqlens)[n + 1];
  } else {
    b = static_cast<const int32_t*>(p.cu_seqlens)[n];
    e = static_cast<const int32_t*>(p.cu_seqlens)[n + 1];
  }
  b = b < 0 ? 0 : (b > p.rows ? p.rows : b);
  e = e < b ? b : (e > p.rows ? p.rows : e);
  *bos = b;
  *eos = e;
}

}  // namespace linattn::cpu
