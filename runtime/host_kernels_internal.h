// Internal helpers of the host kernel library (host_kernels_*.cc): strided
// iteration with broadcasting, argument access and error wording. Not part
// of the runtime's API.
#ifndef FERRY_RUNTIME_HOST_KERNELS_INTERNAL_H_
#define FERRY_RUNTIME_HOST_KERNELS_INTERNAL_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/cancel.h"
#include "runtime/element.h"
#include "runtime/host_kernels.h"

namespace ferry::host {

// Byte strides of `t` aligned (right to left) to `out_sizes`, with 0 for
// broadcast dims (missing or of size 1 in `t`).
DimVector BroadcastByteStrides(const TensorView& t,
                               std::span<const int64_t> out_sizes);

// `t`'s own strides in bytes.
DimVector OwnByteStrides(const TensorView& t);

// Whether `t` can be read as if broadcast to `out_sizes`; CheckBroadcast
// says why not.
bool BroadcastsTo(const TensorView& t, std::span<const int64_t> out_sizes);
absl::Status CheckBroadcast(const KernelCall& call, const TensorView& t,
                            const TensorView& out);

// Copies one element between dtypes (through double when either side is
// floating, else through int64).
inline void ConvertElement(DType dst_code, std::byte* dst, DType src_code,
                           const std::byte* src) {
  if (element::IsFloat(dst_code) || element::IsFloat(src_code)) {
    element::StoreDouble(dst_code, dst, element::LoadAsDouble(src_code, src));
  } else {
    element::StoreInt64(dst_code, dst, element::LoadAsInt64(src_code, src));
  }
}

// Calls fn(ptrs) once per index of `sizes` (row-major order), where ptrs[k]
// is operand k's element address: bases[k] + sum(index[d] * strides[k][d]).
// Gives up part-way when the current CancelToken asks to stop (cancel.h);
// the executor then discards the result.
template <size_t N, typename Fn>
void StridedLoop(std::span<const int64_t> sizes,
                 const std::array<std::byte*, N>& bases,
                 const std::array<DimVector, N>& byte_strides, Fn&& fn) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  for (int64_t s : sizes)
    if (s == 0) return;
  std::array<std::byte*, N> ptrs = bases;
  if (ndim == 0) {
    fn(ptrs);
    return;
  }
  const int64_t inner = sizes[ndim - 1];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = byte_strides[k][ndim - 1];
  DimVector index(ndim, 0);
  while (true) {
    std::array<std::byte*, N> p = ptrs;
    for (int64_t start = 0; start < inner; start += kStopPollUnits) {
      const int64_t end = std::min(inner, start + kStopPollUnits);
      for (int64_t i = start; i < end; ++i) {
        fn(p);
        for (size_t k = 0; k < N; ++k) p[k] += inner_stride[k];
      }
      if (StopTick(end - start)) return;
    }
    // Advance the outer index (all dims but the last).
    int64_t d = ndim - 2;
    for (; d >= 0; --d) {
      ++index[d];
      for (size_t k = 0; k < N; ++k) ptrs[k] += byte_strides[k][d];
      if (index[d] < sizes[d]) break;
      for (size_t k = 0; k < N; ++k) ptrs[k] -= byte_strides[k][d] * sizes[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

// A Scalar argument as a 0-dim tensor (f64, i64 or bool) backed by `slot`.
struct ScalarSlot {
  alignas(8) std::byte bytes[8] = {};
};
TensorView ScalarAsTensor(const KernelArg& arg, ScalarSlot& slot);

// The tensor view of argument `i`, or of a Scalar argument as a 0-dim tensor.
TensorView TensorOrScalar(const KernelCall& call, size_t i, ScalarSlot& slot);

// Errors worded "aten::mm: ...".
absl::Status KernelError(const KernelCall& call, absl::string_view message);
absl::Status UnsupportedDType(const KernelCall& call, DType dtype);

// Normalizes a possibly negative dim against `ndim` (0-dim tensors accept
// -1 and 0, as ATen does).
absl::StatusOr<int64_t> NormalizeDim(const KernelCall& call, int64_t dim,
                                     int64_t ndim);

// Dense row-major scratch memory of one dtype.
struct Scratch {
  std::vector<std::byte> bytes;
  TensorView view;
};
Scratch MakeScratch(DType dtype, std::span<const int64_t> sizes);

// Writes dense row-major `src_bytes` (of dst's dtype) into the strided dst.
void ScatterContiguous(const TensorView& dst, const std::byte* src_bytes);

// A reduction's split of the input into kept dims (indexing the output) and
// reduced dims. `dims` empty or absent reduces every dim (as ATen reads an
// empty list for sum, mean and amax); a keepdim output drops its size-1
// reduced dims.
struct ReductionPlan {
  TensorView kept;     // input restricted to the kept dims
  TensorView reduced;  // input restricted to the reduced dims
  TensorView out;      // output restricted to the kept dims
  int64_t count = 1;   // elements reduced into each output element
};
absl::StatusOr<ReductionPlan> PlanReduction(const KernelCall& call,
                                            const TensorView& in,
                                            const KernelArg* dims_arg,
                                            const TensorView& out);

// --- Kernels defined in the topic files, registered in host_kernels.cc. ----
// host_kernels_linalg.cc
absl::Status MmKernel(const KernelCall& call);
absl::Status AddmmKernel(const KernelCall& call);
absl::Status BmmKernel(const KernelCall& call);
absl::Status LinearKernel(const KernelCall& call);
// The generic convolution loop (any dtypes); ops/nn_conv.cc registers the
// BLAS kernel and falls back to this one.
absl::Status ConvolutionLoopKernel(const KernelCall& call);
// The argument checks every convolution kernel makes first: arity, not
// transposed (Unimplemented), 1-D or 2-D, matching ranks.
absl::Status CheckConvolutionCall(const KernelCall& call);
// host_kernels_reduce.cc
absl::Status SumDimKernel(const KernelCall& call);
absl::Status SumAllKernel(const KernelCall& call);
absl::Status MeanDimKernel(const KernelCall& call);
absl::Status MeanAllKernel(const KernelCall& call);
absl::Status AmaxKernel(const KernelCall& call);
absl::Status AminKernel(const KernelCall& call);
absl::Status SoftmaxKernel(const KernelCall& call);
absl::Status LogSoftmaxKernel(const KernelCall& call);
absl::Status NativeLayerNormKernel(const KernelCall& call);
absl::Status NativeBatchNormKernel(const KernelCall& call);
absl::Status BatchNormNoTrainingKernel(const KernelCall& call);
absl::Status MaxPool2dWithIndicesKernel(const KernelCall& call);
absl::Status AvgPool2dKernel(const KernelCall& call);
// host_kernels_shape.cc
absl::Status CatKernel(const KernelCall& call);
absl::Status StackKernel(const KernelCall& call);
absl::Status CloneKernel(const KernelCall& call);
absl::Status CopyKernel(const KernelCall& call);
absl::Status FillScalarKernel(const KernelCall& call);
absl::Status ZeroKernel(const KernelCall& call);
absl::Status FlatCopyKernel(const KernelCall& call);  // view_copy, reshape
absl::Status PermuteCopyKernel(const KernelCall& call);
absl::Status TransposeCopyKernel(const KernelCall& call);
absl::Status TCopyKernel(const KernelCall& call);
absl::Status SliceCopyKernel(const KernelCall& call);
absl::Status SelectCopyKernel(const KernelCall& call);
absl::Status EmbeddingKernel(const KernelCall& call);
absl::Status IndexSelectKernel(const KernelCall& call);

}  // namespace ferry::host

#endif  // FERRY_RUNTIME_HOST_KERNELS_INTERNAL_H_
