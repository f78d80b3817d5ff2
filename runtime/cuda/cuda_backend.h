// The CUDA backend's entry points for device.cc (internal to the runtime).
// Compiled only with FERRY_HAVE_CUDA.
//
// A CUDA device memory owns one stream and one cuBLAS handle on its device;
// every copy and kernel of that device is queued on the stream, in order.
// Copies to and from the host synchronize the stream before returning, so
// host code never reads a buffer a kernel is still writing. Host memory in
// CUDA mode is pinned (cudaHostAlloc), so those copies run at full speed.
#ifndef FERRY_RUNTIME_CUDA_CUDA_BACKEND_H_
#define FERRY_RUNTIME_CUDA_CUDA_BACKEND_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/device.h"

namespace ferry::cuda {

// cudaGetDeviceCount, with any error read as 0.
int VisibleDeviceCount();

absl::StatusOr<std::unique_ptr<DeviceMemory>> CreateDeviceMemory(int index);
std::unique_ptr<DeviceMemory> CreatePinnedHostMemory();

// ferry::ReadGpuUsage (device.h), in gpu_usage.cc.
std::vector<GpuUsage> ReadGpuUsage();

}  // namespace ferry::cuda

#endif  // FERRY_RUNTIME_CUDA_CUDA_BACKEND_H_
