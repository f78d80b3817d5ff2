// The cuda backend: device memory, copies, and a delegate subgraph's
// operators as CUDA kernels.
//
// Each CudaDeviceMemory owns a stream and a cuBLAS handle on its device.
// Kernels are queued on the stream; copies to and from the host wait for it,
// so host code only ever sees finished results. Per-call temporaries come
// from the stream-ordered allocator (cudaMallocAsync / cudaFreeAsync), so
// they are freed in stream order after the kernels that use them.
//
// Operators: the declared table of runtime/ops/backend_ops.h says which
// operators run here (kDevice) and which through the host kernel
// (kHostOnly); an operator not in the table is not the backend's (the
// capability partitioner leaves it on the host; a hand-made delegate with
// one runs it on the host). Device kernels:
//  - elementwise (unary, binary, comparisons, where, copies, fills,
//    masked_fill, empty/ones) and reductions (sum, mean, amax, amin),
//    softmax and layer norm: kernels of our own (cuda_kernels.cu);
//  - mm, addmm, bmm, linear on f32/f64/f16/bf16: cuBLAS (GemmStridedBatchedEx
//    on dense copies of the operands, fp32 accumulation for the 16-bit
//    types, no TF32);
//  - convolution: im2col (nn_kernels.cu) and one cuBLAS product per batch
//    element, batched over the groups; batch norm in evaluation, 2-D max
//    pooling and embedding: nn_kernels.cu.
// Every call that runs on the host instead (a kHostOnly operator, a dtype
// or form the device kernel does not take, views of more than kMaxDims
// dims, an output overlapping an input) goes through RunOnHost, which
// counts it (RecordHostFallback): never silent.
//
// Cancellation (cancel.h): waits for the stream (copies, Synchronize) poll
// the calling thread's CancelToken instead of blocking, and a call is not
// launched once it has said stop; work already queued finishes on its own
// (the executor checks between nodes, so that is at most a few kernels).
#include "runtime/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/absl_compat.h"
#include "runtime/cancel.h"
#include "runtime/cuda/cuda_kernels.h"
#include "runtime/cuda/nn_kernels.h"
#include "runtime/host_kernels.h"
#include "runtime/host_kernels_internal.h"
#include "runtime/ops/backend_ops.h"

namespace ferry::cuda {
namespace {

absl::Status CudaError(int index, absl::string_view what, cudaError_t error) {
  return absl::InternalError(absl::StrCat("cuda:", index, ": ", what, ": ",
                                          cudaGetErrorString(error)));
}

absl::Status BlasError(int index, absl::string_view what,
                       cublasStatus_t status) {
  return absl::InternalError(absl::StrCat("cuda:", index, ": ", what,
                                          ": cuBLAS status ",
                                          static_cast<int>(status)));
}

// --- TensorView -> kernel operands
// ---------------------------------------------

bool FitsKernels(const TensorView& t) { return t.dim() <= kMaxDims; }

Shape ShapeOf(std::span<const int64_t> sizes) {
  Shape shape;
  shape.ndim = static_cast<int>(sizes.size());
  shape.numel = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    shape.sizes[d] = sizes[d];
    shape.numel *= sizes[d];
  }
  return shape;
}

// `t` read over `shape`: its dims right-aligned, 0 strides where it
// broadcasts.
Operand Aligned(const TensorView& t, const Shape& shape) {
  Operand op;
  op.data = t.data;
  op.dtype = t.dtype;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t od = shape.ndim - t.dim() + d;
    if (od >= 0 && t.sizes[d] != 1) op.strides[od] = t.strides[d];
  }
  return op;
}

Operand ScalarOperand(const KernelArg& arg) {
  Operand op;
  op.is_scalar = true;
  op.dtype = arg.kind == KernelArg::Kind::kFloat  ? DType::kF64
             : arg.kind == KernelArg::Kind::kBool ? DType::kBool
                                                  : DType::kI64;
  op.scalar_float = arg.AsDouble();
  op.scalar_int = arg.AsInt();
  return op;
}

// An argument that is a tensor or a Scalar.
Operand OperandOf(const KernelArg& arg, const Shape& shape) {
  return arg.is_tensor() ? Aligned(arg.tensor, shape) : ScalarOperand(arg);
}

bool IsFloat(const Operand& op) { return element::IsFloat(op.dtype); }

// --- Operator tables
// -------------------------------------------------------------

struct Named {
  std::string_view op;
  ElementwiseOp kernel;
};

constexpr Named kUnary[] = {
    {"aten::relu", ElementwiseOp::kRelu},
    {"aten::relu_", ElementwiseOp::kRelu},
    {"aten::neg", ElementwiseOp::kNeg},
    {"aten::neg_", ElementwiseOp::kNeg},
    {"aten::abs", ElementwiseOp::kAbs},
    {"aten::abs_", ElementwiseOp::kAbs},
    {"aten::sin", ElementwiseOp::kSin},
    {"aten::sin_", ElementwiseOp::kSin},
    {"aten::cos", ElementwiseOp::kCos},
    {"aten::tan", ElementwiseOp::kTan},
    {"aten::exp", ElementwiseOp::kExp},
    {"aten::exp_", ElementwiseOp::kExp},
    {"aten::log", ElementwiseOp::kLog},
    {"aten::sqrt", ElementwiseOp::kSqrt},
    {"aten::rsqrt", ElementwiseOp::kRsqrt},
    {"aten::tanh", ElementwiseOp::kTanh},
    {"aten::tanh_", ElementwiseOp::kTanh},
    {"aten::sigmoid", ElementwiseOp::kSigmoid},
    {"aten::sigmoid_", ElementwiseOp::kSigmoid},
    {"aten::silu", ElementwiseOp::kSilu},
    {"aten::silu_", ElementwiseOp::kSilu},
    {"aten::erf", ElementwiseOp::kErf},
    {"aten::reciprocal", ElementwiseOp::kReciprocal},
    {"aten::floor", ElementwiseOp::kFloor},
    {"aten::ceil", ElementwiseOp::kCeil},
    {"aten::trunc", ElementwiseOp::kTrunc},
    {"aten::round", ElementwiseOp::kRound},
    {"aten::sign", ElementwiseOp::kSign},
};

// Binary arithmetic; `alpha` says whether args[2] scales the other operand.
struct NamedBinary {
  std::string_view op;
  ElementwiseOp kernel;
  bool alpha;
};

constexpr NamedBinary kBinary[] = {
    {"aten::add.Tensor", ElementwiseOp::kAdd, true},
    {"aten::add.Scalar", ElementwiseOp::kAdd, true},
    {"aten::add_.Tensor", ElementwiseOp::kAdd, true},
    {"aten::add_.Scalar", ElementwiseOp::kAdd, true},
    {"aten::sub.Tensor", ElementwiseOp::kSub, true},
    {"aten::sub.Scalar", ElementwiseOp::kSub, true},
    {"aten::sub_.Tensor", ElementwiseOp::kSub, true},
    {"aten::sub_.Scalar", ElementwiseOp::kSub, true},
    {"aten::rsub.Tensor", ElementwiseOp::kRsub, true},
    {"aten::rsub.Scalar", ElementwiseOp::kRsub, true},
    {"aten::mul.Tensor", ElementwiseOp::kMul, false},
    {"aten::mul.Scalar", ElementwiseOp::kMul, false},
    {"aten::mul_.Tensor", ElementwiseOp::kMul, false},
    {"aten::mul_.Scalar", ElementwiseOp::kMul, false},
    {"aten::div.Tensor", ElementwiseOp::kDiv, false},
    {"aten::div.Scalar", ElementwiseOp::kDiv, false},
    {"aten::div_.Tensor", ElementwiseOp::kDiv, false},
    {"aten::div_.Scalar", ElementwiseOp::kDiv, false},
    {"aten::maximum", ElementwiseOp::kMaximum, false},
    {"aten::minimum", ElementwiseOp::kMinimum, false},
    {"aten::pow.Tensor_Tensor", ElementwiseOp::kPow, false},
    {"aten::pow.Tensor_Scalar", ElementwiseOp::kPow, false},
};

