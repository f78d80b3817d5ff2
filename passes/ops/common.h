// The shared machinery of the operator catalogue: what every family file
// (passes/ops/<family>.cc) uses to write its schema rows and shape rules.
//
//  - OpDef: one catalogue row (ATen schema text, rule kind, rule function).
//  - BoundCall: a call with its arguments bound to the schema's parameters,
//    read by parameter name with the schema's defaults for omitted ones;
//    every error it returns starts with "<op> of <operand specs>: ".
//  - Checked arithmetic, dense strides, dims, dtype promotion (ATen's
//    three-tier result type).
//
// Nothing here knows a particular operator; that is the family files' job.
#ifndef FERRY_PASSES_OPS_COMMON_H_
#define FERRY_PASSES_OPS_COMMON_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "passes/ir.h"
#include "passes/resource_limits.h"
#include "passes/schema.h"

namespace ferry {

using Specs = absl::StatusOr<std::vector<TensorSpec>>;
// A rule's one result, moved into its list (a braced list copies it).
inline Specs OneResult(TensorSpec spec) {
  std::vector<TensorSpec> results;
  results.push_back(std::move(spec));
  return results;
}
// A call's tensor operands (BoundCall::TensorOperands): a few, kept in place.
using TensorOperandList = absl::InlinedVector<const TensorSpec*, 4>;

// One row of a family's catalogue.
struct OpDef {
  std::string_view schema;  // exactly as ATen prints it
  ShapeRule kind;           // the rule's kind (schema.h)
  ShapeRuleFn rule;         // the rule itself; null: not checked
  bool metadata_only = false;
};

// One operator family: its name (as docs/operators.md titles it) and rows.
struct OpFamily {
  std::string_view name;
  std::string_view description;
  std::span<const OpDef> ops;
};

// An error from a rule about the operands' dtypes (IsDTypeError reads it).
absl::Status DTypeError(std::string message);
inline constexpr absl::string_view kDTypeErrorPayload =
    "ferry.dev/shape_rules/dtype";

// Debian's Abseil has its own string_view; ferry's headers use std's.
inline absl::string_view AbslView(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}
inline absl::string_view DTypeText(DType dtype) {
  return AbslView(DTypeName(dtype));
}

// --- Checked arithmetic -----------------------------------------------------

// CheckedMul and CheckedAdd: passes/resource_limits.h.
std::optional<int64_t> NumElementsOf(const std::vector<int64_t>& sizes);

// Contiguous strides as ATen computes them (a size-0 dim counts as 1),
// saturating instead of overflowing: the sizes come from a call's
// arguments, not from a validated spec.
std::vector<int64_t> DenseStrides(const std::vector<int64_t>& sizes);

// A fresh, contiguous result (empty strides mean contiguous).
TensorSpec FreshSpec(DType dtype, Dims sizes);

// --- Dtypes -----------------------------------------------------------------

DType PromoteTypes(DType a, DType b);
// Whether a computed `from` may be written into a tensor of dtype `to` (as
// ATen's canCast: no floating to integral, nothing but bool to bool).
bool CanCast(DType from, DType to);

// ATen's three-tier result type: dimensioned tensors, 0-dim tensors and
// wrapped scalars. A lower tier only decides the dtype when it is of a
// higher category (bool < integer < floating).
class ResultType {
 public:
  void AddTensor(const TensorSpec& spec);
  // A Scalar argument: int -> i64, float -> the default float dtype f32.
  void AddScalar(DType dtype) { wrapped_ = PromoteTypes(wrapped_, dtype); }
  DType Get() const;

 private:
  DType dimensioned_ = DType::kInvalid;
  DType zero_dim_ = DType::kInvalid;
  DType wrapped_ = DType::kInvalid;
};

// --- Dims -------------------------------------------------------------------

// Wraps a possibly negative dim of a `rank`-D tensor (a 0-dim tensor accepts
// -1 and 0, as ATen does).
absl::StatusOr<int64_t> WrapDim(int64_t dim, int64_t rank);

// --- Bound calls ------------------------------------------------------------

// A Scalar argument's value: an int or a float.
using Number = std::variant<int64_t, double>;

// A call with its arguments bound to the schema's parameters.
class BoundCall {
 public:
  // `node`, when given, is the call itself (for DeclaredResult).
  BoundCall(const OpSchema& schema, const Method& method, BoundArguments bound,
            const Node* node = nullptr)
      : schema_(schema),
        method_(method),
        bound_(std::move(bound)),
        node_(node) {}

