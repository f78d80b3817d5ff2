// ReadGpuUsage for ferryd's metrics: memory and utilisation of every GPU
// CUDA sees.
//
// NVML (the driver's libnvidia-ml.so.1) answers both without a CUDA
// context. It comes with the driver, not the toolkit (which ships no stub
// for it here), so it is opened at run time; where it is missing, memory
// comes from cudaMemGetInfo and utilisation is left out. NVML numbers all
// GPUs of the machine while CUDA numbers the visible ones, so each visible
// device is found in NVML by its PCI bus id.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <array>
#include <cstdint>
#include <vector>

#include "runtime/cuda/cuda_backend.h"

namespace ferry::cuda {
namespace {

// The few NVML declarations used (nvml.h, stable since NVML 5).
using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlUtilization {
  unsigned int gpu;  // percent of the sample period a kernel ran
  unsigned int memory;
};

class Nvml {
 public:
  // Opened and initialised once; null functions when it is not there.
  static const Nvml& Get() {
    static const Nvml* nvml = new Nvml();
    return *nvml;
  }
  bool loaded() const { return loaded_; }

  NvmlReturn (*by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*memory_info)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;

 private:
  Nvml() {
    void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) return;
    auto init =
        reinterpret_cast<NvmlReturn (*)()>(dlsym(library, "nvmlInit_v2"));
    by_pci_bus_id = reinterpret_cast<decltype(by_pci_bus_id)>(
        dlsym(library, "nvmlDeviceGetHandleByPciBusId_v2"));
    memory_info = reinterpret_cast<decltype(memory_info)>(
        dlsym(library, "nvmlDeviceGetMemoryInfo"));
    utilization = reinterpret_cast<decltype(utilization)>(
        dlsym(library, "nvmlDeviceGetUtilizationRates"));
    loaded_ = init != nullptr && by_pci_bus_id != nullptr &&
              memory_info != nullptr && utilization != nullptr && init() == 0;
  }
  bool loaded_ = false;
};

// From NVML, when it knows the device; false otherwise.
bool ReadFromNvml(int index, GpuUsage& usage) {
  const Nvml& nvml = Nvml::Get();
  if (!nvml.loaded()) return false;
  std::array<char, 64> bus_id{};
  if (cudaDeviceGetPCIBusId(bus_id.data(), static_cast<int>(bus_id.size()),
                            index) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  NvmlDevice device = nullptr;
  NvmlMemory memory{};
  if (nvml.by_pci_bus_id(bus_id.data(), &device) != 0 ||
      nvml.memory_info(device, &memory) != 0) {
    return false;
  }
  usage.memory_used_bytes = static_cast<int64_t>(memory.used);
  usage.memory_total_bytes = static_cast<int64_t>(memory.total);
  if (NvmlUtilization rates{}; nvml.utilization(device, &rates) == 0) {
    usage.utilization = rates.gpu / 100.0;
  }
  return true;
}

bool ReadFromCudaRuntime(int index, GpuUsage& usage) {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaSetDevice(index) != cudaSuccess ||
      cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  usage.memory_used_bytes = static_cast<int64_t>(total_bytes - free_bytes);
  usage.memory_total_bytes = static_cast<int64_t>(total_bytes);
  return true;
}

}  // namespace

std::vector<GpuUsage> ReadGpuUsage() {
  std::vector<GpuUsage> usages;
  const int count = VisibleDeviceCount();
  for (int index = 0; index < count; ++index) {
    GpuUsage usage;
    usage.index = index;
    if (ReadFromNvml(index, usage) || ReadFromCudaRuntime(index, usage)) {
      usages.push_back(usage);
    }
  }
  return usages;
}

}  // namespace ferry::cuda