constexpr Named kCompare[] = {
    {"aten::eq.Tensor", ElementwiseOp::kEq},
    {"aten::eq.Scalar", ElementwiseOp::kEq},
    {"aten::ne.Tensor", ElementwiseOp::kNe},
    {"aten::ne.Scalar", ElementwiseOp::kNe},
    {"aten::lt.Tensor", ElementwiseOp::kLt},
    {"aten::lt.Scalar", ElementwiseOp::kLt},
    {"aten::le.Tensor", ElementwiseOp::kLe},
    {"aten::le.Scalar", ElementwiseOp::kLe},
    {"aten::gt.Tensor", ElementwiseOp::kGt},
    {"aten::gt.Scalar", ElementwiseOp::kGt},
    {"aten::ge.Tensor", ElementwiseOp::kGe},
    {"aten::ge.Scalar", ElementwiseOp::kGe},
    {"aten::logical_and", ElementwiseOp::kLogicalAnd},
    {"aten::logical_or", ElementwiseOp::kLogicalOr},
    {"aten::logical_xor", ElementwiseOp::kLogicalXor},
};

template <typename Table>
const auto* Find(const Table& table, std::string_view op) {
  for (const auto& entry : table)
    if (entry.op == op) return &entry;
  return static_cast<decltype(&table[0])>(nullptr);
}

// Copies whose source is args[0], converted and broadcast to the output.
constexpr std::string_view kCopyFromSelf[] = {
    "aten::clone",    "aten::contiguous", "aten::_to_copy",
    "aten::to.dtype", "aten::alias_copy", "aten::expand_copy"};

// --- Memories
// ------------------------------------------------------------------------

class CudaDeviceMemory final : public DeviceMemory {
 public:
  explicit CudaDeviceMemory(int index) : index_(index) {}

  absl::Status Init() {
    if (cudaError_t e = cudaSetDevice(index_); e != cudaSuccess)
      return CudaError(index_, "cudaSetDevice", e);
    if (cudaError_t e =
            cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
        e != cudaSuccess)
      return CudaError(index_, "cudaStreamCreate", e);
    if (cublasStatus_t s = cublasCreate(&blas_); s != CUBLAS_STATUS_SUCCESS)
      return BlasError(index_, "cublasCreate", s);
    if (cublasStatus_t s = cublasSetStream(blas_, stream_);
        s != CUBLAS_STATUS_SUCCESS)
      return BlasError(index_, "cublasSetStream", s);
    // Plain fp32 arithmetic (no TF32) for f32 products.
    cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH);
    return absl::OkStatus();
  }

  ~CudaDeviceMemory() override {
    cudaSetDevice(index_);
    if (stream_) cudaStreamSynchronize(stream_);
    if (blas_) cublasDestroy(blas_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Device device() const override { return Device::Cuda(index_); }
  std::string name() const override { return absl::StrCat("cuda:", index_); }

  absl::StatusOr<DeviceBuffer> Allocate(int64_t bytes) override {
    cudaSetDevice(index_);
    void* data = nullptr;
    const int64_t rounded = std::max<int64_t>((bytes + 255) / 256 * 256, 256);
    if (cudaError_t e = cudaMalloc(&data, rounded); e != cudaSuccess)
      return CudaError(index_, absl::StrCat("cudaMalloc(", bytes, ")"), e);
    if (cudaError_t e = cudaMemsetAsync(data, 0, rounded, stream_);
        e != cudaSuccess)
      return CudaError(index_, "cudaMemset", e);
    if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess)
      return CudaError(index_, "cudaStreamSynchronize", e);
    return DeviceBuffer(this, static_cast<std::byte*>(data), bytes);
  }

  absl::Status CopyFromHost(std::byte* dst, const std::byte* src,
                            int64_t bytes) override {
    return Copy(dst, src, bytes, cudaMemcpyHostToDevice, "H2D copy");
  }
  absl::Status CopyToHost(std::byte* dst, const std::byte* src,
                          int64_t bytes) override {
    return Copy(dst, src, bytes, cudaMemcpyDeviceToHost, "D2H copy");
  }

  absl::Status CopyStrided(const TensorView& dst,
                           const TensorView& src) override {
    KernelArg arg;
    arg.kind = KernelArg::Kind::kTensor;
    arg.tensor = src;
    KernelCall call{"aten::copy_", std::span<const KernelArg>(&arg, 1),
                    std::span<const TensorView>(&dst, 1)};
    if (!FitsKernels(dst) || !FitsKernels(src) ||
        OutputsOverlapInputs(call, true))
      return RunOnHost(call, [&](const KernelCall& host) {
        return CopyStridedHost(host.outputs[0], host.args[0].tensor);
      });
    if (!host::BroadcastsTo(src, dst.sizes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("copy: source ", src.DebugString(),
                       " does not broadcast to ", dst.DebugString()));
    }
    return Elementwise(ElementwiseOp::kCopy, dst,
                       Aligned(src, ShapeOf(dst.sizes)), {}, {}, 0, 0, 0,
                       IsFloat(Aligned(src, ShapeOf(dst.sizes))) ||
                           element::IsFloat(dst.dtype));
  }

  absl::Status RunKernel(const KernelCall& call) override;

  absl::Status Synchronize() override {
    cudaSetDevice(index_);
    return WaitForStream("cudaStreamSynchronize");
  }

 protected:
  void Free(std::byte* data) override {
    cudaSetDevice(index_);
    cudaStreamSynchronize(stream_);
    cudaFree(data);
  }

 private:
  // Temporaries of one kernel call, freed in stream order.
  class Temporaries {
   public:
    explicit Temporaries(CudaDeviceMemory& memory) : memory_(memory) {}
    ~Temporaries() {
      for (void* p : blocks_) cudaFreeAsync(p, memory_.stream_);
    }
    absl::StatusOr<TensorView> Dense(DType dtype,
                                     std::span<const int64_t> sizes) {
      int64_t n = 1;
      for (int64_t s : sizes) n *= s;
      void* data = nullptr;
      const int64_t bytes = std::max<int64_t>(n * ElementSize(dtype), 1);
      if (cudaError_t e = cudaMallocAsync(&data, bytes, memory_.stream_);
          e != cudaSuccess)
        return CudaError(memory_.index_, "cudaMallocAsync", e);
      blocks_.push_back(data);
      return ContiguousView(data, dtype, sizes);
    }

   private:
    CudaDeviceMemory& memory_;
    std::vector<void*> blocks_;
  };

  absl::Status Copy(std::byte* dst, const std::byte* src, int64_t bytes,
                    cudaMemcpyKind kind, absl::string_view what) {
    if (bytes <= 0) return absl::OkStatus();
    cudaSetDevice(index_);
    if (absl::Status stop = CheckStop(absl::StrCat("cuda:", index_, ": "));
        !stop.ok())
      return stop;
    if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, stream_);
        e != cudaSuccess)
      return CudaError(index_, what, e);
    return WaitForStream(what);
  }

  // Waits until the stream is idle. Without a CancelToken it blocks; with
  // one it polls, and returns the token's stop (CANCELLED) as soon as it
  // says stop, leaving the queued work to finish on its own.
  absl::Status WaitForStream(absl::string_view what) {
    if (CurrentCancelToken() == nullptr) {
      if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess)
        return CudaError(index_, what, e);
      return absl::OkStatus();
    }
    while (true) {
      cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) return absl::OkStatus();
      if (e != cudaErrorNotReady) return CudaError(index_, what, e);
      if (absl::Status stop = CheckStop(absl::StrCat("cuda:", index_, ": "));
          !stop.ok())
        return stop;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  absl::Status Check(cudaError_t e, const KernelCall& call) {
    if (e == cudaSuccess) return absl::OkStatus();
    return CudaError(index_, AsAbsl(call.op), e);
  }

  absl::Status Elementwise(ElementwiseOp op, const TensorView& out,
                           const Operand& a, const Operand& b, const Operand& c,
                           double p0, double p1, int flags,
                           bool float_compute) {
    const Shape shape = ShapeOf(out.sizes);
    Operand o = Aligned(out, shape);
    cudaError_t e = LaunchElementwise(op, shape, o, a, b, c, p0, p1, flags,
                                      float_compute, stream_);
    if (e != cudaSuccess) return CudaError(index_, "elementwise kernel", e);
    return absl::OkStatus();
  }

  // Runs `host_kernel` on host copies of the call's tensors, then copies the
  // outputs back.
  template <typename Fn>
  absl::Status RunOnHost(const KernelCall& call, Fn&& host_kernel);
  absl::Status RunOnHost(const KernelCall& call) {
    return RunOnHost(
        call, [](const KernelCall& host) { return RunHostKernel(host); });
  }

  absl::Status RunElementwise(const KernelCall& call);
  absl::Status RunMatmul(const KernelCall& call);
  absl::Status Gemm(const KernelCall& call, const TensorView& a,
                    const TensorView& b, const TensorView* c_init, double alpha,
                    double beta, const TensorView& out,
                    Temporaries& temporaries);
  absl::Status RunReduce(const KernelCall& call, ReduceOp op, bool has_dims);
  absl::Status RunSoftmax(const KernelCall& call, bool log);
  absl::Status RunLayerNorm(const KernelCall& call);
  absl::Status RunCat(const KernelCall& call);
  absl::Status RunConvolution(const KernelCall& call);
  absl::Status RunBatchNorm(const KernelCall& call);
  absl::Status RunMaxPool(const KernelCall& call);
  absl::Status RunEmbedding(const KernelCall& call);
  absl::Status RunFill(const KernelCall& call, double value);
  absl::Status RunMaskedFill(const KernelCall& call);
  absl::Status RunUnsafeView(const KernelCall& call);

  int index_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
};

