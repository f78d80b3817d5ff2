// CUDA kernels of the cuda backend: elementwise, reductions, softmax and
// layer norm over strided operands (see cuda_kernels.h). One thread per
// output element (per row for softmax and layer norm), grid-stride loops.
// Arithmetic mirrors the host kernels: double or wrapping int64, the
// element conversions of runtime/element.h.
#include <cmath>
#include <cstdint>

#include "runtime/cuda/cuda_kernels.h"
#include "runtime/cuda/launch.h"
#include "runtime/element.h"

namespace ferry::cuda {
namespace {

__device__ int64_t Offset(const Shape& shape, const int64_t* strides,
                          int64_t linear) {
  int64_t offset = 0;
  for (int d = shape.ndim - 1; d >= 0; --d) {
    const int64_t size = shape.sizes[d];
    offset += (linear % size) * strides[d];
    linear /= size;
  }
  return offset;
}

__device__ char* Address(const Operand& op, int64_t offset) {
  const int es = op.dtype == DType::kF64 || op.dtype == DType::kI64   ? 8
                 : op.dtype == DType::kF32 || op.dtype == DType::kI32 ? 4
                 : op.dtype == DType::kF16 || op.dtype == DType::kBF16 ||
                         op.dtype == DType::kI16
                     ? 2
                     : 1;
  return static_cast<char*>(op.data) + offset * es;
}

__device__ double LoadF(const Operand& op, int64_t offset) {
  if (op.is_scalar) return op.scalar_float;
  return element::LoadAsDouble(op.dtype, Address(op, offset));
}

__device__ int64_t LoadI(const Operand& op, int64_t offset) {
  if (op.is_scalar) return op.scalar_int;
  return element::LoadAsInt64(op.dtype, Address(op, offset));
}

__device__ int64_t Wrap(uint64_t v) { return static_cast<int64_t>(v); }

__device__ double Sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

__device__ double FloatOp(ElementwiseOp op, double a, double b, double c,
                          double p0, double p1, int flags) {
  switch (op) {
    case ElementwiseOp::kCopy:
      return a;
    case ElementwiseOp::kRelu:
      return a > 0 ? a : (isnan(a) ? a : 0.0);
    case ElementwiseOp::kNeg:
      return -a;
    case ElementwiseOp::kAbs:
      return fabs(a);
    case ElementwiseOp::kSin:
      return sin(a);
    case ElementwiseOp::kCos:
      return cos(a);
    case ElementwiseOp::kTan:
      return tan(a);
    case ElementwiseOp::kExp:
      return exp(a);
    case ElementwiseOp::kLog:
      return log(a);
    case ElementwiseOp::kSqrt:
      return sqrt(a);
    case ElementwiseOp::kRsqrt:
      return 1.0 / sqrt(a);
    case ElementwiseOp::kTanh:
      return tanh(a);
    case ElementwiseOp::kSigmoid:
      return Sigmoid(a);
    case ElementwiseOp::kSilu:
      return a * Sigmoid(a);
    case ElementwiseOp::kGeluErf:
      return 0.5 * a * (1.0 + erf(a * 0.7071067811865476));
    case ElementwiseOp::kGeluTanh:
      return 0.5 * a *
             (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));
    case ElementwiseOp::kErf:
      return erf(a);
    case ElementwiseOp::kReciprocal:
      return 1.0 / a;
    case ElementwiseOp::kFloor:
      return floor(a);
    case ElementwiseOp::kCeil:
      return ceil(a);
    case ElementwiseOp::kTrunc:
      return trunc(a);
    case ElementwiseOp::kRound:
      return nearbyint(a);
    case ElementwiseOp::kSign:
      return isnan(a) ? a : static_cast<double>((a > 0) - (a < 0));
    case ElementwiseOp::kClamp:
      if (isnan(a)) return a;
      if (flags & 1) a = fmax(a, p0);
      if (flags & 2) a = fmin(a, p1);
      return a;
    case ElementwiseOp::kLeakyRelu:
      return a > 0 ? a : a * p0;
    case ElementwiseOp::kAdd:
      return a + p0 * b;
    case ElementwiseOp::kSub:
      return a - p0 * b;
    case ElementwiseOp::kRsub:
      return b - p0 * a;
    case ElementwiseOp::kMul:
      return a * b;
    case ElementwiseOp::kDiv:
      return a / b;
    case ElementwiseOp::kMaximum:
      return (isnan(a) || isnan(b)) ? NAN : fmax(a, b);
    case ElementwiseOp::kMinimum:
      return (isnan(a) || isnan(b)) ? NAN : fmin(a, b);
    case ElementwiseOp::kPow:
      return pow(a, b);
    default:
      return 0;
  }
}

__device__ int64_t IntOp(ElementwiseOp op, int64_t a, int64_t b, int64_t p0,
                         int64_t lo, int64_t hi, int flags) {
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case ElementwiseOp::kCopy:
      return a;
    case ElementwiseOp::kRelu:
      return a > 0 ? a : 0;
    case ElementwiseOp::kNeg:
      return Wrap(0 - ua);
    case ElementwiseOp::kAbs:
      return a < 0 ? Wrap(0 - ua) : a;
    case ElementwiseOp::kSign:
      return (a > 0) - (a < 0);
    case ElementwiseOp::kFloor:
    case ElementwiseOp::kCeil:
    case ElementwiseOp::kTrunc:
    case ElementwiseOp::kRound:
      return a;
    case ElementwiseOp::kClamp:
      if ((flags & 1) && a < lo) a = lo;
      if ((flags & 2) && a > hi) a = hi;
      return a;
    case ElementwiseOp::kAdd:
      return Wrap(ua + static_cast<uint64_t>(p0) * ub);
    case ElementwiseOp::kSub:
      return Wrap(ua - static_cast<uint64_t>(p0) * ub);
    case ElementwiseOp::kRsub:
      return Wrap(ub - static_cast<uint64_t>(p0) * ua);
    case ElementwiseOp::kMul:
      return Wrap(ua * ub);
    case ElementwiseOp::kMaximum:
      return a > b ? a : b;
    case ElementwiseOp::kMinimum:
      return a < b ? a : b;
    case ElementwiseOp::kPow: {
      if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b % 2 == 0) ? 1 : -1) : 0);
      uint64_t result = 1, base = ua;
      while (b > 0) {
        if (b & 1) result *= base;
        base *= base;
        b >>= 1;
      }
      return Wrap(result);
    }
    default:
      return 0;
  }
}

