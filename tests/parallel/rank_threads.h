// run_rank_threads: fn(rank, comm) on `world` threads, rank r's communicator built on its own
// thread by make(r) (which may select a device first); the first exception (by rank) is rethrown
// after every thread joined. Shared by the CPU (ThreadCommunicator), NCCL and simulated-rank
// runners of the context-parallel tests and benchmark (no GoogleTest, no CUDA here).
#pragma once
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "parallel/communicator.h"

namespace linattn::test {

using RankFn = std::function<void(int, parallel::Communicator&)>;
using MakeComm = std::function<std::unique_ptr<parallel::Communicator>(int)>;

inline void run_rank_threads(int world, const MakeComm& make, const RankFn& fn) {
  std::vector<std::exception_ptr> errs(static_cast<size_t>(world));
  std::vector<std::thread> th;
  for (int r = 0; r < world; ++r)
    th.emplace_back([&, r] {
      try {
        std::unique_ptr<parallel::Communicator> comm = make(r);
        fn(r, *comm);
      } catch (...) {
        errs[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : th) t.join();
  for (auto& e : errs)
    if (e) std::rethrow_exception(e);
}

}  // namespace linattn::test
