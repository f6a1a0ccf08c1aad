// Threads-as-ranks communicator (in-process, host memory): a ThreadGroup of `world` ranks shares
// one slot per rank; all_gather publishes the caller's record, waits until every rank has
// published (a generation barrier), copies all records in rank order, and waits again so no
// rank overwrites its slot while another still reads it. Used by the CPU context-parallel tests
// (2, 4, 8 simulated ranks); each rank thread owns one ThreadCommunicator.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "parallel/communicator.h"

namespace linattn::parallel {

class ThreadGroup {
 public:
  explicit ThreadGroup(int world);
  int world() const { return world_; }
  void barrier();

 private:
  friend class ThreadCommunicator;
  int world_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  long generation_ = 0;
  std::vector<const void*> slots_;
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadGroup> group, int rank);
  int rank() const override { return rank_; }
  int world_size() const override { return group_->world(); }
  void all_gather(const void* send, void* recv, size_t bytes, void* stream) override;
  bool device_buffers() const override { return false; }

 private:
  std::shared_ptr<ThreadGroup> group_;
  int rank_;
};

}  // namespace linattn::parallel
