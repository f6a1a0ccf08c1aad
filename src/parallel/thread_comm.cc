// ThreadGroup / ThreadCommunicator (see thread_comm.h).
#include "parallel/thread_comm.h"

#include <cstring>

#include "core/check.h"

namespace linattn::parallel {

ThreadGroup::ThreadGroup(int world) : world_(world), slots_(static_cast<size_t>(world), nullptr) {
  LINATTN_CHECK(world >= 1, "world: expected >= 1, got ", world);
}

void ThreadGroup::barrier() {
  std::unique_lock<std::mutex> lk(mu_);
  const long gen = generation_;
  if (++arrived_ == world_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lk, [&] { return generation_ != gen; });
}

ThreadCommunicator::ThreadCommunicator(std::shared_ptr<ThreadGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {
  LINATTN_CHECK(group_ != nullptr, "group: expected a ThreadGroup, got null");
  LINATTN_CHECK(rank >= 0 && rank < group_->world(), "rank: expected in [0, ", group_->world(), "), got ", rank);
}

void ThreadCommunicator::all_gather(const void* send, void* recv, size_t bytes, void*) {
  {
    std::lock_guard<std::mutex> lk(group_->mu_);
    group_->slots_[static_cast<size_t>(rank_)] = send;
  }
  group_->barrier();
  for (int r = 0; r < group_->world(); ++r)
    if (bytes) std::memcpy(static_cast<char*>(recv) + static_cast<size_t>(r) * bytes, group_->slots_[static_cast<size_t>(r)], bytes);
  group_->barrier();
}

}  // namespace linattn::parallel
