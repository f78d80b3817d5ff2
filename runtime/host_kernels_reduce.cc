// Host kernels that reduce: sums, means, max/min, softmax, layer and batch
// normalization, pooling.
//
// Model. A reduction splits the input's dims into kept dims (which index the
// output) and reduced dims. For each output element the reduced dims are
// walked with their own strides:
//
//   sum(x: [A,B,C], dim=[1]) -> out[a,c] = sum_b x[a,b,c]
//     kept view of x: sizes [A,C], strides [sA,sC]; reduced: sizes [B] [sB]
//
// Accumulation is in double for floating inputs or outputs and in int64
// (wrapping) otherwise; the result is rounded once when stored.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "runtime/host_kernels_internal.h"

namespace ferry::host {
namespace {

// The dims [first, first + count) of `t`.
TensorView DimRange(const TensorView& t, int64_t first, int64_t count) {
  TensorView part = t;
  part.sizes.assign(t.sizes.begin() + first, t.sizes.begin() + first + count);
  part.strides.assign(t.strides.begin() + first,
                      t.strides.begin() + first + count);
  return part;
}

}  // namespace

absl::StatusOr<ReductionPlan> PlanReduction(const KernelCall& call,
                                            const TensorView& in,
                                            const KernelArg* dims_arg,
                                            const TensorView& out) {
  std::vector<bool> reduce(in.dim(), false);
  bool any = false;
  if (dims_arg && dims_arg->kind == KernelArg::Kind::kInts) {
    for (int64_t d : dims_arg->ints) {
      absl::StatusOr<int64_t> nd = NormalizeDim(call, d, in.dim());
      if (!nd.ok()) return nd.status();
      if (in.dim() > 0) {
        if (reduce[*nd]) return KernelError(call, "dim appears more than once");
        reduce[*nd] = true;
      }
      any = true;
    }
  } else if (dims_arg && dims_arg->kind == KernelArg::Kind::kInt) {
    absl::StatusOr<int64_t> nd =
        NormalizeDim(call, dims_arg->int_value, in.dim());
    if (!nd.ok()) return nd.status();
    if (in.dim() > 0) reduce[*nd] = true;
    any = true;
  }
  if (!any) std::fill(reduce.begin(), reduce.end(), true);

  ReductionPlan plan;
  plan.kept = in;
  plan.reduced = in;
  plan.kept.sizes.clear();
  plan.kept.strides.clear();
  plan.reduced.sizes.clear();
  plan.reduced.strides.clear();
  for (int64_t d = 0; d < in.dim(); ++d) {
    TensorView& part = reduce[d] ? plan.reduced : plan.kept;
    part.sizes.push_back(in.sizes[d]);
    part.strides.push_back(in.strides[d]);
    if (reduce[d]) plan.count *= in.sizes[d];
  }
  plan.out = out;
  if (out.dim() == in.dim() && in.dim() > 0 && plan.reduced.dim() > 0) {
    // keepdim: drop the reduced dims (size 1) from the output.
    plan.out.sizes.clear();
    plan.out.strides.clear();
    for (int64_t d = 0; d < out.dim(); ++d) {
      if (reduce[d]) {
        if (out.sizes[d] != 1)
          return KernelError(call,
                             "keepdim output must have size 1 in reduced dims");
        continue;
      }
      plan.out.sizes.push_back(out.sizes[d]);
      plan.out.strides.push_back(out.strides[d]);
    }
  }
  if (plan.out.sizes != plan.kept.sizes) {
    return KernelError(
        call, absl::StrCat("output ", out.DebugString(),
                           " does not match reducing ", in.DebugString()));
  }
  return plan;
}

namespace {

// Calls fn(out_ptr, in_row_ptr) per output element; the row is walked with
// ForEachReduced.
template <typename Fn>
void ForEachOutput(const ReductionPlan& plan, Fn&& fn) {
  StridedLoop<2>(plan.out.sizes, {plan.out.bytes(), plan.kept.bytes()},
                 {OwnByteStrides(plan.out), OwnByteStrides(plan.kept)},
                 [&](const std::array<std::byte*, 2>& p) { fn(p[0], p[1]); });
}

template <typename Fn>
void ForEachReduced(const ReductionPlan& plan, std::byte* row, Fn&& fn) {
  StridedLoop<1>(plan.reduced.sizes, {row}, {OwnByteStrides(plan.reduced)},
                 [&](const std::array<std::byte*, 1>& p) { fn(p[0]); });
}

enum class Reduce { kSum, kMean, kMax, kMin };

absl::Status ReduceKernel(const KernelCall& call, const KernelArg* dims,
                          Reduce kind) {
  const TensorView& in = call.args[0].tensor;
  const TensorView& out = call.outputs[0];
  absl::StatusOr<ReductionPlan> plan = PlanReduction(call, in, dims, out);
  if (!plan.ok()) return plan.status();
  const DType ic = in.dtype, oc = out.dtype;
  const bool as_float = IsFloatingPoint(in.dtype) || IsFloatingPoint(out.dtype);
  if ((kind == Reduce::kMax || kind == Reduce::kMin) && plan->count == 0 &&
      out.numel() > 0) {
    return KernelError(call, "cannot take the max/min of an empty dimension");
  }
  if (kind == Reduce::kMean && !IsFloatingPoint(out.dtype))
    return KernelError(call, "mean needs a floating output dtype");
  const double count = static_cast<double>(plan->count);
  ForEachOutput(*plan, [&](std::byte* out_ptr, std::byte* row) {
    if (as_float) {
      double acc =
          kind == Reduce::kMax   ? -std::numeric_limits<double>::infinity()
          : kind == Reduce::kMin ? std::numeric_limits<double>::infinity()
                                 : 0.0;
      ForEachReduced(*plan, row, [&](std::byte* p) {
        double v = element::LoadAsDouble(ic, p);
        switch (kind) {
          case Reduce::kSum:
          case Reduce::kMean:
            acc += v;
            break;
          case Reduce::kMax:
            acc = (std::isnan(v) || std::isnan(acc))
                      ? std::numeric_limits<double>::quiet_NaN()
                      : std::max(acc, v);
            break;
          case Reduce::kMin:
            acc = (std::isnan(v) || std::isnan(acc))
                      ? std::numeric_limits<double>::quiet_NaN()
                      : std::min(acc, v);
            break;
        }
      });
      if (kind == Reduce::kMean) acc /= count;
      element::StoreDouble(oc, out_ptr, acc);
    } else {
      int64_t acc = kind == Reduce::kMax   ? std::numeric_limits<int64_t>::min()
                    : kind == Reduce::kMin ? std::numeric_limits<int64_t>::max()
                                           : 0;
      ForEachReduced(*plan, row, [&](std::byte* p) {
        int64_t v = element::LoadAsInt64(ic, p);
        switch (kind) {
          case Reduce::kSum:
          case Reduce::kMean:
            acc = static_cast<int64_t>(static_cast<uint64_t>(acc) +
                                       static_cast<uint64_t>(v));
            break;
          case Reduce::kMax:
            acc = std::max(acc, v);
            break;
          case Reduce::kMin:
            acc = std::min(acc, v);
            break;
        }
      });
      element::StoreInt64(oc, out_ptr, acc);
    }
  });
  return absl::OkStatus();
}

const KernelArg* OptionalArg(const KernelCall& call, size_t i) {
  return i < call.args.size() ? &call.args[i] : nullptr;
}

}  // namespace

// sum.dim_IntList(self, int[1]? dim, bool keepdim=False, *, dtype=None)
absl::Status SumDimKernel(const KernelCall& call) {
  return ReduceKernel(call, OptionalArg(call, 1), Reduce::kSum);
}
// sum(self, *, dtype=None)
absl::Status SumAllKernel(const KernelCall& call) {
  return ReduceKernel(call, nullptr, Reduce::kSum);
}
absl::Status MeanDimKernel(const KernelCall& call) {
  return ReduceKernel(call, OptionalArg(call, 1), Reduce::kMean);
}
absl::Status MeanAllKernel(const KernelCall& call) {
  return ReduceKernel(call, nullptr, Reduce::kMean);
}
// amax(self, int[1] dim=[], bool keepdim=False)
absl::Status AmaxKernel(const KernelCall& call) {
  return ReduceKernel(call, OptionalArg(call, 1), Reduce::kMax);
}
absl::Status AminKernel(const KernelCall& call) {
  return ReduceKernel(call, OptionalArg(call, 1), Reduce::kMin);
}

namespace {

// Walks every row along `dim` of `in` and the matching row of `out`:
// fn(in_row, in_stride_bytes, out_row, out_stride_bytes, length).
template <typename Fn>
absl::Status ForEachRow(const KernelCall& call, const TensorView& in,
                        const TensorView& out, int64_t dim, Fn&& fn) {
  if (in.sizes != out.sizes)
    return KernelError(call, "output sizes differ from the input's");
  if (in.dim() == 0) {
    fn(in.bytes(), 0, out.bytes(), 0, 1);
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> d = NormalizeDim(call, dim, in.dim());
  if (!d.ok()) return d.status();
  TensorView in_rows = in, out_rows = out;
  in_rows.sizes.erase(in_rows.sizes.begin() + *d);
  in_rows.strides.erase(in_rows.strides.begin() + *d);
  out_rows.sizes.erase(out_rows.sizes.begin() + *d);
  out_rows.strides.erase(out_rows.strides.begin() + *d);
  const int64_t length = in.sizes[*d];
  const int64_t in_step = in.strides[*d] * in.element_size();
  const int64_t out_step = out.strides[*d] * out.element_size();
  StridedLoop<2>(out_rows.sizes, {in_rows.bytes(), out_rows.bytes()},
                 {OwnByteStrides(in_rows), OwnByteStrides(out_rows)},
                 [&](const std::array<std::byte*, 2>& p) {
                   fn(p[0], in_step, p[1], out_step, length);
                 });
  return absl::OkStatus();
}

absl::Status SoftmaxLike(const KernelCall& call, bool log) {
  const TensorView& in = call.args[0].tensor;
  const TensorView& out = call.outputs[0];
  if (!IsFloatingPoint(out.dtype)) return UnsupportedDType(call, out.dtype);
  const DType ic = in.dtype, oc = out.dtype;
  const int64_t dim = call.args[1].AsInt();
  return ForEachRow(
      call, in, out, dim,
      [&](std::byte* in_row, int64_t in_step, std::byte* out_row,
          int64_t out_step, int64_t length) {
        if (StopTick(3 * length)) return;
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < length; ++i)
          max = std::max(max, element::LoadAsDouble(ic, in_row + i * in_step));
        double sum = 0;
        for (int64_t i = 0; i < length; ++i)
          sum +=
              std::exp(element::LoadAsDouble(ic, in_row + i * in_step) - max);
        const double log_sum = std::log(sum);
        for (int64_t i = 0; i < length; ++i) {
          double x = element::LoadAsDouble(ic, in_row + i * in_step) - max;
          element::StoreDouble(oc, out_row + i * out_step,
                               log ? x - log_sum : std::exp(x) / sum);
        }
      });
}

}  // namespace

// _softmax(self, int dim, bool half_to_float); softmax.int(self, dim, dtype)
absl::Status SoftmaxKernel(const KernelCall& call) {
  return SoftmaxLike(call, /*log=*/false);
}
absl::Status LogSoftmaxKernel(const KernelCall& call) {
  return SoftmaxLike(call, /*log=*/true);
}

namespace {

// Partial sums per row in LayerNormRow: enough independent additions to
// fill the vector lanes and hide the adder's latency.
constexpr int64_t kNormLanes = 8;

// One row of an f32 layer norm whose `n` normalized elements are adjacent,
// as are the weight's and the bias's (either may be null): the general
// loop's arithmetic (in double, each result rounded once when stored), with
// the two sums split over kNormLanes partial sums so that the loops
// vectorise. Returns mean and rstd.
std::pair<double, double> LayerNormRow(const float* __restrict x, int64_t n,
                                       const float* __restrict w,
                                       const float* __restrict b, double eps,
                                       float* __restrict y) {
  const int64_t whole = n - n % kNormLanes;
  double part[kNormLanes] = {};
  for (int64_t i = 0; i < whole; i += kNormLanes)
    for (int64_t l = 0; l < kNormLanes; ++l) part[l] += x[i + l];
  double sum = 0;
  for (double p : part) sum += p;
  for (int64_t i = whole; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  std::fill_n(part, kNormLanes, 0.0);
  for (int64_t i = 0; i < whole; i += kNormLanes)
    for (int64_t l = 0; l < kNormLanes; ++l) {
      const double d = x[i + l] - mean;
      part[l] += d * d;
    }
  double squares = 0;
  for (double p : part) squares += p;
  for (int64_t i = whole; i < n; ++i) {
    const double d = x[i] - mean;
    squares += d * d;
  }
  const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(n) + eps);
  if (w != nullptr && b != nullptr) {
    for (int64_t i = 0; i < n; ++i)
      y[i] = static_cast<float>((x[i] - mean) * rstd * w[i] + b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      double v = (x[i] - mean) * rstd;
      if (w != nullptr) v *= w[i];
      if (b != nullptr) v += b[i];
      y[i] = static_cast<float>(v);
    }
  }
  return {mean, rstd};
}

// Whether LayerNormRow serves an affine operand: absent, or f32 laid out
// as the normalized dims.
bool IsDenseF32Like(const TensorView& t, const TensorView& like) {
  return t.data == nullptr ||
         (t.dtype == DType::kF32 && t.sizes == like.sizes && t.IsContiguous());
}

}  // namespace

// native_layer_norm(input, normalized_shape, weight?, bias?, eps)
//   -> (out, mean, rstd); mean/rstd have the input's leading sizes and 1s.
absl::Status NativeLayerNormKernel(const KernelCall& call) {
  const TensorView& in = call.args[0].tensor;
  const std::vector<int64_t>& shape = call.args[1].ints;
  const KernelArg& weight = call.args[2];
  const KernelArg& bias = call.args[3];
  const double eps = call.args[4].AsDouble();
  if (call.outputs.size() != 3) return KernelError(call, "expects 3 outputs");
  const TensorView& out = call.outputs[0];
  const int64_t k = static_cast<int64_t>(shape.size());
  if (k == 0 || k > in.dim())
    return KernelError(call, "normalized_shape must be 1..rank dims");
  for (int64_t i = 0; i < k; ++i) {
    if (in.sizes[in.dim() - k + i] != shape[i])
      return KernelError(call, "normalized_shape does not match the input");
  }
  if (out.sizes != in.sizes) return KernelError(call, "output sizes differ");
  const int64_t outer = in.dim() - k;
  TensorView in_outer = DimRange(in, 0, outer),
             out_outer = DimRange(out, 0, outer);
  TensorView in_inner = DimRange(in, outer, k),
             out_inner = DimRange(out, outer, k);
  // mean / rstd indexed by the outer dims (their trailing 1s ignored).
  std::array<TensorView, 2> stats;
  for (int s = 0; s < 2; ++s) {
    const TensorView& t = call.outputs[1 + s];
    if (t.numel() != in_outer.numel())
      return KernelError(call, "mean/rstd outputs do not match the input");
    stats[s] = t.dim() >= outer
                   ? DimRange(t, 0, outer)
                   : ContiguousView(t.data, t.dtype, in_outer.sizes);
    if (stats[s].sizes != in_outer.sizes)
      stats[s] = ContiguousView(t.data, t.dtype, in_outer.sizes);
  }
  for (const KernelArg* affine : {&weight, &bias}) {
    if (affine->is_tensor() && affine->tensor.numel() != in_inner.numel())
      return KernelError(call, "weight/bias must have normalized_shape");
  }
  TensorView w = weight.is_tensor() ? weight.tensor : TensorView{};
  TensorView b = bias.is_tensor() ? bias.tensor : TensorView{};
  const DType ic = in.dtype, oc = out.dtype;
  const double n = static_cast<double>(in_inner.numel());
  const DimVector in_inner_strides = OwnByteStrides(in_inner);
  const DimVector out_inner_strides = OwnByteStrides(out_inner);
  const DimVector w_strides =
      w.data ? BroadcastByteStrides(w, in_inner.sizes) : DimVector(k, 0);
  const DimVector b_strides =
      b.data ? BroadcastByteStrides(b, in_inner.sizes) : DimVector(k, 0);
  std::byte zero_bytes[8] = {};
  // f32 rows of adjacent elements: LayerNormRow.
  const bool rows = ic == DType::kF32 && oc == DType::kF32 &&
                    in_inner.IsContiguous() && out_inner.IsContiguous() &&
                    IsDenseF32Like(w, in_inner) && IsDenseF32Like(b, in_inner);
  StridedLoop<4>(
      in_outer.sizes,
      {in_outer.bytes(), out_outer.bytes(), stats[0].bytes(), stats[1].bytes()},
      {OwnByteStrides(in_outer), OwnByteStrides(out_outer),
       OwnByteStrides(stats[0]), OwnByteStrides(stats[1])},
      [&](const std::array<std::byte*, 4>& p) {
        if (rows) {
          const auto [mean, rstd] =
              LayerNormRow(reinterpret_cast<const float*>(p[0]),
                           in_inner.numel(), static_cast<const float*>(w.data),
                           static_cast<const float*>(b.data), eps,
                           reinterpret_cast<float*>(p[1]));
          element::StoreDouble(stats[0].dtype, p[2], mean);
          element::StoreDouble(stats[1].dtype, p[3], rstd);
          return;
        }
        double sum = 0;
        StridedLoop<1>(in_inner.sizes, {p[0]}, {in_inner_strides},
                       [&](const std::array<std::byte*, 1>& q) {
                         sum += element::LoadAsDouble(ic, q[0]);
                       });
        const double mean = sum / n;
        double squares = 0;
        StridedLoop<1>(in_inner.sizes, {p[0]}, {in_inner_strides},
                       [&](const std::array<std::byte*, 1>& q) {
                         double d = element::LoadAsDouble(ic, q[0]) - mean;
                         squares += d * d;
                       });
        const double rstd = 1.0 / std::sqrt(squares / n + eps);
        StridedLoop<4>(
            in_inner.sizes,
            {p[0], p[1], w.data ? w.bytes() : zero_bytes,
             b.data ? b.bytes() : zero_bytes},
            {in_inner_strides, out_inner_strides, w_strides, b_strides},
            [&](const std::array<std::byte*, 4>& q) {
              double y = (element::LoadAsDouble(ic, q[0]) - mean) * rstd;
              if (w.data) y *= element::LoadAsDouble(w.dtype, q[2]);
              if (b.data) y += element::LoadAsDouble(b.dtype, q[3]);
              element::StoreDouble(oc, q[1], y);
            });
        element::StoreDouble(stats[0].dtype, p[2], mean);
        element::StoreDouble(stats[1].dtype, p[3], rstd);
      });
  return absl::OkStatus();
}

namespace {

// Batch normalization over dim 1 (channels) of `in` with per-channel
// statistics. In training mode the statistics come from the batch (biased
// variance) and the running ones are updated in place, as ATen does.
absl::Status BatchNorm(const KernelCall& call, const TensorView& in,
                       const KernelArg& weight, const KernelArg& bias,
                       const KernelArg& running_mean,
                       const KernelArg& running_var, bool training,
                       double momentum, double eps) {
  const TensorView& out = call.outputs[0];
  if (in.dim() < 2) return KernelError(call, "input must have a channel dim");
  if (out.sizes != in.sizes) return KernelError(call, "output sizes differ");
  const int64_t channels = in.sizes[1];
  for (const KernelArg* a : {&weight, &bias, &running_mean, &running_var}) {
    if (a->is_tensor() && a->tensor.numel() != channels)
      return KernelError(call, "per-channel tensors must have C elements");
  }
  if (!training && (!running_mean.is_tensor() || !running_var.is_tensor()))
    return KernelError(call,
                       "evaluation mode needs running_mean and running_var");
  const DType ic = in.dtype, oc = out.dtype;
  auto channel_value = [](const KernelArg& a, int64_t c) {
    const TensorView& t = a.tensor;
    const int64_t stride = t.dim() > 0 ? t.strides[t.dim() - 1] : 0;
    return element::LoadAsDouble(t.dtype,
                                 t.bytes() + c * stride * t.element_size());
  };
  auto store_channel = [](const TensorView& t, int64_t c, double v) {
    const int64_t stride = t.dim() > 0 ? t.strides[t.dim() - 1] : 0;
    element::StoreDouble(t.dtype, t.bytes() + c * stride * t.element_size(), v);
  };
  for (int64_t c = 0; c < channels; ++c) {
    TensorView in_c = in, out_c = out;
    in_c.data = in.bytes() + c * in.strides[1] * in.element_size();
    out_c.data = out.bytes() + c * out.strides[1] * out.element_size();
    in_c.sizes[1] = out_c.sizes[1] = 1;
    const double n = static_cast<double>(in_c.numel());
    double mean, var;
    if (training) {
      double sum = 0, squares = 0;
      StridedLoop<1>(in_c.sizes, {in_c.bytes()}, {OwnByteStrides(in_c)},
                     [&](const std::array<std::byte*, 1>& p) {
                       sum += element::LoadAsDouble(ic, p[0]);
                     });
      mean = n > 0 ? sum / n : 0;
      StridedLoop<1>(in_c.sizes, {in_c.bytes()}, {OwnByteStrides(in_c)},
                     [&](const std::array<std::byte*, 1>& p) {
                       double d = element::LoadAsDouble(ic, p[0]) - mean;
                       squares += d * d;
                     });
      var = n > 0 ? squares / n : 0;
      if (running_mean.is_tensor()) {
        store_channel(
            running_mean.tensor, c,
            (1 - momentum) * channel_value(running_mean, c) + momentum * mean);
      }
      if (running_var.is_tensor()) {
        const double unbiased = n > 1 ? squares / (n - 1) : var;
        store_channel(running_var.tensor, c,
                      (1 - momentum) * channel_value(running_var, c) +
                          momentum * unbiased);
      }
    } else {
      mean = channel_value(running_mean, c);
      var = channel_value(running_var, c);
    }
    const double invstd = 1.0 / std::sqrt(var + eps);
    const double scale = weight.is_tensor() ? channel_value(weight, c) : 1.0;
    const double shift = bias.is_tensor() ? channel_value(bias, c) : 0.0;
    StridedLoop<2>(in_c.sizes, {in_c.bytes(), out_c.bytes()},
                   {OwnByteStrides(in_c), OwnByteStrides(out_c)},
                   [&](const std::array<std::byte*, 2>& p) {
                     double y =
                         (element::LoadAsDouble(ic, p[0]) - mean) * invstd;
                     element::StoreDouble(oc, p[1], y * scale + shift);
                   });
    // The saved statistics, where the outputs have room for them.
    if (call.outputs.size() > 1 && call.outputs[1].numel() == channels)
      store_channel(call.outputs[1], c, mean);
    if (call.outputs.size() > 2 && call.outputs[2].numel() == channels)
      store_channel(call.outputs[2], c, invstd);
  }
  return absl::OkStatus();
}

}  // namespace

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?,
//                   bool training, float momentum, float eps)
absl::Status NativeBatchNormKernel(const KernelCall& call) {
  return BatchNorm(call, call.args[0].tensor, call.args[1], call.args[2],
                   call.args[3], call.args[4], call.args[5].bool_value,
                   call.args[6].AsDouble(), call.args[7].AsDouble());
}

// _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean,
//                                      running_var, float momentum, float eps)
absl::Status BatchNormNoTrainingKernel(const KernelCall& call) {
  return BatchNorm(call, call.args[0].tensor, call.args[1], call.args[2],
                   call.args[3], call.args[4], /*training=*/false,
                   call.args[5].AsDouble(), call.args[6].AsDouble());
}

namespace {

struct Pool2dParams {
  int64_t kh, kw, sh, sw, ph, pw, dh = 1, dw = 1;
};

// kernel_size, stride (empty: kernel_size), padding, dilation as int[2]
// arguments that may hold one value for both dims.
absl::StatusOr<Pool2dParams> ReadPool2dParams(const KernelCall& call,
                                              size_t first, bool has_dilation) {
  auto pair = [&](size_t i, int64_t fallback_h, int64_t fallback_w, int64_t& h,
                  int64_t& w) {
    const std::vector<int64_t>* ints =
        i < call.args.size() && call.args[i].kind == KernelArg::Kind::kInts
            ? &call.args[i].ints
            : nullptr;
    if (ints && ints->size() == 1) {
      h = w = (*ints)[0];
    } else if (ints && ints->size() >= 2) {
      h = (*ints)[0];
      w = (*ints)[1];
    } else if (i < call.args.size() &&
               call.args[i].kind == KernelArg::Kind::kInt) {
      h = w = call.args[i].int_value;
    } else {
      h = fallback_h;
      w = fallback_w;
    }
  };
  Pool2dParams p;
  pair(first, 1, 1, p.kh, p.kw);
  pair(first + 1, p.kh, p.kw, p.sh, p.sw);
  pair(first + 2, 0, 0, p.ph, p.pw);
  if (has_dilation) pair(first + 3, 1, 1, p.dh, p.dw);
  if (p.kh <= 0 || p.kw <= 0 || p.sh <= 0 || p.sw <= 0 || p.ph < 0 ||
      p.pw < 0 || p.dh <= 0 || p.dw <= 0)
    return KernelError(call, "invalid pooling parameters");
  return p;
}

// Calls fn(plane_in, plane_out...) for each (batch, channel) plane of a
// [N,C,H,W] or [C,H,W] tensor: the last two dims are the plane.
template <size_t N, typename Fn>
void ForEachPlane(const std::array<const TensorView*, N>& views, Fn&& fn) {
  const TensorView& first = *views[0];
  const int64_t lead = first.dim() - 2;
  std::array<std::byte*, N> bases;
  std::array<DimVector, N> strides;
  for (size_t k = 0; k < N; ++k) {
    TensorView part = DimRange(*views[k], 0, lead);
    bases[k] = part.bytes();
    strides[k] = OwnByteStrides(part);
  }
  DimVector lead_sizes(first.sizes.begin(), first.sizes.begin() + lead);
  StridedLoop<N>(lead_sizes, bases, strides, fn);
}

}  // namespace

namespace {

// One plane of a max pool: the input's and outputs' sizes and strides (in
// elements) in its last two dims.
struct MaxPoolGeometry {
  int64_t H, W, OH, OW;
  Pool2dParams p;
  int64_t in_h, in_w, out_h, out_w, ix_h, ix_w;
};

// Max pool of one f32 plane into f32 maxima and int64 indices: the windows,
// order and NaN rule of MaxPool2dWithIndicesKernel's general loop (a float
// widens to the same double, so the comparisons agree). One output row at a
// time, window element by window element across the whole row: each output
// still sees its window's elements in the general loop's order (rows, then
// columns), but neighbouring outputs no longer wait on each other's
// comparisons, and no bounds are tested per element. `row` is scratch of OW
// entries each.
struct MaxPoolRow {
  std::vector<float> best;
  std::vector<int32_t> index;
};

// The comparison step of every output of the row against one window
// element: the element's column is w = ow * stride + shift, read at
// in_row[w], its plane position row_at + w.
//
// The form is what lets the loop vectorise: the maxima (float) and their
// positions (int32) fill vector lanes alike, and each output keeps its own
// running pair, chosen by select. `kStride` is the column stride when it is
// known at compile time (1 and 2: the strided load becomes shuffles), 0 when
// it is read from `stride`.
template <int kStride>
void MaxPoolColumns(const float* __restrict in_row, int32_t shift,
                    int32_t row_at, int32_t first, int32_t last, int32_t stride,
                    float* __restrict best, int32_t* __restrict index) {
  const int32_t s = kStride > 0 ? kStride : stride;
  for (int32_t ow = first; ow < last; ++ow) {
    const int32_t w = ow * s + shift;
    const float v = in_row[w];
    const bool take = v > best[ow] || v != v || index[ow] < 0;
    best[ow] = take ? v : best[ow];
    index[ow] = take ? row_at + w : index[ow];
  }
}

// Plane positions fit int32 (MaxPoolFitsRow), and the input's columns are
// adjacent (in_w == 1).
void MaxPoolPlane(const MaxPoolGeometry& geometry, const std::byte* x,
                  std::byte* y, std::byte* ix, MaxPoolRow& row) {
  const MaxPoolGeometry g = geometry;
  constexpr int64_t kF = sizeof(float);
  const auto* in = reinterpret_cast<const float*>(x);
  const auto columns = g.p.sw == 1   ? &MaxPoolColumns<1>
                       : g.p.sw == 2 ? &MaxPoolColumns<2>
                                     : &MaxPoolColumns<0>;
  float* best = row.best.data();
  int32_t* index = row.index.data();
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    if (StopTick(g.OW * g.p.kh * g.p.kw)) return;
    std::fill_n(best, g.OW, -std::numeric_limits<float>::infinity());
    std::fill_n(index, g.OW, int32_t{-1});
    for (int64_t i = 0; i < g.p.kh; ++i) {
      const int64_t h = oh * g.p.sh - g.p.ph + i * g.p.dh;
      if (h < 0 || h >= g.H) continue;
      for (int64_t j = 0; j < g.p.kw; ++j) {
        // The outputs whose column w = ow * sw + shift is inside the input.
        const int64_t shift = j * g.p.dw - g.p.pw;
        const int64_t first = shift >= 0 ? 0 : (-shift + g.p.sw - 1) / g.p.sw;
        const int64_t last =
            g.W - 1 - shift < 0
                ? 0
                : std::min(g.OW, (g.W - 1 - shift) / g.p.sw + 1);
        columns(in + h * g.in_h, static_cast<int32_t>(shift),
                static_cast<int32_t>(h * g.W), static_cast<int32_t>(first),
                static_cast<int32_t>(last), static_cast<int32_t>(g.p.sw), best,
                index);
      }
    }
    if (g.out_w == 1 && g.ix_w == 1) {
      std::memcpy(y + oh * g.out_h * kF, best, g.OW * kF);
      auto* out_index = reinterpret_cast<int64_t*>(
          ix + oh * g.ix_h * int64_t{sizeof(int64_t)});
      for (int64_t ow = 0; ow < g.OW; ++ow) out_index[ow] = index[ow];
      continue;
    }
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      element::StoreRaw<float>(y + (oh * g.out_h + ow * g.out_w) * kF,
                               best[ow]);
      element::StoreRaw<int64_t>(
          ix + (oh * g.ix_h + ow * g.ix_w) * int64_t{sizeof(int64_t)},
          index[ow]);
    }
  }
}

