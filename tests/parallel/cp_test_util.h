// Helpers of the context-parallel tests: run one function per simulated rank on its own thread
// (ThreadCommunicator), cut [1, T, ...] tensors into a rank's rows and paste them back, and the
// rank layouts the tests use (uneven cuts inside chunks, an empty rank, ranks shorter than a
// conv window).
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "linattn/tensor.h"
#include "parallel/thread_comm.h"
#include "rank_threads.h"

namespace linattn::test {

// fn(rank, comm) on `world` threads with ThreadCommunicators; the first exception (by rank) is rethrown.
inline void run_ranks(int world, const RankFn& fn) {
  auto group = std::make_shared<parallel::ThreadGroup>(world);
  run_rank_threads(world, [&](int r) { return std::make_unique<parallel::ThreadCommunicator>(group, r); }, fn);
}

// Rows [r0, r0 + n) of a [1, T, ...] tensor, as a new [1, n, ...] tensor.
inline Tensor take_rows(const Tensor& t, int64_t r0, int64_t n) {
  std::vector<int64_t> shp = t.shape();
  const int64_t T = shp[1];
  const size_t row_bytes = t.view().nbytes() / static_cast<size_t>(T);
  shp[1] = n;
  Tensor out(t.dtype(), shp);
  if (n) std::memcpy(out.view().data, static_cast<const char*>(t.view().data) + r0 * row_bytes, n * row_bytes);
  return out;
}

inline void put_rows(Tensor& dst, const Tensor& src, int64_t r0) {
  const size_t row_bytes = dst.view().nbytes() / static_cast<size_t>(dst.shape()[1]);
  if (src.shape()[1]) std::memcpy(static_cast<char*>(dst.view().data) + r0 * row_bytes, src.view().data, src.view().nbytes());
}

inline Tensor offsets_tensor(const std::vector<int64_t>& off) {
  Tensor t(DType::kI64, {static_cast<int64_t>(off.size())});
  for (size_t i = 0; i < off.size(); ++i) t.data<int64_t>()[i] = off[i];
  return t;
}

// Rank row offsets for `world` ranks over T rows: uneven cuts that land inside chunks and inside
// sequences; world 8 also has an empty rank and ranks of 1-2 rows.
inline std::vector<int64_t> rank_layout(int world, int64_t T) {
  std::vector<int64_t> off(static_cast<size_t>(world) + 1);
  for (int r = 0; r <= world; ++r) off[r] = T * r / world + (r > 0 && r < world ? (r % 2 ? 3 : -5) : 0);
  if (world == 8) {
    off[2] = off[1] + 1;
    off[3] = off[2];      // rank 2 holds nothing
    off[4] = off[3] + 2;  // rank 3 holds 2 rows
  }
  return off;
}

}  // namespace linattn::test
