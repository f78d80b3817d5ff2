// CUDA kernels of the cuda backend for the network operators (internal):
// im2col for convolution, batch norm in evaluation, 2-D max pooling and the
// embedding gather. Plain data, as cuda_kernels.h; launchers enqueue on
// `stream` and return the launch's cudaError_t.
#ifndef FERRY_RUNTIME_CUDA_NN_KERNELS_H_
#define FERRY_RUNTIME_CUDA_NN_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/cuda_kernels.h"

namespace ferry::cuda {

struct ConvParams {
  int64_t C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw;
};

// One batch element: in dense [C, H, W] -> col dense [C*KH*KW, OH*OW], both
// of `element_size`-byte elements (2, 4 or 8), zeros where the window leaves
// the input.
cudaError_t LaunchIm2Col(const void* in, void* col, int element_size,
                         const ConvParams& p, cudaStream_t stream);

// y = (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c] over `shape`
// (in and out aligned to it); `channel` operands have their stride on dim 1
// of the shape (weight/bias data may be null). Where save_mean/save_invstd
// have data, element c gets mean[c] and 1/sqrt(var[c] + eps).
cudaError_t LaunchBatchNormEval(const Shape& shape, const Operand& in,
                                const Operand& out, const Operand& mean,
                                const Operand& var, const Operand& weight,
                                const Operand& bias, const Operand& save_mean,
                                const Operand& save_invstd, double eps,
                                cudaStream_t stream);

struct PoolParams {
  int64_t H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t in_h, in_w, out_h, out_w, idx_h, idx_w;  // strides of the planes
};

// max_pool2d_with_indices: `lead` indexes the planes (in, out, indices
// strides over it); indices are h * W + w within the plane, as ATen's.
cudaError_t LaunchMaxPool2d(const Shape& lead, const Operand& in,
                            const Operand& out, const Operand& indices,
                            const PoolParams& p, cudaStream_t stream);

// out[r, j] = weight[index[r], j] for dense int64 `index` [rows], out dense
// [rows, width]; an index outside [0, weight rows) sets *bad to 1.
cudaError_t LaunchEmbedding(const Operand& weight, int64_t weight_rows,
                            int64_t width, const int64_t* index, int64_t rows,
                            const Operand& out, int* bad, cudaStream_t stream);

}  // namespace ferry::cuda

#endif  // FERRY_RUNTIME_CUDA_NN_KERNELS_H_