// Whether MaxPoolPlane serves this plane: adjacent input columns, and every
// plane position and window offset within int32. The sizes and parameters
// come from the request: each factor is bounded before it is multiplied.
bool MaxPoolFitsRow(const MaxPoolGeometry& g) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max() / 4;
  auto product_fits = [](int64_t a, int64_t b) {
    return a < kMax && b < kMax && a * b < kMax;
  };
  return g.in_w == 1 && product_fits(g.H, g.W) && product_fits(g.OW, g.p.sw) &&
         product_fits(g.p.kw, g.p.dw) && g.p.pw < kMax;
}

}  // namespace

// max_pool2d_with_indices(self, kernel_size, stride=[], padding=0,
//                         dilation=1, ceil_mode=False) -> (out, indices)
absl::Status MaxPool2dWithIndicesKernel(const KernelCall& call) {
  const TensorView& in = call.args[0].tensor;
  if (in.dim() != 3 && in.dim() != 4)
    return KernelError(call, "expects 3-D or 4-D input");
  if (call.outputs.size() != 2) return KernelError(call, "expects 2 outputs");
  absl::StatusOr<Pool2dParams> p = ReadPool2dParams(call, 1, true);
  if (!p.ok()) return p.status();
  const TensorView& out = call.outputs[0];
  const TensorView& indices = call.outputs[1];
  if (out.dim() != in.dim() || indices.sizes != out.sizes)
    return KernelError(call, "output ranks do not match the input");
  const int64_t d = in.dim();
  const int64_t H = in.sizes[d - 2], W = in.sizes[d - 1];
  const int64_t OH = out.sizes[d - 2], OW = out.sizes[d - 1];
  const int64_t es = in.element_size();
  const DType ic = in.dtype, oc = out.dtype, xc = indices.dtype;
  // The window walk, with the input read by `load`: f32 input (the models'
  // case) reads floats directly, anything else dispatches per element.
  auto pool = [&](auto load) {
    ForEachPlane<3>(
        {&in, &out, &indices}, [&](const std::array<std::byte*, 3>& b) {
          for (int64_t oh = 0; oh < OH; ++oh) {
            if (StopTick(OW * p->kh * p->kw)) return;
            for (int64_t ow = 0; ow < OW; ++ow) {
              double best = -std::numeric_limits<double>::infinity();
              int64_t best_index = -1;
              for (int64_t i = 0; i < p->kh; ++i) {
                const int64_t h = oh * p->sh - p->ph + i * p->dh;
                if (h < 0 || h >= H) continue;
                for (int64_t j = 0; j < p->kw; ++j) {
                  const int64_t w = ow * p->sw - p->pw + j * p->dw;
                  if (w < 0 || w >= W) continue;
                  double v = load(
                      b[0] +
                      (h * in.strides[d - 2] + w * in.strides[d - 1]) * es);
                  // PyTorch's rule: every NaN is taken, so the index is
                  // the last NaN met.
                  if (v > best || std::isnan(v) || best_index < 0) {
                    best = v;
                    best_index = h * W + w;
                  }
                }
              }
              const int64_t out_offset =
                  oh * out.strides[d - 2] + ow * out.strides[d - 1];
              const int64_t index_offset =
                  oh * indices.strides[d - 2] + ow * indices.strides[d - 1];
              element::StoreDouble(oc, b[1] + out_offset * out.element_size(),
                                   best);
              element::StoreInt64(
                  xc, b[2] + index_offset * indices.element_size(), best_index);
            }
          }
        });
  };
  // The models' case, in float with no per-element dispatch (MaxPoolPlane).
  const MaxPoolGeometry g{.H = H,
                          .W = W,
                          .OH = OH,
                          .OW = OW,
                          .p = *p,
                          .in_h = in.strides[d - 2],
                          .in_w = in.strides[d - 1],
                          .out_h = out.strides[d - 2],
                          .out_w = out.strides[d - 1],
                          .ix_h = indices.strides[d - 2],
                          .ix_w = indices.strides[d - 1]};
  if (ic == DType::kF32 && oc == DType::kF32 && xc == DType::kI64 &&
      MaxPoolFitsRow(g)) {
    MaxPoolRow row{std::vector<float>(OW), std::vector<int32_t>(OW)};
    ForEachPlane<3>({&in, &out, &indices},
                    [&g, &row](const std::array<std::byte*, 3>& b) {
                      MaxPoolPlane(g, b[0], b[1], b[2], row);
                    });
  } else if (ic == DType::kF32) {
    pool([](const std::byte* q) {
      return static_cast<double>(element::LoadRaw<float>(q));
    });
  } else {
    pool([ic](const std::byte* q) { return element::LoadAsDouble(ic, q); });
  }
  return absl::OkStatus();
}

