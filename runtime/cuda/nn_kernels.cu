// CUDA kernels for the network operators (nn_kernels.h). One thread per
// output element, grid-stride loops; values through runtime/element.h as
// in cuda_kernels.cu.
#include <cmath>
#include <cstdint>

#include "runtime/cuda/launch.h"
#include "runtime/cuda/nn_kernels.h"
#include "runtime/element.h"

namespace ferry::cuda {
namespace {

__device__ int ElementBytes(DType dtype) {
  return dtype == DType::kF64 || dtype == DType::kI64   ? 8
         : dtype == DType::kF32 || dtype == DType::kI32 ? 4
         : dtype == DType::kF16 || dtype == DType::kBF16 || dtype == DType::kI16
             ? 2
             : 1;
}

__device__ char* At(const Operand& op, int64_t offset) {
  return static_cast<char*>(op.data) + offset * ElementBytes(op.dtype);
}

__device__ int64_t OffsetOf(const Shape& shape, const int64_t* strides,
                            int64_t linear) {
  int64_t offset = 0;
  for (int d = shape.ndim - 1; d >= 0; --d) {
    const int64_t size = shape.sizes[d];
    offset += (linear % size) * strides[d];
    linear /= size;
  }
  return offset;
}

template <typename T>
__global__ void Im2ColKernel(const T* in, T* col, ConvParams p) {
  const int64_t ohw = p.OH * p.OW;
  const int64_t total = p.C * p.KH * p.KW * ohw;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ow = i % p.OW;
    const int64_t oh = (i / p.OW) % p.OH;
    const int64_t row = i / ohw;
    const int64_t kw = row % p.KW;
    const int64_t kh = (row / p.KW) % p.KH;
    const int64_t c = row / (p.KW * p.KH);
    const int64_t h = oh * p.sh - p.ph + kh * p.dh;
    const int64_t w = ow * p.sw - p.pw + kw * p.dw;
    col[i] = (h >= 0 && h < p.H && w >= 0 && w < p.W)
                 ? in[(c * p.H + h) * p.W + w]
                 : T();
  }
}

__global__ void BatchNormEvalKernel(Shape shape, Operand in, Operand out,
                                    Operand mean, Operand var, Operand weight,
                                    Operand bias, Operand save_mean,
                                    Operand save_invstd, double eps) {
  int64_t inner = 1;
  for (int d = 2; d < shape.ndim; ++d) inner *= shape.sizes[d];
  const int64_t channels = shape.sizes[1];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < shape.numel; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (i / inner) % channels;
    const double m =
        element::LoadAsDouble(mean.dtype, At(mean, c * mean.strides[1]));
    const double v =
        element::LoadAsDouble(var.dtype, At(var, c * var.strides[1]));
    const double invstd = 1.0 / sqrt(v + eps);
    const double g = weight.data
                         ? element::LoadAsDouble(
                               weight.dtype, At(weight, c * weight.strides[1]))
                         : 1.0;
    const double b = bias.data ? element::LoadAsDouble(
                                     bias.dtype, At(bias, c * bias.strides[1]))
                               : 0.0;
    const double x =
        element::LoadAsDouble(in.dtype, At(in, OffsetOf(shape, in.strides, i)));
    element::StoreDouble(out.dtype, At(out, OffsetOf(shape, out.strides, i)),
                         (x - m) * invstd * g + b);
    if (i < channels * inner && i % inner == 0) {  // first batch element
      if (save_mean.data)
        element::StoreDouble(save_mean.dtype,
                             At(save_mean, c * save_mean.strides[1]), m);
      if (save_invstd.data)
        element::StoreDouble(save_invstd.dtype,
                             At(save_invstd, c * save_invstd.strides[1]),
                             invstd);
    }
  }
}