template <typename Fn>
absl::Status CudaDeviceMemory::RunOnHost(const KernelCall& call,
                                         Fn&& host_kernel) {
  RecordHostFallback(call.op);
  cudaSetDevice(index_);
  if (absl::Status s = Synchronize(); !s.ok()) return s;
  std::vector<std::vector<std::byte>> staging;
  staging.reserve(call.args.size() * 2 + call.outputs.size());
  auto stage =
      [&](const TensorView& device_view) -> absl::StatusOr<TensorView> {
    auto [first, last] = device_view.ByteExtent();
    staging.emplace_back(std::max<int64_t>(last, 1));
    TensorView host_view = device_view;
    host_view.data = staging.back().data();
    if (last > first) {
      absl::Status s =
          CopyToHost(staging.back().data(), device_view.bytes(), last);
      if (!s.ok()) return s;
    }
    return host_view;
  };
  std::vector<KernelArg> args(call.args.begin(), call.args.end());
  for (KernelArg& arg : args) {
    if (arg.kind == KernelArg::Kind::kTensor) {
      absl::StatusOr<TensorView> v = stage(arg.tensor);
      if (!v.ok()) return v.status();
      arg.tensor = *v;
    } else if (arg.kind == KernelArg::Kind::kTensorList) {
      for (TensorView& t : arg.tensors) {
        absl::StatusOr<TensorView> v = stage(t);
        if (!v.ok()) return v.status();
        t = *v;
      }
    }
  }
  std::vector<TensorView> outputs;
  for (const TensorView& out : call.outputs) {
    absl::StatusOr<TensorView> v = stage(out);
    if (!v.ok()) return v.status();
    outputs.push_back(*v);
  }
  if (absl::Status s = host_kernel(KernelCall{call.op, args, outputs}); !s.ok())
    return s;
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto [first, last] = call.outputs[i].ByteExtent();
    if (last <= first) continue;
    absl::Status s =
        CopyFromHost(call.outputs[i].bytes(), outputs[i].bytes(), last);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CudaDeviceMemory::RunKernel(const KernelCall& call) {
  if (StopRequested()) return CheckStop(absl::StrCat("cuda:", index_, ": "));
  cudaSetDevice(index_);
  std::string_view op = call.op;
  if (op.ends_with(".default")) op.remove_suffix(8);
  // The declared table decides: host-only and unknown operators run the
  // host kernel (counted).
  if (CudaBackendSupport(op) != BackendSupport::kDevice) return RunOnHost(call);
  for (const KernelArg& arg : call.args) {
    if (arg.kind == KernelArg::Kind::kTensor && !FitsKernels(arg.tensor))
      return RunOnHost(call);
    if (arg.kind == KernelArg::Kind::kTensorList)
      for (const TensorView& t : arg.tensors)
        if (!FitsKernels(t)) return RunOnHost(call);
  }
  for (const TensorView& out : call.outputs)
    if (!FitsKernels(out)) return RunOnHost(call);

  const bool elementwise =
      Find(kUnary, op) || Find(kBinary, op) || Find(kCompare, op) ||
      op == "aten::gelu" || op == "aten::gelu_" || op == "aten::clamp" ||
      op == "aten::clamp_" || op == "aten::hardtanh" ||
      op == "aten::hardtanh_" || op == "aten::leaky_relu" ||
      op == "aten::leaky_relu_" || op == "aten::logical_not" ||
      op == "aten::where.self" || op == "aten::copy_" ||
      op == "aten::fill_.Scalar" || op == "aten::zero_" ||
      std::find(std::begin(kCopyFromSelf), std::end(kCopyFromSelf), op) !=
          std::end(kCopyFromSelf);
  // In-place computation over overlapping views: the host kernel's
  // temporaries keep it correct.
  if (OutputsOverlapInputs(call, elementwise)) return RunOnHost(call);
  if (elementwise) return RunElementwise(call);
  if (op == "aten::mm" || op == "aten::addmm" || op == "aten::bmm" ||
      op == "aten::linear")
    return RunMatmul(call);
  if (op == "aten::sum.dim_IntList")
    return RunReduce(call, ReduceOp::kSum, true);
  if (op == "aten::sum") return RunReduce(call, ReduceOp::kSum, false);
  if (op == "aten::mean.dim") return RunReduce(call, ReduceOp::kMean, true);
  if (op == "aten::mean") return RunReduce(call, ReduceOp::kMean, false);
  if (op == "aten::amax") return RunReduce(call, ReduceOp::kMax, true);
  if (op == "aten::amin") return RunReduce(call, ReduceOp::kMin, true);
  if (op == "aten::_softmax" || op == "aten::softmax.int")
    return RunSoftmax(call, false);
  if (op == "aten::_log_softmax" || op == "aten::log_softmax.int")
    return RunSoftmax(call, true);
  if (op == "aten::native_layer_norm") return RunLayerNorm(call);
  if (op == "aten::cat") return RunCat(call);
  if (op == "aten::convolution") return RunConvolution(call);
  if (op == "aten::native_batch_norm" ||
      op == "aten::_native_batch_norm_legit_no_training")
    return RunBatchNorm(call);
  if (op == "aten::max_pool2d_with_indices") return RunMaxPool(call);
  if (op == "aten::embedding") return RunEmbedding(call);
  if (op == "aten::empty.memory_format" || op == "aten::zeros")
    return RunFill(call, 0);
  if (op == "aten::ones") return RunFill(call, 1);
  if (op == "aten::masked_fill.Scalar") return RunMaskedFill(call);
  if (op == "aten::_unsafe_view") return RunUnsafeView(call);
  // Declared as a device kernel in backend_ops.cc but not dispatched here.
  return absl::InternalError(absl::StrCat(
      "cuda:", index_, ": ", AsAbsl(call.op),
      " is declared with a device kernel but the backend has none"));
}

absl::Status CudaDeviceMemory::RunElementwise(const KernelCall& call) {
  std::string_view op = call.op;
  if (op.ends_with(".default")) op.remove_suffix(8);
  const TensorView& out = call.outputs[0];
  const Shape shape = ShapeOf(out.sizes);
  const bool out_float = element::IsFloat(out.dtype);
  auto check_broadcast = [&](const KernelArg& arg) -> absl::Status {
    if (!arg.is_tensor() || host::BroadcastsTo(arg.tensor, out.sizes))
      return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(call.op), ": operand ", arg.tensor.DebugString(),
                     " does not broadcast to the output ", out.DebugString()));
  };
  for (const KernelArg& arg : call.args)
    if (absl::Status s = check_broadcast(arg); !s.ok()) return s;

  auto copy_from = [&](const KernelArg& src) {
    Operand a = OperandOf(src, shape);
    return Elementwise(ElementwiseOp::kCopy, out, a, {}, {}, 0, 0, 0,
                       out_float || IsFloat(a));
  };
  if (std::find(std::begin(kCopyFromSelf), std::end(kCopyFromSelf), op) !=
      std::end(kCopyFromSelf))
    return copy_from(call.args[0]);
  if (op == "aten::copy_") return copy_from(call.args[1]);
  if (op == "aten::fill_.Scalar") return copy_from(call.args[1]);
  if (op == "aten::zero_") {
    KernelArg zero;
    zero.kind = KernelArg::Kind::kInt;
    return copy_from(zero);
  }
  if (const Named* unary = Find(kUnary, op)) {
    // Negating bools is an error; the host kernel says so.
    if (unary->kernel == ElementwiseOp::kNeg && out.dtype == DType::kBool)
      return RunOnHost(call);
    Operand a = OperandOf(call.args[0], shape);
    return Elementwise(unary->kernel, out, a, {}, {}, 0, 0, 0,
                       out_float || IsFloat(a));
  }
  if (op == "aten::gelu" || op == "aten::gelu_") {
    const std::string approximate =
        call.args.size() > 1 && call.args[1].kind == KernelArg::Kind::kString
            ? call.args[1].string_value
            : "none";
    if (approximate != "none" && approximate != "tanh") return RunOnHost(call);
    Operand a = OperandOf(call.args[0], shape);
    return Elementwise(approximate == "tanh" ? ElementwiseOp::kGeluTanh
                                             : ElementwiseOp::kGeluErf,
                       out, a, {}, {}, 0, 0, 0, true);
  }
  if (op == "aten::clamp" || op == "aten::clamp_" || op == "aten::hardtanh" ||
      op == "aten::hardtanh_") {
    const bool hardtanh = op.starts_with("aten::hardtanh");
    const KernelArg* lo = call.args.size() > 1 ? &call.args[1] : nullptr;
    const KernelArg* hi = call.args.size() > 2 ? &call.args[2] : nullptr;
    int flags = 0;
    double p0 = hardtanh ? -1 : 0, p1 = hardtanh ? 1 : 0;
    if (hardtanh || (lo && lo->is_number())) flags |= 1;
    if (hardtanh || (hi && hi->is_number())) flags |= 2;
    if (lo && lo->is_number()) p0 = lo->AsDouble();
    if (hi && hi->is_number()) p1 = hi->AsDouble();
    Operand a = OperandOf(call.args[0], shape);
    return Elementwise(ElementwiseOp::kClamp, out, a, {}, {}, p0, p1, flags,
                       out_float || IsFloat(a));
  }
  if (op == "aten::leaky_relu" || op == "aten::leaky_relu_") {
    const double slope = call.args.size() > 1 && call.args[1].is_number()
                             ? call.args[1].AsDouble()
                             : 0.01;
    Operand a = OperandOf(call.args[0], shape);
    return Elementwise(ElementwiseOp::kLeakyRelu, out, a, {}, {}, slope, 0, 0,
                       true);
  }
  if (const NamedBinary* binary = Find(kBinary, op)) {
    Operand a = OperandOf(call.args[0], shape);
    Operand b = OperandOf(call.args[1], shape);
    const bool float_compute = out_float || IsFloat(a) || IsFloat(b);
    // Integer true division and negative integer powers: the host kernel
    // reports the error.
    if (!float_compute && (binary->kernel == ElementwiseOp::kDiv ||
                           binary->kernel == ElementwiseOp::kPow))
      return RunOnHost(call);
    if (out.dtype == DType::kBool && binary->kernel == ElementwiseOp::kSub)
      return RunOnHost(call);
    double alpha = 1;
    if (binary->alpha && call.args.size() > 2 && call.args[2].is_number())
      alpha = float_compute ? call.args[2].AsDouble()
                            : static_cast<double>(call.args[2].AsInt());
    return Elementwise(binary->kernel, out, a, b, {}, alpha, 0, 0,
                       float_compute);
  }
  if (const Named* compare = Find(kCompare, op)) {
    Operand a = OperandOf(call.args[0], shape);
    Operand b = OperandOf(call.args[1], shape);
    return Elementwise(compare->kernel, out, a, b, {}, 0, 0, 0,
                       IsFloat(a) || IsFloat(b));
  }
  if (op == "aten::logical_not") {
    Operand a = OperandOf(call.args[0], shape);
    return Elementwise(ElementwiseOp::kLogicalNot, out, a, {}, {}, 0, 0, 0,
                       IsFloat(a));
  }
  if (op == "aten::where.self") {
    Operand cond = OperandOf(call.args[0], shape);
    Operand a = OperandOf(call.args[1], shape);
    Operand b = OperandOf(call.args[2], shape);
    return Elementwise(ElementwiseOp::kWhere, out, cond, a, b, 0, 0, 0,
                       out_float || IsFloat(a) || IsFloat(b));
  }
  return RunOnHost(call);
}