template <typename T>
__device__ bool Compare(ElementwiseOp op, T a, T b) {
  switch (op) {
    case ElementwiseOp::kEq:
      return a == b;
    case ElementwiseOp::kNe:
      return a != b;
    case ElementwiseOp::kLt:
      return a < b;
    case ElementwiseOp::kLe:
      return a <= b;
    case ElementwiseOp::kGt:
      return a > b;
    case ElementwiseOp::kGe:
      return a >= b;
    case ElementwiseOp::kLogicalAnd:
      return a != 0 && b != 0;
    case ElementwiseOp::kLogicalOr:
      return a != 0 || b != 0;
    case ElementwiseOp::kLogicalXor:
      return (a != 0) != (b != 0);
    case ElementwiseOp::kLogicalNot:
      return a == 0;
    default:
      return false;
  }
}

__global__ void ElementwiseKernel(ElementwiseOp op, Shape shape, Operand out,
                                  Operand a, Operand b, Operand c, double p0,
                                  double p1, int flags, bool float_compute) {
  const bool compare =
      op >= ElementwiseOp::kEq && op <= ElementwiseOp::kLogicalNot;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < shape.numel; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    char* out_ptr = Address(out, Offset(shape, out.strides, i));
    const int64_t oa = a.is_scalar ? 0 : Offset(shape, a.strides, i);
    if (op == ElementwiseOp::kWhere) {
      const int64_t ob = b.is_scalar ? 0 : Offset(shape, b.strides, i);
      const int64_t oc = c.is_scalar ? 0 : Offset(shape, c.strides, i);
      const bool take_b = LoadF(a, oa) != 0.0;
      const Operand& pick = take_b ? b : c;
      const int64_t po = take_b ? ob : oc;
      if (float_compute) {
        element::StoreDouble(out.dtype, out_ptr, LoadF(pick, po));
      } else {
        element::StoreInt64(out.dtype, out_ptr, LoadI(pick, po));
      }
      continue;
    }
    const int64_t ob =
        (b.is_scalar || b.data == nullptr) ? 0 : Offset(shape, b.strides, i);
    if (compare) {
      const bool r =
          float_compute
              ? Compare(op, LoadF(a, oa),
                        b.data || b.is_scalar ? LoadF(b, ob) : 0.0)
              : Compare(op, LoadI(a, oa),
                        b.data || b.is_scalar ? LoadI(b, ob) : int64_t{0});
      element::StoreInt64(out.dtype, out_ptr, r ? 1 : 0);
    } else if (float_compute) {
      const double bv = (b.data || b.is_scalar) ? LoadF(b, ob) : 0.0;
      element::StoreDouble(out.dtype, out_ptr,
                           FloatOp(op, LoadF(a, oa), bv, 0, p0, p1, flags));
    } else {
      const int64_t bv = (b.data || b.is_scalar) ? LoadI(b, ob) : 0;
      element::StoreInt64(out.dtype, out_ptr,
                          IntOp(op, LoadI(a, oa), bv, static_cast<int64_t>(p0),
                                element::SaturatingToInt64(p0),
                                element::SaturatingToInt64(p1), flags));
    }
  }
}

