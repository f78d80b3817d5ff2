// The host kernel library: one kernel per built-in operator of the registry
// (passes/schema.h), for every dtype ATen allows for it.
//
// Requires: the call's arguments bound to the schema (one KernelArg per
// schema argument, in schema order, defaults applied) and output views laid
// out as the node's result specs say, all in host-addressable memory.
// Establishes: the outputs hold what ATen computes:
//  - inputs may be strided views (any non-negative strides, including 0);
//  - tensor operands broadcast as ATen does; Scalar arguments act as 0-dim
//    tensors;
//  - the output dtype is the output view's dtype: arithmetic computes in
//    double for floating outputs (f16/bf16/f32 rounded once, when stored) and
//    in wrapping int64 for integer outputs; comparisons compute in the
//    operands' common category and store bools;
//  - an output that overlaps an input with a different layout is computed
//    into a temporary first, so in-place operators see their old values;
//  - mm, bmm, addmm and linear on f32/f64 call OpenBLAS (operands copied to a
//    dense layout first when their strides are not BLAS-compatible); on f16
//    and bf16 they convert to f32, call cblas_sgemm and round once when
//    storing; the integers accumulate in int64;
//  - long kernels give up part-way when the calling thread's CancelToken
//    asks them to (cancel.h); the executor discards what they wrote.
// Errors are InvalidArgument/Unimplemented statuses naming the operator and
// the problem (dtype not supported, integer division by zero, ...); the
// executor adds the node's name. Nothing aborts.
#ifndef FERRY_RUNTIME_HOST_KERNELS_H_
#define FERRY_RUNTIME_HOST_KERNELS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "runtime/tensor_view.h"

namespace ferry {

using HostKernelFn = absl::Status (*)(const KernelCall& call);

// The kernel of operator `op` ("aten::add.Tensor"; the default overload as
// "aten::relu" or "aten::relu.default"), or null when there is none.
// View operators (results aliasing an argument without writing it) and
// metadata-only operators have no data to compute: their kernel is a no-op
// that the executor need not call.
HostKernelFn FindHostKernel(std::string_view op);

// Looks up call.op and runs it; Unimplemented when there is no kernel.
absl::Status RunHostKernel(const KernelCall& call);

// Every operator name with a host kernel, sorted.
std::vector<std::string> HostKernelOps();

// dst[i] = src[i] for every index of dst, src broadcast to dst's sizes and
// converted to dst's dtype. Both in host memory; handles overlap.
absl::Status CopyStridedHost(const TensorView& dst, const TensorView& src);

// Reads every element of `src` into dense row-major bytes of its dtype.
std::vector<std::byte> GatherContiguous(const TensorView& src);

}  // namespace ferry

#endif  // FERRY_RUNTIME_HOST_KERNELS_H_