__global__ void MaxPool2dKernel(Shape lead, Operand in, Operand out,
                                Operand indices, PoolParams p) {
  const int64_t plane = p.OH * p.OW;
  const int64_t total = lead.numel * plane;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ow = i % p.OW, oh = (i / p.OW) % p.OH, l = i / plane;
    const int64_t in_base = OffsetOf(lead, in.strides, l);
    double best = 0;
    int64_t best_index = -1;
    for (int64_t a = 0; a < p.kh; ++a) {
      const int64_t h = oh * p.sh - p.ph + a * p.dh;
      if (h < 0 || h >= p.H) continue;
      for (int64_t b = 0; b < p.kw; ++b) {
        const int64_t w = ow * p.sw - p.pw + b * p.dw;
        if (w < 0 || w >= p.W) continue;
        const double v = element::LoadAsDouble(
            in.dtype, At(in, in_base + h * p.in_h + w * p.in_w));
        // PyTorch's rule, as on the host: every NaN is taken, so the index
        // is the last NaN met.
        if (best_index < 0 || v > best || isnan(v)) {
          best = v;
          best_index = h * p.W + w;
        }
      }
    }
    if (best_index < 0) best = -INFINITY;
    element::StoreDouble(
        out.dtype,
        At(out, OffsetOf(lead, out.strides, l) + oh * p.out_h + ow * p.out_w),
        best);
    element::StoreInt64(indices.dtype,
                        At(indices, OffsetOf(lead, indices.strides, l) +
                                        oh * p.idx_h + ow * p.idx_w),
                        best_index);
  }
}

__global__ void EmbeddingKernel(Operand weight, int64_t weight_rows,
                                int64_t width, const int64_t* index,
                                int64_t rows, Operand out, int* bad) {
  const int64_t total = rows * width;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / width, j = i % width;
    const int64_t row = index[r];
    if (row < 0 || row >= weight_rows) {
      *bad = 1;
      continue;
    }
    const char* src =
        At(weight, row * weight.strides[0] + j * weight.strides[1]);
    char* dst = At(out, i);
    if (weight.dtype == out.dtype) {
      for (int k = 0; k < ElementBytes(out.dtype); ++k) dst[k] = src[k];
    } else {
      element::StoreDouble(out.dtype, dst,
                           element::LoadAsDouble(weight.dtype, src));
    }
  }
}

}  // namespace

cudaError_t LaunchIm2Col(const void* in, void* col, int element_size,
                         const ConvParams& p, cudaStream_t stream) {
  const int64_t total = p.C * p.KH * p.KW * p.OH * p.OW;
  if (total == 0) return cudaSuccess;
  switch (element_size) {
    case 2:
      Im2ColKernel<uint16_t><<<Blocks(total), kThreads, 0, stream>>>(
          static_cast<const uint16_t*>(in), static_cast<uint16_t*>(col), p);
      break;
    case 4:
      Im2ColKernel<uint32_t><<<Blocks(total), kThreads, 0, stream>>>(
          static_cast<const uint32_t*>(in), static_cast<uint32_t*>(col), p);
      break;
    case 8:
      Im2ColKernel<uint64_t><<<Blocks(total), kThreads, 0, stream>>>(
          static_cast<const uint64_t*>(in), static_cast<uint64_t*>(col), p);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchBatchNormEval(const Shape& shape, const Operand& in,
                                const Operand& out, const Operand& mean,
                                const Operand& var, const Operand& weight,
                                const Operand& bias, const Operand& save_mean,
                                const Operand& save_invstd, double eps,
                                cudaStream_t stream) {
  if (shape.numel == 0 || shape.ndim < 2) return cudaSuccess;
  BatchNormEvalKernel<<<Blocks(shape.numel), kThreads, 0, stream>>>(
      shape, in, out, mean, var, weight, bias, save_mean, save_invstd, eps);
  return cudaGetLastError();
}

cudaError_t LaunchMaxPool2d(const Shape& lead, const Operand& in,
                            const Operand& out, const Operand& indices,
                            const PoolParams& p, cudaStream_t stream) {
  const int64_t total = lead.numel * p.OH * p.OW;
  if (total == 0) return cudaSuccess;
  MaxPool2dKernel<<<Blocks(total), kThreads, 0, stream>>>(lead, in, out,
                                                          indices, p);
  return cudaGetLastError();
}

cudaError_t LaunchEmbedding(const Operand& weight, int64_t weight_rows,
                            int64_t width, const int64_t* index, int64_t rows,
                            const Operand& out, int* bad, cudaStream_t stream) {
  const int64_t total = rows * width;
  if (total == 0) return cudaSuccess;
  EmbeddingKernel<<<Blocks(total), kThreads, 0, stream>>>(
      weight, weight_rows, width, index, rows, out, bad);
  return cudaGetLastError();
}

}  // namespace ferry::cuda
