// The backend interface behind linattn::Graph. One implementation per backend:
//   CPU  (graph_cpu.cc):  a CaptureSink that records (name, closure) pairs; replay runs them.
//   CUDA (graph_cuda.cc): stream capture on the caller's stream (cudaStreamBeginCapture /
//                         EndCapture, cudaGraphInstantiate, cudaGraphLaunch); the stub there
//                         raises Unsupported until the CUDA backend implements it.
// linattn::Graph (graph.cc) owns the state machine (empty -> capturing -> ready) and its
// errors; an impl only does the backend work, and is called in valid states only.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "linattn/tensor.h"

namespace linattn::runtime {

class GraphImpl {
 public:
  virtual ~GraphImpl() = default;
  virtual void begin_capture() = 0;
  // Ends the capture and instantiates the executable program.
  virtual void end_capture() = 0;
  // Ends the capture (if the backend still holds it) and drops what was recorded.
  virtual void abort_capture() = 0;
  virtual void replay() = 0;
  // Drops the instantiated program.
  virtual void reset() = 0;
  // Whether the capture this impl began is the one active now on the calling thread / stream.
  virtual bool capture_is_current() const = 0;
  virtual size_t num_nodes() const = 0;
  virtual std::vector<std::string> node_names() const = 0;
};

std::unique_ptr<GraphImpl> make_cpu_graph();
// `stream` is a cudaStream_t (nullptr = legacy default stream).
std::unique_ptr<GraphImpl> make_cuda_graph(int device_index, void* stream);

}  // namespace linattn::runtime
