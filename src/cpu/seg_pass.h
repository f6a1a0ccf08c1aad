// Building blocks of exact sequence splitting (tier 3 inside one device, and context parallelism
// across ranks; docs/perf-notes.md "Sequence parallelism"). A segment is rows [bos, eos) of one
// sequence, chunked from bos. The state map of a segment is affine: S(eos) = M S(bos) + S_loc,
// with M the K x K product of the per-chunk factors (e^{g_last} I - (e^{g_last - g} K)^T W)
// (KDA: Diag(e^{g_last}) - ...) and S_loc the final state from a zero initial state. The state
// gradient is affine the other way: dS(bos) = M^T dS(eos) + dS_loc, dS_loc from a zero terminal
// gradient (it never depends on the forward states). Passes here run one task per (listed
// segment, value head) on the thread pool, fp32, compute chunk `bt`; outputs are K-major fp32
// [slot, HV, K, V] (states) and [slot, HV, K, K] (transitions) at the segment's `slot`.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/carver.h"
#include "cpu/chunk_bwd.h"
#include "cpu/chunk_params.h"

namespace linattn::cpu {

struct SegList {
  int64_t num = 0;
  const int64_t* bos = nullptr;   // [num] first row
  const int64_t* eos = nullptr;   // [num] end row
  const int64_t* slot = nullptr;  // [num] output index (null: i)
};

// Scratch bytes of either pass with `threads` workers (p.BT is the compute chunk).
size_t seg_pass_workspace_bytes(const ChunkParams& p, int threads);

// S_loc[slot, j] and M[slot, j] of every listed segment and value head; either output may be null.
// bf16_dot: bf16 inputs take the forward's bf16 dot products (ignored without AVX512-BF16).
void seg_state_pass(const ChunkParams& p, const SegList& segs, float* S_loc, float* M, int threads, void* ws,
                    bool bf16_dot = false);
// dS_loc[slot, j]: gradient w.r.t. the state at bos from the segment's outputs o (cotangent d_o,
// [rows, HV, V]) with a zero gradient at eos, or with the gradient dS_end[slot, j] there when
// given (then the true dS(bos) of a segment whose terminal gradient is known).
void seg_dstate_pass(const ChunkParams& p, const BwdBuf& d_o, const SegList& segs, float* dS_loc,
                     int threads, void* ws, const float* dS_end = nullptr);

// Y[K, V] = A X + B with A [K, K] (transposed: A^T X + B), X, B [K, V]; all dense fp32. Y may
// alias B, never X.
void affine_state(int64_t K, int64_t V, const float* A, bool transpose_a, const float* X, const float* B,
                  float* Y);

// ---- Tier 3 segmentation, computed when the kernel runs (reads cu_seqlens then, never at plan
// or record time). Sequence n of length L splits into ceil(L / len) segments with
// len = max(min_segment, round_up(ceil(L / segments), bt)); an empty sequence is one empty segment.
struct SegTable {
  int64_t num = 0;
  int64_t* cu = nullptr;     // [max + 1] virtual cu_seqlens (segment bounds, contiguous)
  int64_t* bos = nullptr;    // [max]
  int64_t* eos = nullptr;    // [max]
  int64_t* first = nullptr;  // [N + 1] segments of sequence n: [first[n], first[n + 1])
};
int64_t max_segments(const ChunkParams& p, int segments);
// Longest segment any layout of at most `max_len` tokens per sequence can produce.
int64_t max_segment_len(int64_t max_len, int segments, int64_t min_segment, int bt);
size_t seg_table_bytes(const ChunkParams& p, int segments);
SegTable build_seg_table(const ChunkParams& p, int segments, int64_t min_segment, int bt, void* mem);

// The segments of sequences with more than one segment (less the first / last of each with
// skip_first / skip_last), slot = table index; mem holds [3 * t.num] entries.
SegList multi_segments(const SegTable& t, int64_t N, int64_t* mem, bool skip_first, bool skip_last);
// Fills h0[i, j] (fp32 K-major [max, HV, K, V]) for every segment i of sequence n, value head j:
// the sequence's initial state (p.h0, or zero), then S(bos_{i+1}) = M_i S(bos_i) + S_loc_i.
void segment_initial_states(const ChunkParams& p, const SegTable& t, int64_t n, int64_t j, const float* M,
                            const float* S_loc, float* h0);

// Bump allocator over a caller's workspace (count with base == nullptr, then carve).
using Carver = WorkspaceCarver<64>;

}  // namespace linattn::cpu
