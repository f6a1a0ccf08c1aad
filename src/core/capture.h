// The CPU capture hook (level 0, so every level can see it; src/runtime implements it).
// While a CPU graph capture is active on this thread, an op that may be captured hands its
// bound, already-validated work to the sink instead of running it; the graph replays the
// recorded closures in order. Ops that would do work the contract forbids during capture
// (allocate, build metadata on the host, take the eager path) raise kCaptureViolation instead.
#pragma once
#include <functional>
#include <string>

namespace linattn {

class CaptureSink {
 public:
  virtual ~CaptureSink() = default;
  // `name` is for diagnostics ("gdn_fwd", "chunk_meta").
  virtual void record(std::string name, std::function<void()> work) = 0;
};

// The sink of the capture active on this thread, or nullptr.
CaptureSink* active_cpu_capture();
void set_active_cpu_capture(CaptureSink* sink);

// Runs `work` now, or records it when a CPU capture is active.
inline void run_or_record(const char* name, std::function<void()> work) {
  if (CaptureSink* s = active_cpu_capture()) s->record(name, std::move(work));
  else work();
}

}  // namespace linattn
