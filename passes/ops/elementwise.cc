// Elementwise operators.
//
// Model. kElementwise: the tensor operands broadcast (ATen's rules, aligned
// from the last dim); the dtype is ATen's result type over three tiers:
// dimensioned tensors, 0-dim tensors, and wrapped scalars (Scalar arguments
// other than `alpha`/`beta`, which only scale). A lower tier only decides the
// dtype when it is of a higher category (bool < integer < floating), so
// `i32 tensor + 2` is i32, `i32 tensor + 2.5` is f32 (the default float
// dtype) and `f16 tensor + 2.5` is f16. Simplified: true division and the
// transcendental functions (div, sin, cos, exp, tanh, sigmoid, gelu) give f32
// for integral and bool inputs; operators ATen refuses for bool (neg, sub)
// are not refused here.
//
// In place. When the schema says result 0 is a written argument (`Tensor(a!)`
// on both), the result IS that argument (shape_rules.cc gives it the
// argument's spec exactly); the rule checks that the computed shape equals
// the written tensor's (ATen refuses to resize in place) and that the
// computed dtype can be cast into it.
//
//   relu_(x: f32[2,3])            ==> x itself
//   add_(x: i32[2,3], 2.5)        ==> error: f32 cannot be written into i32
//   masked_fill(x: f32[2,1,4,4], m: bool[4,4], -inf) ==> f32[2,1,4,4]
#include "passes/ops/elementwise.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/shape_rules.h"