// C[b] = alpha * A[b] @ B[b] + beta * C_init, on dense copies; the result is
// copied into `out` ([batch, M, N], any strides).
absl::Status CudaDeviceMemory::Gemm(const KernelCall& call, const TensorView& a,
                                    const TensorView& b,
                                    const TensorView* c_init, double alpha,
                                    double beta, const TensorView& out,
                                    Temporaries& temporaries) {
  const int64_t batch = a.sizes[0], M = a.sizes[1], K = a.sizes[2],
                N = b.sizes[2];
  if (b.sizes[0] != batch || b.sizes[1] != K || out.sizes[0] != batch ||
      out.sizes[1] != M || out.sizes[2] != N) {
    return absl::InvalidArgumentError(absl::StrCat(
        AsAbsl(call.op), ": shapes ", a.DebugString(), " @ ", b.DebugString(),
        " -> ", out.DebugString(), " do not fit"));
  }
  if (batch == 0 || M == 0 || N == 0) return absl::OkStatus();
  const DType dtype = out.dtype;
  cudaDataType_t type;
  cublasComputeType_t compute;
  switch (dtype) {
    case DType::kF32:
      type = CUDA_R_32F;
      compute = CUBLAS_COMPUTE_32F;
      break;
    case DType::kF64:
      type = CUDA_R_64F;
      compute = CUBLAS_COMPUTE_64F;
      break;
    case DType::kF16:
      type = CUDA_R_16F;
      compute = CUBLAS_COMPUTE_32F;
      break;
    case DType::kBF16:
      type = CUDA_R_16BF;
      compute = CUBLAS_COMPUTE_32F;
      break;
    default:
      return absl::InternalError("Gemm: unsupported dtype");
  }
  auto dense_copy =
      [&](const TensorView& src,
          std::span<const int64_t> sizes) -> absl::StatusOr<TensorView> {
    absl::StatusOr<TensorView> dense = temporaries.Dense(dtype, sizes);
    if (!dense.ok()) return dense.status();
    const Shape shape = ShapeOf(dense->sizes);
    Operand s = Aligned(src, shape);
    absl::Status st =
        Elementwise(ElementwiseOp::kCopy, *dense, s, {}, {}, 0, 0, 0, true);
    if (!st.ok()) return st;
    return *dense;
  };
  absl::StatusOr<TensorView> ad = dense_copy(a, a.sizes);
  if (!ad.ok()) return ad.status();
  absl::StatusOr<TensorView> bd = dense_copy(b, b.sizes);
  if (!bd.ok()) return bd.status();
  absl::StatusOr<TensorView> cd = c_init ? dense_copy(*c_init, out.sizes)
                                         : temporaries.Dense(dtype, out.sizes);
  if (!cd.ok()) return cd.status();
  if (!c_init) beta = 0;
  // Row-major C = A @ B is column-major C^T = B^T @ A^T: swap the operands.
  const float alpha32 = static_cast<float>(alpha),
              beta32 = static_cast<float>(beta);
  const void* alpha_ptr = compute == CUBLAS_COMPUTE_64F
                              ? static_cast<const void*>(&alpha)
                              : static_cast<const void*>(&alpha32);
  const void* beta_ptr = compute == CUBLAS_COMPUTE_64F
                             ? static_cast<const void*>(&beta)
                             : static_cast<const void*>(&beta32);
  cublasStatus_t status = cublasGemmStridedBatchedEx(
      blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
      static_cast<int>(K), alpha_ptr, bd->data, type, static_cast<int>(N),
      K * N, ad->data, type, static_cast<int>(K), M * K, beta_ptr, cd->data,
      type, static_cast<int>(N), M * N, static_cast<int>(batch), compute,
      CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS)
    return BlasError(index_, "cublasGemmStridedBatchedEx", status);
  return Elementwise(ElementwiseOp::kCopy, out,
                     Aligned(*cd, ShapeOf(out.sizes)), {}, {}, 0, 0, 0, true);
}

