// DeviceThreadGroup / DeviceThreadCommunicator (see device_thread_comm.h).
#include "parallel/device_thread_comm.h"

#include "core/check.h"

#if LINATTN_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/common/check.h"
#endif

namespace linattn::parallel {

DeviceThreadGroup::DeviceThreadGroup(int world)
    : group_(world), send_(static_cast<size_t>(world)), ready_(static_cast<size_t>(world)),
      done_(static_cast<size_t>(world)) {}

#if LINATTN_WITH_CUDA

DeviceThreadCommunicator::DeviceThreadCommunicator(std::shared_ptr<DeviceThreadGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {
  LINATTN_CHECK(group_ != nullptr, "group: expected a DeviceThreadGroup, got null");
  LINATTN_CHECK(rank >= 0 && rank < group_->world(), "rank: expected in [0, ", group_->world(), "), got ", rank);
  cudaEvent_t ready = nullptr, done = nullptr;
  LINATTN_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  LINATTN_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  group_->ready_[static_cast<size_t>(rank)] = ready;
  group_->done_[static_cast<size_t>(rank)] = done;
  group_->group_.barrier();  // every rank's events exist before any all_gather
}

DeviceThreadCommunicator::~DeviceThreadCommunicator() {
  group_->group_.barrier();  // no rank still waits on this rank's events
  cudaEventDestroy(static_cast<cudaEvent_t>(group_->ready_[static_cast<size_t>(rank_)]));
  cudaEventDestroy(static_cast<cudaEvent_t>(group_->done_[static_cast<size_t>(rank_)]));
}

void DeviceThreadCommunicator::all_gather(const void* send, void* recv, size_t bytes, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  LINATTN_CUDA_CHECK(cudaStreamIsCapturing(st, &cs));
  LINATTN_CHECK_CODE(cs == cudaStreamCaptureStatusNone, ErrorCode::kUnsupported, FailureCategory::kDistributed,
                     "DeviceThreadCommunicator::all_gather: eager only (simulated ranks), got a capturing stream; "
                     "capture context parallelism with NcclCommunicator");
  DeviceThreadGroup& g = *group_;
  const auto me = static_cast<size_t>(rank_);
  g.send_[me] = send;
  LINATTN_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(g.ready_[me]), st));
  g.group_.barrier();
  for (int q = 0; q < g.world(); ++q) {
    const auto qi = static_cast<size_t>(q);
    if (q != rank_) LINATTN_CUDA_CHECK(cudaStreamWaitEvent(st, static_cast<cudaEvent_t>(g.ready_[qi]), 0));
    if (bytes)
      LINATTN_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(recv) + qi * bytes, g.send_[qi], bytes, cudaMemcpyDefault, st));
  }
  LINATTN_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(g.done_[me]), st));
  g.group_.barrier();
  for (int q = 0; q < g.world(); ++q)
    if (q != rank_) LINATTN_CUDA_CHECK(cudaStreamWaitEvent(st, static_cast<cudaEvent_t>(g.done_[static_cast<size_t>(q)]), 0));
}

#else

DeviceThreadCommunicator::DeviceThreadCommunicator(std::shared_ptr<DeviceThreadGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {
  LINATTN_UNSUPPORTED("DeviceThreadCommunicator: this build has no CUDA backend");
}
DeviceThreadCommunicator::~DeviceThreadCommunicator() = default;
void DeviceThreadCommunicator::all_gather(const void*, void*, size_t, void*) {
  LINATTN_UNSUPPORTED("DeviceThreadCommunicator: this build has no CUDA backend");
}

#endif

}  // namespace linattn::parallel