  const OpSchema& schema() const { return schema_; }
  bool HasParameter(absl::string_view name) const { return IndexOf(name) >= 0; }

  // The tensor bound to `name`; an error when it is omitted, None or not a
  // tensor.
  absl::StatusOr<const TensorSpec*> Tensor(absl::string_view name) const;
  // Null when omitted or None.
  absl::StatusOr<const TensorSpec*> OptionalTensor(
      absl::string_view name) const;
  absl::StatusOr<std::vector<const TensorSpec*>> TensorList(
      absl::string_view name) const;
  absl::StatusOr<std::optional<int64_t>> OptionalInt(
      absl::string_view name) const;
  absl::StatusOr<int64_t> Int(absl::string_view name) const;
  absl::StatusOr<bool> Bool(absl::string_view name) const;
  // nullopt when None (or omitted with a None default). A single int is a
  // list of one (`int[1] dim` accepts `dim=1`).
  absl::StatusOr<std::optional<std::vector<int64_t>>> IntList(
      absl::string_view name) const;
  // IntList that must be present.
  absl::StatusOr<std::vector<int64_t>> RequiredIntList(
      absl::string_view name) const;
  absl::StatusOr<std::optional<DType>> OptionalDType(
      absl::string_view name) const;
  // A Scalar (or int/float) argument's value, with the schema's default.
  absl::StatusOr<Number> ScalarValue(absl::string_view name) const;

  // The spec the node declares for its result `r` (tuple element r, or the
  // tensor result for r == 0); null when there is none. Only for results
  // where ATen itself gives either of two answers (batch norm's statistics
  // in eval mode: [C] from the meta kernel, [0] from the CPU kernel).
  const TensorSpec* DeclaredResult(int r) const;

  // Scalar arguments taking part in type promotion, as their wrapped dtype.
  std::vector<DType> PromotingScalars() const;
  // Every tensor operand (Tensor parameters bound to a tensor), in order.
  TensorOperandList TensorOperands() const;

  // "aten::mm of f32[2,3] and f32[4,5]": the operator and its tensor
  // operands, the prefix of every rule error.
  std::string Describe() const;
  // "<Describe()>: <reason>".
  absl::Status Error(absl::string_view reason) const;
  absl::Status DTypeMismatch(absl::string_view reason) const;

 private:
  int IndexOf(absl::string_view name) const;
  const Argument* Get(absl::string_view name) const;
  std::optional<absl::string_view> DefaultText(absl::string_view name) const;
  const Node* ScalarNode(const ValueId& value) const;
  absl::StatusOr<std::optional<std::vector<int64_t>>> ParseIntListDefault(
      absl::string_view name, absl::string_view text) const;
  absl::Status Symbolic(absl::string_view name) const;
  absl::Status Unsupported(absl::string_view name) const;
  absl::Status WrongKind(absl::string_view name, absl::string_view expected,
                         ArgKind got) const;

  const OpSchema& schema_;
  const Method& method_;
  BoundArguments bound_;
  const Node* node_;
};

// The argument result 0 is written into, when the schema says so.
std::optional<int> InPlaceArgument(const OpSchema& schema);

// WrapDim with the call's description in front of its error.
absl::StatusOr<int64_t> WrapDimFor(const BoundCall& call, int64_t dim,
                                   int64_t rank);

// Checks shared by several families.
absl::Status SameDTypes(const BoundCall& call);
absl::Status CheckRank(const BoundCall& call, absl::string_view name,
                       const TensorSpec& spec, int64_t rank);
// A result of `sizes` whose element count and bytes fit int64 (creation
// ops and convolutions compute sizes from arguments).
absl::Status CheckResultSizes(const BoundCall& call,
                              const std::vector<int64_t>& sizes, DType dtype);

}  // namespace ferry

#endif  // FERRY_PASSES_OPS_COMMON_H_