absl::Status CudaDeviceMemory::RunMatmul(const KernelCall& call) {
  std::string_view op = call.op;
  const TensorView& out = call.outputs[0];
  // cuBLAS for floating dtypes that agree, and a non-empty inner dim.
  auto blas_ok = [&](std::initializer_list<const TensorView*> views) {
    if (!IsFloatingPoint(out.dtype)) return false;
    for (const TensorView* v : views)
      if (v->dtype != out.dtype) return false;
    return true;
  };
  auto batched = [](TensorView t) {  // [M,K] -> [1,M,K]
    t.sizes.insert(t.sizes.begin(), 1);
    t.strides.insert(t.strides.begin(), 0);
    return t;
  };
  Temporaries temporaries(*this);
  if (op == "aten::mm" || op == "aten::bmm") {
    const TensorView& a = call.args[0].tensor;
    const TensorView& b = call.args[1].tensor;
    const int64_t rank = op == "aten::mm" ? 2 : 3;
    if (a.dim() != rank || b.dim() != rank || out.dim() != rank ||
        !blas_ok({&a, &b}) || a.sizes[rank - 1] == 0)
      return RunOnHost(call);
    if (rank == 2)
      return Gemm(call, batched(a), batched(b), nullptr, 1, 0, batched(out),
                  temporaries);
    return Gemm(call, a, b, nullptr, 1, 0, out, temporaries);
  }
  if (op == "aten::addmm") {
    const TensorView& self = call.args[0].tensor;
    const TensorView& a = call.args[1].tensor;
    const TensorView& b = call.args[2].tensor;
    const double beta =
        call.args[3].is_number() ? call.args[3].AsDouble() : 1.0;
    const double alpha =
        call.args[4].is_number() ? call.args[4].AsDouble() : 1.0;
    if (a.dim() != 2 || b.dim() != 2 || out.dim() != 2 ||
        !blas_ok({&a, &b, &self}) || a.sizes[1] == 0 ||
        !host::BroadcastsTo(self, out.sizes))
      return RunOnHost(call);
    TensorView c_init = batched(self);
    return Gemm(call, batched(a), batched(b), beta != 0 ? &c_init : nullptr,
                alpha, beta, batched(out), temporaries);
  }
  // linear(input [*, K], weight [N, K], bias?)
  const TensorView& input = call.args[0].tensor;
  const TensorView& weight = call.args[1].tensor;
  const KernelArg& bias = call.args[2];
  if (input.dim() < 1 || weight.dim() != 2 || out.dim() != input.dim() ||
      !blas_ok({&input, &weight}) ||
      (bias.is_tensor() && bias.tensor.dtype != out.dtype) ||
      input.sizes[input.dim() - 1] == 0)
    return RunOnHost(call);
  const int64_t K = input.sizes[input.dim() - 1], N = weight.sizes[0];
  const int64_t M = input.numel() / K;
  // Dense input [1, M, K]; weight^T [1, K, N]; result [1, M, N] then `out`.
  absl::StatusOr<TensorView> input_dense =
      temporaries.Dense(out.dtype, input.sizes);
  if (!input_dense.ok()) return input_dense.status();
  if (absl::Status s = Elementwise(ElementwiseOp::kCopy, *input_dense,
                                   Aligned(input, ShapeOf(input.sizes)), {}, {},
                                   0, 0, 0, true);
      !s.ok())
    return s;
  std::array<int64_t, 3> a_sizes{1, M, K}, c_sizes{1, M, N};
  TensorView a = ContiguousView(input_dense->data, out.dtype, a_sizes);
  TensorView w_t = batched(weight);
  std::swap(w_t.sizes[1], w_t.sizes[2]);
  std::swap(w_t.strides[1], w_t.strides[2]);
  absl::StatusOr<TensorView> result = temporaries.Dense(out.dtype, c_sizes);
  if (!result.ok()) return result.status();
  TensorView bias_view = bias.is_tensor() ? bias.tensor : TensorView{};
  if (absl::Status s =
          Gemm(call, a, w_t, bias.is_tensor() ? &bias_view : nullptr, 1,
               bias.is_tensor() ? 1 : 0, *result, temporaries);
      !s.ok())
    return s;
  TensorView result_as_out = ContiguousView(result->data, out.dtype, out.sizes);
  return Elementwise(ElementwiseOp::kCopy, out,
                     Aligned(result_as_out, ShapeOf(out.sizes)), {}, {}, 0, 0,
                     0, true);
}

absl::Status CudaDeviceMemory::RunReduce(const KernelCall& call, ReduceOp op,
                                         bool has_dims) {
  const TensorView& in = call.args[0].tensor;
  const TensorView& out = call.outputs[0];
  absl::StatusOr<host::ReductionPlan> plan =
      host::PlanReduction(call, in, has_dims ? &call.args[1] : nullptr, out);
  if (!plan.ok()) return plan.status();
  if ((op == ReduceOp::kMax || op == ReduceOp::kMin) && plan->count == 0 &&
      out.numel() > 0)
    return RunOnHost(call);  // the host kernel reports the error
  if (op == ReduceOp::kMean && !IsFloatingPoint(out.dtype))
    return RunOnHost(call);
  const Shape kept = ShapeOf(plan->kept.sizes);
  const Shape reduced = ShapeOf(plan->reduced.sizes);
  const bool float_compute =
      IsFloatingPoint(in.dtype) || IsFloatingPoint(out.dtype);
  return Check(
      LaunchReduce(op, kept, Aligned(plan->out, kept),
                   Aligned(plan->kept, kept), reduced,
                   Aligned(plan->reduced, reduced), float_compute, stream_),
      call);
}

absl::Status CudaDeviceMemory::RunSoftmax(const KernelCall& call, bool log) {
  const TensorView& in = call.args[0].tensor;
  const TensorView& out = call.outputs[0];
  if (!IsFloatingPoint(out.dtype) || in.sizes != out.sizes || in.dim() == 0)
    return RunOnHost(call);
  int64_t dim = call.args[1].AsInt();
  if (dim < -in.dim() || dim >= in.dim()) return RunOnHost(call);
  if (dim < 0) dim += in.dim();
  TensorView in_rows = in, out_rows = out;
  in_rows.sizes.erase(in_rows.sizes.begin() + dim);
  in_rows.strides.erase(in_rows.strides.begin() + dim);
  out_rows.sizes.erase(out_rows.sizes.begin() + dim);
  out_rows.strides.erase(out_rows.strides.begin() + dim);
  const Shape rows = ShapeOf(in_rows.sizes);
  return Check(LaunchSoftmax(rows, Aligned(in_rows, rows),
                             Aligned(out_rows, rows), in.sizes[dim],
                             in.strides[dim], out.strides[dim], log, stream_),
               call);
}

