// The per-family host kernel tables (runtime/ops/*.cc) and what they share.
//
// Each family file defines its kernels and one table of (operator, kernel)
// rows; host_kernels.cc adds every family table to the kernel library
// (FindHostKernel, HostKernelOps). A family row replaces a row of the same
// name in host_kernels.cc's own table, so an operator is defined once.
// Not part of the runtime's API.
#ifndef FERRY_RUNTIME_OPS_FAMILY_H_
#define FERRY_RUNTIME_OPS_FAMILY_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "runtime/host_kernels_internal.h"

namespace ferry::host {

struct FamilyKernel {
  std::string_view op;
  HostKernelFn fn;
};

// The tables, one per family file.
std::span<const FamilyKernel> ConvKernels();       // nn_conv.cc
std::span<const FamilyKernel> NormKernels();       // nn_norm.cc
std::span<const FamilyKernel> CreationKernels();   // creation.cc
std::span<const FamilyKernel> AttentionKernels();  // embedding_attention.cc
// All of them.
std::vector<std::span<const FamilyKernel>> FamilyKernelTables();

// A convolution builds and multiplies its im2col matrix a band of output
// rows at a time, of about this many bytes (nn_conv.cc: one core's L2
// cache). While one of these lives, the bands are of `bytes` instead: tests
// give 1, for bands of one output row.
class ConvolutionBandBytesForTesting {
 public:
  explicit ConvolutionBandBytesForTesting(int64_t bytes);
  ~ConvolutionBandBytesForTesting();
  ConvolutionBandBytesForTesting(const ConvolutionBandBytesForTesting&) =
      delete;
  ConvolutionBandBytesForTesting& operator=(
      const ConvolutionBandBytesForTesting&) = delete;
};

// Runs kKernel on temporaries when an output overlaps an input (any overlap
// for non-elementwise kernels; for elementwise ones, anything but the same
// view), then scatters the temporaries into the outputs.
absl::Status RunGuarded(const KernelCall& call, HostKernelFn kernel,
                        bool elementwise);
template <HostKernelFn kKernel, bool kElementwise>
absl::Status Guard(const KernelCall& call) {
  return RunGuarded(call, kKernel, kElementwise);
}

// Views: the executor builds the result over the argument's storage.
absl::Status NoData(const KernelCall& call);

// `t`'s elements as dense row-major T (float or double), converted from its
// dtype; points into `t` itself when it already is dense T.
template <typename T>
const T* DenseAs(const TensorView& t, std::vector<T>& storage) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  constexpr DType kType = std::is_same_v<T, float> ? DType::kF32 : DType::kF64;
  if (t.dtype == kType && t.IsContiguous())
    return static_cast<const T*>(t.data);
  storage.resize(t.numel());
  T* dst = storage.data();
  const DType code = t.dtype;
  StridedLoop<1>(t.sizes, {t.bytes()}, {OwnByteStrides(t)},
                 [&](const std::array<std::byte*, 1>& p) {
                   *dst++ = static_cast<T>(element::LoadAsDouble(code, p[0]));
                 });
  return storage.data();
}

// Stores dense row-major T values into the strided `out`, converting.
template <typename T>
void StoreDense(const T* src, const TensorView& out) {
  const DType code = out.dtype;
  StridedLoop<1>(out.sizes, {out.bytes()}, {OwnByteStrides(out)},
                 [&](const std::array<std::byte*, 1>& p) {
                   element::StoreDouble(code, p[0],
                                        static_cast<double>(*src++));
                 });
}

// Whether `out` is dense T, so a kernel may write it directly.
template <typename T>
bool IsDense(const TensorView& out) {
  constexpr DType kType = std::is_same_v<T, float> ? DType::kF32 : DType::kF64;
  return out.dtype == kType && out.IsContiguous();
}

}  // namespace ferry::host

#endif  // FERRY_RUNTIME_OPS_FAMILY_H_
