// Device memory: the host, simulated devices and CUDA devices behind one
// interface.
//
// A DeviceMemory is one memory space with its own allocations: "host",
// "sim cuda:N" (a strict simulated device: ordinary host memory, but a pool
// of its own, so the executor can tell which side every buffer is on) or
// "cuda:N" (real device memory; the host side is then pinned memory). Each
// memory also runs kernels on its own buffers, which is how delegate
// subgraphs execute: host kernels for the host and sim devices, CUDA kernels
// for CUDA devices.
//
// A DeviceSet owns the memories one executor uses, created on first use.
// Requires: for kCuda, CudaAvailable() (and the device index < the number
// of visible GPUs). Establishes: allocations are zero-filled and live until
// their DeviceBuffer is destroyed; copies complete before they return.
#ifndef FERRY_RUNTIME_DEVICE_H_
#define FERRY_RUNTIME_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "passes/ir.h"
#include "runtime/tensor_view.h"

namespace ferry {

class DeviceMemory;

// An allocation, freed when destroyed.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceMemory* memory, std::byte* data, int64_t bytes)
      : memory_(memory), data_(data), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  DeviceMemory* memory() const { return memory_; }
  std::byte* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  DeviceMemory* memory_ = nullptr;
  std::byte* data_ = nullptr;
  int64_t bytes_ = 0;
};

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;

  // The device (cpu for the host).
  virtual Device device() const = 0;
  // "host", "sim cuda:0", "cuda:0".
  virtual std::string name() const = 0;
  bool is_host() const { return device().is_host(); }

  // `bytes` zero-filled bytes (at least one byte is allocated).
  virtual absl::StatusOr<DeviceBuffer> Allocate(int64_t bytes) = 0;
  // Host memory -> this memory, and back. Complete when they return.
  virtual absl::Status CopyFromHost(std::byte* dst, const std::byte* src,
                                    int64_t bytes) = 0;
  virtual absl::Status CopyToHost(std::byte* dst, const std::byte* src,
                                  int64_t bytes) = 0;
  // dst = src elementwise (src broadcast, dtype converted), both here.
  virtual absl::Status CopyStrided(const TensorView& dst,
                                   const TensorView& src) = 0;
  // Runs operator call.op on buffers of this memory.
  virtual absl::Status RunKernel(const KernelCall& call) = 0;
  // Waits for queued work.
  virtual absl::Status Synchronize() { return absl::OkStatus(); }

 protected:
  friend class DeviceBuffer;
  virtual void Free(std::byte* data) = 0;
};

// Memory the host kernels can touch: the host itself, or a simulated device
// ("sim cuda:N": the same kind of bytes in a pool of its own, so every buffer
// is known to be on one side or the other). Subclasses choose how the bytes
// are obtained (the CUDA backend pins them).
class HostLikeMemory : public DeviceMemory {
 public:
  explicit HostLikeMemory(Device device) : device_(device) {}

  Device device() const override { return device_; }
  std::string name() const override;
  absl::StatusOr<DeviceBuffer> Allocate(int64_t bytes) override;
  absl::Status CopyFromHost(std::byte* dst, const std::byte* src,
                            int64_t bytes) override;
  absl::Status CopyToHost(std::byte* dst, const std::byte* src,
                          int64_t bytes) override;
  absl::Status CopyStrided(const TensorView& dst,
                           const TensorView& src) override;
  absl::Status RunKernel(const KernelCall& call) override;

 protected:
  // `bytes` (a multiple of 64) aligned bytes, or null.
  virtual void* AllocateBytes(int64_t bytes);
  virtual void FreeBytes(void* data);
  void Free(std::byte* data) override { FreeBytes(data); }

 private:
  Device device_;
};

enum class MemoryKind {
  kHostOnly,  // one host memory; device placements are ignored (eager)
  kSim,       // host + simulated devices
  kCuda,      // pinned host + CUDA devices
};

class DeviceSet {
 public:
  explicit DeviceSet(MemoryKind kind);
  ~DeviceSet();
  DeviceSet(const DeviceSet&) = delete;
  DeviceSet& operator=(const DeviceSet&) = delete;

  MemoryKind kind() const { return kind_; }
  DeviceMemory& host() { return *host_; }
  // The memory of `device`: the host for cpu (and for everything under
  // kHostOnly). FailedPrecondition when a CUDA device is not visible.
  absl::StatusOr<DeviceMemory*> For(Device device);
  absl::Status SynchronizeAll();

 private:
  MemoryKind kind_;
  std::unique_ptr<DeviceMemory> host_;
  std::map<int32_t, std::unique_ptr<DeviceMemory>> devices_;
};

// Whether the CUDA backend was built and a GPU is visible (errors from the
// CUDA runtime, such as a missing driver, count as "no GPU").
bool CudaAvailable();
// The number of visible GPUs (0 when CudaAvailable() is false).
int CudaDeviceCount();

// What a visible GPU reports, for monitoring (ferryd's metrics).
struct GpuUsage {
  int index = 0;  // cuda:N, as CUDA numbers the visible devices
  int64_t memory_used_bytes = 0;
  int64_t memory_total_bytes = 0;
  // Fraction of the last sample period a kernel ran (0..1); only where
  // the driver's NVML (libnvidia-ml.so.1) is loadable.
  std::optional<double> utilization;
};
// One entry per visible GPU whose memory could be read; empty without the
// CUDA backend or a GPU. Uses NVML where it is loadable (no CUDA context
// is created), else cudaMemGetInfo (which creates one per device).
std::vector<GpuUsage> ReadGpuUsage();

}  // namespace ferry

#endif  // FERRY_RUNTIME_DEVICE_H_
