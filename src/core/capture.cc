// Thread-local storage of the active CPU capture sink.
#include "core/capture.h"

namespace linattn {
namespace {
thread_local CaptureSink* t_sink = nullptr;
}
CaptureSink* active_cpu_capture() { return t_sink; }
void set_active_cpu_capture(CaptureSink* sink) { t_sink = sink; }
}  // namespace linattn
