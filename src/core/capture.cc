// Thread-local storage of the active CPU capture sink, and the capture-violation helper.
#include "core/capture.h"

#include "core/check.h"

namespace linattn {
namespace {
thread_local CaptureSink* t_sink = nullptr;

const char* why(FailureCategory c) {
  switch (c) {
    case FailureCategory::kAddressOrLifetime:
      return "buffers of a graph are allocated before capture and never replaced";
    case FailureCategory::kStaleOrDynamicMetadata:
      return "a graph rebuilds metadata from the static cu_seqlens at every replay; host-built or "
             "data-sized metadata would be frozen at capture";
    case FailureCategory::kEagerBackend:
      return "the eager path may allocate, sync and size work from the data; call the op with "
             "use_graph = true on static buffers";
    default:
      return "the graph contract forbids it";
  }
}
}  // namespace

CaptureSink* active_cpu_capture() { return t_sink; }
void set_active_cpu_capture(CaptureSink* sink) { t_sink = sink; }

void forbid_during_capture(const char* what, FailureCategory category) {
  LINATTN_CHECK_CODE(t_sink == nullptr, ErrorCode::kCaptureViolation, category, what,
                     ": not allowed while a graph capture is active (", why(category), ")");
}

}  // namespace linattn
