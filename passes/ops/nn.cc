// Neural-network layers.
//
// Model. Each operator has a rule of its own (below, next to its row): the
// output sizes follow ATen's formulas, computed in 128-bit integers so that
// no argument can overflow them, and every operand whose shape the formula
// assumes is checked (channels, groups, per-channel vectors).
//
//   convolution(x: f32[1,3,8,8], w: f32[4,3,3,3], b, [1,1], [1,1], [1,1],
//               False, [0,0], 1)                   ==> f32[1,4,8,8]
//   max_pool2d_with_indices(x: f32[1,64,112,112], [3,3], [2,2], [1,1])
//                                                  ==> (f32, i64)[1,64,56,56]
//   native_batch_norm(x: f32[2,3,4,4], ..., training=False)
//                                                  ==> f32[2,3,4,4], [3], [3]
#include "passes/ops/nn.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/shape_rules.h"

namespace ferry {
namespace {

// Expands a per-spatial-dim parameter given as one value (or N) to `n`
// values, as ATen's expand_param_if_needed.
absl::StatusOr<std::vector<int64_t>> SpatialParameter(const BoundCall& call,
                                                      absl::string_view name,
                                                      int64_t n) {
  absl::StatusOr<std::vector<int64_t>> values = call.RequiredIntList(name);
  if (!values.ok()) return values.status();
  if (values->size() == 1) return std::vector<int64_t>(n, (*values)[0]);
  if (static_cast<int64_t>(values->size()) != n) {
    return call.Error(absl::StrCat("'", name, "' ", ShapeText(*values),
                                   " must have 1 or ", n, " values"));
  }
  return values;
}

// All of `names` (omitted or None ones skipped) of one dtype, `self_name`'s.
absl::Status SameDTypeAs(const BoundCall& call, absl::string_view self_name,
                         std::initializer_list<absl::string_view> names) {
  absl::StatusOr<const TensorSpec*> self = call.Tensor(self_name);
  if (!self.ok()) return self.status();
  for (absl::string_view name : names) {
    absl::StatusOr<const TensorSpec*> other = call.OptionalTensor(name);
    if (!other.ok()) return other.status();
    if (*other != nullptr && (*other)->dtype != (*self)->dtype) {
      return call.DTypeMismatch(
          absl::StrCat("'", name, "' is ", DTypeText((*other)->dtype), " but '",
                       self_name, "' is ", DTypeText((*self)->dtype)));
    }
  }
  return absl::OkStatus();
}

// A 1-D tensor of `size` elements, where given.
absl::Status CheckVector(const BoundCall& call, absl::string_view name,
                         int64_t size) {
  absl::StatusOr<const TensorSpec*> tensor = call.OptionalTensor(name);
  if (!tensor.ok()) return tensor.status();
  if (*tensor == nullptr || (*tensor)->sizes == std::vector<int64_t>{size}) {
    return absl::OkStatus();
  }
  return call.Error(absl::StrCat("'", name, "' has sizes ",
                                 ShapeText((*tensor)->sizes), ", not [", size,
                                 "]"));
}

// --- convolution

// convolution: input [N, C_in, *spatial], weight [C_out, C_in/groups,
// *kernel] ([C_in, C_out/groups, *kernel] when transposed), bias [C_out].
// Each output size is
//   (in + 2*padding - dilation*(kernel-1) - 1) / stride + 1
// or, transposed,
//   (in - 1)*stride - 2*padding + dilation*(kernel-1) + output_padding + 1.
Specs InferConvolution(const BoundCall& call) {
  absl::StatusOr<const TensorSpec*> input = call.Tensor("input");
  if (!input.ok()) return input.status();
  absl::StatusOr<const TensorSpec*> weight = call.Tensor("weight");
  if (!weight.ok()) return weight.status();
  const TensorSpec& in = **input;
  const TensorSpec& w = **weight;
  if (in.dim() < 3) {
    return call.Error(
        absl::StrCat("'input' must be at least 3-D ([N, C, *spatial]), not ",
                     in.dim(), "-D"));
  }
  if (w.dim() != in.dim()) {
    return call.Error(absl::StrCat("'weight' must be ", in.dim(),
                                   "-D like 'input', not ", w.dim(), "-D"));
  }
  const int64_t spatial = in.dim() - 2;
  absl::StatusOr<std::vector<int64_t>> stride =
      SpatialParameter(call, "stride", spatial);
  if (!stride.ok()) return stride.status();
  absl::StatusOr<std::vector<int64_t>> padding =
      SpatialParameter(call, "padding", spatial);
  if (!padding.ok()) return padding.status();
  absl::StatusOr<std::vector<int64_t>> dilation =
      SpatialParameter(call, "dilation", spatial);
  if (!dilation.ok()) return dilation.status();
  absl::StatusOr<bool> transposed = call.Bool("transposed");
  if (!transposed.ok()) return transposed.status();
  absl::StatusOr<std::vector<int64_t>> output_padding =
      SpatialParameter(call, "output_padding", spatial);
  if (!output_padding.ok()) return output_padding.status();
  absl::StatusOr<int64_t> groups = call.Int("groups");
  if (!groups.ok()) return groups.status();
  if (*groups <= 0) {
    return call.Error(absl::StrCat("groups must be positive, not ", *groups));
  }
  for (int64_t d = 0; d < spatial; ++d) {
    if ((*stride)[d] <= 0 || (*dilation)[d] <= 0) {
      return call.Error(absl::StrCat("stride ", ShapeText(*stride),
                                     " and dilation ", ShapeText(*dilation),
                                     " must be positive"));
    }
    if ((*padding)[d] < 0 || (*output_padding)[d] < 0) {
      return call.Error(
          absl::StrCat("padding ", ShapeText(*padding), " and output_padding ",
                       ShapeText(*output_padding), " must not be negative"));
    }
    if (!*transposed && (*output_padding)[d] != 0) {
      return call.Error("output_padding needs a transposed convolution");
    }
  }

  const int64_t in_channels = in.sizes[1];
  int64_t out_channels = 0;
  if (!*transposed) {
    std::optional<int64_t> expected = CheckedMul(w.sizes[1], *groups);
    if (!expected || *expected != in_channels) {
      return call.Error(absl::StrCat(
          "'weight' ", ShapeText(w.sizes), " with groups=", *groups,
          " expects ", expected ? absl::StrCat(*expected) : "too many",
          " input channels, but 'input' has ", in_channels));
    }
    if (w.sizes[0] % *groups != 0) {
      return call.Error(absl::StrCat("output channels ", w.sizes[0],
                                     " are not divisible by groups=", *groups));
    }
    out_channels = w.sizes[0];
  } else {
    if (w.sizes[0] != in_channels) {
      return call.Error(absl::StrCat("'weight' ", ShapeText(w.sizes),
                                     " of a transposed convolution expects ",
                                     w.sizes[0],
                                     " input channels, but 'input' "
                                     "has ",
                                     in_channels));
    }
    if (in_channels % *groups != 0) {
      return call.Error(absl::StrCat("input channels ", in_channels,
                                     " are not divisible by groups=", *groups));
    }
    std::optional<int64_t> channels = CheckedMul(w.sizes[1], *groups);
    if (!channels) return call.Error("the output channels overflow int64");
    out_channels = *channels;
  }
  if (absl::Status s = CheckVector(call, "bias", out_channels); !s.ok()) {
    return s;
  }
  if (absl::Status s = SameDTypeAs(call, "input", {"weight", "bias"});
      !s.ok()) {
    return s;
  }

  std::vector<int64_t> sizes = {in.sizes[0], out_channels};
  for (int64_t d = 0; d < spatial; ++d) {
    // In __int128: the arguments are any int64 values.
    const __int128 size = in.sizes[d + 2];
    const __int128 kernel = w.sizes[d + 2];
    const __int128 s = (*stride)[d], p = (*padding)[d], dl = (*dilation)[d];
    const __int128 extent = dl * (kernel - 1) + 1;  // the dilated kernel
    __int128 out;
    if (!*transposed) {
      const __int128 padded = size + 2 * p;
      if (padded < extent) {
        return call.Error(absl::StrCat(
            "the dilated kernel (", static_cast<int64_t>(kernel), ", dilation ",
            static_cast<int64_t>(dl), ") is larger than the padded input (",
            static_cast<int64_t>(size), " + 2*", static_cast<int64_t>(p),
            ") in spatial dim ", d));
      }
      out = (padded - extent) / s + 1;
    } else {
      out = (size - 1) * s - 2 * p + extent + (*output_padding)[d];
      if (out <= 0) {
        return call.Error(absl::StrCat("the output size of spatial dim ", d,
                                       " is not positive"));
      }
    }
    if (out > std::numeric_limits<int64_t>::max()) {
      return call.Error("the output size overflows int64");
    }
    sizes.push_back(static_cast<int64_t>(out));
  }
  if (absl::Status s = CheckResultSizes(call, sizes, in.dtype); !s.ok()) {
    return s;
  }
  return OneResult(FreshSpec(in.dtype, std::move(sizes)));
}

// --- max_pool2d_with_indices

// (values, indices) of [N, C, H_out, W_out] (or [C, H_out, W_out]); each
// output size is ATen's pooling_output_shape:
//   (in + 2*padding - dilation*(kernel-1) - 1 [+ stride-1 if ceil_mode])
//     / stride + 1,
// one less under ceil_mode when the last window would start in the padding.
Specs InferMaxPool2d(const BoundCall& call) {
  absl::StatusOr<const TensorSpec*> self = call.Tensor("self");
  if (!self.ok()) return self.status();
  const TensorSpec& in = **self;
  if (in.dim() != 3 && in.dim() != 4) {
    return call.Error(
        absl::StrCat("'self' must be 3-D or 4-D, not ", in.dim(), "-D"));
  }
  absl::StatusOr<std::vector<int64_t>> kernel =
      SpatialParameter(call, "kernel_size", 2);
  if (!kernel.ok()) return kernel.status();
  absl::StatusOr<std::vector<int64_t>> stride = call.RequiredIntList("stride");
  if (!stride.ok()) return stride.status();
  if (stride->empty()) {
    stride = *kernel;  // stride=[] is the kernel size
  } else {
    stride = SpatialParameter(call, "stride", 2);
    if (!stride.ok()) return stride.status();
  }
  absl::StatusOr<std::vector<int64_t>> padding =
      SpatialParameter(call, "padding", 2);
  if (!padding.ok()) return padding.status();
  absl::StatusOr<std::vector<int64_t>> dilation =
      SpatialParameter(call, "dilation", 2);
  if (!dilation.ok()) return dilation.status();
  absl::StatusOr<bool> ceil_mode = call.Bool("ceil_mode");
  if (!ceil_mode.ok()) return ceil_mode.status();

  std::vector<int64_t> sizes(in.sizes.begin(), in.sizes.end() - 2);
  for (int d = 0; d < 2; ++d) {
    const __int128 k = (*kernel)[d], s = (*stride)[d], p = (*padding)[d],
                   dl = (*dilation)[d];
    if (k <= 0 || s <= 0 || dl <= 0) {
      return call.Error(absl::StrCat(
          "kernel_size ", ShapeText(*kernel), ", stride ", ShapeText(*stride),
          " and dilation ", ShapeText(*dilation), " must be positive"));
    }
    if (p < 0 || p > k / 2) {
      return call.Error(absl::StrCat("padding ", ShapeText(*padding),
                                     " must be between 0 and half the kernel "
                                     "size ",
                                     ShapeText(*kernel)));
    }
    const __int128 size = in.sizes[in.dim() - 2 + d];
    __int128 numerator =
        size + 2 * p - dl * (k - 1) - 1 + (*ceil_mode ? s - 1 : 0);
    // Floor division (the numerator may be negative).
    __int128 out = numerator >= 0 ? numerator / s : -((-numerator + s - 1) / s);
    out += 1;
    if (*ceil_mode && (out - 1) * s >= size + p) --out;
    if (out < 1 || out > std::numeric_limits<int64_t>::max()) {
      return call.Error(absl::StrCat("the output size of spatial dim ", d,
                                     " is ",
                                     out < 1 ? "too small" : "too large",
                                     " for input ", ShapeText(in.sizes)));
    }
    sizes.push_back(static_cast<int64_t>(out));
  }
  return std::vector<TensorSpec>{FreshSpec(in.dtype, sizes),
                                 FreshSpec(DType::kI64, sizes)};
}

// --- native_batch_norm

// native_batch_norm -> (out, save_mean, save_invstd): out has the input's
// dtype and sizes; the statistics are [C]. In eval mode ATen's CPU kernel
// returns them empty ([0]) while its meta kernel says [C]: both are accepted
// (the declared one decides). Their dtype is the input's, or f32 for a half
// input where declared so (ATen's accumulation type, as CUDA and meta give).
Specs InferBatchNorm(const BoundCall& call) {
  absl::StatusOr<const TensorSpec*> input = call.Tensor("input");
  if (!input.ok()) return input.status();
  const TensorSpec& in = **input;
  if (in.dim() < 2) {
    return call.Error(
        absl::StrCat("'input' must be at least 2-D ([N, C, ...]), "
                     "not ",
                     in.dim(), "-D"));
  }
  const int64_t channels = in.sizes[1];
  for (absl::string_view name :
       {"weight", "bias", "running_mean", "running_var"}) {
    if (absl::Status s = CheckVector(call, name, channels); !s.ok()) return s;
  }
  absl::StatusOr<bool> training = call.Bool("training");
  if (!training.ok()) return training.status();
  if (!*training) {
    for (absl::string_view name : {"running_mean", "running_var"}) {
      absl::StatusOr<const TensorSpec*> stat = call.OptionalTensor(name);
      if (!stat.ok()) return stat.status();
      if (*stat == nullptr) {
        return call.Error(absl::StrCat("'", name,
                                       "' is needed in eval mode "
                                       "(training=False)"));
      }
    }
  }
  std::vector<TensorSpec> results = {FreshSpec(in.dtype, in.sizes)};
  for (int r = 1; r <= 2; ++r) {
    const TensorSpec* declared = call.DeclaredResult(r);
    std::vector<int64_t> sizes = {channels};
    if (!*training && declared != nullptr &&
        declared->sizes == std::vector<int64_t>{0}) {
      sizes = {0};
    }
    DType dtype = in.dtype;
    if ((in.dtype == DType::kF16 || in.dtype == DType::kBF16) &&
        declared != nullptr && declared->dtype == DType::kF32) {
      dtype = DType::kF32;
    }
    results.push_back(FreshSpec(dtype, std::move(sizes)));
  }
  return results;
}

// --- native_layer_norm

// native_layer_norm -> (out, mean, rstd). mean and rstd keep the leading
// (non-normalized) dims and have size 1 in each normalized one; their dtype is
// the input's (as ATen's CPU kernels give for non-mixed inputs).
Specs InferLayerNorm(const BoundCall& call) {
  absl::StatusOr<const TensorSpec*> input = call.Tensor("input");
  if (!input.ok()) return input.status();
  absl::StatusOr<std::optional<std::vector<int64_t>>> normalized =
      call.IntList("normalized_shape");
  if (!normalized.ok()) return normalized.status();
  if (!normalized->has_value() || (*normalized)->empty()) {
    return call.Error("'normalized_shape' must have at least one dim");
  }
  const std::vector<int64_t>& shape = **normalized;
  const TensorSpec& in = **input;
  int64_t axis = in.dim() - static_cast<int64_t>(shape.size());
  if (axis < 0 ||
      !std::equal(shape.begin(), shape.end(), in.sizes.begin() + axis)) {
    return call.Error(absl::StrCat("normalized_shape ", ShapeText(shape),
                                   " is not the trailing sizes of ",
                                   ShapeText(in.sizes)));
  }
  for (absl::string_view name : {"weight", "bias"}) {
    absl::StatusOr<const TensorSpec*> affine = call.OptionalTensor(name);
    if (!affine.ok()) return affine.status();
    if (*affine != nullptr && (*affine)->sizes != shape) {
      return call.Error(
          absl::StrCat("'", name, "' has sizes ", ShapeText((*affine)->sizes),
                       ", not normalized_shape ", ShapeText(shape)));
    }
  }
  std::vector<int64_t> stats(in.sizes.begin(), in.sizes.begin() + axis);
  stats.resize(in.sizes.size(), 1);
  return std::vector<TensorSpec>{FreshSpec(in.dtype, in.sizes),
                                 FreshSpec(in.dtype, stats),
                                 FreshSpec(in.dtype, stats)};
}

constexpr OpDef kOps[] = {
    {"aten::convolution(Tensor input, Tensor weight, Tensor? bias, int[] "
     "stride, int[] padding, int[] dilation, bool transposed, int[] "
     "output_padding, int groups) -> Tensor",
     ShapeRule::kSpecific, &InferConvolution},
    {"aten::max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] "
     "stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) "
     "-> (Tensor, Tensor)",
     ShapeRule::kSpecific, &InferMaxPool2d},
    {"aten::native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, "
     "Tensor? running_mean, Tensor? running_var, bool training, float "
     "momentum, float eps) -> (Tensor, Tensor, Tensor)",
     ShapeRule::kSpecific, &InferBatchNorm},
    {"aten::native_layer_norm(Tensor input, SymInt[] normalized_shape, "
     "Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)",
     ShapeRule::kLayerNorm, &InferLayerNorm},
};

}  // namespace

constinit const OpFamily kNnFamily = {
    "nn",
    "Convolution, pooling and normalization layers.",
    kOps,
};

}  // namespace ferry
