// Reductions.
//
// Model. kReduction: the dims listed (wrapped, each at most once; None or []
// reduces every dim) are removed, or kept with size 1 under keepdim. The
// dtype is `dtype` when given, else self's; integral and bool sums accumulate
// in i64, and mean needs a floating dtype.
//
//   mean.dim(x: f32[1,512,7,7], [-1,-2], True) ==> f32[1,512,1,1]
//   sum.dim_IntList(x: i32[2,3], [1])         ==> i64[2]
#include "passes/ops/reductions.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/shape_rules.h"

namespace ferry {
namespace {

Specs InferReduction(const BoundCall& call) {
  absl::StatusOr<const TensorSpec*> self = call.Tensor("self");
  if (!self.ok()) return self.status();
  const TensorSpec& in = **self;
  int64_t rank = in.dim();
  absl::StatusOr<std::optional<std::vector<int64_t>>> dims =
      call.IntList("dim");
  if (!dims.ok()) return dims.status();
  bool keepdim = false;
  if (call.HasParameter("keepdim")) {
    absl::StatusOr<bool> value = call.Bool("keepdim");
    if (!value.ok()) return value.status();
    keepdim = *value;
  }
  // None or an empty list reduces every dim.
  std::vector<bool> reduced(rank, !dims->has_value() || (*dims)->empty());
  if (dims->has_value()) {
    std::vector<bool> seen(std::max<int64_t>(rank, 1), false);
    for (int64_t dim : **dims) {
      absl::StatusOr<int64_t> wrapped = WrapDimFor(call, dim, rank);
      if (!wrapped.ok()) return wrapped.status();
      if (seen[*wrapped]) {
        return call.Error(
            absl::StrCat("dim ", dim, " appears more than once in dim"));
      }
      seen[*wrapped] = true;
      if (rank > 0) reduced[*wrapped] = true;
    }
  }
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) {
      sizes.push_back(in.sizes[d]);
    } else if (keepdim) {
      sizes.push_back(1);
    }
  }

  std::optional<DType> requested;
  if (call.HasParameter("dtype")) {
    absl::StatusOr<std::optional<DType>> dtype = call.OptionalDType("dtype");
    if (!dtype.ok()) return dtype.status();
    requested = *dtype;
  }
  DType dtype = requested.value_or(in.dtype);
  absl::string_view op = call.schema().name;
  if (!requested && op == "sum" && !IsFloatingPoint(in.dtype)) {
    dtype = DType::kI64;  // Integral and bool sums accumulate in int64.
  }
  if (op == "mean" && !IsFloatingPoint(dtype)) {
    return call.DTypeMismatch(
        absl::StrCat("mean of ", DTypeText(dtype),
                     " needs a floating dtype (pass 'dtype')"));
  }
  return OneResult(FreshSpec(dtype, std::move(sizes)));
}

constexpr OpDef kOps[] = {
    {"aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, "
     "ScalarType? dtype=None) -> Tensor",
     ShapeRule::kReduction, &InferReduction},
    {"aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, "
     "ScalarType? dtype=None) -> Tensor",
     ShapeRule::kReduction, &InferReduction},
    {"aten::amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
     ShapeRule::kReduction, &InferReduction},
};

}  // namespace

constinit const OpFamily kReductionsFamily = {
    "reductions",
    "Reductions over a list of dims (None or [] reduces all), keepdim, "
    "negative dims.",
    kOps,
};

}  // namespace ferry
