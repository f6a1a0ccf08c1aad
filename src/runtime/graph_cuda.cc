// CUDA Graph backend factory. The CUDA backend replaces this stub with a GraphImpl doing
// stream capture on the caller's stream: begin = cudaStreamBeginCapture(stream,
// cudaStreamCaptureModeThreadLocal); end = cudaStreamEndCapture + cudaGraphInstantiate;
// replay = cudaGraphLaunch(exec, stream); capture_is_current = cudaStreamIsCapturing.
#include "core/check.h"
#include "runtime/graph_impl.h"

namespace linattn::runtime {

std::unique_ptr<GraphImpl> make_cuda_graph(int device_index, void* stream) {
#if LINATTN_WITH_CUDA
  LINATTN_UNSUPPORTED("Graph on cuda:", device_index, ": CUDA graph capture is not implemented yet");
#else
  LINATTN_UNSUPPORTED("Graph on cuda:", device_index,
                      ": this build has no CUDA backend (LINATTN_ENABLE_CUDA=OFF)");
#endif
}

}  // namespace linattn::runtime