absl::Status CudaDeviceMemory::RunLayerNorm(const KernelCall& call) {
  const TensorView& in = call.args[0].tensor;
  const std::vector<int64_t>& shape = call.args[1].ints;
  const int64_t k = static_cast<int64_t>(shape.size());
  if (call.outputs.size() != 3 || k == 0 || k > in.dim() ||
      call.outputs[0].sizes != in.sizes)
    return RunOnHost(call);
  const int64_t outer_dims = in.dim() - k;
  auto part = [](const TensorView& t, int64_t first, int64_t count) {
    TensorView p = t;
    p.sizes.assign(t.sizes.begin() + first, t.sizes.begin() + first + count);
    p.strides.assign(t.strides.begin() + first,
                     t.strides.begin() + first + count);
    return p;
  };
  const TensorView& out = call.outputs[0];
  const TensorView in_outer = part(in, 0, outer_dims),
                   in_inner = part(in, outer_dims, k);
  const TensorView out_outer = part(out, 0, outer_dims),
                   out_inner = part(out, outer_dims, k);
  if (std::vector<int64_t>(in_inner.sizes.begin(), in_inner.sizes.end()) !=
      shape)
    return RunOnHost(call);
  const Shape outer = ShapeOf(in_outer.sizes), inner = ShapeOf(in_inner.sizes);
  // mean / rstd: indexed by the outer dims (trailing 1s ignored).
  std::array<Operand, 2> stats;
  for (int s = 0; s < 2; ++s) {
    const TensorView& t = call.outputs[1 + s];
    if (t.numel() != in_outer.numel()) return RunOnHost(call);
    TensorView dense = ContiguousView(t.data, t.dtype, in_outer.sizes);
    stats[s] = Aligned(
        t.dim() >= outer_dims && part(t, 0, outer_dims).sizes == in_outer.sizes
            ? part(t, 0, outer_dims)
            : dense,
        outer);
  }
  Operand weight, bias;
  if (call.args[2].is_tensor()) weight = Aligned(call.args[2].tensor, inner);
  if (call.args[3].is_tensor()) bias = Aligned(call.args[3].tensor, inner);
  return Check(
      LaunchLayerNorm(outer, Aligned(in_outer, outer),
                      Aligned(out_outer, outer), stats[0], stats[1], inner,
                      Aligned(in_inner, inner), Aligned(out_inner, inner),
                      weight, bias, call.args[4].AsDouble(), stream_),
      call);
}

absl::Status CudaDeviceMemory::RunCat(const KernelCall& call) {
  const TensorView& out = call.outputs[0];
  if (out.dim() == 0) return RunOnHost(call);
  int64_t dim = call.args.size() > 1 ? call.args[1].AsInt() : 0;
  if (dim < -out.dim() || dim >= out.dim()) return RunOnHost(call);
  if (dim < 0) dim += out.dim();
  int64_t offset = 0;
  for (const TensorView& in : call.args[0].tensors) {
    if (in.dim() == 1 && in.sizes[0] == 0) continue;
    bool fits =
        in.dim() == out.dim() && offset + in.sizes[dim] <= out.sizes[dim];
    for (int64_t d = 0; fits && d < out.dim(); ++d)
      if (d != dim && in.sizes[d] != out.sizes[d]) fits = false;
    if (!fits) return RunOnHost(call);  // the host kernel says why
    offset += in.sizes[dim];
  }
  if (offset != out.sizes[dim]) return RunOnHost(call);
  offset = 0;
  for (const TensorView& in : call.args[0].tensors) {
    if (in.dim() == 1 && in.sizes[0] == 0) continue;
    TensorView slot = out;
    slot.data = out.bytes() + offset * out.strides[dim] * out.element_size();
    slot.sizes[dim] = in.sizes[dim];
    const Shape shape = ShapeOf(slot.sizes);
    Operand src = Aligned(in, shape);
    absl::Status s = Elementwise(ElementwiseOp::kCopy, slot, src, {}, {}, 0, 0,
                                 0, IsFloat(src) || IsFloatingPoint(out.dtype));
    if (!s.ok()) return s;
    offset += in.sizes[dim];
  }
  return absl::OkStatus();
}

namespace {

bool BlasTypes(DType dtype, cudaDataType_t* type,
               cublasComputeType_t* compute) {
  switch (dtype) {
    case DType::kF32:
      *type = CUDA_R_32F;
      *compute = CUBLAS_COMPUTE_32F;
      return true;
    case DType::kF64:
      *type = CUDA_R_64F;
      *compute = CUBLAS_COMPUTE_64F;
      return true;
    case DType::kF16:
      *type = CUDA_R_16F;
      *compute = CUBLAS_COMPUTE_32F;
      return true;
    case DType::kBF16:
      *type = CUDA_R_16BF;
      *compute = CUBLAS_COMPUTE_32F;
      return true;
    default:
      return false;
  }
}

// A per-channel [C] tensor as an operand whose stride is on dim 1.
Operand ChannelOperand(const KernelArg& arg) {
  Operand op;
  if (!arg.is_tensor()) return op;
  op.data = arg.tensor.data;
  op.dtype = arg.tensor.dtype;
  op.strides[1] =
      arg.tensor.dim() > 0 ? arg.tensor.strides[arg.tensor.dim() - 1] : 0;
  return op;
}

// An int[2] argument that may hold one value for both dims.
void IntPair(const KernelArg& arg, int64_t fallback_h, int64_t fallback_w,
             int64_t& h, int64_t& w) {
  if (arg.kind == KernelArg::Kind::kInts && arg.ints.size() == 1) {
    h = w = arg.ints[0];
  } else if (arg.kind == KernelArg::Kind::kInts && arg.ints.size() >= 2) {
    h = arg.ints[0];
    w = arg.ints[1];
  } else if (arg.kind == KernelArg::Kind::kInt) {
    h = w = arg.int_value;
  } else {
    h = fallback_h;
    w = fallback_w;
  }
}

}  // namespace