// avg_pool2d(self, kernel_size, stride=[], padding=0, ceil_mode=False,
//            count_include_pad=True, divisor_override=None)
absl::Status AvgPool2dKernel(const KernelCall& call) {
  const TensorView& in = call.args[0].tensor;
  if (in.dim() != 3 && in.dim() != 4)
    return KernelError(call, "expects 3-D or 4-D input");
  absl::StatusOr<Pool2dParams> p = ReadPool2dParams(call, 1, false);
  if (!p.ok()) return p.status();
  const bool count_include_pad =
      call.args.size() > 5 && call.args[5].kind == KernelArg::Kind::kBool
          ? call.args[5].bool_value
          : true;
  const int64_t divisor_override =
      call.args.size() > 6 && call.args[6].is_number() ? call.args[6].AsInt()
                                                       : 0;
  const TensorView& out = call.outputs[0];
  if (out.dim() != in.dim()) return KernelError(call, "output rank differs");
  const int64_t d = in.dim();
  const int64_t H = in.sizes[d - 2], W = in.sizes[d - 1];
  const int64_t OH = out.sizes[d - 2], OW = out.sizes[d - 1];
  const DType ic = in.dtype, oc = out.dtype;
  ForEachPlane<2>({&in, &out}, [&](const std::array<std::byte*, 2>& b) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      if (StopTick(OW * p->kh * p->kw)) return;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t h0 = oh * p->sh - p->ph, w0 = ow * p->sw - p->pw;
        const int64_t h1 = std::min(h0 + p->kh, H + p->ph);
        const int64_t w1 = std::min(w0 + p->kw, W + p->pw);
        const int64_t padded_count = (h1 - h0) * (w1 - w0);
        double sum = 0;
        int64_t count = 0;
        for (int64_t h = std::max<int64_t>(h0, 0); h < std::min(h1, H); ++h) {
          for (int64_t w = std::max<int64_t>(w0, 0); w < std::min(w1, W); ++w) {
            sum += element::LoadAsDouble(
                ic, b[0] + (h * in.strides[d - 2] + w * in.strides[d - 1]) *
                               in.element_size());
            ++count;
          }
        }
        const double divisor = divisor_override    ? divisor_override
                               : count_include_pad ? padded_count
                                                   : count;
        element::StoreDouble(
            oc,
            b[1] + (oh * out.strides[d - 2] + ow * out.strides[d - 1]) *
                       out.element_size(),
            divisor > 0 ? sum / divisor : 0.0);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace ferry::host
