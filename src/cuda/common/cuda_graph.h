// CUDA graph capture on the caller's stream (no CUDA headers here, so src/runtime can wrap it):
// begin() starts a thread-local stream capture; end() ends it and instantiates; replay()
// launches the executable graph on the same stream. A layer is captured into one graph by making
// all of its op calls on that stream between begin() and end() (GRAPH_CONTRACT.md section 6).
// Errors raise linattn::Error; the destructor releases everything without throwing.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace linattn::cuda {

class CudaGraph {
 public:
  explicit CudaGraph(void* stream) : stream_(stream) {}
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void begin();
  void end();      // end capture + instantiate
  void abort();    // end capture (if active) and drop it
  void replay();   // cudaGraphLaunch on the stream (asynchronous)
  void reset();    // drop the instantiated graph
  bool capturing() const;  // this object's capture is active on its stream
  size_t num_nodes() const;
  std::vector<std::string> node_kinds() const;  // "kernel", "memcpy", "memset", ... per node
  void* stream() const { return stream_; }

 private:
  void* stream_;
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
  bool active_ = false;
};

}  // namespace linattn::cuda
