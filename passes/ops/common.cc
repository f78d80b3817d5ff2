// The shared machinery of the operator catalogue (common.h).
#include "passes/ops/common.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "passes/shape_rules.h"

namespace ferry {
namespace {

// bool < integer < floating.
int Category(DType dtype) {
  if (dtype == DType::kBool) return 0;
  return IsFloatingPoint(dtype) ? 2 : 1;
}

std::string KindText(ArgKind kind) {
  switch (kind) {
    case ArgKind::kValue:
      return "a value";
    case ArgKind::kValueList:
      return "a list of values";
    case ArgKind::kInt:
      return "an int";
    case ArgKind::kFloat:
      return "a float";
    case ArgKind::kBool:
      return "a bool";
    case ArgKind::kInts:
      return "an int list";
    case ArgKind::kDType:
      return "a dtype";
    case ArgKind::kNone:
      return "None";
    case ArgKind::kString:
      return "a string";
  }
  return "an argument";
}

}  // namespace

absl::Status DTypeError(std::string message) {
  absl::Status status = absl::InvalidArgumentError(std::move(message));
  status.SetPayload(kDTypeErrorPayload, absl::Cord("dtype"));
  return status;
}

// --- Checked arithmetic -----------------------------------------------------

std::optional<int64_t> NumElementsOf(const std::vector<int64_t>& sizes) {
  int64_t numel = 1;
  for (int64_t size : sizes) {
    std::optional<int64_t> next = CheckedMul(numel, size);
    if (!next) return std::nullopt;
    numel = *next;
  }
  return numel;
}

// Contiguous strides as ATen computes them (a size-0 dim counts as 1). Unlike
// ContiguousStrides (ir.h) it saturates instead of overflowing: the sizes it
// gets come from a call's arguments, not from a validated spec.
std::vector<int64_t> DenseStrides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = stride;
    stride = CheckedMul(stride, std::max<int64_t>(sizes[d], 1))
                 .value_or(std::numeric_limits<int64_t>::max());
  }
  return strides;
}

// A fresh, contiguous result (empty strides mean contiguous).
TensorSpec FreshSpec(DType dtype, Dims sizes) {
  TensorSpec spec;
  spec.dtype = dtype;
  spec.sizes = std::move(sizes);
  return spec;
}

// --- Dtypes -----------------------------------------------------------------

DType PromoteTypes(DType a, DType b) {
  if (a == b || b == DType::kInvalid) return a;
  if (a == DType::kInvalid) return b;
  if (a == DType::kBool) return b;
  if (b == DType::kBool) return a;
  bool a_float = IsFloatingPoint(a);
  bool b_float = IsFloatingPoint(b);
  if (a_float != b_float) return a_float ? a : b;
  if (a_float) {
    if (a == DType::kF64 || b == DType::kF64) return DType::kF64;
    return DType::kF32;  // f32 with a half type, or f16 with bf16
  }
  // Integers. u8 with a signed type needs a signed type wider than 8 bits.
  if (a == DType::kU8 || b == DType::kU8) {
    DType other = a == DType::kU8 ? b : a;
    return other == DType::kI8 ? DType::kI16 : other;
  }
  return ElementSize(a) >= ElementSize(b) ? a : b;
}

// Whether a computed `from` may be written into a tensor of dtype `to` (as
// ATen's canCast: no floating to integral, nothing but bool to bool).
bool CanCast(DType from, DType to) {
  if (IsFloatingPoint(from) && !IsFloatingPoint(to)) return false;
  if (from != DType::kBool && to == DType::kBool) return false;
  return true;
}

void ResultType::AddTensor(const TensorSpec& spec) {
  DType& tier = spec.dim() == 0 ? zero_dim_ : dimensioned_;
  tier = PromoteTypes(tier, spec.dtype);
}

DType ResultType::Get() const {
  // The dtype of `higher` unless `lower` is of a higher category.
  auto combine = [](DType higher, DType lower) {
    if (higher == DType::kInvalid) return lower;
    if (lower == DType::kInvalid) return higher;
    if (Category(lower) > Category(higher)) return PromoteTypes(higher, lower);
    return higher;
  };
  return combine(dimensioned_, combine(zero_dim_, wrapped_));
}

// --- Dims -------------------------------------------------------------------

absl::StatusOr<int64_t> WrapDim(int64_t dim, int64_t rank) {
  int64_t extent = std::max<int64_t>(rank, 1);
  if (dim < -extent || dim >= extent) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dim ", dim, " is out of range for a ", rank,
        "-D tensor (expected a dim in [", -extent, ", ", extent - 1, "])"));
  }
  return dim < 0 ? dim + extent : dim;
}

// --- Bound calls ------------------------------------------------------------

