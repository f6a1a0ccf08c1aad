// EventTimer (cudaEvent pair on the bench's stream) and gpu_energy_mj (NVML through dlopen:
// nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2 with the CUDA device's PCI bus id, so the NVML
// device is the one CUDA runs on whatever CUDA_VISIBLE_DEVICES says, then
// nvmlDeviceGetTotalEnergyConsumption). The NVML entry points are declared here by their C ABI.
#include "bench_meter.h"

#include <cstdio>

#if LINATTN_WITH_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#endif

namespace linattn::bench {

#if LINATTN_WITH_CUDA
EventTimer::EventTimer(void* cuda_stream) : stream_(cuda_stream) {
  if (!cuda_stream) return;
  cudaEvent_t b = nullptr, e = nullptr;
  if (cudaEventCreate(&b) != cudaSuccess || cudaEventCreate(&e) != cudaSuccess) {
    if (b) cudaEventDestroy(b);
    return;
  }
  begin_ = b;
  end_ = e;
}

EventTimer::~EventTimer() {
  if (begin_) cudaEventDestroy(static_cast<cudaEvent_t>(begin_));
  if (end_) cudaEventDestroy(static_cast<cudaEvent_t>(end_));
}

void EventTimer::start() {
  if (active()) cudaEventRecord(static_cast<cudaEvent_t>(begin_), static_cast<cudaStream_t>(stream_));
}

void EventTimer::stop() {
  if (active()) cudaEventRecord(static_cast<cudaEvent_t>(end_), static_cast<cudaStream_t>(stream_));
}

double EventTimer::read_ms() {
  if (!active()) return -1;
  float ms = -1;
  if (cudaEventSynchronize(static_cast<cudaEvent_t>(end_)) != cudaSuccess ||
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(begin_), static_cast<cudaEvent_t>(end_)) != cudaSuccess)
    return -1;
  return ms;
}

namespace {

struct Nvml {
  using Init = int (*)();
  using ByBus = int (*)(const char*, void**);
  using Energy = int (*)(void*, unsigned long long*);
  Energy energy = nullptr;
  void* device = nullptr;

  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto init = reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"));
    auto by_bus = reinterpret_cast<ByBus>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    auto e = reinterpret_cast<Energy>(dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
    int dev = 0;
    char bus[32] = {};
    if (!init || !by_bus || !e || init() != 0 || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetPCIBusId(bus, sizeof(bus), dev) != cudaSuccess || by_bus(bus, &device) != 0)
      return;
    unsigned long long probe = 0;
    if (e(device, &probe) == 0) energy = e;  // older GPUs answer NOT_SUPPORTED
  }
};

}  // namespace

std::string gpu_description() {
  int dev = 0, drv = 0, rt = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error for later callers
    return "";
  }
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s, %d SMs, %.1f GiB, cc %d.%d, driver %d.%d, runtime %d.%d", prop.name,
                prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1u << 30), prop.major, prop.minor,
                drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
  return buf;
}

double gpu_energy_mj() {
  static const Nvml nvml;
  unsigned long long mj = 0;
  if (!nvml.energy || nvml.energy(nvml.device, &mj) != 0) return -1;
  return static_cast<double>(mj);
}

#else
EventTimer::EventTimer(void*) {}
EventTimer::~EventTimer() = default;
void EventTimer::start() {}
void EventTimer::stop() {}
double EventTimer::read_ms() { return -1; }
double gpu_energy_mj() { return -1; }
std::string gpu_description() { return ""; }
#endif

}  // namespace linattn::bench
