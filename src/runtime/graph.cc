// linattn::Graph: the state machine (empty -> capturing -> ready) and its errors, over a
// backend GraphImpl chosen by the device. Misuse of the lifecycle is address-or-lifetime;
// replaying inside an active capture is a capture violation.
#include "linattn/graph.h"

#include "core/capture.h"
#include "core/check.h"
#include "runtime/graph_impl.h"

namespace linattn {

namespace {
const char* state_name(Graph::State s) {
  switch (s) {
    case Graph::State::kEmpty: return "empty";
    case Graph::State::kCapturing: return "capturing";
    case Graph::State::kReady: return "ready";
  }
  return "?";
}
constexpr ErrorCode kInv = ErrorCode::kInvalidArgument;
constexpr FailureCategory kLife = FailureCategory::kAddressOrLifetime;
}  // namespace

Graph::Graph(Device device, void* stream) : device_(device) {
  impl_ = device.type == DeviceType::kCPU ? runtime::make_cpu_graph()
                                          : runtime::make_cuda_graph(device.index, stream);
}

Graph::~Graph() = default;
Graph::Graph(Graph&& o) noexcept
    : device_(o.device_), impl_(std::move(o.impl_)), capturing_(o.capturing_), ready_(o.ready_) {
  o.capturing_ = o.ready_ = false;
}

Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    device_ = o.device_;
    impl_ = std::move(o.impl_);
    capturing_ = o.capturing_;
    ready_ = o.ready_;
    o.capturing_ = o.ready_ = false;
  }
  return *this;
}

Graph::State Graph::state() const {
  return capturing_ ? State::kCapturing : ready_ ? State::kReady : State::kEmpty;
}

void Graph::begin_capture() {
  LINATTN_CHECK_CODE(impl_, kInv, kLife, "Graph: expected a live graph, got a moved-from one");
  LINATTN_CHECK_CODE(!capturing_ && !ready_, kInv, kLife,
                     "Graph::begin_capture: expected state empty, got ",
                     state_name(state()),
                     " (reset() before capturing again)");
  LINATTN_CHECK_CODE(active_cpu_capture() == nullptr, ErrorCode::kCaptureViolation, kLife,
                     "Graph::begin_capture: expected no capture active on this thread, got one "
                     "(nested captures are not supported)");
  impl_->begin_capture();
  capturing_ = true;
}

void Graph::end_capture() {
  LINATTN_CHECK_CODE(impl_ && capturing_, kInv, kLife,
                     "Graph::end_capture: expected state capturing, got ",
                     state_name(state()));
  LINATTN_CHECK_CODE(impl_->capture_is_current(), kInv, kLife,
                     "Graph::end_capture: expected the thread that began the capture, got another");
  impl_->end_capture();
  capturing_ = false;
  ready_ = true;
}

void Graph::abort_capture() {
  if (!impl_ || !capturing_) return;
  impl_->abort_capture();
  capturing_ = false;
}

void Graph::capture(const std::function<void()>& body) {
  begin_capture();
  try {
    body();
  } catch (...) {
    abort_capture();
    throw;
  }
  end_capture();
}

void Graph::replay() {
  LINATTN_CHECK_CODE(impl_ && ready_, kInv, kLife, "Graph::replay: expected state ready, got ",
                     state_name(state()));
  LINATTN_CHECK_CODE(active_cpu_capture() == nullptr, ErrorCode::kCaptureViolation,
                     FailureCategory::kUnsupportedOp,
                     "Graph::replay: expected no capture active on this thread, got one "
                     "(replaying a graph inside a capture is not supported)");
  impl_->replay();
}

void Graph::reset() {
  if (!impl_) return;
  abort_capture();
  impl_->reset();
  ready_ = false;
}

size_t Graph::num_nodes() const { return impl_ ? impl_->num_nodes() : 0; }
std::vector<std::string> Graph::node_names() const {
  return impl_ ? impl_->node_names() : std::vector<std::string>{};
}

}  // namespace linattn
