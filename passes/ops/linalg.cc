// Matrix products.
//
// Model. kMatmul: mm [n,k]x[k,m] -> [n,m]; addmm adds `self` broadcast to
// [n,m]; bmm [b,n,k]x[b,k,m] -> [b,n,m]; linear [..., k] with weight [m,k]
// (or [k]) and an optional bias broadcast to the result. All operands must
// have one dtype.
//
//   addmm(b: f32[4], x: f32[2,3], t(w): f32[3,4]) ==> f32[2,4]
//   mm(f32[2,3], f32[4,5])                         ==> error: 3 and 4 differ
#include "passes/ops/linalg.h"

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

absl::Status CheckInner(const BoundCall& call, int64_t left, int64_t right) {
  if (left == right) return absl::OkStatus();
  return call.Error(
      absl::StrCat("inner dimensions ", left, " and ", right, " differ"));
}

Specs InferMatmul(const BoundCall& call) {
  absl::string_view op = call.schema().name;
  Dims sizes;
  if (op == "mm" || op == "addmm") {
    absl::string_view left_name = op == "mm" ? "self" : "mat1";
    absl::StatusOr<const TensorSpec*> left = call.Tensor(left_name);
    if (!left.ok()) return left.status();
    absl::StatusOr<const TensorSpec*> right = call.Tensor("mat2");
    if (!right.ok()) return right.status();
    if (absl::Status s = CheckRank(call, left_name, **left, 2); !s.ok())
      return s;
    if (absl::Status s = CheckRank(call, "mat2", **right, 2); !s.ok()) return s;
    if (absl::Status s =
            CheckInner(call, (*left)->sizes[1], (*right)->sizes[0]);
        !s.ok()) {
      return s;
    }
    sizes = {(*left)->sizes[0], (*right)->sizes[1]};
    if (op == "addmm") {
      absl::StatusOr<const TensorSpec*> bias = call.Tensor("self");
      if (!bias.ok()) return bias.status();
      std::optional<Dims> broadcast = BroadcastShapes((*bias)->sizes, sizes);
      if (!broadcast || *broadcast != sizes) {
        return call.Error(
            absl::StrCat("'self' of sizes ", ShapeText((*bias)->sizes),
                         " does not broadcast to ", ShapeText(sizes)));
      }
    }
  } else if (op == "bmm") {
    absl::StatusOr<const TensorSpec*> left = call.Tensor("self");
    if (!left.ok()) return left.status();
    absl::StatusOr<const TensorSpec*> right = call.Tensor("mat2");
    if (!right.ok()) return right.status();
    if (absl::Status s = CheckRank(call, "self", **left, 3); !s.ok()) return s;
    if (absl::Status s = CheckRank(call, "mat2", **right, 3); !s.ok()) return s;
    if ((*left)->sizes[0] != (*right)->sizes[0]) {
      return call.Error(absl::StrCat("batch sizes ", (*left)->sizes[0], " and ",
                                     (*right)->sizes[0], " differ"));
    }
    if (absl::Status s =
            CheckInner(call, (*left)->sizes[2], (*right)->sizes[1]);
        !s.ok()) {
      return s;
    }
    sizes = {(*left)->sizes[0], (*left)->sizes[1], (*right)->sizes[2]};
  } else if (op == "linear") {
    absl::StatusOr<const TensorSpec*> input = call.Tensor("input");
    if (!input.ok()) return input.status();
    absl::StatusOr<const TensorSpec*> weight = call.Tensor("weight");
    if (!weight.ok()) return weight.status();
    const TensorSpec& in = **input;
    const TensorSpec& w = **weight;
    if (in.dim() < 1) return call.Error("'input' must be at least 1-D");
    if (w.dim() != 1 && w.dim() != 2) {
      return call.Error(
          absl::StrCat("'weight' must be 1-D or 2-D, not ", w.dim(), "-D"));
    }
    int64_t in_features = in.sizes.back();
    int64_t weight_features = w.sizes.back();
    if (in_features != weight_features) {
      return call.Error(absl::StrCat("input features ", in_features,
                                     " and weight features ", weight_features,
                                     " differ"));
    }
    sizes.assign(in.sizes.begin(), in.sizes.end() - 1);
    if (w.dim() == 2) sizes.push_back(w.sizes[0]);
    absl::StatusOr<const TensorSpec*> bias = call.OptionalTensor("bias");
    if (!bias.ok()) return bias.status();
    if (*bias != nullptr) {
      std::optional<Dims> broadcast = BroadcastShapes((*bias)->sizes, sizes);
      if (!broadcast || *broadcast != sizes) {
        return call.Error(
            absl::StrCat("'bias' of sizes ", ShapeText((*bias)->sizes),
                         " does not broadcast to ", ShapeText(sizes)));
      }
    }
  } else {
    return absl::UnimplementedError(absl::StrCat(
        "no matrix-product rule for '", call.schema().QualifiedName(), "'"));
  }
  if (absl::Status s = SameDTypes(call); !s.ok()) return s;
  TensorOperandList tensors = call.TensorOperands();
  return OneResult(FreshSpec(tensors[0]->dtype, std::move(sizes)));
}

constexpr OpDef kOps[] = {
    {"aten::mm(Tensor self, Tensor mat2) -> Tensor", ShapeRule::kMatmul,
     &InferMatmul},
    {"aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, "
     "Scalar alpha=1) -> Tensor",
     ShapeRule::kMatmul, &InferMatmul},
    {"aten::bmm(Tensor self, Tensor mat2) -> Tensor", ShapeRule::kMatmul,
     &InferMatmul},
    {"aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
     ShapeRule::kMatmul, &InferMatmul},
};

}  // namespace

constinit const OpFamily kLinalgFamily = {
    "linalg",
    "Matrix products; operands of one dtype.",
    kOps,
};

}  // namespace ferry