absl::StatusOr<const TensorSpec*> BoundCall::Tensor(
    absl::string_view name) const {
  absl::StatusOr<const TensorSpec*> spec = OptionalTensor(name);
  if (spec.ok() && *spec == nullptr) {
    return Error(absl::StrCat("argument '", name, "' must be a tensor"));
  }
  return spec;
}

absl::StatusOr<const TensorSpec*> BoundCall::OptionalTensor(
    absl::string_view name) const {
  const Argument* arg = Get(name);
  if (arg == nullptr || arg->kind == ArgKind::kNone) {
    return static_cast<const TensorSpec*>(nullptr);
  }
  const TensorSpec* spec =
      arg->kind == ArgKind::kValue ? method_.Spec(arg->value) : nullptr;
  if (spec == nullptr) {
    return Error(absl::StrCat("argument '", name, "' must be a tensor"));
  }
  return spec;
}

absl::StatusOr<std::vector<const TensorSpec*>> BoundCall::TensorList(
    absl::string_view name) const {
  const Argument* arg = Get(name);
  if (arg == nullptr || arg->kind != ArgKind::kValueList) {
    return Error(
        absl::StrCat("argument '", name, "' must be a list of tensors"));
  }
  std::vector<const TensorSpec*> specs;
  for (const ValueId& value : arg->values) {
    const TensorSpec* spec = method_.Spec(value);
    if (spec == nullptr) {
      return Error(absl::StrCat("element ", specs.size(), " of argument '",
                                name, "' must be a tensor"));
    }
    specs.push_back(spec);
  }
  return specs;
}

absl::StatusOr<std::optional<int64_t>> BoundCall::OptionalInt(
    absl::string_view name) const {
  const Argument* arg = Get(name);
  if (arg == nullptr) {
    std::optional<absl::string_view> text = DefaultText(name);
    if (!text || *text == "None") return std::optional<int64_t>();
    int64_t value = 0;
    if (absl::SimpleAtoi(*text, &value)) return std::optional(value);
    return Unsupported(name);
  }
  switch (arg->kind) {
    case ArgKind::kInt:
      return std::optional(arg->int_value);
    case ArgKind::kNone:
      return std::optional<int64_t>();
    case ArgKind::kValue:
      return Symbolic(name);
    default:
      return WrongKind(name, "an int", arg->kind);
  }
}

absl::StatusOr<int64_t> BoundCall::Int(absl::string_view name) const {
  absl::StatusOr<std::optional<int64_t>> value = OptionalInt(name);
  if (!value.ok()) return value.status();
  if (!value->has_value()) {
    return Error(absl::StrCat("argument '", name, "' must be an int"));
  }
  return **value;
}

absl::StatusOr<bool> BoundCall::Bool(absl::string_view name) const {
  const Argument* arg = Get(name);
  if (arg == nullptr) {
    std::optional<absl::string_view> text = DefaultText(name);
    if (text && *text == "True") return true;
    if (text && *text == "False") return false;
    return Unsupported(name);
  }
  if (arg->kind == ArgKind::kBool) return arg->bool_value;
  if (arg->kind == ArgKind::kValue) return Symbolic(name);
  return WrongKind(name, "a bool", arg->kind);
}

absl::StatusOr<std::optional<std::vector<int64_t>>> BoundCall::IntList(
    absl::string_view name) const {
  using Result = std::optional<std::vector<int64_t>>;
  const Argument* arg = Get(name);
  if (arg == nullptr) {
    std::optional<absl::string_view> text = DefaultText(name);
    if (!text || *text == "None") return Result();
    return ParseIntListDefault(name, *text);
  }
  switch (arg->kind) {
    case ArgKind::kInts:
      return Result(arg->ints);
    case ArgKind::kInt:
      return Result(std::vector<int64_t>{arg->int_value});
    case ArgKind::kNone:
      return Result();
    case ArgKind::kValue:
    case ArgKind::kValueList:
      return Symbolic(name);
    default:
      return WrongKind(name, "an int list", arg->kind);
  }
}

absl::StatusOr<std::optional<DType>> BoundCall::OptionalDType(
    absl::string_view name) const {
  const Argument* arg = Get(name);
  if (arg == nullptr || arg->kind == ArgKind::kNone) {
    return std::optional<DType>();
  }
  if (arg->kind == ArgKind::kDType) return std::optional(arg->dtype);
  return WrongKind(name, "a dtype", arg->kind);
}

absl::StatusOr<std::vector<int64_t>> BoundCall::RequiredIntList(
    absl::string_view name) const {
  absl::StatusOr<std::optional<std::vector<int64_t>>> list = IntList(name);
  if (!list.ok()) return list.status();
  if (!list->has_value()) {
    return Error(absl::StrCat("argument '", name, "' must be a list"));
  }
  return **std::move(list);
}