__global__ void ReduceKernel(ReduceOp op, Shape kept, Operand out,
                             Operand in_kept, Shape reduced, Operand in_reduced,
                             bool float_compute) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < kept.numel; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = Offset(kept, in_kept.strides, i);
    char* out_ptr = Address(out, Offset(kept, out.strides, i));
    if (float_compute) {
      double acc = op == ReduceOp::kMax   ? -INFINITY
                   : op == ReduceOp::kMin ? INFINITY
                                          : 0.0;
      for (int64_t j = 0; j < reduced.numel; ++j) {
        const double v = element::LoadAsDouble(
            in_kept.dtype,
            Address(in_kept, base + Offset(reduced, in_reduced.strides, j)));
        if (op == ReduceOp::kSum || op == ReduceOp::kMean) {
          acc += v;
        } else if (isnan(v) || isnan(acc)) {
          acc = NAN;
        } else {
          acc = op == ReduceOp::kMax ? fmax(acc, v) : fmin(acc, v);
        }
      }
      if (op == ReduceOp::kMean) acc /= static_cast<double>(reduced.numel);
      element::StoreDouble(out.dtype, out_ptr, acc);
    } else {
      int64_t acc = op == ReduceOp::kMax   ? INT64_MIN
                    : op == ReduceOp::kMin ? INT64_MAX
                                           : 0;
      for (int64_t j = 0; j < reduced.numel; ++j) {
        const int64_t v = element::LoadAsInt64(
            in_kept.dtype,
            Address(in_kept, base + Offset(reduced, in_reduced.strides, j)));
        if (op == ReduceOp::kMax) {
          acc = v > acc ? v : acc;
        } else if (op == ReduceOp::kMin) {
          acc = v < acc ? v : acc;
        } else {
          acc = Wrap(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v));
        }
      }
      element::StoreInt64(out.dtype, out_ptr, acc);
    }
  }
}

__global__ void SoftmaxKernel(Shape rows, Operand in, Operand out,
                              int64_t length, int64_t in_step, int64_t out_step,
                              bool log_output) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       r < rows.numel; r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ib = Offset(rows, in.strides, r),
                  ob = Offset(rows, out.strides, r);
    double max = -INFINITY;
    for (int64_t k = 0; k < length; ++k)
      max = fmax(
          max, element::LoadAsDouble(in.dtype, Address(in, ib + k * in_step)));
    double sum = 0;
    for (int64_t k = 0; k < length; ++k)
      sum += exp(
          element::LoadAsDouble(in.dtype, Address(in, ib + k * in_step)) - max);
    const double log_sum = log(sum);
    for (int64_t k = 0; k < length; ++k) {
      const double x =
          element::LoadAsDouble(in.dtype, Address(in, ib + k * in_step)) - max;
      element::StoreDouble(out.dtype, Address(out, ob + k * out_step),
                           log_output ? x - log_sum : exp(x) / sum);
    }
  }
}