// convolution(input, weight, bias?, stride, padding, dilation, transposed,
//             output_padding, groups): im2col + one cuBLAS product per batch
// element, batched over the groups.
absl::Status CudaDeviceMemory::RunConvolution(const KernelCall& call) {
  TensorView in = call.args[0].tensor;
  TensorView weight = call.args[1].tensor;
  const KernelArg& bias = call.args[2];
  TensorView out = call.outputs[0];
  const DType dt = out.dtype;
  cudaDataType_t type;
  cublasComputeType_t compute;
  if (call.args[6].bool_value || !BlasTypes(dt, &type, &compute) ||
      in.dtype != dt || weight.dtype != dt ||
      (bias.is_tensor() && bias.tensor.dtype != dt) ||
      (in.dim() != 3 && in.dim() != 4) || weight.dim() != in.dim() ||
      out.dim() != in.dim())
    return RunOnHost(call);  // the host kernel computes it or says why not
  auto param = [&](size_t i, int64_t d, int64_t fallback) {
    const std::vector<int64_t>& v = call.args[i].ints;
    if (v.empty()) return fallback;
    return v.size() == 1 ? v[0] : v[std::min<size_t>(d, v.size() - 1)];
  };
  ConvParams p;
  p.sh = 1, p.ph = 0, p.dh = 1;
  if (in.dim() == 3) {
    for (TensorView* t : {&in, &weight, &out}) {
      t->sizes.insert(t->sizes.begin() + 2, 1);
      t->strides.insert(t->strides.begin() + 2, 0);
    }
    p.sw = param(3, 0, 1), p.pw = param(4, 0, 0), p.dw = param(5, 0, 1);
  } else {
    p.sh = param(3, 0, 1), p.ph = param(4, 0, 0), p.dh = param(5, 0, 1);
    p.sw = param(3, 1, 1), p.pw = param(4, 1, 0), p.dw = param(5, 1, 1);
  }
  const int64_t groups = call.args[8].is_number() ? call.args[8].AsInt() : 1;
  const int64_t N = in.sizes[0];
  p.C = in.sizes[1], p.H = in.sizes[2], p.W = in.sizes[3];
  const int64_t F = weight.sizes[0], CG = weight.sizes[1];
  p.KH = weight.sizes[2], p.KW = weight.sizes[3];
  p.OH = out.sizes[2], p.OW = out.sizes[3];
  const bool valid =
      p.sh > 0 && p.sw > 0 && p.dh > 0 && p.dw > 0 && p.ph >= 0 && p.pw >= 0 &&
      groups > 0 && p.C == CG * groups && F % groups == 0 &&
      out.sizes[0] == N && out.sizes[1] == F &&
      (!bias.is_tensor() || bias.tensor.numel() == F) &&
      p.OH == (p.H + 2 * p.ph - p.dh * (p.KH - 1) - 1) / p.sh + 1 &&
      p.OW == (p.W + 2 * p.pw - p.dw * (p.KW - 1) - 1) / p.sw + 1;
  if (!valid || out.numel() == 0 || p.OH <= 0 || p.OW <= 0)
    return RunOnHost(call);  // the host kernel reports the problem
  Temporaries temporaries(*this);
  auto dense = [&](const TensorView& t) -> absl::StatusOr<TensorView> {
    if (t.IsContiguous()) return ContiguousView(t.data, t.dtype, t.sizes);
    absl::StatusOr<TensorView> d = temporaries.Dense(t.dtype, t.sizes);
    if (!d.ok()) return d.status();
    if (absl::Status s =
            Elementwise(ElementwiseOp::kCopy, *d, Aligned(t, ShapeOf(t.sizes)),
                        {}, {}, 0, 0, 0, true);
        !s.ok())
      return s;
    return *d;
  };
  absl::StatusOr<TensorView> x = dense(in);
  if (!x.ok()) return x.status();
  absl::StatusOr<TensorView> w = dense(weight);
  if (!w.ok()) return w.status();
  absl::StatusOr<TensorView> y = out.IsContiguous()
                                     ? absl::StatusOr<TensorView>(out)
                                     : temporaries.Dense(dt, out.sizes);
  if (!y.ok()) return y.status();
  const int64_t fg = F / groups, k = CG * p.KH * p.KW, ohw = p.OH * p.OW;
  const bool pointwise = p.KH == 1 && p.KW == 1 && p.sh == 1 && p.sw == 1 &&
                         p.ph == 0 && p.pw == 0;
  TensorView col;
  if (!pointwise) {
    std::array<int64_t, 2> col_sizes{p.C * p.KH * p.KW, ohw};
    absl::StatusOr<TensorView> c = temporaries.Dense(dt, col_sizes);
    if (!c.ok()) return c.status();
    col = *c;
  }
  const int64_t es = ElementSize(dt);
  const double one = 1, zero = 0;
  const float one32 = 1, zero32 = 0;
  const void* alpha = compute == CUBLAS_COMPUTE_64F
                          ? static_cast<const void*>(&one)
                          : static_cast<const void*>(&one32);
  const void* beta = compute == CUBLAS_COMPUTE_64F
                         ? static_cast<const void*>(&zero)
                         : static_cast<const void*>(&zero32);
  for (int64_t n = 0; n < N; ++n) {
    if (StopRequested()) return CheckStop(absl::StrCat("cuda:", index_, ": "));
    const std::byte* xn = x->bytes() + n * p.C * p.H * p.W * es;
    std::byte* yn = y->bytes() + n * F * ohw * es;
    const void* cols = xn;
    if (!pointwise) {
      if (cudaError_t e =
              LaunchIm2Col(xn, col.data, static_cast<int>(es), p, stream_);
          e != cudaSuccess)
        return CudaError(index_, "im2col kernel", e);
      cols = col.data;
    }
    // Row-major y[g] (fg x ohw) = w[g] (fg x k) @ cols[g] (k x ohw), i.e.
    // column-major y^T = cols^T @ w^T.
    cublasStatus_t status = cublasGemmStridedBatchedEx(
        blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(ohw),
        static_cast<int>(fg), static_cast<int>(k), alpha, cols, type,
        static_cast<int>(ohw), k * ohw, w->data, type, static_cast<int>(k),
        fg * k, beta, yn, type, static_cast<int>(ohw), fg * ohw,
        static_cast<int>(groups), compute, CUBLAS_GEMM_DEFAULT);
    if (status != CUBLAS_STATUS_SUCCESS)
      return BlasError(index_, "cublasGemmStridedBatchedEx", status);
  }
  const Shape shape = ShapeOf(y->sizes);
  if (bias.is_tensor()) {
    Operand b = ChannelOperand(bias);
    if (absl::Status s = Elementwise(ElementwiseOp::kAdd, *y,
                                     Aligned(*y, shape), b, {}, 1, 0, 0, true);
        !s.ok())
      return s;
  }
  if (y->data != out.data)
    return Elementwise(ElementwiseOp::kCopy, out, Aligned(*y, shape), {}, {}, 0,
                       0, 0, true);
  return absl::OkStatus();
}

// native_batch_norm / _native_batch_norm_legit_no_training in evaluation.
absl::Status CudaDeviceMemory::RunBatchNorm(const KernelCall& call) {
  const bool legit = call.op.find("legit") != std::string_view::npos;
  if (call.args.size() < (legit ? 7u : 8u)) return RunOnHost(call);
  if (!legit && call.args[5].bool_value) return RunOnHost(call);  // training
  const double eps = call.args[legit ? 6 : 7].AsDouble();
  const TensorView& in = call.args[0].tensor;
  const TensorView& out = call.outputs[0];
  if (in.dim() < 2 || out.sizes != in.sizes || !IsFloatingPoint(in.dtype) ||
      !IsFloatingPoint(out.dtype))
    return RunOnHost(call);
  const int64_t channels = in.sizes[1];
  for (int i = 1; i <= 4; ++i) {
    const KernelArg& a = call.args[i];
    if ((i >= 3 && !a.is_tensor()) ||
        (a.is_tensor() && a.tensor.numel() != channels))
      return RunOnHost(call);  // the host kernel says why
  }
  const Shape shape = ShapeOf(out.sizes);
  auto saved = [&](size_t i) {
    Operand op;
    if (call.outputs.size() > i && call.outputs[i].numel() == channels &&
        channels > 0) {
      const TensorView& t = call.outputs[i];
      op.data = t.data;
      op.dtype = t.dtype;
      op.strides[1] = t.dim() > 0 ? t.strides[t.dim() - 1] : 0;
    }
    return op;
  };
  return Check(LaunchBatchNormEval(
                   shape, Aligned(in, shape), Aligned(out, shape),
                   ChannelOperand(call.args[3]), ChannelOperand(call.args[4]),
                   ChannelOperand(call.args[1]), ChannelOperand(call.args[2]),
                   saved(1), saved(2), eps, stream_),
               call);
}