absl::StatusOr<Number> BoundCall::ScalarValue(absl::string_view name) const {
  const Argument* arg = Get(name);
  if (arg == nullptr) {
    std::optional<absl::string_view> text = DefaultText(name);
    int64_t int_value = 0;
    double float_value = 0;
    if (text && absl::SimpleAtoi(*text, &int_value)) return Number(int_value);
    if (text && absl::SimpleAtod(*text, &float_value)) {
      return Number(float_value);
    }
    return Unsupported(name);
  }
  switch (arg->kind) {
    case ArgKind::kInt:
      return Number(arg->int_value);
    case ArgKind::kFloat:
      return Number(arg->float_value);
    case ArgKind::kBool:
      return Number(int64_t{arg->bool_value});
    case ArgKind::kValue:
      return Symbolic(name);
    default:
      return WrongKind(name, "a number", arg->kind);
  }
}

const TensorSpec* BoundCall::DeclaredResult(int r) const {
  if (node_ == nullptr || r < 0) return nullptr;
  if (node_->result == ResultKind::kTuple) {
    return r < static_cast<int>(node_->tuple.size()) ? &node_->tuple[r]
                                                     : nullptr;
  }
  return r == 0 && node_->result == ResultKind::kTensor ? &node_->tensor
                                                        : nullptr;
}

std::vector<DType> BoundCall::PromotingScalars() const {
  std::vector<DType> dtypes;
  for (size_t i = 0; i < bound_.size(); ++i) {
    const SchemaArgument& param = schema_.arguments[i];
    if (param.type.kind != SchemaTypeKind::kScalar) continue;
    // alpha and beta scale an operand; they never change the dtype.
    if (param.name == "alpha" || param.name == "beta") continue;
    const Argument* arg = bound_[i];
    if (arg == nullptr) continue;
    switch (arg->kind) {
      case ArgKind::kInt:
        dtypes.push_back(DType::kI64);
        break;
      case ArgKind::kFloat:
        dtypes.push_back(DType::kF32);
        break;
      case ArgKind::kBool:
        dtypes.push_back(DType::kBool);
        break;
      case ArgKind::kValue: {
        const Node* node = ScalarNode(arg->value);
        if (node == nullptr) break;
        if (node->scalar == ScalarType::kInt) dtypes.push_back(DType::kI64);
        if (node->scalar == ScalarType::kFloat) dtypes.push_back(DType::kF32);
        if (node->scalar == ScalarType::kBool) {
          dtypes.push_back(DType::kBool);
        }
        break;
      }
      default:
        break;
    }
  }
  return dtypes;
}

TensorOperandList BoundCall::TensorOperands() const {
  TensorOperandList specs;
  for (size_t i = 0; i < bound_.size(); ++i) {
    const Argument* arg = bound_[i];
    if (schema_.arguments[i].type.kind != SchemaTypeKind::kTensor ||
        arg == nullptr || arg->kind != ArgKind::kValue) {
      continue;
    }
    if (const TensorSpec* spec = method_.Spec(arg->value)) {
      specs.push_back(spec);
    }
  }
  return specs;
}

std::string BoundCall::Describe() const {
  std::vector<std::string> operands;
  for (size_t i = 0; i < bound_.size(); ++i) {
    const Argument* arg = bound_[i];
    if (arg == nullptr) continue;
    if (arg->kind == ArgKind::kValue) {
      if (const TensorSpec* spec = method_.Spec(arg->value)) {
        operands.push_back(SpecText(*spec));
      }
    } else if (arg->kind == ArgKind::kValueList) {
      std::vector<std::string> elements;
      for (const ValueId& value : arg->values) {
        const TensorSpec* spec = method_.Spec(value);
        elements.push_back(spec ? SpecText(*spec) : "?");
      }
      operands.push_back(absl::StrCat("(", absl::StrJoin(elements, ", "), ")"));
    }
  }
  std::string text = schema_.QualifiedName();
  if (operands.empty()) return text;
  absl::StrAppend(&text, " of ");
  for (size_t i = 0; i < operands.size(); ++i) {
    if (i > 0)
      absl::StrAppend(&text, i + 1 == operands.size() ? " and " : ", ");
    absl::StrAppend(&text, operands[i]);
  }
  return text;
}

absl::Status BoundCall::Error(absl::string_view reason) const {
  return absl::InvalidArgumentError(absl::StrCat(Describe(), ": ", reason));
}

absl::Status BoundCall::DTypeMismatch(absl::string_view reason) const {
  return DTypeError(absl::StrCat(Describe(), ": ", reason));
}

