// Ranks as threads that share CUDA devices (issue 12: "a simulated 4- and 8-rank run on one GPU"):
// NCCL refuses two ranks on one GPU, so this communicator carries device records between rank
// threads with stream-ordered copies. Eager only (CUDA builds; elsewhere the constructor raises
// Unsupported); a call under stream capture raises Unsupported (the cross-thread event waits
// would join the ranks' graphs). Not a transport for real runs: NcclCommunicator is.
// all_gather(send, recv, bytes, stream) on rank r:
//   1. publish send, record ready[r] on stream; host barrier (every rank published);
//   2. for every rank q: stream waits ready[q], then copies q's record to recv[q * bytes, ...);
//      record done[r]; host barrier (every rank enqueued its copies);
//   3. stream waits done[q] of every q, so no later work of rank r overwrites send while another
//      rank's copy still reads it.
// No host synchronization with the device: only the rank threads meet on the host.
#pragma once
#include <memory>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/thread_comm.h"

namespace linattn::parallel {

class DeviceThreadGroup {
 public:
  explicit DeviceThreadGroup(int world);
  int world() const { return group_.world(); }

 private:
  friend class DeviceThreadCommunicator;
  ThreadGroup group_;                // the host barrier
  std::vector<const void*> send_;    // [world] published send pointers
  std::vector<void*> ready_, done_;  // [world] cudaEvent_t of each rank (created by its communicator)
};

class DeviceThreadCommunicator final : public Communicator {
 public:
  // On the calling thread's current CUDA device; every rank of the group constructs one.
  DeviceThreadCommunicator(std::shared_ptr<DeviceThreadGroup> group, int rank);
  ~DeviceThreadCommunicator() override;
  DeviceThreadCommunicator(const DeviceThreadCommunicator&) = delete;
  DeviceThreadCommunicator& operator=(const DeviceThreadCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return group_->world(); }
  void all_gather(const void* send, void* recv, size_t bytes, void* stream) override;
  bool device_buffers() const override { return true; }

 private:
  std::shared_ptr<DeviceThreadGroup> group_;
  int rank_;
};

}  // namespace linattn::parallel
