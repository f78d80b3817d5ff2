// Normalizations: aten::native_batch_norm and
// aten::_native_batch_norm_legit_no_training.
//
// Evaluation (training=false) uses the running statistics: per channel
// scale = weight / sqrt(running_var + eps) and shift = bias - mean * scale,
// computed in double, then y = x * scale + shift per element (in float for
// f32/f16/bf16 inputs, in double for f64). Outputs 1 and 2 (save_mean,
// save_invstd) may be [C] (they get the running mean and 1/sqrt(var + eps))
// or [0], as ATen's CPU kernel returns them in evaluation. Training and
// unusual layouts use the generic kernel of host_kernels_reduce.cc (batch
// statistics, biased variance for the output, unbiased for the running
// update).
#include <cmath>

#include "runtime/absl_compat.h"
#include "runtime/ops/family.h"

namespace ferry::host {
namespace {

double ChannelValue(const KernelArg& a, int64_t c, double fallback) {
  if (!a.is_tensor()) return fallback;
  const TensorView& t = a.tensor;
  const int64_t stride = t.dim() > 0 ? t.strides[t.dim() - 1] : 0;
  return element::LoadAsDouble(t.dtype,
                               t.bytes() + c * stride * t.element_size());
}

void StoreChannel(const TensorView& t, int64_t c, double v) {
  const int64_t stride = t.dim() > 0 ? t.strides[t.dim() - 1] : 0;
  element::StoreDouble(t.dtype, t.bytes() + c * stride * t.element_size(), v);
}

template <typename T>
absl::Status ApplyAffine(const TensorView& in, const TensorView& out,
                         const std::vector<double>& scale,
                         const std::vector<double>& shift) {
  std::vector<T> in_store, out_store;
  const T* x = DenseAs<T>(in, in_store);
  T* y;
  if (IsDense<T>(out)) {
    y = static_cast<T*>(out.data);
  } else {
    out_store.resize(out.numel());
    y = out_store.data();
  }
  const int64_t n = in.sizes[0], channels = in.sizes[1];
  const int64_t inner = channels == 0 ? 0 : in.numel() / (n * channels);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t c = 0; c < channels; ++c) {
      const T s = static_cast<T>(scale[c]), h = static_cast<T>(shift[c]);
      const T* src = x + (b * channels + c) * inner;
      T* dst = y + (b * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] = src[i] * s + h;
      if (StopTick(inner)) return absl::OkStatus();
    }
  }
  if (!out_store.empty()) StoreDense<T>(out_store.data(), out);
  return absl::OkStatus();
}

absl::Status BatchNormEval(const KernelCall& call, const KernelArg& weight,
                           const KernelArg& bias, const KernelArg& mean,
                           const KernelArg& var, double eps) {
  const TensorView& in = call.args[0].tensor;
  const TensorView& out = call.outputs[0];
  if (in.dim() < 2) return KernelError(call, "input must have a channel dim");
  if (out.sizes != in.sizes) return KernelError(call, "output sizes differ");
  const int64_t channels = in.sizes[1];
  for (const KernelArg* a : {&weight, &bias, &mean, &var}) {
    if (a->is_tensor() && a->tensor.numel() != channels)
      return KernelError(call, "per-channel tensors must have C elements");
  }
  if (!mean.is_tensor() || !var.is_tensor())
    return KernelError(call,
                       "evaluation mode needs running_mean and running_var");
  if (!IsFloatingPoint(in.dtype) || !IsFloatingPoint(out.dtype))
    return UnsupportedDType(call,
                            IsFloatingPoint(in.dtype) ? out.dtype : in.dtype);
  std::vector<double> scale(channels), shift(channels);
  for (int64_t c = 0; c < channels; ++c) {
    const double m = ChannelValue(mean, c, 0);
    const double invstd = 1.0 / std::sqrt(ChannelValue(var, c, 1) + eps);
    scale[c] = ChannelValue(weight, c, 1) * invstd;
    shift[c] = ChannelValue(bias, c, 0) - m * scale[c];
    if (call.outputs.size() > 1 && call.outputs[1].numel() == channels)
      StoreChannel(call.outputs[1], c, m);
    if (call.outputs.size() > 2 && call.outputs[2].numel() == channels)
      StoreChannel(call.outputs[2], c, invstd);
  }
  if (in.numel() == 0) return absl::OkStatus();
  if (in.dtype == DType::kF64 || out.dtype == DType::kF64)
    return ApplyAffine<double>(in, out, scale, shift);
  return ApplyAffine<float>(in, out, scale, shift);
}

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?,
//                   bool training, float momentum, float eps)
absl::Status NativeBatchNorm(const KernelCall& call) {
  if (call.args.size() < 8) return KernelError(call, "expects 8 arguments");
  if (call.args[5].bool_value) return NativeBatchNormKernel(call);
  return BatchNormEval(call, call.args[1], call.args[2], call.args[3],
                       call.args[4], call.args[7].AsDouble());
}

// _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean,
//                                      running_var, float momentum, float eps)
absl::Status BatchNormNoTraining(const KernelCall& call) {
  if (call.args.size() < 7) return KernelError(call, "expects 7 arguments");
  return BatchNormEval(call, call.args[1], call.args[2], call.args[3],
                       call.args[4], call.args[6].AsDouble());
}

const FamilyKernel kNorm[] = {
    {"aten::native_batch_norm", &Guard<NativeBatchNorm, false>},
    {"aten::_native_batch_norm_legit_no_training",
     &Guard<BatchNormNoTraining, false>},
};

}  // namespace

std::span<const FamilyKernel> NormKernels() { return kNorm; }

}  // namespace ferry::host
