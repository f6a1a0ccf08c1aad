// CUDA Graph backend of linattn::Graph: stream capture on the caller's stream through
// cuda::CudaGraph (begin = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
// end = cudaStreamEndCapture + cudaGraphInstantiate; replay = cudaGraphLaunch on the stream).
// Several ops (a whole layer) go into one graph by calling them on that stream between
// begin_capture and end_capture. The legacy default stream cannot be captured: pass a stream.
#include "core/check.h"
#include "runtime/graph_impl.h"

#if LINATTN_WITH_CUDA
#include "cuda/common/cuda_graph.h"
#endif

namespace linattn::runtime {

#if LINATTN_WITH_CUDA
namespace {

class CudaGraphImpl final : public GraphImpl {
 public:
  explicit CudaGraphImpl(void* stream) : g_(stream) {}
  void begin_capture() override { g_.begin(); }
  void end_capture() override { g_.end(); }
  void abort_capture() override { g_.abort(); }
  void replay() override { g_.replay(); }
  void reset() override { g_.reset(); }
  bool capture_is_current() const override { return g_.capturing(); }
  size_t num_nodes() const override { return g_.num_nodes(); }
  std::vector<std::string> node_names() const override { return g_.node_kinds(); }

 private:
  cuda::CudaGraph g_;
};

}  // namespace

std::unique_ptr<GraphImpl> make_cuda_graph(int device_index, void* stream) {
  LINATTN_CHECK_CODE(stream != nullptr, ErrorCode::kInvalidArgument, FailureCategory::kAddressOrLifetime,
                     "Graph on cuda:", device_index, ": expected a CUDA stream to capture on, got the "
                     "legacy default stream (nullptr), which cannot be captured");
  return std::make_unique<CudaGraphImpl>(stream);
}
#else
std::unique_ptr<GraphImpl> make_cuda_graph(int device_index, void*) {
  LINATTN_UNSUPPORTED("Graph on cuda:", device_index,
                      ": this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)");
}
#endif

}  // namespace linattn::runtime
