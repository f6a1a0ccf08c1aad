// The CPU capture hook (level 0, so every level can see it; src/runtime implements it).
// While a CPU graph capture is active on this thread, an op that may be captured hands its
// bound, already-validated work to the sink instead of running it; the graph replays the
// recorded closures in order. Ops that would do work the contract forbids during capture
// (allocate, build metadata on the host, take the eager path) raise kCaptureViolation instead,
// through forbid_during_capture and its shorthands, with the failure category of that work.
#pragma once
#include <functional>
#include <string>

#include "linattn/error.h"

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

// Raises kCaptureViolation with `category` when a CPU capture is active on this thread; `what`
// names the forbidden work. Call it before doing any of that work (nothing is recorded).
void forbid_during_capture(const char* what, FailureCategory category);
// Allocation of device/host buffers, replacing a static buffer: address-or-lifetime.
inline void forbid_alloc_during_capture(const char* what) {
  forbid_during_capture(what, FailureCategory::kAddressOrLifetime);
}
// Host-built metadata, a host read of device data, a data-dependent size: stale-or-dynamic-metadata.
inline void forbid_host_metadata_during_capture(const char* what) {
  forbid_during_capture(what, FailureCategory::kStaleOrDynamicMetadata);
}
// The eager (use_graph = false) path of an op: eager-backend.
inline void forbid_eager_during_capture(const char* what) {
  forbid_during_capture(what, FailureCategory::kEagerBackend);
}

}  // namespace linattn
