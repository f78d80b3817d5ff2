// The CUDA kernels of the cuda backend and their launchers (internal).
//
// Everything here is plain data so that nvcc and the host compiler agree on
// it: tensors reach the kernels as an iteration Shape plus one Operand per
// tensor, whose element strides are aligned to the shape (0 where the
// operand broadcasts). Values are widened to double (floating compute) or
// int64 (integer compute) with runtime/element.h, exactly as the host
// kernels do, and rounded once when stored. Launchers enqueue on `stream`
// and return the launch's cudaError_t.
#ifndef FERRY_RUNTIME_CUDA_CUDA_KERNELS_H_
#define FERRY_RUNTIME_CUDA_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "passes/dtype.h"

namespace ferry::cuda {

inline constexpr int kMaxDims = 8;

struct Shape {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t numel = 1;
};

struct Operand {
  void* data = nullptr;
  DType dtype = DType::kInvalid;
  int64_t strides[kMaxDims] = {};  // elements, aligned to the Shape
  // A Scalar argument: no data, this value everywhere.
  bool is_scalar = false;
  double scalar_float = 0;
  int64_t scalar_int = 0;
};

enum class ElementwiseOp : int {
  // out = a (dtype conversion, broadcast)
  kCopy,
  // unary: out = f(a); p0/p1 are parameters where noted
  kRelu,
  kNeg,
  kAbs,
  kSin,
  kCos,
  kTan,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kTanh,
  kSigmoid,
  kSilu,
  kGeluErf,
  kGeluTanh,
  kErf,
  kReciprocal,
  kFloor,
  kCeil,
  kTrunc,
  kRound,
  kSign,
  kClamp,      // p0 = min, p1 = max; flags bit 0: has min, bit 1: has max
  kLeakyRelu,  // p0 = negative slope
  // binary: out = f(a, b)
  kAdd,   // a + p0 * b
  kSub,   // a - p0 * b
  kRsub,  // b - p0 * a
  kMul,
  kDiv,
  kMaximum,
  kMinimum,
  kPow,
  // comparisons and logic: bool out
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kLogicalAnd,
  kLogicalOr,
  kLogicalXor,
  kLogicalNot,
  // ternary: out = a ? b : c
  kWhere,
};

// out[i] = op(a[i], b[i], c[i]) over `shape`. `float_compute` picks double
// (else int64) arithmetic; comparisons pick it from the operands.
cudaError_t LaunchElementwise(ElementwiseOp op, const Shape& shape,
                              const Operand& out, const Operand& a,
                              const Operand& b, const Operand& c, double p0,
                              double p1, int flags, bool float_compute,
                              cudaStream_t stream);

enum class ReduceOp : int { kSum, kMean, kMax, kMin };

// For each index of `kept` (out and in_kept strides over it), reduces the
// `reduced` dims of the input (in_reduced strides over them).
cudaError_t LaunchReduce(ReduceOp op, const Shape& kept, const Operand& out,
                         const Operand& in_kept, const Shape& reduced,
                         const Operand& in_reduced, bool float_compute,
                         cudaStream_t stream);

// Softmax / log-softmax of each row: `rows` indexes the rows (in and out
// strides over it); each row has `length` elements `in_step` / `out_step`
// elements apart.
cudaError_t LaunchSoftmax(const Shape& rows, const Operand& in,
                          const Operand& out, int64_t length, int64_t in_step,
                          int64_t out_step, bool log, cudaStream_t stream);

// Layer norm: `outer` indexes the rows (in, out, mean, rstd strides over
// it); `inner` the normalized elements (in_inner, out_inner, weight, bias
// strides over it; weight/bias data may be null).
cudaError_t LaunchLayerNorm(const Shape& outer, const Operand& in,
                            const Operand& out, const Operand& mean,
                            const Operand& rstd, const Shape& inner,
                            const Operand& in_inner, const Operand& out_inner,
                            const Operand& weight, const Operand& bias,
                            double eps, cudaStream_t stream);

}  // namespace ferry::cuda

#endif  // FERRY_RUNTIME_CUDA_CUDA_KERNELS_H_
