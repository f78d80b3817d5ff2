#include "runtime/device.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/host_kernels.h"
#include "runtime/ops/backend_ops.h"

#ifdef FERRY_HAVE_CUDA
#include "runtime/cuda/cuda_backend.h"
#endif

namespace ferry {

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (memory_ && data_) memory_->Free(data_);
    memory_ = std::exchange(other.memory_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (memory_ && data_) memory_->Free(data_);
}

namespace {

constexpr int64_t kAlignment = 64;

}  // namespace

std::string HostLikeMemory::name() const {
  return device_.is_host() ? "host" : absl::StrCat("sim ", device_.ToString());
}

absl::StatusOr<DeviceBuffer> HostLikeMemory::Allocate(int64_t bytes) {
  if (bytes < 0) return absl::InvalidArgumentError("negative allocation size");
  const int64_t rounded = std::max<int64_t>(
      (bytes + kAlignment - 1) / kAlignment * kAlignment, kAlignment);
  void* data = AllocateBytes(rounded);
  if (!data) {
    return absl::ResourceExhaustedError(
        absl::StrCat(name(), ": cannot allocate ", bytes, " bytes"));
  }
  std::memset(data, 0, rounded);
  return DeviceBuffer(this, static_cast<std::byte*>(data), bytes);
}

void* HostLikeMemory::AllocateBytes(int64_t bytes) {
  return std::aligned_alloc(kAlignment, bytes);
}

void HostLikeMemory::FreeBytes(void* data) { std::free(data); }

absl::Status HostLikeMemory::CopyFromHost(std::byte* dst, const std::byte* src,
                                          int64_t bytes) {
  if (bytes > 0) std::memmove(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status HostLikeMemory::CopyToHost(std::byte* dst, const std::byte* src,
                                        int64_t bytes) {
  if (bytes > 0) std::memmove(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status HostLikeMemory::CopyStrided(const TensorView& dst,
                                         const TensorView& src) {
  return CopyStridedHost(dst, src);
}

absl::Status HostLikeMemory::RunKernel(const KernelCall& call) {
  // A simulated device follows the CUDA backend's table: what has no device
  // kernel there is a host fallback here too (backend_ops.h).
  if (!is_host() && CudaBackendSupport(call.op) != BackendSupport::kDevice)
    RecordHostFallback(call.op);
  return RunHostKernel(call);
}

DeviceSet::DeviceSet(MemoryKind kind) : kind_(kind) {
#ifdef FERRY_HAVE_CUDA
  if (kind == MemoryKind::kCuda) {
    host_ = cuda::CreatePinnedHostMemory();
    return;
  }
#endif
  host_ = std::make_unique<HostLikeMemory>(Device::Cpu());
}

DeviceSet::~DeviceSet() = default;

absl::StatusOr<DeviceMemory*> DeviceSet::For(Device device) {
  if (device.is_host() || kind_ == MemoryKind::kHostOnly) return host_.get();
  auto it = devices_.find(device.index);
  if (it != devices_.end()) return it->second.get();
  std::unique_ptr<DeviceMemory> memory;
  if (kind_ == MemoryKind::kSim) {
    memory = std::make_unique<HostLikeMemory>(device);
  } else {
#ifdef FERRY_HAVE_CUDA
    absl::StatusOr<std::unique_ptr<DeviceMemory>> created =
        cuda::CreateDeviceMemory(device.index);
    if (!created.ok()) return created.status();
    memory = *std::move(created);
#else
    return absl::FailedPreconditionError(
        "this build has no CUDA backend (configure with FERRY_CUDA=ON)");
#endif
  }
  DeviceMemory* raw = memory.get();
  devices_.emplace(device.index, std::move(memory));
  return raw;
}

absl::Status DeviceSet::SynchronizeAll() {
  for (auto& [index, memory] : devices_) {
    if (absl::Status s = memory->Synchronize(); !s.ok()) return s;
  }
  return host_->Synchronize();
}

int CudaDeviceCount() {
#ifdef FERRY_HAVE_CUDA
  return cuda::VisibleDeviceCount();
#else
  return 0;
#endif
}

bool CudaAvailable() { return CudaDeviceCount() > 0; }

std::vector<GpuUsage> ReadGpuUsage() {
#ifdef FERRY_HAVE_CUDA
  return cuda::ReadGpuUsage();
#else
  return {};
#endif
}

}  // namespace ferry