int BoundCall::IndexOf(absl::string_view name) const {
  return schema_.ArgumentIndex(std::string_view(name.data(), name.size()));
}

const Argument* BoundCall::Get(absl::string_view name) const {
  int index = IndexOf(name);
  return index < 0 ? nullptr : bound_[index];
}

std::optional<absl::string_view> BoundCall::DefaultText(
    absl::string_view name) const {
  int index = IndexOf(name);
  if (index < 0 || !schema_.arguments[index].default_value) {
    return std::nullopt;
  }
  return absl::string_view(*schema_.arguments[index].default_value);
}

const Node* BoundCall::ScalarNode(const ValueId& value) const {
  if (value.node < 0 ||
      value.node >= static_cast<int32_t>(method_.nodes.size()) ||
      value.element >= 0) {
    return nullptr;
  }
  const Node& node = method_.nodes[value.node];
  return node.result == ResultKind::kScalar ? &node : nullptr;
}

absl::StatusOr<std::optional<std::vector<int64_t>>>
BoundCall::ParseIntListDefault(absl::string_view name,
                               absl::string_view text) const {
  int index = IndexOf(name);
  int fixed_size = schema_.arguments[index].type.fixed_size;
  int64_t single = 0;
  if (absl::SimpleAtoi(text, &single)) {
    // `int[2] stride=1` repeats the value.
    return std::optional(std::vector<int64_t>(std::max(fixed_size, 1), single));
  }
  if (!absl::ConsumePrefix(&text, "[") || !absl::ConsumeSuffix(&text, "]")) {
    return Unsupported(name);
  }
  std::vector<int64_t> values;
  if (absl::StripAsciiWhitespace(text).empty()) return std::optional(values);
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &value)) {
      return Unsupported(name);
    }
    values.push_back(value);
  }
  return std::optional(std::move(values));
}

absl::Status BoundCall::Symbolic(absl::string_view name) const {
  return absl::UnimplementedError(absl::StrCat(
      schema_.QualifiedName(), ": argument '", name,
      "' is a symbolic value; the result is not checked statically"));
}

absl::Status BoundCall::Unsupported(absl::string_view name) const {
  return absl::UnimplementedError(
      absl::StrCat(schema_.QualifiedName(), ": the default of '", name,
                   "' is not understood by the shape rules"));
}

absl::Status BoundCall::WrongKind(absl::string_view name,
                                  absl::string_view expected,
                                  ArgKind got) const {
  return Error(absl::StrCat("argument '", name, "' must be ", expected,
                            ", got ", KindText(got)));
}

// The argument result 0 is written into, when the schema says so.
std::optional<int> InPlaceArgument(const OpSchema& schema) {
  std::optional<int> aliased = schema.AliasedArgument(0);
  // The aliased argument has an annotation (its set is the result's): the
  // result is written into it when that annotation has `!`.
  if (!aliased || !schema.arguments[*aliased].alias->is_write)
    return std::nullopt;
  return aliased;
}

// Prefixes a WrapDim error with the call's description.
absl::StatusOr<int64_t> WrapDimFor(const BoundCall& call, int64_t dim,
                                   int64_t rank) {
  absl::StatusOr<int64_t> wrapped = WrapDim(dim, rank);
  if (!wrapped.ok()) return call.Error(wrapped.status().message());
  return wrapped;
}

absl::Status SameDTypes(const BoundCall& call) {
  TensorOperandList tensors = call.TensorOperands();
  for (const TensorSpec* tensor : tensors) {
    if (tensor->dtype != tensors[0]->dtype) {
      return call.DTypeMismatch(absl::StrCat(
          "operands have different dtypes ", DTypeText(tensors[0]->dtype),
          " and ", DTypeText(tensor->dtype)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRank(const BoundCall& call, absl::string_view name,
                       const TensorSpec& spec, int64_t rank) {
  if (spec.dim() == rank) return absl::OkStatus();
  return call.Error(absl::StrCat("'", name, "' must be ", rank, "-D, not ",
                                 spec.dim(), "-D"));
}

absl::Status CheckResultSizes(const BoundCall& call,
                              const std::vector<int64_t>& sizes, DType dtype) {
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0) {
      return call.Error(absl::StrCat("the result's size ", ShapeText(sizes),
                                     " is negative in dim ", d));
    }
  }
  std::optional<int64_t> numel = NumElementsOf(sizes);
  if (!numel || !CheckedMul(*numel, std::max<int64_t>(ElementSize(dtype), 1))) {
    return call.Error(absl::StrCat("the result's size ", ShapeText(sizes),
                                   " overflows int64"));
  }
  return absl::OkStatus();
}

}  // namespace ferry
