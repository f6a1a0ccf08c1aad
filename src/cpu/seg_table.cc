// Tier-3 segmentation (seg_pass.h): the segment table of a call, built when the kernel runs from
// the sequence bounds (cu_seqlens read then, as the head-level kernels do, so a recorded graph
// call replays any layout). Segments are chunk-aligned from their sequence's start, so the chunks
// a segment walks are exactly tier 1's chunks of that sequence. Capacity: N x segments entries.
#include <algorithm>

#include "core/util.h"
#include "cpu/seg_pass.h"
#include "cpu/state_io.h"

namespace linattn::cpu {

int64_t max_segments(const ChunkParams& p, int segments) { return std::max<int64_t>(1, p.N * std::max(1, segments)); }

static int64_t segment_len(int64_t L, int segments, int64_t min_segment, int bt) {
  const int64_t even = round_up(ceil_div(L, static_cast<int64_t>(std::max(1, segments))), static_cast<int64_t>(bt));
  return std::max<int64_t>({even, round_up(std::max<int64_t>(min_segment, 1), static_cast<int64_t>(bt))});
}

int64_t max_segment_len(int64_t max_len, int segments, int64_t min_segment, int bt) {
  return std::min(max_len, segment_len(max_len, segments, min_segment, bt));
}

size_t seg_table_bytes(const ChunkParams& p, int segments) {
  const int64_t m = max_segments(p, segments);
  Carver c;
  c.take<int64_t>(m + 1);
  c.take<int64_t>(m);
  c.take<int64_t>(m);
  c.take<int64_t>(p.N + 1);
  return c.off + 64;
}

SegTable build_seg_table(const ChunkParams& p, int segments, int64_t min_segment, int bt, void* mem) {
  const int64_t m = max_segments(p, segments);
  Carver c{static_cast<char*>(mem)};
  SegTable t;
  t.cu = c.take<int64_t>(m + 1);
  t.bos = c.take<int64_t>(m);
  t.eos = c.take<int64_t>(m);
  t.first = c.take<int64_t>(p.N + 1);
  int64_t k = 0;
  for (int64_t n = 0; n < p.N; ++n) {
    int64_t b, e;
    seq_bounds(p, n, &b, &e);
    t.first[n] = k;
    const int64_t len = segment_len(e - b, segments, min_segment, bt);
    int64_t s = b;
    do {  // at least one segment, also for an empty sequence
      t.bos[k] = s;
      t.eos[k] = std::min(e, s + len);
      t.cu[k] = s;
      s = t.eos[k];
      ++k;
    } while (s < e && k < m);
    t.eos[k - 1] = e;  // a capacity cut (unreachable with segment_len above) keeps the tail
  }
  t.first[p.N] = k;
  t.num = k;
  t.cu[k] = k > 0 ? t.eos[k - 1] : 0;
  return t;
}

SegList multi_segments(const SegTable& t, int64_t N, int64_t* mem, bool skip_first, bool skip_last) {
  int64_t* lb = mem;
  int64_t* le = lb + t.num;
  int64_t* ls = le + t.num;
  SegList list;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t f = t.first[n], l = t.first[n + 1];
    if (l - f < 2) continue;
    for (int64_t i = f + (skip_first ? 1 : 0); i < l - (skip_last ? 1 : 0); ++i) {
      lb[list.num] = t.bos[i];
      le[list.num] = t.eos[i];
      ls[list.num] = i;
      ++list.num;
    }
  }
  list.bos = lb;
  list.eos = le;
  list.slot = ls;
  return list;
}

void segment_initial_states(const ChunkParams& p, const SegTable& t, int64_t n, int64_t j, const float* M,
                            const float* S_loc, float* h0) {
  const int64_t KV = p.K * p.V, KK = p.K * p.K;
  const int64_t first = t.first[n], last = t.first[n + 1] - 1;
  load_state(p, n, j, 0, p.V, h0 + (first * p.HV + j) * KV, p.V);
  for (int64_t i = first; i < last; ++i) {
    const int64_t o = i * p.HV + j;
    affine_state(p.K, p.V, M + o * KK, false, h0 + o * KV, S_loc + o * KV, h0 + (o + p.HV) * KV);
  }
}

}  // namespace linattn::cpu
