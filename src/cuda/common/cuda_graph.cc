// CudaGraph (see cuda_graph.h): cudaStreamBeginCapture (thread-local mode, so other threads'
// unrelated CUDA calls are not captured), cudaStreamEndCapture, cudaGraphInstantiate,
// cudaGraphLaunch.
#include "cuda/common/cuda_graph.h"

#include <cuda_runtime.h>

#include "cuda/common/check.h"

namespace linattn::cuda {
namespace {
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
}  // namespace

CudaGraph::~CudaGraph() {
  if (active_) {
    cudaGraph_t g = nullptr;
    (void)cudaStreamEndCapture(as_stream(stream_), &g);
    if (g) (void)cudaGraphDestroy(g);
  }
  if (exec_) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}

void CudaGraph::begin() {
  LINATTN_CHECK(!active_, "CudaGraph::begin: a capture is already active");
  reset();
  LINATTN_CUDA_CHECK(cudaStreamBeginCapture(as_stream(stream_), cudaStreamCaptureModeThreadLocal));
  active_ = true;
}

void CudaGraph::end() {
  LINATTN_CHECK(active_, "CudaGraph::end: no active capture");
  cudaGraph_t g = nullptr;
  active_ = false;
  LINATTN_CUDA_CHECK(cudaStreamEndCapture(as_stream(stream_), &g));
  graph_ = g;
  cudaGraphExec_t e = nullptr;
  LINATTN_CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  exec_ = e;
}

void CudaGraph::abort() {
  if (!active_) return;
  active_ = false;
  cudaGraph_t g = nullptr;
  const cudaError_t err = cudaStreamEndCapture(as_stream(stream_), &g);
  if (g) (void)cudaGraphDestroy(g);
  (void)cudaGetLastError();  // an invalidated capture reports an error here; it is being dropped
  (void)err;
}

void CudaGraph::replay() {
  LINATTN_CHECK(exec_ != nullptr, "CudaGraph::replay: nothing captured");
  LINATTN_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), as_stream(stream_)));
}

void CudaGraph::reset() {
  if (exec_) LINATTN_CUDA_CHECK(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_)));
  if (graph_) LINATTN_CUDA_CHECK(cudaGraphDestroy(static_cast<cudaGraph_t>(graph_)));
  exec_ = graph_ = nullptr;
}

bool CudaGraph::capturing() const {
  if (!active_) return false;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  LINATTN_CUDA_CHECK(cudaStreamIsCapturing(as_stream(stream_), &st));
  return st == cudaStreamCaptureStatusActive;
}

size_t CudaGraph::num_nodes() const {
  if (!graph_) return 0;
  size_t n = 0;
  LINATTN_CUDA_CHECK(cudaGraphGetNodes(static_cast<cudaGraph_t>(graph_), nullptr, &n));
  return n;
}

std::vector<std::string> CudaGraph::node_kinds() const {
  std::vector<std::string> r;
  size_t n = num_nodes();
  if (n == 0) return r;
  std::vector<cudaGraphNode_t> nodes(n);
  LINATTN_CUDA_CHECK(cudaGraphGetNodes(static_cast<cudaGraph_t>(graph_), nodes.data(), &n));
  for (size_t i = 0; i < n; ++i) {
    cudaGraphNodeType t{};
    LINATTN_CUDA_CHECK(cudaGraphNodeGetType(nodes[i], &t));
    switch (t) {
      case cudaGraphNodeTypeKernel: r.emplace_back("kernel"); break;
      case cudaGraphNodeTypeMemcpy: r.emplace_back("memcpy"); break;
      case cudaGraphNodeTypeMemset: r.emplace_back("memset"); break;
      case cudaGraphNodeTypeMemAlloc: r.emplace_back("mem_alloc"); break;
      case cudaGraphNodeTypeMemFree: r.emplace_back("mem_free"); break;
      default: r.emplace_back("other"); break;
    }
  }
  return r;
}

}  // namespace linattn::cuda