namespace ferry {
namespace {

// Operators whose integral (and bool) inputs compute in the default float
// dtype: true division and transcendental functions.
bool ComputesInFloat(absl::string_view op_name) {
  return op_name == "div" || op_name == "sin" || op_name == "cos" ||
         op_name == "exp" || op_name == "tanh" || op_name == "sigmoid" ||
         op_name == "gelu";
}

Specs InferElementwise(const BoundCall& call) {
  TensorOperandList tensors = call.TensorOperands();
  if (tensors.empty()) return call.Error("expected a tensor operand");
  Dims sizes = tensors[0]->sizes;
  ResultType result_type;
  for (const TensorSpec* tensor : tensors) {
    // Operands of one shape (the usual case) need no broadcasting.
    if (tensor->sizes != sizes) {
      std::optional<Dims> broadcast = BroadcastShapes(sizes, tensor->sizes);
      if (!broadcast) {
        return call.Error(absl::StrCat("sizes ", ShapeText(sizes), " and ",
                                       ShapeText(tensor->sizes),
                                       " do not broadcast"));
      }
      sizes = *std::move(broadcast);
    }
    result_type.AddTensor(*tensor);
  }
  for (DType scalar : call.PromotingScalars()) result_type.AddScalar(scalar);
  DType dtype = result_type.Get();
  if (!IsFloatingPoint(dtype) && ComputesInFloat(call.schema().name)) {
    dtype = DType::kF32;
  }

  if (std::optional<int> written = InPlaceArgument(call.schema())) {
    absl::StatusOr<const TensorSpec*> target =
        call.Tensor(call.schema().arguments[*written].name);
    if (!target.ok()) return target.status();
    if (sizes != (*target)->sizes) {
      return call.Error(absl::StrCat(
          "the result's sizes ", ShapeText(sizes), " differ from ",
          ShapeText((*target)->sizes), " of the tensor written in place"));
    }
    if (!CanCast(dtype, (*target)->dtype)) {
      return call.DTypeMismatch(absl::StrCat(
          "the result's dtype ", DTypeText(dtype),
          " cannot be written in place into ", DTypeText((*target)->dtype)));
    }
  }
  return OneResult(FreshSpec(dtype, std::move(sizes)));
}

// masked_fill: self broadcast with the mask, in self's dtype (the fill
// value is cast); the mask must be bool.
Specs InferMaskedFill(const BoundCall& call) {
  absl::StatusOr<const TensorSpec*> self = call.Tensor("self");
  if (!self.ok()) return self.status();
  absl::StatusOr<const TensorSpec*> mask = call.Tensor("mask");
  if (!mask.ok()) return mask.status();
  if ((*mask)->dtype != DType::kBool) {
    return call.DTypeMismatch(
        absl::StrCat("the mask must be bool, not ", DTypeText((*mask)->dtype)));
  }
  std::optional<Dims> sizes = BroadcastShapes((*self)->sizes, (*mask)->sizes);
  if (!sizes) {
    return call.Error(absl::StrCat("sizes ", ShapeText((*self)->sizes), " and ",
                                   ShapeText((*mask)->sizes),
                                   " do not broadcast"));
  }
  return OneResult(FreshSpec((*self)->dtype, *std::move(sizes)));
}

constexpr OpDef kOps[] = {
    // Arithmetic
    {"aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
     ShapeRule::kElementwise, &InferElementwise},
    {"aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
     ShapeRule::kElementwise, &InferElementwise},
    {"aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
     ShapeRule::kElementwise, &InferElementwise},
    {"aten::sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
     ShapeRule::kElementwise, &InferElementwise},
    {"aten::mul.Tensor(Tensor self, Tensor other) -> Tensor",
     ShapeRule::kElementwise, &InferElementwise},
    {"aten::mul.Scalar(Tensor self, Scalar other) -> Tensor",
     ShapeRule::kElementwise, &InferElementwise},
    {"aten::div.Tensor(Tensor self, Tensor other) -> Tensor",
     ShapeRule::kElementwise, &InferElementwise},
    {"aten::div.Scalar(Tensor self, Scalar other) -> Tensor",
     ShapeRule::kElementwise, &InferElementwise},

    // Unary functions and activations
    {"aten::relu(Tensor self) -> Tensor", ShapeRule::kElementwise,
     &InferElementwise},
    {"aten::sin(Tensor self) -> Tensor", ShapeRule::kElementwise,
     &InferElementwise},
    {"aten::cos(Tensor self) -> Tensor", ShapeRule::kElementwise,
     &InferElementwise},
    {"aten::exp(Tensor self) -> Tensor", ShapeRule::kElementwise,
     &InferElementwise},
    {"aten::neg(Tensor self) -> Tensor", ShapeRule::kElementwise,
     &InferElementwise},
    {"aten::tanh(Tensor self) -> Tensor", ShapeRule::kElementwise,
     &InferElementwise},
    {"aten::sigmoid(Tensor self) -> Tensor", ShapeRule::kElementwise,
     &InferElementwise},
    {"aten::gelu(Tensor self, *, str approximate='none') -> Tensor",
     ShapeRule::kElementwise, &InferElementwise},
    {"aten::hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> "
     "Tensor",
     ShapeRule::kElementwise, &InferElementwise},
    {"aten::masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> "
     "Tensor",
     ShapeRule::kSpecific, &InferMaskedFill},

    // In place (the result is `self`)
    {"aten::relu_(Tensor(a!) self) -> Tensor(a!)", ShapeRule::kElementwise,
     &InferElementwise},
    {"aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> "
     "Tensor(a!)",
     ShapeRule::kElementwise, &InferElementwise},
    {"aten::add_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> "
     "Tensor(a!)",
     ShapeRule::kElementwise, &InferElementwise},
    {"aten::mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)",
     ShapeRule::kElementwise, &InferElementwise},
    {"aten::mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)",
     ShapeRule::kElementwise, &InferElementwise},
    {"aten::hardtanh_(Tensor(a!) self, Scalar min_val=-1, Scalar max_val=1) "
     "-> Tensor(a!)",
     ShapeRule::kElementwise, &InferElementwise},
    {"aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> "
     "Tensor(a!)",
     ShapeRule::kSameAsSelf, &InferSameAsSelf},
    {"aten::fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)",
     ShapeRule::kSameAsSelf, &InferSameAsSelf},
};

}  // namespace

Specs InferSameAsSelf(const BoundCall& call) {
  const OpSchema& schema = call.schema();
  if (schema.arguments.empty() ||
      schema.arguments[0].type.kind != SchemaTypeKind::kTensor) {
    return call.Error("expected a tensor as the first parameter");
  }
  absl::StatusOr<const TensorSpec*> self =
      call.Tensor(schema.arguments[0].name);
  if (!self.ok()) return self.status();
  DType dtype = (*self)->dtype;

  if (call.HasParameter("dim")) {
    absl::StatusOr<int64_t> dim = call.Int("dim");
    if (!dim.ok()) return dim.status();
    if (absl::Status s = WrapDimFor(call, *dim, (*self)->dim()).status();
        !s.ok()) {
      return s;
    }
  }
  if (call.HasParameter("half_to_float")) {
    absl::StatusOr<bool> half_to_float = call.Bool("half_to_float");
    if (!half_to_float.ok()) return half_to_float.status();
    if (*half_to_float && dtype == DType::kF16) dtype = DType::kF32;
  }
  // Other tensors (copy_'s src) are read broadcast to self's shape.
  TensorOperandList tensors = call.TensorOperands();
  for (size_t i = 1; i < tensors.size(); ++i) {
    std::optional<Dims> broadcast =
        BroadcastShapes((*self)->sizes, tensors[i]->sizes);
    if (!broadcast || *broadcast != (*self)->sizes) {
      return call.Error(absl::StrCat("sizes ", ShapeText(tensors[i]->sizes),
                                     " do not broadcast to ",
                                     ShapeText((*self)->sizes)));
    }
  }
  std::vector<TensorSpec> results;
  for (size_t i = 0; i < schema.returns.size(); ++i) {
    results.push_back(FreshSpec(dtype, (*self)->sizes));
  }
  return results;
}

constinit const OpFamily kElementwiseFamily = {
    "elementwise",
    "Arithmetic with broadcasting and type promotion, activations, their "
    "in-place forms.",
    kOps,
};

}  // namespace ferry