__global__ void LayerNormKernel(Shape outer, Operand in, Operand out,
                                Operand mean, Operand rstd, Shape inner,
                                Operand in_inner, Operand out_inner,
                                Operand weight, Operand bias, double eps) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       r < outer.numel; r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ib = Offset(outer, in.strides, r),
                  ob = Offset(outer, out.strides, r);
    const double n = static_cast<double>(inner.numel);
    double sum = 0;
    for (int64_t k = 0; k < inner.numel; ++k)
      sum += element::LoadAsDouble(
          in.dtype, Address(in, ib + Offset(inner, in_inner.strides, k)));
    const double m = sum / n;
    double squares = 0;
    for (int64_t k = 0; k < inner.numel; ++k) {
      const double d =
          element::LoadAsDouble(
              in.dtype, Address(in, ib + Offset(inner, in_inner.strides, k))) -
          m;
      squares += d * d;
    }
    const double rs = 1.0 / sqrt(squares / n + eps);
    for (int64_t k = 0; k < inner.numel; ++k) {
      double y =
          (element::LoadAsDouble(
               in.dtype, Address(in, ib + Offset(inner, in_inner.strides, k))) -
           m) *
          rs;
      if (weight.data)
        y *= element::LoadAsDouble(
            weight.dtype, Address(weight, Offset(inner, weight.strides, k)));
      if (bias.data)
        y += element::LoadAsDouble(
            bias.dtype, Address(bias, Offset(inner, bias.strides, k)));
      element::StoreDouble(
          out.dtype, Address(out, ob + Offset(inner, out_inner.strides, k)), y);
    }
    element::StoreDouble(mean.dtype,
                         Address(mean, Offset(outer, mean.strides, r)), m);
    element::StoreDouble(rstd.dtype,
                         Address(rstd, Offset(outer, rstd.strides, r)), rs);
  }
}

}  // namespace

cudaError_t LaunchElementwise(ElementwiseOp op, const Shape& shape,
                              const Operand& out, const Operand& a,
                              const Operand& b, const Operand& c, double p0,
                              double p1, int flags, bool float_compute,
                              cudaStream_t stream) {
  if (shape.numel == 0) return cudaSuccess;
  ElementwiseKernel<<<Blocks(shape.numel), kThreads, 0, stream>>>(
      op, shape, out, a, b, c, p0, p1, flags, float_compute);
  return cudaGetLastError();
}

cudaError_t LaunchReduce(ReduceOp op, const Shape& kept, const Operand& out,
                         const Operand& in_kept, const Shape& reduced,
                         const Operand& in_reduced, bool float_compute,
                         cudaStream_t stream) {
  if (kept.numel == 0) return cudaSuccess;
  ReduceKernel<<<Blocks(kept.numel), kThreads, 0, stream>>>(
      op, kept, out, in_kept, reduced, in_reduced, float_compute);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmax(const Shape& rows, const Operand& in,
                          const Operand& out, int64_t length, int64_t in_step,
                          int64_t out_step, bool log, cudaStream_t stream) {
  if (rows.numel == 0 || length == 0) return cudaSuccess;
  SoftmaxKernel<<<Blocks(rows.numel), kThreads, 0, stream>>>(
      rows, in, out, length, in_step, out_step, log);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNorm(const Shape& outer, const Operand& in,
                            const Operand& out, const Operand& mean,
                            const Operand& rstd, const Shape& inner,
                            const Operand& in_inner, const Operand& out_inner,
                            const Operand& weight, const Operand& bias,
                            double eps, cudaStream_t stream) {
  if (outer.numel == 0) return cudaSuccess;
  LayerNormKernel<<<Blocks(outer.numel), kThreads, 0, stream>>>(
      outer, in, out, mean, rstd, inner, in_inner, out_inner, weight, bias,
      eps);
  return cudaGetLastError();
}

}  // namespace ferry::cuda