// max_pool2d_with_indices(self, kernel_size, stride=[], padding=0,
//                         dilation=1, ceil_mode=False)
absl::Status CudaDeviceMemory::RunMaxPool(const KernelCall& call) {
  const TensorView& in = call.args[0].tensor;
  if ((in.dim() != 3 && in.dim() != 4) || call.outputs.size() != 2)
    return RunOnHost(call);
  const TensorView& out = call.outputs[0];
  const TensorView& idx = call.outputs[1];
  if (out.dim() != in.dim() || idx.sizes != out.sizes ||
      !IsFloatingPoint(in.dtype))
    return RunOnHost(call);
  PoolParams p;
  IntPair(call.args[1], 1, 1, p.kh, p.kw);
  IntPair(call.args[2], p.kh, p.kw, p.sh, p.sw);
  if (call.args[2].kind == KernelArg::Kind::kInts && call.args[2].ints.empty())
    p.sh = p.kh, p.sw = p.kw;
  IntPair(call.args[3], 0, 0, p.ph, p.pw);
  IntPair(call.args[4], 1, 1, p.dh, p.dw);
  if (p.kh <= 0 || p.kw <= 0 || p.sh <= 0 || p.sw <= 0 || p.ph < 0 ||
      p.pw < 0 || p.dh <= 0 || p.dw <= 0)
    return RunOnHost(call);
  const int64_t d = in.dim();
  p.H = in.sizes[d - 2], p.W = in.sizes[d - 1];
  p.OH = out.sizes[d - 2], p.OW = out.sizes[d - 1];
  p.in_h = in.strides[d - 2], p.in_w = in.strides[d - 1];
  p.out_h = out.strides[d - 2], p.out_w = out.strides[d - 1];
  p.idx_h = idx.strides[d - 2], p.idx_w = idx.strides[d - 1];
  auto lead = [&](const TensorView& t) {
    TensorView l = t;
    l.sizes.resize(d - 2);
    l.strides.resize(d - 2);
    return l;
  };
  const Shape lead_shape = ShapeOf(lead(out).sizes);
  return Check(LaunchMaxPool2d(lead_shape, Aligned(lead(in), lead_shape),
                               Aligned(lead(out), lead_shape),
                               Aligned(lead(idx), lead_shape), p, stream_),
               call);
}

// embedding(weight, indices, padding_idx=-1, scale_grad_by_freq, sparse)
absl::Status CudaDeviceMemory::RunEmbedding(const KernelCall& call) {
  const TensorView& weight = call.args[0].tensor;
  const TensorView& indices = call.args[1].tensor;
  const TensorView& out = call.outputs[0];
  if (weight.dim() != 2 || IsFloatingPoint(indices.dtype) ||
      indices.dtype == DType::kBool ||
      out.numel() != indices.numel() * weight.sizes[1])
    return RunOnHost(call);
  const int64_t rows = indices.numel(), width = weight.sizes[1];
  if (rows == 0 || width == 0) return absl::OkStatus();
  Temporaries temporaries(*this);
  absl::StatusOr<TensorView> index =
      temporaries.Dense(DType::kI64, indices.sizes);
  if (!index.ok()) return index.status();
  if (absl::Status s = Elementwise(ElementwiseOp::kCopy, *index,
                                   Aligned(indices, ShapeOf(indices.sizes)), {},
                                   {}, 0, 0, 0, false);
      !s.ok())
    return s;
  absl::StatusOr<TensorView> dense_out =
      out.IsContiguous() ? absl::StatusOr<TensorView>(out)
                         : temporaries.Dense(out.dtype, out.sizes);
  if (!dense_out.ok()) return dense_out.status();
  std::array<int64_t, 1> one{1};
  absl::StatusOr<TensorView> bad = temporaries.Dense(DType::kI32, one);
  if (!bad.ok()) return bad.status();
  if (cudaError_t e = cudaMemsetAsync(bad->data, 0, sizeof(int), stream_);
      e != cudaSuccess)
    return Check(e, call);
  Operand w = Aligned(weight, ShapeOf(weight.sizes));
  Operand o;
  o.data = dense_out->data;
  o.dtype = out.dtype;
  if (cudaError_t e = LaunchEmbedding(
          w, weight.sizes[0], width, static_cast<const int64_t*>(index->data),
          rows, o, static_cast<int*>(bad->data), stream_);
      e != cudaSuccess)
    return Check(e, call);
  int flag = 0;
  if (absl::Status s = CopyToHost(reinterpret_cast<std::byte*>(&flag),
                                  bad->bytes(), sizeof(int));
      !s.ok())
    return s;
  if (flag != 0)
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(call.op), ": index out of range in self"));
  if (dense_out->data != out.data)
    return Elementwise(ElementwiseOp::kCopy, out,
                       Aligned(*dense_out, ShapeOf(out.sizes)), {}, {}, 0, 0, 0,
                       true);
  return absl::OkStatus();
}

// empty.memory_format (zeros, as the host kernel), zeros and ones.
absl::Status CudaDeviceMemory::RunFill(const KernelCall& call, double value) {
  const TensorView& out = call.outputs[0];
  Operand v;
  v.is_scalar = true;
  v.dtype = DType::kF64;
  v.scalar_float = value;
  v.scalar_int = static_cast<int64_t>(value);
  return Elementwise(ElementwiseOp::kCopy, out, v, {}, {}, 0, 0, 0,
                     IsFloatingPoint(out.dtype));
}

// masked_fill.Scalar(self, mask, value) = where(mask, value, self).
absl::Status CudaDeviceMemory::RunMaskedFill(const KernelCall& call) {
  const TensorView& self = call.args[0].tensor;
  const TensorView& mask = call.args[1].tensor;
  const TensorView& out = call.outputs[0];
  if (mask.dtype != DType::kBool || out.sizes != self.sizes ||
      !host::BroadcastsTo(mask, out.sizes) || !call.args[2].is_number())
    return RunOnHost(call);
  const Shape shape = ShapeOf(out.sizes);
  return Elementwise(ElementwiseOp::kWhere, out, Aligned(mask, shape),
                     ScalarOperand(call.args[2]), Aligned(self, shape), 0, 0, 0,
                     IsFloatingPoint(out.dtype));
}

// _unsafe_view(self, size): a copy (fresh storage); dense sources only.
absl::Status CudaDeviceMemory::RunUnsafeView(const KernelCall& call) {
  const TensorView& in = call.args[0].tensor;
  const TensorView& out = call.outputs[0];
  if (!in.IsContiguous() || in.numel() != out.numel() || in.dtype != out.dtype)
    return RunOnHost(call);
  TensorView reshaped = ContiguousView(in.data, in.dtype, out.sizes);
  return Elementwise(ElementwiseOp::kCopy, out,
                     Aligned(reshaped, ShapeOf(out.sizes)), {}, {}, 0, 0, 0,
                     IsFloatingPoint(out.dtype));
}

// Pinned host memory: the host side of copies in CUDA mode. Falls back to
// ordinary memory if pinning fails.
class PinnedHostMemory final : public HostLikeMemory {
 public:
  PinnedHostMemory() : HostLikeMemory(Device::Cpu()) {}

 protected:
  void* AllocateBytes(int64_t bytes) override {
    void* data = nullptr;
    if (cudaHostAlloc(&data, bytes, cudaHostAllocPortable) == cudaSuccess) {
      pinned_.insert(data);
      return data;
    }
    cudaGetLastError();
    return HostLikeMemory::AllocateBytes(bytes);
  }
  void FreeBytes(void* data) override {
    if (pinned_.erase(data)) {
      cudaFreeHost(data);
    } else {
      HostLikeMemory::FreeBytes(data);
    }
  }

 private:
  std::set<void*> pinned_;
};

}  // namespace

int VisibleDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<DeviceMemory>> CreateDeviceMemory(int index) {
  const int count = VisibleDeviceCount();
  if (index < 0 || index >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda:", index, " is not visible (", count, " GPU(s))"));
  }
  auto memory = std::make_unique<CudaDeviceMemory>(index);
  if (absl::Status s = memory->Init(); !s.ok()) return s;
  return std::unique_ptr<DeviceMemory>(std::move(memory));
}

std::unique_ptr<DeviceMemory> CreatePinnedHostMemory() {
  return std::make_unique<PinnedHostMemory>();
}

}  // namespace ferry::cuda
