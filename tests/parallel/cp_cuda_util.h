// Helpers of the CUDA context-parallel tests and benchmark: device buffers on one GPU (NaN-filled
// on request, copies in / out with cudaMemcpy), and run_gpu_ranks, one thread per rank, each on
// its own GPU with an NcclCommunicator (one process, NCCL unique id shared in memory), or
// run_sim_ranks, threads sharing GPU 0 with a DeviceThreadCommunicator.
#pragma once
#include <cuda_runtime.h>

#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "linattn/tensor.h"
#include "parallel/device_thread_comm.h"
#include "parallel/nccl_comm.h"
#include "rank_threads.h"

namespace linattn::test {

inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

inline int gpu_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// Device allocations on the calling thread's current GPU, freed together.
class DevMem {
 public:
  DevMem() { cuda_ok(cudaGetDevice(&device_), "cudaGetDevice"); }
  ~DevMem() {
    for (void* p : ptrs_) cudaFree(p);
  }
  DevMem(const DevMem&) = delete;
  DevMem& operator=(const DevMem&) = delete;
  void* raw(size_t bytes) {
    void* p = nullptr;
    cuda_ok(cudaMalloc(&p, bytes ? bytes : 256), "cudaMalloc");
    ptrs_.push_back(p);
    return p;
  }
  // NaN-filled (all bits set: NaN in fp32 / bf16 / fp16) unless zero.
  TensorView alloc(DType dt, const std::vector<int64_t>& shape, bool zero = false) {
    size_t bytes = dtype_size(dt);
    for (int64_t s : shape) bytes *= static_cast<size_t>(s);
    void* p = raw(bytes);
    cuda_ok(cudaMemset(p, zero ? 0 : 0xFF, bytes ? bytes : 256), "cudaMemset");
    return TensorView::contiguous(p, dt, shape, Device{DeviceType::kCUDA, device_});
  }
  TensorView up(const Tensor& t) {
    if (!t.defined()) return {};
    TensorView v = alloc(t.dtype(), t.shape(), true);
    cuda_ok(cudaMemcpy(v.data, t.view().data, t.view().nbytes(), cudaMemcpyHostToDevice), "upload");
    return v;
  }
  int device() const { return device_; }

 private:
  int device_ = 0;
  std::vector<void*> ptrs_;
};

inline Tensor down(const TensorView& v) {
  if (!v.defined()) return Tensor();
  Tensor h(v.dtype, std::vector<int64_t>(v.shape.begin(), v.shape.begin() + v.ndim));
  cuda_ok(cudaMemcpy(h.view().data, v.data, v.nbytes(), cudaMemcpyDeviceToHost), "download");
  return h;
}

inline void refill(const TensorView& dst, const Tensor& src) {
  cuda_ok(cudaMemcpy(dst.data, src.view().data, src.view().nbytes(), cudaMemcpyHostToDevice), "refill");
}

// fn(rank, comm) on `world` threads, then a device synchronize on each; make(r) selects the device.
inline void run_cuda_rank_threads(int world, const MakeComm& make, const RankFn& fn) {
  run_rank_threads(world, make, [&](int r, parallel::Communicator& comm) {
    fn(r, comm);
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  });
}

// Rank r on GPU r with an NcclCommunicator (one process, the NCCL unique id shared in memory).
inline void run_gpu_ranks(int world, const RankFn& fn) {
  const parallel::NcclUniqueId id = parallel::nccl_unique_id();
  run_cuda_rank_threads(world, [&](int r) -> std::unique_ptr<parallel::Communicator> {
    cuda_ok(cudaSetDevice(r), "cudaSetDevice");
    return std::make_unique<parallel::NcclCommunicator>(id, r, world, r);
  }, fn);
}

// Every rank on GPU 0 with a DeviceThreadCommunicator (NCCL refuses two ranks on one GPU): the
// simulated 4- and 8-rank runs; eager only.
inline void run_sim_ranks(int world, const RankFn& fn) {
  auto group = std::make_shared<parallel::DeviceThreadGroup>(world);
  run_cuda_rank_threads(world, [&](int r) -> std::unique_ptr<parallel::Communicator> {
    cuda_ok(cudaSetDevice(0), "cudaSetDevice");
    return std::make_unique<parallel::DeviceThreadCommunicator>(group, r);
  }, fn);
}

// Captures fn() on `stream` (thread-local mode: every rank thread captures its own graph at the
// same time), then returns the instantiated graph.
inline cudaGraphExec_t capture(cudaStream_t stream, const std::function<void()>& fn) {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  try {
    fn();
  } catch (...) {
    cudaStreamEndCapture(stream, &g);
    if (g) cudaGraphDestroy(g);
    throw;
  }
  cuda_ok(cudaStreamEndCapture(stream, &g), "cudaStreamEndCapture");
  cuda_ok(cudaGraphInstantiate(&ge, g, 0), "cudaGraphInstantiate");
  cudaGraphDestroy(g);
  return ge;
}

// Merges per-rank final-state tensors: each rank writes only the sequences ending on it (the
// others stay NaN).
inline Tensor merge_written(const std::vector<Tensor>& parts) {
  Tensor out = parts[0].to(DType::kF32);
  for (size_t r = 1; r < parts.size(); ++r)
    for (int64_t i = 0; i < out.numel(); ++i)
      if (out.get(i) != out.get(i)) out.set(i, parts[r].get(i));
  return out;
}

}  // namespace linattn::test
