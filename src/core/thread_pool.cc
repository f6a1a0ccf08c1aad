// ThreadPool: one condition-variable generation counter per job; workers 1..P-1 wait, worker 0
// is the caller. Exceptions are captured per worker and the lowest-index one is rethrown.
#include "core/thread_pool.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace linattn {

namespace {
thread_local bool t_inside_pool = false;
}

struct ThreadPool::Impl {
  int n = 1;
  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable cv_start, cv_done;
  uint64_t generation = 0;
  int active = 0, pending = 0;
  bool stop = false;
  const RangeFn* fn = nullptr;
  int64_t total = 0;
  std::vector<std::exception_ptr> errors;
  std::mutex run_mu;  // one job at a time

  void run_part(int i) {
    int64_t b, e;
    static_range(total, active, i, &b, &e);
    try {
      if (b < e) (*fn)(b, e, i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }

  void worker_loop(int i) {
    t_inside_pool = true;
    uint64_t seen = 0;
    for (;;) {
      std::unique_lock<std::mutex> lk(mu);
      cv_start.wait(lk, [&] { return stop || generation != seen; });
      if (stop) return;
      seen = generation;
      const bool mine = i < active;
      lk.unlock();
      if (mine) {
        run_part(i);
        lk.lock();
        if (--pending == 0) cv_done.notify_one();
      }
    }
  }
};

ThreadPool::ThreadPool(int num_threads) : impl_(new Impl) {
  impl_->n = std::max(1, num_threads);
  impl_->errors.resize(impl_->n);
  for (int i = 1; i < impl_->n; ++i) impl_->workers.emplace_back([this, i] { impl_->worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv_start.notify_all();
  for (auto& t : impl_->workers) t.join();
  delete impl_;
}

int ThreadPool::num_threads() const { return impl_->n; }

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int max_threads) {
  if (n <= 0) return;
  int p = impl_->n;
  if (max_threads > 0) p = std::min(p, max_threads);
  p = static_cast<int>(std::min<int64_t>(p, n));
  if (p <= 1 || t_inside_pool) {
    fn(0, n, 0);
    return;
  }
  std::lock_guard<std::mutex> job(impl_->run_mu);
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->fn = &fn;
    impl_->total = n;
    impl_->active = p;
    impl_->pending = p - 1;
    std::fill(impl_->errors.begin(), impl_->errors.end(), nullptr);
    ++impl_->generation;
  }
  impl_->cv_start.notify_all();
  t_inside_pool = true;
  impl_->run_part(0);
  t_inside_pool = false;
  {
    std::unique_lock<std::mutex> lk(impl_->mu);
    impl_->cv_done.wait(lk, [&] { return impl_->pending == 0; });
  }
  for (auto& e : impl_->errors)
    if (e) std::rethrow_exception(e);
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool([] {
    if (const char* s = std::getenv("LINATTN_NUM_THREADS")) {
      int v = std::atoi(s);
      if (v > 0) return v;
    }
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }());
  return pool;
}

}  // namespace linattn
