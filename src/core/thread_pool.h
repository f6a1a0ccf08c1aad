// A persistent thread pool with a deterministic parallel_for: [0, n) is cut into at most
// num_threads static contiguous ranges, range i always runs on worker i (the caller is worker 0).
// Same n and thread count -> same partition, so per-range reductions are reproducible.
// Nested parallel_for calls run inline on the calling worker.
#pragma once
#include <cstdint>
#include <functional>

namespace linattn {

// fn(begin, end, worker_index)
using RangeFn = std::function<void(int64_t, int64_t, int)>;

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const;
  // Runs fn over static ranges on min(num_threads, max_threads, n) workers; rethrows the first
  // exception (by worker index) after every range has finished.
  void parallel_for(int64_t n, const RangeFn& fn, int max_threads = 0);

  // The process-wide pool: LINATTN_NUM_THREADS, else hardware_concurrency().
  static ThreadPool& global();

 private:
  struct Impl;
  Impl* impl_;
};

// Static partition used by parallel_for: the range of part `i` of `parts` over [0, n).
inline void static_range(int64_t n, int parts, int i, int64_t* begin, int64_t* end) {
  const int64_t base = n / parts, rem = n % parts;
  *begin = i * base + (i < rem ? i : rem);
  *end = *begin + base + (i < rem ? 1 : 0);
}

inline void parallel_for(int64_t n, const RangeFn& fn, int max_threads = 0) {
  ThreadPool::global().parallel_for(n, fn, max_threads);
}

}  // namespace linattn
