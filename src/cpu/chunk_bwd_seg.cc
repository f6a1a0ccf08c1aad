// Tier-3 backward driver (see chunk_bwd_seg.h): workspace carving sized by capacity
// (N x segments segments of at most max_segment_len tokens), the passes, both combines and the
// head-level backward over the segments. Deterministic like the forward driver.
#include "cpu/chunk_bwd_seg.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/check.h"
#include "core/thread_pool.h"
#include "cpu/bwd_io.h"
#include "cpu/seg_pass.h"
#include "cpu/state_io.h"

namespace linattn::cpu {
namespace {

struct BwdBufs {
  SegTable table;
  float *S_loc = nullptr, *M = nullptr, *dS_loc = nullptr;  // [max, HV, K, V|K]
  float *h0 = nullptr, *dht = nullptr, *dh0 = nullptr;     // [max, HV, K, V]
  int64_t* list = nullptr;                                 // [3 * max]
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
  size_t total = 0;
};

ChunkBwdParams virtual_params(const ChunkBwdParams& p, const BwdBufs& b, int64_t num) {
  ChunkBwdParams v = p;
  v.segments = 1;
  v.f.N = num;
  v.f.seq_len = 0;
  v.f.cu_seqlens = b.table.cu;
  v.f.cu_dtype = DType::kI64;
  v.f.h0 = b.h0;
  v.f.h0_dtype = DType::kF32;
  v.f.state_v_first = false;
  v.f.fixed_capacity = false;  // scratch sized below by the longest possible segment
  v.dht = {b.dht, DType::kF32};
  v.dh0 = {p.dh0.data ? b.dh0 : nullptr, DType::kF32};
  return v;
}

BwdBufs carve(const ChunkBwdParams& p, int threads, int64_t max_seq_len, void* ws) {
  const ChunkParams& f = p.f;
  const int64_t m = max_segments(f, p.segments), KV = f.K * f.V, KK = f.K * f.K;
  Carver c{static_cast<char*>(ws)};
  BwdBufs b;
  char* table = c.take<char>(seg_table_bytes(f, p.segments));
  b.S_loc = c.take<float>(m * f.HV * KV);
  b.M = c.take<float>(m * f.HV * KK);
  b.dS_loc = c.take<float>(m * f.HV * KV);
  b.h0 = c.take<float>(m * f.HV * KV);
  b.dht = c.take<float>(m * f.HV * KV);
  if (p.dh0.data) b.dh0 = c.take<float>(m * f.HV * KV);
  b.list = c.take<int64_t>(3 * m);
  ChunkBwdParams vmax = virtual_params(p, b, m);
  const int64_t seg_len = max_segment_len(f.fixed_capacity ? f.rows : max_seq_len, p.segments, p.min_segment, f.BT);
  b.scratch_bytes = std::max(seg_pass_workspace_bytes(f, threads), chunk_bwd_workspace_bytes(vmax, threads, seg_len));
  b.scratch = c.take<char>(b.scratch_bytes);
  b.total = c.off + 64;
  if (ws) b.table = build_seg_table(f, p.segments, p.min_segment, f.BT, table);
  return b;
}

int worker_count(int num_threads) { return num_threads > 0 ? num_threads : ThreadPool::global().num_threads(); }

}  // namespace

size_t chunk_bwd_segmented_workspace_bytes(const ChunkBwdParams& p, int num_threads, int64_t max_seq_len) {
  return carve(p, worker_count(num_threads), max_seq_len, nullptr).total;
}

void chunk_bwd_segmented(const ChunkBwdParams& p, void* ws, size_t ws_bytes, int num_threads) {
  const int threads = worker_count(num_threads);
  const ChunkParams& f = p.f;
  // Eager calls size by the real longest sequence (validated by the api); capacity otherwise.
  int64_t max_len = 0;
  for (int64_t n = 0; n < f.N; ++n) {
    int64_t b0, e0;
    seq_bounds(f, n, &b0, &e0);
    max_len = std::max(max_len, e0 - b0);
  }
  const size_t need = carve(p, threads, max_len, nullptr).total;
  LINATTN_CHECK(ws == nullptr || ws_bytes >= need, "workspace: expected at least ", need, " bytes, got ", ws_bytes);
  std::unique_ptr<char[]> owned;
  if (ws == nullptr) {
    owned.reset(new char[need]);
    ws = owned.get();
  }
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws) + 63) & ~uintptr_t{63});
  const BwdBufs b = carve(p, threads, max_len, aligned);
  const SegTable& t = b.table;
  const int64_t KV = f.K * f.V, KK = f.K * f.K;
  // (1) local states / transitions, and local state gradients of non-first segments.
  seg_state_pass(f, multi_segments(t, f.N, b.list, false, false), b.S_loc, b.M, threads, b.scratch, p.bf16_dot);
  seg_dstate_pass(f, p.d_o, multi_segments(t, f.N, b.list, true, false), b.dS_loc, threads, b.scratch);
  // (2) initial states forward, final-state gradients backward, per (sequence, head).
  ChunkParams gp = f;  // reads d_ht with the state loader (same layout as h0)
  gp.h0 = p.dht.data;
  gp.h0_dtype = p.dht.dtype;
  parallel_for(
      f.N * f.HV,
      [&](int64_t lo, int64_t hi, int) {
        for (int64_t task = lo; task < hi; ++task) {
          const int64_t n = task / f.HV, j = task % f.HV;
          const int64_t first = t.first[n], last = t.first[n + 1] - 1;
          segment_initial_states(f, t, n, j, b.M, b.S_loc, b.h0);
          load_state(gp, n, j, 0, f.V, b.dht + (last * f.HV + j) * KV, f.V);
          for (int64_t i = last; i > first; --i) {
            const int64_t o = i * f.HV + j;
            affine_state(f.K, f.V, b.M + o * KK, true, b.dht + o * KV, b.dS_loc + o * KV, b.dht + (o - f.HV) * KV);
          }
        }
      },
      threads);
  // (3) the head-level backward over the segments; dh0 of each sequence from its first segment.
  const ChunkBwdParams v = virtual_params(p, b, t.num);
  chunk_bwd(v, b.scratch, b.scratch_bytes, threads);
  if (p.dh0.data)
    for (int64_t n = 0; n < f.N; ++n)
      for (int64_t j = 0; j < f.HV; ++j) {
        const float* src = b.dh0 + (t.first[n] * f.HV + j) * KV;
        const int64_t base = (n * f.HV + j) * KV;
        for (int64_t d = 0; d < f.K; ++d)
          for (int64_t c = 0; c < f.V; ++c)
            bwd::store_one(p.dh0, base + (f.state_v_first ? c * f.K + d : d * f.V + c), src[d * f.V + c]);
      }
}

}  // namespace linattn::cpu
