// Side stream of tier 3's concurrent passes (see side_stream.h): per host thread, one record per
// device with a stream and the fork / join events, created lazily, destroyed at thread exit
// (errors ignored there: the runtime may already be shutting down at process exit).
#include "cuda/seg/side_stream.h"

#include <cuda_runtime.h>

#include <vector>

#include "cuda/common/check.h"

namespace linattn::cuda::seg {
namespace {

struct Side {
  int device = -1;
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
};

struct Sides {
  std::vector<Side> v;
  ~Sides() {
    for (Side& s : v) {
      if (s.fork) (void)cudaEventDestroy(s.fork);
      if (s.join) (void)cudaEventDestroy(s.join);
      if (s.stream) (void)cudaStreamDestroy(s.stream);
    }
  }
};

// Restores the thread's capture mode on scope exit (also when a creation call throws).
struct RelaxedCapture {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode); }
  ~RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode); }
};

Side& current_side() {
  thread_local Sides sides;
  int device = 0;
  LINATTN_CUDA_CHECK(cudaGetDevice(&device));
  for (Side& s : sides.v)
    if (s.device == device) return s;
  Side s;
  s.device = device;
  {
    RelaxedCapture relaxed;
    int least = 0, greatest = 0;
    LINATTN_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    LINATTN_CUDA_CHECK(cudaStreamCreateWithPriority(&s.stream, cudaStreamNonBlocking, greatest));
    LINATTN_CUDA_CHECK(cudaEventCreateWithFlags(&s.fork, cudaEventDisableTiming));
    LINATTN_CUDA_CHECK(cudaEventCreateWithFlags(&s.join, cudaEventDisableTiming));
  }
  sides.v.push_back(s);
  return sides.v.back();
}

}  // namespace

void* side_fork(void* main) {
  Side& s = current_side();
  LINATTN_CUDA_CHECK(cudaEventRecord(s.fork, static_cast<cudaStream_t>(main)));
  LINATTN_CUDA_CHECK(cudaStreamWaitEvent(s.stream, s.fork, 0));
  return s.stream;
}

void side_join(void* main) {
  Side& s = current_side();
  LINATTN_CUDA_CHECK(cudaEventRecord(s.join, s.stream));
  LINATTN_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(main), s.join, 0));
}

}  // namespace linattn::cuda::seg
