// Device-side meters of the all-modes bench on CUDA (issue 10): CUDA-event time of one call on a
// stream (the call's span on the GPU, launch gaps included, host synchronization excluded), and
// NVML's total-energy counter of the GPU that runs the stream. NVML is opened with dlopen at run
// time (libnvidia-ml.so.1 ships with the driver), so the tool neither links it nor needs it:
// without it, or on the CPU backend, energy reads -1 and event times are not taken.
#pragma once
#include <string>

namespace linattn::bench {

class EventTimer {
 public:
  explicit EventTimer(void* cuda_stream);  // nullptr (CPU backend): inactive
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  bool active() const { return begin_ != nullptr; }
  void start();    // records the start event
  void stop();     // records the end event (call before the host synchronizes)
  double read_ms();  // waits for the end event; elapsed ms between the two, -1 when inactive

 private:
  void* stream_ = nullptr;
  void* begin_ = nullptr;
  void* end_ = nullptr;
};

// Total energy the current CUDA device has used since the driver loaded, in millijoules;
// -1 when NVML, the device or the counter is unavailable (CPU builds, older GPUs).
double gpu_energy_mj();

// "NVIDIA H200, 132 SMs, 139.8 GiB, cc 9.0, driver 13.0, runtime 13.0" for the current CUDA
// device; "" without one (CPU build, no GPU).
std::string gpu_description();

}  // namespace linattn::bench
