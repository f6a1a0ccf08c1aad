// Tier-3 forward driver (see chunk_fwd_seg.h): workspace carving (count-then-carve, sized by
// capacity N x segments so fixed-capacity calls never depend on the layout), the three phases
// and the copy of each sequence's final state. Deterministic: every phase has a fixed
// task -> output mapping and the combine runs in segment order.
#include "cpu/chunk_fwd_seg.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "cpu/chunk_fwd.h"
#include "cpu/seg_pass.h"
#include "cpu/state_io.h"

namespace linattn::cpu {
namespace {

struct FwdBufs {
  SegTable table;
  float *S_loc = nullptr, *M = nullptr, *h0 = nullptr, *ht = nullptr;  // [max, HV, K, V|K]
  int64_t* list = nullptr;  // [3 * max]: bos, eos, slot of the pass-1 segments
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
  size_t total = 0;
};

ChunkParams with_bt(const ChunkParams& p, const ChunkSchedule& s) {
  ChunkParams q = p;
  if (s.bt > 0) q.BT = s.bt;
  return q;
}

ChunkSchedule inner_schedule(const ChunkSchedule& s) {
  ChunkSchedule t = s;
  t.segments = 1;
  return t;
}

// The virtual problem of phase 3: segments as sequences, fp32 K-major initial / final states.
ChunkParams virtual_params(const ChunkParams& p, const FwdBufs& b, int64_t num) {
  ChunkParams v = p;
  v.N = num;
  v.seq_len = 0;
  v.cu_seqlens = b.table.cu;
  v.cu_dtype = DType::kI64;
  v.h0 = b.h0;
  v.h0_dtype = DType::kF32;
  v.ht = p.ht ? b.ht : nullptr;
  v.state_v_first = false;
  return v;
}

FwdBufs carve(const ChunkParams& p, const ChunkSchedule& s, void* ws) {
  const int64_t m = max_segments(p, s.segments), KV = p.K * p.V, KK = p.K * p.K;
  Carver c{static_cast<char*>(ws)};
  FwdBufs b;
  char* table = c.take<char>(seg_table_bytes(p, s.segments));
  b.S_loc = c.take<float>(m * p.HV * KV);
  b.M = c.take<float>(m * p.HV * KK);
  b.h0 = c.take<float>(m * p.HV * KV);
  if (p.ht) b.ht = c.take<float>(m * p.HV * KV);
  b.list = c.take<int64_t>(3 * m);
  ChunkParams vmax = virtual_params(p, b, m);
  b.scratch_bytes = std::max(seg_pass_workspace_bytes(p, s.num_threads),
                             chunk_fwd_workspace_bytes(vmax, inner_schedule(s)));
  b.scratch = c.take<char>(b.scratch_bytes);
  b.total = c.off + 64;
  if (ws) b.table = build_seg_table(p, s.segments, s.min_segment, p.BT, table);
  return b;
}

}  // namespace

size_t chunk_fwd_segmented_workspace_bytes(const ChunkParams& params, const ChunkSchedule& s) {
  return carve(with_bt(params, s), s, nullptr).total;
}

void chunk_fwd_segmented(const ChunkParams& params, const ChunkSchedule& s, void* ws, size_t ws_bytes) {
  const ChunkParams p = with_bt(params, s);
  const size_t need = chunk_fwd_segmented_workspace_bytes(params, s);
  LINATTN_CHECK(ws_bytes >= need, "workspace: expected at least ", need, " bytes, got ", ws_bytes);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws) + 63) & ~uintptr_t{63});
  const FwdBufs b = carve(p, s, aligned);
  const SegTable& t = b.table;
  const int64_t KV = p.K * p.V;
  // (1) local states and transitions of every segment but each sequence's last.
  const SegList list = multi_segments(t, p.N, b.list, false, true);
  seg_state_pass(p, list, b.S_loc, b.M, s.num_threads, b.scratch, s.bf16_dot);
  // (2) true initial state of every segment, in order.
  parallel_for(
      p.N * p.HV,
      [&](int64_t lo, int64_t hi, int) {
        for (int64_t task = lo; task < hi; ++task) {
          segment_initial_states(p, t, task / p.HV, task % p.HV, b.M, b.S_loc, b.h0);
        }
      },
      s.num_threads);
  // (3) the head-level forward over the segments.
  const ChunkParams v = virtual_params(p, b, t.num);
  chunk_fwd(v, inner_schedule(s), b.scratch, b.scratch_bytes);
  if (p.ht)
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t j = 0; j < p.HV; ++j)
        store_state(p, n, j, 0, p.V, b.ht + ((t.first[n + 1] - 1) * p.HV + j) * KV, p.V);
}

}  // namespace linattn::cpu
