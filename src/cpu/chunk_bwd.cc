// Driver of the CPU chunk backward (chunk_bwd.h): sequence ranges, scratch carving, the task
// loop over (sequence, value head) and the deterministic reductions that follow it.
// Tasks are handed out longest-first through an atomic counter; a task's results depend only
// on its inputs (its scratch is fully rewritten before use), so the mapping of tasks to
// threads never changes a bit. Reductions run after all tasks, in a fixed order.
#include "cpu/chunk_bwd.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "cpu/bwd_io.h"
#include "cpu/chunk_bwd_seg.h"
#include "cpu/bwd_vec.h"
#include "cpu/bwd_worker.h"

namespace linattn::cpu {
namespace {

struct SeqRange {
  int64_t bos = 0, len = 0;
};

// Sequences from cu_seqlens (clamped into [prev, B*T] so that a bad replay input cannot index
// out of bounds; eager callers validated it already) or from the batch rows.
std::vector<SeqRange> sequence_ranges(const ChunkBwdParams& p, int64_t* covered_end) {
  std::vector<SeqRange> s(static_cast<size_t>(p.f.N));
  const int64_t total = p.f.rows;
  if (!p.f.cu_seqlens) {
    for (int64_t n = 0; n < p.f.N; ++n) s[n] = {n * p.f.seq_len, p.f.seq_len};
    *covered_end = total;
    return s;
  }
  int64_t prev = 0;
  for (int64_t n = 0; n < p.f.N; ++n) {
    const int64_t e = std::clamp<int64_t>(bwd::load_index(p.cu_seqlens(), n + 1), prev, total);
    s[n] = {prev, e - prev};
    prev = e;
  }
  *covered_end = prev;
  return s;
}

struct Layout {
  bool group_tasks = false;  // GVA: a task owns a q/k head group (sums in the worker)
  size_t worker_floats = 0;  // per worker
  size_t acc_floats = 0;     // dq / dk global group accumulators (GVA with per-value-head tasks)
  size_t part_doubles = 0;   // per-task dA_log / ddt_bias partials
  size_t bytes(int workers) const {
    return 64 + sizeof(float) * (worker_floats * workers + acc_floats) + sizeof(double) * part_doubles;
  }
};

// GVA: tasks own whole q/k head groups (O(threads x T x K) sums) when there are enough of them
// for the threads, else one task per value head with global O(T x HV x K) sums. Both add the G
// value heads in the same order with the same operations, so the choice never changes a bit.
Layout layout(const ChunkBwdParams& p, int64_t max_seq_len, int threads) {
  Layout l;
  const int64_t max_chunks = std::max<int64_t>(1, (max_seq_len + p.f.BT - 1) / p.f.BT);
  const bool grouped = p.f.HV != p.f.H;  // sizes are gradient-agnostic
  l.group_tasks = grouped && p.f.N * p.f.H >= threads;
  bwd::WorkerBufs dummy;
  l.worker_floats = bwd::carve_worker(p, max_chunks, l.group_tasks, nullptr, &dummy);
  l.acc_floats = grouped && !l.group_tasks ? static_cast<size_t>(2 * p.f.rows * p.f.HV * p.f.K) : 0;
  l.part_doubles = static_cast<size_t>(p.f.N * p.f.HV * (1 + p.gate_width()));
  return l;
}

// dq / dk of q/k head hq at token row `row`: sum of the G value-head partials in order, then
// finish_qk_row.
void finish_grouped(const ChunkBwdParams& p, const float* acc, const BwdBuf& x, const BwdOut& out,
                    int64_t row, int64_t hq, float* buf) {
  const int64_t K = p.f.K, G = p.f.HV / p.f.H;
  const float* a = acc + (row * p.f.HV + hq * G) * K;
  std::memcpy(buf, a, sizeof(float) * K);
  for (int64_t gi = 1; gi < G; ++gi) bwd::vadd(buf, a + gi * K, buf, K);
  bwd::finish_qk_row(p, buf, x, out, row, hq, buf + K);
}

}  // namespace

size_t chunk_bwd_workspace_bytes(const ChunkBwdParams& p, int num_threads, int64_t max_seq_len) {
  if (p.segments > 1) return chunk_bwd_segmented_workspace_bytes(p, num_threads, max_seq_len);  // tier 3
  const int workers = num_threads > 0 ? num_threads : ThreadPool::global().num_threads();
  return layout(p, max_seq_len, workers).bytes(workers);
}

void chunk_bwd(const ChunkBwdParams& p, void* workspace, size_t workspace_bytes, int num_threads) {
  if (p.segments > 1) return chunk_bwd_segmented(p, workspace, workspace_bytes, num_threads);  // tier 3
  const int threads = num_threads > 0 ? num_threads : ThreadPool::global().num_threads();
  int64_t covered = 0;
  const std::vector<SeqRange> seqs = sequence_ranges(p, &covered);
  int64_t max_len = 0;
  for (const SeqRange& s : seqs) max_len = std::max(max_len, s.len);
  // Fixed capacity: size by capacity, so that the workspace never depends on the layout.
  const Layout lay = layout(p, p.f.fixed_capacity ? p.f.rows : max_len, threads);
  const int64_t per_seq = lay.group_tasks ? p.f.H : p.f.HV;  // tasks per sequence
  const int64_t num_tasks = p.f.N * per_seq;
  const int workers = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, num_tasks)));

  std::unique_ptr<float[]> owned;
  char* base = static_cast<char*>(workspace);
  if (!base || workspace_bytes < lay.bytes(workers)) {
    LINATTN_CHECK(!base, "workspace: expected at least ", lay.bytes(workers), " bytes, got ",
                  workspace_bytes);
    owned.reset(new float[lay.bytes(workers) / sizeof(float) + 16]);
    base = reinterpret_cast<char*>(owned.get());
  }
  float* fbase = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(base) + 63) & ~uintptr_t{63});
  float* acc = lay.acc_floats ? fbase + lay.worker_floats * workers : nullptr;
  double* parts = reinterpret_cast<double*>(fbase + lay.worker_floats * workers + lay.acc_floats);
  const int64_t gw = p.gate_width();
  std::fill(parts, parts + lay.part_doubles, 0.0);

  // Longest sequences first (ties by index): balances the dynamic hand-out.
  std::vector<int64_t> order(static_cast<size_t>(num_tasks));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return seqs[a / per_seq].len > seqs[b / per_seq].len;
  });
  std::atomic<int64_t> next{0};
  const int64_t max_chunks = std::max<int64_t>(1, ((p.f.fixed_capacity ? p.f.rows : max_len) + p.f.BT - 1) / p.f.BT);
  ThreadPool::global().parallel_for(
      workers,
      [&](int64_t wb, int64_t we, int) {
        for (int64_t w = wb; w < we; ++w) {
          bwd::Worker worker(p, fbase + lay.worker_floats * w, max_chunks, lay.group_tasks, acc);
          for (int64_t i = next.fetch_add(1); i < num_tasks; i = next.fetch_add(1)) {
            const int64_t t = order[i], n = t / per_seq, h = t % per_seq;
            auto part_of = [&](int64_t hv) {
              double* pt = parts + (n * p.f.HV + hv) * (1 + gw);
              return bwd::TaskPartials{pt, pt + 1};
            };
            if (lay.group_tasks) worker.run_group(n, seqs[n].bos, seqs[n].len, h, part_of);
            else worker.run(n, seqs[n].bos, seqs[n].len, h, part_of(h));
          }
        }
        bwd::store_fence();
      },
      workers);

  if (acc) {
    const int64_t rows = covered;
    ThreadPool::global().parallel_for(
        rows * p.f.H,
        [&](int64_t b, int64_t e, int) {
          std::vector<float> buf(2 * p.f.K + 16);
          for (int64_t i = b; i < e; ++i) {
            const int64_t row = i / p.f.H, hq = i % p.f.H;
            if (p.dq.data) finish_grouped(p, acc, p.q(), p.dq, row, hq, buf.data());
            if (p.dk.data) finish_grouped(p, acc + p.f.rows * p.f.HV * p.f.K, p.k(), p.dk, row, hq, buf.data());
          }
          bwd::store_fence();
        },
        threads);
  }
  for (int64_t hv = 0; hv < p.f.HV; ++hv) {
    double a = 0.0;
    for (int64_t n = 0; n < p.f.N; ++n) a += parts[(n * p.f.HV + hv) * (1 + gw)];
    if (p.dA_log.data) bwd::store_one(p.dA_log, hv, a);
    for (int64_t c = 0; c < gw && p.ddt_bias.data; ++c) {
      double s = 0.0;
      for (int64_t n = 0; n < p.f.N; ++n) s += parts[(n * p.f.HV + hv) * (1 + gw) + 1 + c];
      bwd::store_one(p.ddt_bias, hv * gw + c, s);
    }
  }
  // Padding rows (past cu_seqlens[N]): every per-token gradient there is 0.
  const int64_t total = p.f.rows;
  bwd::zero_rows(p.dq, covered, total, p.f.H * p.f.K);
  bwd::zero_rows(p.dk, covered, total, p.f.H * p.f.K);
  bwd::zero_rows(p.dv, covered, total, p.f.HV * p.f.V);
  bwd::zero_rows(p.dg, covered, total, p.f.HV * gw);
  bwd::zero_rows(p.dbeta, covered, total, p.f.HV);
}

}  // namespace linattn::cpu
