// Communicator: the one collective that context parallelism needs, an in-order all-gather of a
// fixed-size record per rank (segment states / transitions, conv boundary rows, parameter-grad
// partials). Lockstep: every rank calls the same collectives in the same order with the same
// size (so NCCL calls can be captured into a CUDA graph on every rank). Buffers live on the
// device of the ops' tensors (host memory for the CPU backend, device memory for NCCL).
// Implementations: ThreadCommunicator (thread_comm.h: ranks are threads of one process, used by
// the CPU tests) and NcclCommunicator (nccl_comm.h: CUDA + NCCL builds).
#pragma once
#include <cstddef>

namespace linattn::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // recv[r * bytes, (r + 1) * bytes) = rank r's send[0, bytes), for every rank r, in rank order.
  // `stream`: cudaStream_t for NCCL (nullptr = legacy default), ignored on the host.
  virtual void all_gather(const void* send, void* recv, size_t bytes, void* stream) = 0;
  // True when the buffers are device memory (the ops then stage host metadata accordingly).
  virtual bool device_buffers() const = 0;
};

}  // namespace linattn::parallel
