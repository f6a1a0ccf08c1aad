// ThreadPool: full coverage of the range, static partition, exception propagation.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "core/thread_pool.h"

namespace linattn {
namespace {

TEST(ThreadPool, CoversEveryIndexOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 3, 7, 100, 1001}) {
    std::vector<int> hits(n, 0);
    pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << n << " " << i;
  }
}

TEST(ThreadPool, StaticPartitionIsDeterministic) {
  ThreadPool pool(4);
  std::vector<int> owner(37, -1);
  pool.parallel_for(37, [&](int64_t b, int64_t e, int w) {
    for (int64_t i = b; i < e; ++i) owner[i] = w;
  });
  for (int w = 0; w < 4; ++w) {
    int64_t b, e;
    static_range(37, 4, w, &b, &e);
    for (int64_t i = b; i < e; ++i) EXPECT_EQ(owner[i], w);
  }
}

TEST(ThreadPool, PropagatesExceptions) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(10, [](int64_t b, int64_t, int) {
    if (b > 0) throw std::runtime_error("boom");
  }), std::runtime_error);
  std::atomic<int> n{0};
  pool.parallel_for(10, [&](int64_t b, int64_t e, int) { n += static_cast<int>(e - b); });
  EXPECT_EQ(n.load(), 10);
}

TEST(ThreadPool, NestedRunsInline) {
  ThreadPool& pool = ThreadPool::global();
  std::atomic<int> n{0};
  pool.parallel_for(4, [&](int64_t b, int64_t e, int) {
    parallel_for(5, [&](int64_t b2, int64_t e2, int) { n += static_cast<int>((e - b) * (e2 - b2)); });
  });
  EXPECT_EQ(n.load(), 20);
}

}  // namespace
}  // namespace linattn
