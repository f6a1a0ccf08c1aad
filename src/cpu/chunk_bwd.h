// CPU chunked backward of GDN / KDA (ALGORITHMS.md section 4), recomputing the forward.
// One task per (sequence, value head) (see GVA below): a forward sweep over the chunks recomputes the state
// entering each chunk and the effective values V^ and stores them in the task's scratch
// (O(chunks x K x V) per running task); a reverse sweep then walks the chunks backwards with the
// state gradient dS resident and produces every gradient of the chunk's rows.
// GVA: a task owns a q/k head group and sums its dq / dk in fp32 when sequences x q/k heads
// cover the threads, else one task per value head writes fp32 partials that are group-summed
// afterwards; both sum in the same order. dA_log / ddt_bias are per-(sequence, head) partials
// summed over sequences in order. 1 thread and N threads give bitwise equal results.
// The compute chunk is f.BT (the api passes the planner's choice; the math is exact for any).
// Layouts (ChunkParams): q, k [rows, H, K]; v, d_o [rows, HV, V]; g [rows, HV(, K)];
// beta [rows, HV]; states [N, HV, K, V] (or [N, HV, V, K] when state_v_first); dense row-major.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu/chunk_params.h"
#include "linattn/tensor.h"

namespace linattn::cpu {

// A dense tensor seen by the kernel: data and element type (null = absent).
struct BwdBuf {
  const void* data = nullptr;
  DType dtype = DType::kF32;
};
struct BwdOut {
  void* data = nullptr;
  DType dtype = DType::kF32;
};

struct ChunkBwdParams {
  ChunkParams f;           // inputs and options (f.o / f.ht unused)
  BwdBuf d_o;              // [rows, HV, V]
  BwdBuf dht;              // like h0, or null

  BwdOut dq, dk;           // like q, k (null = not wanted)
  BwdOut dv, dg, dbeta;    // like v, g, beta
  BwdOut dA_log;           // [HV]
  BwdOut ddt_bias;         // [HV * gate width]
  BwdOut dh0;              // like h0
  // bf16 inputs: the state-sized products take AVX512-BF16 dot products (operands rounded to
  // bf16 per chunk, fp32 accumulation), as the forward's plan decides (plan.bf16_dot).
  bool bf16_dot = false;
  // Tier 3 (chunk_bwd_seg.h): > 1 splits every sequence into up to `segments` segments of at
  // least min_segment tokens; 1 = one task per (sequence, head) as above.
  int segments = 1;
  int64_t min_segment = 0;

  int64_t gate_width() const { return f.kda ? f.K : 1; }
  BwdBuf q() const { return {f.q, f.qk_dtype}; }
  BwdBuf k() const { return {f.k, f.qk_dtype}; }
  BwdBuf v() const { return {f.v, f.v_dtype}; }
  BwdBuf g() const { return {f.g, f.g_dtype}; }
  BwdBuf beta() const { return {f.beta, f.beta_dtype}; }
  BwdBuf h0() const { return {f.h0, f.h0_dtype}; }
  BwdBuf cu_seqlens() const { return {f.cu_seqlens, f.cu_dtype}; }
};

// Scratch bytes the backward needs with `num_threads` workers and sequences of at most
// `max_seq_len` tokens (eager: the longest sequence; fixed capacity: rows).
size_t chunk_bwd_workspace_bytes(const ChunkBwdParams& p, int num_threads, int64_t max_seq_len);

// Runs the backward. `workspace` (64-byte aligned, chunk_bwd_workspace_bytes bytes) may be null,
// then the function allocates. num_threads = 0: the global pool size.
// Eager mode reads cu_seqlens on the host (validated by the caller).
void chunk_bwd(const ChunkBwdParams& p, void* workspace, size_t workspace_bytes, int num_threads);

}  // namespace linattn::cpu
