// Creation operators.
//
// Model. The result's sizes come from the arguments (a size list, or
// arange's bounds), its dtype from `dtype` or ATen's default: f32 for ones,
// zeros and empty; for arange i64 when every bound is an integer, else f32.
// Sizes are checked to be non-negative and to fit int64 in elements and
// bytes. layout, device and pin_memory do not change the spec; a
// channels_last memory_format gives NHWC strides.
//
//   arange(5)                    ==> i64[5]
//   arange.start_step(0, 1, 0.3) ==> f32[4]
//   ones([2,3])                  ==> f32[2,3]
//   triu(x: f32[3,4], 1)         ==> f32[3,4]
#include "passes/ops/creation.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/shape_rules.h"

namespace ferry {
namespace {

// ATen's MemoryFormat::ChannelsLast, as the frontend writes it.
constexpr int64_t kChannelsLast = 2;

// `dtype` when given, else `fallback`.
absl::StatusOr<DType> ResultDType(const BoundCall& call, DType fallback) {
  absl::StatusOr<std::optional<DType>> dtype = call.OptionalDType("dtype");
  if (!dtype.ok()) return dtype.status();
  return dtype->value_or(fallback);
}

// ones, zeros, empty.memory_format: `size` in `dtype` (f32 by default).
Specs InferFromSize(const BoundCall& call) {
  absl::StatusOr<std::vector<int64_t>> sizes = call.RequiredIntList("size");
  if (!sizes.ok()) return sizes.status();
  absl::StatusOr<DType> dtype = ResultDType(call, DType::kF32);
  if (!dtype.ok()) return dtype.status();
  if (absl::Status s = CheckResultSizes(call, *sizes, *dtype); !s.ok()) {
    return s;
  }
  TensorSpec result = FreshSpec(*dtype, *sizes);
  if (call.HasParameter("memory_format")) {
    absl::StatusOr<std::optional<int64_t>> format =
        call.OptionalInt("memory_format");
    if (!format.ok()) return format.status();
    if (*format == kChannelsLast) {
      if (sizes->size() != 4) {
        return call.Error(
            absl::StrCat("channels_last needs 4 dims, not ", sizes->size()));
      }
      // Dim order 0, 2, 3, 1: C innermost.
      const std::vector<int64_t>& s = *sizes;
      std::vector<int64_t> nhwc = DenseStrides({s[0], s[2], s[3], s[1]});
      result.strides = {nhwc[0], nhwc[3], nhwc[1], nhwc[2]};
    }
  }
  return OneResult(std::move(result));
}

bool IsInteger(const Number& n) { return std::holds_alternative<int64_t>(n); }
double AsDouble(const Number& n) {
  return IsInteger(n) ? static_cast<double>(std::get<int64_t>(n))
                      : std::get<double>(n);
}

// arange, arange.start, arange.start_step: ATen's RangeFactories. The
// length is ceil((end - start) / step), in int64 arithmetic for an integral
// result (the bounds truncated) and in double otherwise.
Specs InferArange(const BoundCall& call) {
  Number start = int64_t{0};
  Number step = int64_t{1};
  absl::StatusOr<Number> end = call.ScalarValue("end");
  if (!end.ok()) return end.status();
  if (call.HasParameter("start")) {
    absl::StatusOr<Number> value = call.ScalarValue("start");
    if (!value.ok()) return value.status();
    start = *value;
  }
  if (call.HasParameter("step")) {
    absl::StatusOr<Number> value = call.ScalarValue("step");
    if (!value.ok()) return value.status();
    step = *value;
  }
  const bool integral_bounds =
      IsInteger(start) && IsInteger(*end) && IsInteger(step);
  absl::StatusOr<DType> dtype =
      ResultDType(call, integral_bounds ? DType::kI64 : DType::kF32);
  if (!dtype.ok()) return dtype.status();
  if (*dtype == DType::kBool) {
    return call.DTypeMismatch("arange cannot make a bool tensor");
  }

  const double first = AsDouble(start), last = AsDouble(*end),
               increment = AsDouble(step);
  if (!std::isfinite(first) || !std::isfinite(last) ||
      !std::isfinite(increment)) {
    return call.Error("the range's bounds and step must be finite");
  }
  if (increment == 0) return call.Error("the step must be nonzero");
  if ((increment > 0 && last < first) || (increment < 0 && last > first)) {
    return call.Error(absl::StrCat("the bounds [", first, ", ", last,
                                   ") are inconsistent with the step's sign (",
                                   increment, ")"));
  }
  __int128 length = 0;
  if (!IsFloatingPoint(*dtype)) {
    // Bounds beyond int64 are not integral results ATen could make either.
    constexpr double kLimit = 9.2e18;
    if (std::fabs(first) > kLimit || std::fabs(last) > kLimit ||
        std::fabs(increment) > kLimit) {
      return call.Error("the range's bounds overflow int64");
    }
    auto truncated = [](const Number& n) -> __int128 {
      return IsInteger(n) ? std::get<int64_t>(n)
                          : static_cast<int64_t>(std::get<double>(n));
    };
    const __int128 a = truncated(start), b = truncated(*end),
                   s = truncated(step);
    if (s == 0) return call.Error("the step must be nonzero");
    const __int128 sign = s > 0 ? 1 : -1;
    // ceil((b - a) / s) for a step of either sign.
    length = (b - a + s - sign) / s;
  } else {
    const double size = std::ceil((last - first) / increment);
    if (!(size >= 0) || size > 9.2e18) {
      return call.Error("the range's length overflows int64");
    }
    length = static_cast<__int128>(size);
  }
  if (length < 0 || length > std::numeric_limits<int64_t>::max()) {
    return call.Error("the range's length overflows int64");
  }
  std::vector<int64_t> sizes = {static_cast<int64_t>(length)};
  if (absl::Status s = CheckResultSizes(call, sizes, *dtype); !s.ok()) return s;
  return OneResult(FreshSpec(*dtype, std::move(sizes)));
}

// triu: self's dtype and sizes; self must be at least 2-D.
Specs InferTriangle(const BoundCall& call) {
  absl::StatusOr<const TensorSpec*> self = call.Tensor("self");
  if (!self.ok()) return self.status();
  if ((*self)->dim() < 2) {
    return call.Error(absl::StrCat("'self' must be at least 2-D, not ",
                                   (*self)->dim(), "-D"));
  }
  absl::StatusOr<int64_t> diagonal = call.Int("diagonal");
  if (!diagonal.ok()) return diagonal.status();
  return OneResult(FreshSpec((*self)->dtype, (*self)->sizes));
}

constexpr OpDef kOps[] = {
    {"aten::arange(Scalar end, *, ScalarType? dtype=None, Layout? layout=None, "
     "Device? device=None, bool? pin_memory=None) -> Tensor",
     ShapeRule::kSpecific, &InferArange},
    {"aten::arange.start(Scalar start, Scalar end, *, ScalarType? dtype=None, "
     "Layout? layout=None, Device? device=None, bool? pin_memory=None) -> "
     "Tensor",
     ShapeRule::kSpecific, &InferArange},
    {"aten::arange.start_step(Scalar start, Scalar end, Scalar step=1, *, "
     "ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
     "pin_memory=None) -> Tensor",
     ShapeRule::kSpecific, &InferArange},
    {"aten::ones(SymInt[] size, *, ScalarType? dtype=None, Layout? "
     "layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
     ShapeRule::kSpecific, &InferFromSize},
    {"aten::zeros(SymInt[] size, *, ScalarType? dtype=None, Layout? "
     "layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
     ShapeRule::kSpecific, &InferFromSize},
    {"aten::empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, "
     "Layout? layout=None, Device? device=None, bool? pin_memory=None, "
     "MemoryFormat? memory_format=None) -> Tensor",
     ShapeRule::kSpecific, &InferFromSize},
    {"aten::triu(Tensor self, int diagonal=0) -> Tensor", ShapeRule::kSpecific,
     &InferTriangle},
};

}  // namespace

constinit const OpFamily kCreationFamily = {
    "creation",
    "Tensors made from their arguments (arange, ones, zeros, empty) and "
    "triangular masks (triu).",
    kOps,
};

}  // namespace ferry
