// Shape rules: what a call's result specs must be, from its operands' specs.
//
// Model. A registered operator names one rule kind (schema.h, ShapeRule); the
// rule reads the call's arguments by their schema parameter names (`self`,
// `other`, `dim`, ...), with the schema's defaults for omitted ones, and
// computes one TensorSpec per tensor result. Within a kind, the few facts
// that differ between operators (mm vs bmm, transpose vs slice, sum's dtype)
// are keyed by the schema's base name; adding an operator to an existing kind
// is one registry row, plus one case here when its geometry is new.
//
//   kElementwise  broadcast of the tensor operands; dtype by type promotion.
//   kSameAsSelf   self's dtype and sizes (clone, _softmax, copies, fill_).
//   kMatmul       mm, bmm, addmm, linear.
//   kView         exact ATen view geometry over self's strides and storage
//                 offset (the result shares self's storage).
//   kCopy         the view's sizes, in fresh contiguous storage.
//   kReduction    sum / mean / amax over a dim list, keepdim, negative dims.
//   kCat          concatenation along a dim.
//   kLayerNorm    native_layer_norm's (out, mean, rstd).
//   kMetadata     no tensor result (the node's result is a scalar).
//
// In place. When the schema says result 0 is a written argument (`Tensor(a!)`
// on both), the result IS that argument: its spec is the argument's spec
// exactly (strides and offset included). The rule still checks that the
// computed shape equals the written tensor's (ATen refuses to resize in
// place) and, for arithmetic, that the computed dtype can be cast into it.
//
// Type promotion (kElementwise, kCat) follows ATen's rules with three tiers:
// dimensioned tensors, 0-dim tensors, and wrapped scalars (Scalar arguments
// other than `alpha`/`beta`, which only scale). A lower tier only decides the
// dtype when it is of a higher category (bool < integer < floating), so
// `i32 tensor + 2` is i32, `i32 tensor + 2.5` is f32 (the default float
// dtype) and `f16 tensor + 2.5` is f16. Simplified: true division and the
// transcendental functions (div, sin, cos, exp, tanh, sigmoid, gelu) give f32
// for integral and bool inputs; operators ATen refuses for bool (neg, sub)
// are not refused here.
#include "passes/shape_rules.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
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

namespace ferry {
namespace {

constexpr absl::string_view kDTypeErrorPayload = "ferry.dev/shape_rules/dtype";

absl::Status DTypeError(std::string message) {
  absl::Status status = absl::InvalidArgumentError(std::move(message));
  status.SetPayload(kDTypeErrorPayload, absl::Cord("dtype"));
  return status;
}

// Debian's Abseil has its own string_view; ferry's headers use std's.
absl::string_view AbslView(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}
absl::string_view DTypeText(DType dtype) { return AbslView(DTypeName(dtype)); }

// --- Checked arithmetic -----------------------------------------------------

std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

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
TensorSpec FreshSpec(DType dtype, std::vector<int64_t> sizes) {
  TensorSpec spec;
  spec.dtype = dtype;
  spec.sizes = std::move(sizes);
  return spec;
}

// --- Dtypes -----------------------------------------------------------------

// bool < integer < floating.
int Category(DType dtype) {
  if (dtype == DType::kBool) return 0;
  return IsFloatingPoint(dtype) ? 2 : 1;
}

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

// ATen's three-tier result type.
class ResultType {
 public:
  void AddTensor(const TensorSpec& spec) {
    DType& tier = spec.dim() == 0 ? zero_dim_ : dimensioned_;
    tier = PromoteTypes(tier, spec.dtype);
  }
  // A Scalar argument: int -> i64, float -> the default float dtype f32.
  void AddScalar(DType dtype) { wrapped_ = PromoteTypes(wrapped_, dtype); }

  DType Get() const {
    return Combine(dimensioned_, Combine(zero_dim_, wrapped_));
  }

 private:
  // The dtype of `higher` unless `lower` is of a higher category.
  static DType Combine(DType higher, DType lower) {
    if (higher == DType::kInvalid) return lower;
    if (lower == DType::kInvalid) return higher;
    if (Category(lower) > Category(higher)) return PromoteTypes(higher, lower);
    return higher;
  }

  DType dimensioned_ = DType::kInvalid;
  DType zero_dim_ = DType::kInvalid;
  DType wrapped_ = DType::kInvalid;
};

// --- Dims -------------------------------------------------------------------

// Wraps a possibly negative dim of a `rank`-D tensor (a 0-dim tensor accepts
// -1 and 0, as ATen does).
absl::StatusOr<int64_t> WrapDim(int64_t dim, int64_t rank) {
  int64_t extent = std::max<int64_t>(rank, 1);
  if (dim < -extent || dim >= extent) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dim ", dim, " is out of range for a ", rank,
        "-D tensor (expected a dim in [", -extent, ", ", extent - 1, "])"));
  }
  return dim < 0 ? dim + extent : dim;
}

// --- Reading bound arguments ------------------------------------------------

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

// A call with its arguments bound to the schema's parameters.
class BoundCall {
 public:
  BoundCall(const OpSchema& schema, const Method& method,
            std::vector<const Argument*> bound)
      : schema_(schema), method_(method), bound_(std::move(bound)) {}

  const OpSchema& schema() const { return schema_; }
  bool HasParameter(absl::string_view name) const { return IndexOf(name) >= 0; }

  // The tensor bound to `name`; an error when it is omitted, None or not a
  // tensor.
  absl::StatusOr<const TensorSpec*> Tensor(absl::string_view name) const {
    absl::StatusOr<const TensorSpec*> spec = OptionalTensor(name);
    if (spec.ok() && *spec == nullptr) {
      return Error(absl::StrCat("argument '", name, "' must be a tensor"));
    }
    return spec;
  }

  // Null when omitted or None.
  absl::StatusOr<const TensorSpec*> OptionalTensor(
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

  absl::StatusOr<std::vector<const TensorSpec*>> TensorList(
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

  absl::StatusOr<std::optional<int64_t>> OptionalInt(
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

  absl::StatusOr<int64_t> Int(absl::string_view name) const {
    absl::StatusOr<std::optional<int64_t>> value = OptionalInt(name);
    if (!value.ok()) return value.status();
    if (!value->has_value()) {
      return Error(absl::StrCat("argument '", name, "' must be an int"));
    }
    return **value;
  }

  absl::StatusOr<bool> Bool(absl::string_view name) const {
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

  // nullopt when None (or omitted with a None default). A single int is a
  // list of one (`int[1] dim` accepts `dim=1`).
  absl::StatusOr<std::optional<std::vector<int64_t>>> IntList(
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

  absl::StatusOr<std::optional<DType>> OptionalDType(
      absl::string_view name) const {
    const Argument* arg = Get(name);
    if (arg == nullptr || arg->kind == ArgKind::kNone) {
      return std::optional<DType>();
    }
    if (arg->kind == ArgKind::kDType) return std::optional(arg->dtype);
    return WrongKind(name, "a dtype", arg->kind);
  }

  // Scalar arguments taking part in type promotion, as their wrapped dtype.
  std::vector<DType> PromotingScalars() const {
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

  // Every tensor operand (Tensor parameters bound to a tensor), in order.
  std::vector<const TensorSpec*> TensorOperands() const {
    std::vector<const TensorSpec*> specs;
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

  // "aten::mm of f32[2,3] and f32[4,5]": the operator and its tensor
  // operands, the prefix of every rule error.
  std::string Describe() const {
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
        operands.push_back(
            absl::StrCat("(", absl::StrJoin(elements, ", "), ")"));
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

  // "<Describe()>: <reason>".
  absl::Status Error(absl::string_view reason) const {
    return absl::InvalidArgumentError(absl::StrCat(Describe(), ": ", reason));
  }
  absl::Status DTypeMismatch(absl::string_view reason) const {
    return DTypeError(absl::StrCat(Describe(), ": ", reason));
  }

 private:
  int IndexOf(absl::string_view name) const {
    return schema_.ArgumentIndex(std::string_view(name.data(), name.size()));
  }

  const Argument* Get(absl::string_view name) const {
    int index = IndexOf(name);
    return index < 0 ? nullptr : bound_[index];
  }

  std::optional<absl::string_view> DefaultText(absl::string_view name) const {
    int index = IndexOf(name);
    if (index < 0 || !schema_.arguments[index].default_value) {
      return std::nullopt;
    }
    return absl::string_view(*schema_.arguments[index].default_value);
  }

  const Node* ScalarNode(const ValueId& value) const {
    if (value.node < 0 ||
        value.node >= static_cast<int32_t>(method_.nodes.size()) ||
        value.element >= 0) {
      return nullptr;
    }
    const Node& node = method_.nodes[value.node];
    return node.result == ResultKind::kScalar ? &node : nullptr;
  }

  absl::StatusOr<std::optional<std::vector<int64_t>>> ParseIntListDefault(
      absl::string_view name, absl::string_view text) const {
    int index = IndexOf(name);
    int fixed_size = schema_.arguments[index].type.fixed_size;
    int64_t single = 0;
    if (absl::SimpleAtoi(text, &single)) {
      // `int[2] stride=1` repeats the value.
      return std::optional(
          std::vector<int64_t>(std::max(fixed_size, 1), single));
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

  absl::Status Symbolic(absl::string_view name) const {
    return absl::UnimplementedError(absl::StrCat(
        schema_.QualifiedName(), ": argument '", name,
        "' is a symbolic value; the result is not checked statically"));
  }
  absl::Status Unsupported(absl::string_view name) const {
    return absl::UnimplementedError(
        absl::StrCat(schema_.QualifiedName(), ": the default of '", name,
                     "' is not understood by the shape rules"));
  }
  absl::Status WrongKind(absl::string_view name, absl::string_view expected,
                         ArgKind got) const {
    return Error(absl::StrCat("argument '", name, "' must be ", expected,
                              ", got ", KindText(got)));
  }

  const OpSchema& schema_;
  const Method& method_;
  std::vector<const Argument*> bound_;
};

using Specs = absl::StatusOr<std::vector<TensorSpec>>;

// The argument result 0 is written into, when the schema says so.
std::optional<int> InPlaceArgument(const OpSchema& schema) {
  std::optional<int> aliased = schema.AliasedArgument(0);
  if (!aliased) return std::nullopt;
  std::vector<int> written = schema.WrittenArguments();
  if (std::find(written.begin(), written.end(), *aliased) == written.end()) {
    return std::nullopt;
  }
  return aliased;
}

// Prefixes a WrapDim error with the call's description.
absl::StatusOr<int64_t> WrapDimFor(const BoundCall& call, int64_t dim,
                                   int64_t rank) {
  absl::StatusOr<int64_t> wrapped = WrapDim(dim, rank);
  if (!wrapped.ok()) return call.Error(wrapped.status().message());
  return wrapped;
}

// --- kElementwise -----------------------------------------------------------

// Operators whose integral (and bool) inputs compute in the default float
// dtype: true division and transcendental functions.
bool ComputesInFloat(absl::string_view op_name) {
  return op_name == "div" || op_name == "sin" || op_name == "cos" ||
         op_name == "exp" || op_name == "tanh" || op_name == "sigmoid" ||
         op_name == "gelu";
}

Specs InferElementwise(const BoundCall& call) {
  std::vector<const TensorSpec*> tensors = call.TensorOperands();
  if (tensors.empty()) return call.Error("expected a tensor operand");
  std::vector<int64_t> sizes = tensors[0]->sizes;
  ResultType result_type;
  for (const TensorSpec* tensor : tensors) {
    std::optional<std::vector<int64_t>> broadcast =
        BroadcastShapes(sizes, tensor->sizes);
    if (!broadcast) {
      return call.Error(absl::StrCat("sizes ", ShapeText(sizes), " and ",
                                     ShapeText(tensor->sizes),
                                     " do not broadcast"));
    }
    sizes = *std::move(broadcast);
    result_type.AddTensor(*tensor);
  }
  for (DType scalar : call.PromotingScalars()) result_type.AddScalar(scalar);
  DType dtype = result_type.Get();
  if (ComputesInFloat(call.schema().name) && !IsFloatingPoint(dtype)) {
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
  return std::vector<TensorSpec>{FreshSpec(dtype, std::move(sizes))};
}

// --- kSameAsSelf ------------------------------------------------------------

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
  std::vector<const TensorSpec*> tensors = call.TensorOperands();
  for (size_t i = 1; i < tensors.size(); ++i) {
    std::optional<std::vector<int64_t>> broadcast =
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

// --- kMatmul ----------------------------------------------------------------

absl::Status SameDTypes(const BoundCall& call) {
  std::vector<const TensorSpec*> tensors = call.TensorOperands();
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

absl::Status CheckInner(const BoundCall& call, int64_t left, int64_t right) {
  if (left == right) return absl::OkStatus();
  return call.Error(
      absl::StrCat("inner dimensions ", left, " and ", right, " differ"));
}

Specs InferMatmul(const BoundCall& call) {
  absl::string_view op = call.schema().name;
  std::vector<int64_t> sizes;
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
      std::optional<std::vector<int64_t>> broadcast =
          BroadcastShapes((*bias)->sizes, sizes);
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
      std::optional<std::vector<int64_t>> broadcast =
          BroadcastShapes((*bias)->sizes, sizes);
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
  std::vector<const TensorSpec*> tensors = call.TensorOperands();
  return std::vector<TensorSpec>{
      FreshSpec(tensors[0]->dtype, std::move(sizes))};
}

// --- kView and kCopy --------------------------------------------------------

// The strides that let `new_sizes` view a tensor of `sizes` and `strides`
// without a copy, or nullopt when no strides can (ATen's computeStride).
//
// The old dims are grouped, innermost first, into chunks that are contiguous
// among themselves (a dim joins the chunk inside it when its stride equals the
// chunk's extent; size-1 dims join anything). A view is possible exactly when
// the new dims, innermost first, tile each chunk's element count; each new dim
// gets the stride its position in its chunk implies.
std::optional<std::vector<int64_t>> ComputeViewStrides(
    const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
    const std::vector<int64_t>& new_sizes) {
  std::vector<int64_t> new_strides(new_sizes.size(), 1);
  if (sizes.empty()) return new_strides;  // A 0-dim tensor: all new sizes 1.
  std::optional<int64_t> numel = NumElementsOf(sizes);
  if (!numel) return std::nullopt;
  if (*numel == 0) {
    // No element is ever addressed: any strides do.
    if (sizes == new_sizes) return strides;
    return DenseStrides(new_sizes);
  }
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t chunk_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    chunk_numel *= sizes[d];  // Bounded by numel: cannot overflow.
    bool chunk_ends = d == 0;
    if (!chunk_ends && sizes[d - 1] != 1) {
      std::optional<int64_t> extent =
          CheckedMul(chunk_numel, chunk_base_stride);
      chunk_ends = !extent || strides[d - 1] != *extent;
    }
    if (!chunk_ends) continue;
    while (view_d >= 0 &&
           (view_numel < chunk_numel || new_sizes[view_d] == 1)) {
      std::optional<int64_t> stride = CheckedMul(view_numel, chunk_base_stride);
      if (!stride) return std::nullopt;
      new_strides[view_d] = *stride;
      view_numel *= new_sizes[view_d];
      --view_d;
    }
    if (view_numel != chunk_numel) return std::nullopt;
    if (d > 0) {
      chunk_base_stride = strides[d - 1];
      chunk_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// Resolves a `-1` in a view's requested sizes against `numel` elements.
absl::StatusOr<std::vector<int64_t>> InferViewSizes(
    const BoundCall& call, std::vector<int64_t> requested, int64_t numel) {
  int64_t inferred = -1;
  int64_t known = 1;
  for (size_t d = 0; d < requested.size(); ++d) {
    if (requested[d] == -1) {
      if (inferred >= 0) return call.Error("only one dimension can be -1");
      inferred = static_cast<int64_t>(d);
    } else if (requested[d] < 0) {
      return call.Error(
          absl::StrCat("invalid size ", requested[d], " in dim ", d));
    } else {
      std::optional<int64_t> product = CheckedMul(known, requested[d]);
      if (!product) return call.Error("the requested sizes overflow int64");
      known = *product;
    }
  }
  if (inferred >= 0) {
    if (known == 0) {
      return call.Error(absl::StrCat("size ", ShapeText(requested),
                                     " cannot infer dim ", inferred,
                                     " of a tensor with 0 elements"));
    }
    if (numel % known == 0) {
      requested[inferred] = numel / known;
      return requested;
    }
  } else if (known == numel) {
    return requested;
  }
  return call.Error(absl::StrCat("size ", ShapeText(requested),
                                 " is invalid for ", numel, " elements"));
}

// The geometry of a view result, relative to self's storage.
struct ViewGeometry {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;
};

absl::Status ViewReshape(const BoundCall& call, bool needs_strides,
                         ViewGeometry& view) {
  absl::string_view param = call.HasParameter("size") ? "size" : "shape";
  absl::StatusOr<std::optional<std::vector<int64_t>>> requested =
      call.IntList(param);
  if (!requested.ok()) return requested.status();
  if (!requested->has_value()) {
    return call.Error(absl::StrCat("argument '", param, "' must be a list"));
  }
  std::optional<int64_t> numel = NumElementsOf(view.sizes);
  if (!numel) return call.Error("the number of elements overflows int64");
  absl::StatusOr<std::vector<int64_t>> sizes =
      InferViewSizes(call, **std::move(requested), *numel);
  if (!sizes.ok()) return sizes.status();
  if (needs_strides) {
    std::optional<std::vector<int64_t>> strides =
        ComputeViewStrides(view.sizes, view.strides, *sizes);
    if (!strides) {
      return call.Error(
          absl::StrCat("view is not compatible with input strides ",
                       ShapeText(view.strides), " (size ", ShapeText(*sizes),
                       "); make the input contiguous or use view_copy"));
    }
    view.strides = *std::move(strides);
  } else {
    view.strides = DenseStrides(*sizes);
  }
  view.sizes = *std::move(sizes);
  return absl::OkStatus();
}

absl::Status ViewTranspose(const BoundCall& call, ViewGeometry& view) {
  int64_t rank = static_cast<int64_t>(view.sizes.size());
  absl::StatusOr<int64_t> dim0 = call.Int("dim0");
  if (!dim0.ok()) return dim0.status();
  absl::StatusOr<int64_t> dim1 = call.Int("dim1");
  if (!dim1.ok()) return dim1.status();
  dim0 = WrapDimFor(call, *dim0, rank);
  if (!dim0.ok()) return dim0.status();
  dim1 = WrapDimFor(call, *dim1, rank);
  if (!dim1.ok()) return dim1.status();
  if (rank == 0) return absl::OkStatus();
  std::swap(view.sizes[*dim0], view.sizes[*dim1]);
  std::swap(view.strides[*dim0], view.strides[*dim1]);
  return absl::OkStatus();
}

absl::Status ViewPermute(const BoundCall& call, ViewGeometry& view) {
  int64_t rank = static_cast<int64_t>(view.sizes.size());
  absl::StatusOr<std::optional<std::vector<int64_t>>> dims =
      call.IntList("dims");
  if (!dims.ok()) return dims.status();
  if (!dims->has_value() || static_cast<int64_t>((*dims)->size()) != rank) {
    return call.Error(
        absl::StrCat("dims ", dims->has_value() ? ShapeText(**dims) : "None",
                     " are not a permutation of the ", rank, " dims of self"));
  }
  std::vector<bool> seen(rank, false);
  ViewGeometry permuted = view;
  for (int64_t i = 0; i < rank; ++i) {
    absl::StatusOr<int64_t> dim = WrapDimFor(call, (**dims)[i], rank);
    if (!dim.ok()) return dim.status();
    if (seen[*dim]) {
      return call.Error(
          absl::StrCat("dim ", (**dims)[i], " appears more than once in dims"));
    }
    seen[*dim] = true;
    permuted.sizes[i] = view.sizes[*dim];
    permuted.strides[i] = view.strides[*dim];
  }
  view = std::move(permuted);
  return absl::OkStatus();
}

absl::Status ViewT(const BoundCall& call, ViewGeometry& view) {
  if (view.sizes.size() > 2) {
    return call.Error(absl::StrCat("self must be at most 2-D, not ",
                                   view.sizes.size(), "-D"));
  }
  if (view.sizes.size() == 2) {
    std::swap(view.sizes[0], view.sizes[1]);
    std::swap(view.strides[0], view.strides[1]);
  }
  return absl::OkStatus();
}

absl::Status ViewExpand(const BoundCall& call, ViewGeometry& view) {
  absl::StatusOr<std::optional<std::vector<int64_t>>> target =
      call.IntList("size");
  if (!target.ok()) return target.status();
  if (!target->has_value()) return call.Error("argument 'size' must be a list");
  const std::vector<int64_t>& sizes = **target;
  int64_t rank = static_cast<int64_t>(view.sizes.size());
  int64_t new_rank = static_cast<int64_t>(sizes.size());
  if (new_rank < rank) {
    return call.Error(
        absl::StrCat("size ", ShapeText(sizes), " has fewer dims than self"));
  }
  ViewGeometry expanded;
  expanded.sizes.assign(new_rank, 0);
  expanded.strides.assign(new_rank, 0);
  expanded.storage_offset = view.storage_offset;
  for (int64_t i = new_rank - 1; i >= 0; --i) {
    int64_t self_dim = i - (new_rank - rank);
    int64_t size = 1;
    int64_t stride = 1;
    if (self_dim >= 0) {
      size = view.sizes[self_dim];
      stride = view.strides[self_dim];
    } else if (i + 1 < new_rank) {
      // A new leading dim of size 1 is laid out as if just outside the next.
      stride = CheckedMul(expanded.sizes[i + 1], expanded.strides[i + 1])
                   .value_or(0);
    }
    int64_t wanted = sizes[i];
    if (wanted == -1) {
      if (self_dim < 0) {
        return call.Error(
            absl::StrCat("size -1 is not allowed in the new leading dim ", i));
      }
      wanted = size;
    }
    if (wanted < 0) {
      return call.Error(absl::StrCat("invalid size ", wanted, " in dim ", i));
    }
    if (wanted != size) {
      if (size != 1) {
        return call.Error(absl::StrCat("the expanded size ", wanted,
                                       " must match the existing size ", size,
                                       " at non-singleton dim ", i));
      }
      size = wanted;
      stride = 0;
    }
    expanded.sizes[i] = size;
    expanded.strides[i] = stride;
  }
  view = std::move(expanded);
  return absl::OkStatus();
}

absl::Status ViewSlice(const BoundCall& call, ViewGeometry& view) {
  int64_t rank = static_cast<int64_t>(view.sizes.size());
  if (rank == 0) return call.Error("cannot slice a 0-dim tensor");
  absl::StatusOr<int64_t> dim = call.Int("dim");
  if (!dim.ok()) return dim.status();
  dim = WrapDimFor(call, *dim, rank);
  if (!dim.ok()) return dim.status();
  absl::StatusOr<std::optional<int64_t>> start = call.OptionalInt("start");
  if (!start.ok()) return start.status();
  absl::StatusOr<std::optional<int64_t>> end = call.OptionalInt("end");
  if (!end.ok()) return end.status();
  absl::StatusOr<int64_t> step = call.Int("step");
  if (!step.ok()) return step.status();
  if (*step <= 0) {
    return call.Error(absl::StrCat("slice step must be positive, not ", *step));
  }
  int64_t size = view.sizes[*dim];
  int64_t first = start->value_or(0);
  int64_t last = end->value_or(std::numeric_limits<int64_t>::max());
  // Negative indices count from the end; then both clamp to [0, size].
  if (first < 0) first += size;
  if (last < 0) last += size;
  first = std::clamp<int64_t>(first, 0, size);
  last = std::clamp<int64_t>(last, first, size);
  int64_t length = last == first ? 0 : (last - first - 1) / *step + 1;
  std::optional<int64_t> skipped = CheckedMul(first, view.strides[*dim]);
  std::optional<int64_t> offset =
      skipped ? CheckedAdd(view.storage_offset, *skipped) : std::nullopt;
  std::optional<int64_t> stride = CheckedMul(view.strides[*dim], *step);
  if (!offset || !stride)
    return call.Error("the slice's offset overflows int64");
  view.storage_offset = *offset;
  view.sizes[*dim] = length;
  view.strides[*dim] = *stride;
  return absl::OkStatus();
}

absl::Status ViewSelect(const BoundCall& call, ViewGeometry& view) {
  int64_t rank = static_cast<int64_t>(view.sizes.size());
  if (rank == 0) return call.Error("cannot select from a 0-dim tensor");
  absl::StatusOr<int64_t> dim = call.Int("dim");
  if (!dim.ok()) return dim.status();
  dim = WrapDimFor(call, *dim, rank);
  if (!dim.ok()) return dim.status();
  absl::StatusOr<int64_t> index = call.Int("index");
  if (!index.ok()) return index.status();
  int64_t size = view.sizes[*dim];
  if (*index < -size || *index >= size) {
    return call.Error(absl::StrCat("index ", *index,
                                   " is out of range for dim ", *dim,
                                   " of size ", size));
  }
  int64_t position = *index < 0 ? *index + size : *index;
  std::optional<int64_t> skipped = CheckedMul(position, view.strides[*dim]);
  std::optional<int64_t> offset =
      skipped ? CheckedAdd(view.storage_offset, *skipped) : std::nullopt;
  if (!offset) return call.Error("the selection's offset overflows int64");
  view.storage_offset = *offset;
  view.sizes.erase(view.sizes.begin() + *dim);
  view.strides.erase(view.strides.begin() + *dim);
  return absl::OkStatus();
}

absl::Status ViewUnsqueeze(const BoundCall& call, ViewGeometry& view) {
  int64_t rank = static_cast<int64_t>(view.sizes.size());
  absl::StatusOr<int64_t> dim = call.Int("dim");
  if (!dim.ok()) return dim.status();
  dim = WrapDimFor(call, *dim, rank + 1);
  if (!dim.ok()) return dim.status();
  int64_t stride = 1;
  if (*dim < rank) {
    stride = CheckedMul(view.sizes[*dim], view.strides[*dim]).value_or(0);
  }
  view.sizes.insert(view.sizes.begin() + *dim, 1);
  view.strides.insert(view.strides.begin() + *dim, stride);
  return absl::OkStatus();
}

absl::Status ViewSqueeze(const BoundCall& call, ViewGeometry& view) {
  int64_t rank = static_cast<int64_t>(view.sizes.size());
  if (call.HasParameter("dim")) {
    absl::StatusOr<int64_t> dim = call.Int("dim");
    if (!dim.ok()) return dim.status();
    dim = WrapDimFor(call, *dim, rank);
    if (!dim.ok()) return dim.status();
    if (rank > 0 && view.sizes[*dim] == 1) {
      view.sizes.erase(view.sizes.begin() + *dim);
      view.strides.erase(view.strides.begin() + *dim);
    }
    return absl::OkStatus();
  }
  ViewGeometry squeezed;
  squeezed.storage_offset = view.storage_offset;
  for (int64_t d = 0; d < rank; ++d) {
    if (view.sizes[d] == 1) continue;
    squeezed.sizes.push_back(view.sizes[d]);
    squeezed.strides.push_back(view.strides[d]);
  }
  view = std::move(squeezed);
  return absl::OkStatus();
}

Specs InferView(const BoundCall& call, bool fresh_storage) {
  absl::StatusOr<const TensorSpec*> self = call.Tensor("self");
  if (!self.ok()) return self.status();
  absl::string_view op = call.schema().name;
  if (fresh_storage) absl::ConsumeSuffix(&op, "_copy");

  ViewGeometry view;
  view.sizes = (*self)->sizes;
  view.strides = (*self)->Strides();
  view.storage_offset = (*self)->storage_offset;
  absl::Status status;
  if (op == "view" || op == "reshape") {
    // view_copy copies when a view is impossible (it reshapes).
    status = ViewReshape(call, /*needs_strides=*/!fresh_storage, view);
  } else if (op == "transpose") {
    status = ViewTranspose(call, view);
  } else if (op == "permute") {
    status = ViewPermute(call, view);
  } else if (op == "t") {
    status = ViewT(call, view);
  } else if (op == "expand") {
    status = ViewExpand(call, view);
  } else if (op == "slice") {
    status = ViewSlice(call, view);
  } else if (op == "select") {
    status = ViewSelect(call, view);
  } else if (op == "unsqueeze") {
    status = ViewUnsqueeze(call, view);
  } else if (op == "squeeze") {
    status = ViewSqueeze(call, view);
  } else if (op == "alias") {
    // Same geometry.
  } else {
    return absl::UnimplementedError(
        absl::StrCat("no view rule for '", call.schema().QualifiedName(), "'"));
  }
  if (!status.ok()) return status;

  TensorSpec result = FreshSpec((*self)->dtype, std::move(view.sizes));
  if (!fresh_storage) {
    result.strides = std::move(view.strides);
    result.storage_offset = view.storage_offset;
  }
  return std::vector<TensorSpec>{std::move(result)};
}

// --- kReduction -------------------------------------------------------------

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
  return std::vector<TensorSpec>{FreshSpec(dtype, std::move(sizes))};
}

// --- kCat -------------------------------------------------------------------

Specs InferCat(const BoundCall& call) {
  absl::StatusOr<std::vector<const TensorSpec*>> tensors =
      call.TensorList("tensors");
  if (!tensors.ok()) return tensors.status();
  if (tensors->empty()) return call.Error("expected at least one tensor");
  absl::StatusOr<int64_t> dim = call.Int("dim");
  if (!dim.ok()) return dim.status();

  DType dtype = DType::kInvalid;
  for (const TensorSpec* tensor : *tensors) {
    dtype = PromoteTypes(dtype, tensor->dtype);
  }
  // As ATen (for compatibility), 1-D empty tensors are skipped.
  auto skipped = [](const TensorSpec* t) {
    return t->sizes == std::vector<int64_t>{0};
  };
  const TensorSpec* reference = nullptr;
  for (const TensorSpec* tensor : *tensors) {
    if (!skipped(tensor)) {
      reference = tensor;
      break;
    }
  }
  if (reference == nullptr)
    return std::vector<TensorSpec>{FreshSpec(dtype, {0})};
  if (reference->dim() == 0) {
    return call.Error("zero-dimensional tensors cannot be concatenated");
  }
  absl::StatusOr<int64_t> cat_dim = WrapDimFor(call, *dim, reference->dim());
  if (!cat_dim.ok()) return cat_dim.status();
  std::vector<int64_t> sizes = reference->sizes;
  sizes[*cat_dim] = 0;
  for (size_t i = 0; i < tensors->size(); ++i) {
    const TensorSpec& tensor = *(*tensors)[i];
    if (skipped(&tensor)) continue;
    if (tensor.dim() != reference->dim()) {
      return call.Error(absl::StrCat("tensor ", i, " has ", tensor.dim(),
                                     " dims, not ", reference->dim()));
    }
    for (int64_t d = 0; d < tensor.dim(); ++d) {
      if (d != *cat_dim && tensor.sizes[d] != reference->sizes[d]) {
        return call.Error(
            absl::StrCat("sizes ", ShapeText(tensor.sizes), " and ",
                         ShapeText(reference->sizes), " differ in dim ", d,
                         ", which is not the concatenated dim ", *cat_dim));
      }
    }
    std::optional<int64_t> total =
        CheckedAdd(sizes[*cat_dim], tensor.sizes[*cat_dim]);
    if (!total) return call.Error("the concatenated size overflows int64");
    sizes[*cat_dim] = *total;
  }
  return std::vector<TensorSpec>{FreshSpec(dtype, std::move(sizes))};
}

// --- kLayerNorm -------------------------------------------------------------

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

absl::string_view BaseTypeText(SchemaTypeKind kind) {
  switch (kind) {
    case SchemaTypeKind::kTensor:
      return "Tensor";
    case SchemaTypeKind::kInt:
      return "int";
    case SchemaTypeKind::kFloat:
      return "float";
    case SchemaTypeKind::kBool:
      return "bool";
    case SchemaTypeKind::kScalar:
      return "Scalar";
    case SchemaTypeKind::kIntList:
      return "int";
    case SchemaTypeKind::kFloatList:
      return "float";
    case SchemaTypeKind::kBoolList:
      return "bool";
    case SchemaTypeKind::kTensorList:
      return "Tensor";
    case SchemaTypeKind::kScalarType:
      return "ScalarType";
    case SchemaTypeKind::kLayout:
      return "Layout";
    case SchemaTypeKind::kDevice:
      return "Device";
    case SchemaTypeKind::kMemoryFormat:
      return "MemoryFormat";
    case SchemaTypeKind::kString:
      return "str";
    case SchemaTypeKind::kAny:
      return "Any";
  }
  return "Any";
}

// --- kMetadata --------------------------------------------------------------

Specs InferMetadata(const BoundCall& call) {
  absl::StatusOr<const TensorSpec*> self = call.Tensor(
      call.schema().arguments.empty() ? "self"
                                      : call.schema().arguments[0].name);
  if (!self.ok()) return self.status();
  if (call.HasParameter("dim")) {
    absl::StatusOr<int64_t> dim = call.Int("dim");
    if (!dim.ok()) return dim.status();
    if (absl::Status s = WrapDimFor(call, *dim, (*self)->dim()).status();
        !s.ok()) {
      return s;
    }
  }
  return std::vector<TensorSpec>{};
}

}  // namespace

// --- Public entry points ----------------------------------------------------

std::string ShapeText(const std::vector<int64_t>& sizes) {
  return absl::StrCat("[", absl::StrJoin(sizes, ","), "]");
}

std::string SpecText(const TensorSpec& spec) {
  return absl::StrCat(DTypeText(spec.dtype), ShapeText(spec.sizes));
}

std::string TypeText(const SchemaType& type) {
  using K = SchemaTypeKind;
  std::string text(BaseTypeText(type.kind));
  if (type.kind == K::kIntList || type.kind == K::kFloatList ||
      type.kind == K::kBoolList || type.kind == K::kTensorList) {
    absl::StrAppend(&text, "[",
                    type.fixed_size >= 0 ? absl::StrCat(type.fixed_size) : "",
                    "]");
  }
  if (type.optional) absl::StrAppend(&text, "?");
  return text;
}

bool IsDTypeError(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kDTypeErrorPayload).has_value();
}

std::optional<std::vector<int64_t>> BroadcastShapes(
    const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> result(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    // Aligned from the last dim; missing leading dims are 1.
    int64_t size_a = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t size_b = i < b.size() ? b[b.size() - 1 - i] : 1;
    int64_t size;
    if (size_a == size_b || size_b == 1) {
      size = size_a;
    } else if (size_a == 1) {
      size = size_b;
    } else {
      return std::nullopt;
    }
    result[rank - 1 - i] = size;
  }
  return result;
}

absl::StatusOr<std::vector<const Argument*>> BindArguments(
    const OpSchema& schema, const std::vector<Argument>& args) {
  std::vector<const Argument*> bound(schema.arguments.size(), nullptr);
  std::string op = schema.QualifiedName();
  size_t positional = 0;
  for (const Argument& arg : args) {
    if (arg.name.empty()) ++positional;
  }
  if (positional > schema.arguments.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", op, "' takes ", schema.arguments.size(), " argument",
                     schema.arguments.size() == 1 ? "" : "s", ", got ",
                     positional, " positional"));
  }
  // Positional arguments may fill keyword-only parameters too: serialized
  // edge graphs pass every argument by position.
  size_t next = 0;
  for (const Argument& arg : args) {
    if (arg.name.empty()) bound[next++] = &arg;
  }
  for (const Argument& arg : args) {
    if (arg.name.empty()) continue;
    int index = schema.ArgumentIndex(arg.name);
    if (index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", op, "' has no parameter called '", arg.name, "'"));
    }
    if (bound[index] != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "argument '", arg.name, "' of '", op, "' is given twice"));
    }
    bound[index] = &arg;
  }
  for (size_t i = 0; i < bound.size(); ++i) {
    if (bound[i] == nullptr && !schema.arguments[i].default_value) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", op, "' is missing argument '", schema.arguments[i].name, "'"));
    }
  }
  return bound;
}

bool ArgumentMatchesType(const Method& method, const Argument& arg,
                         const SchemaType& type) {
  using K = SchemaTypeKind;
  if (type.kind == K::kAny) return true;
  auto is_int_scalar = [&](const ValueId& v) {
    if (v.node < 0 || v.node >= static_cast<int32_t>(method.nodes.size()) ||
        v.element >= 0) {
      return false;
    }
    const Node& node = method.nodes[v.node];
    return node.result == ResultKind::kScalar &&
           node.scalar == ScalarType::kInt;
  };
  switch (arg.kind) {
    case ArgKind::kNone:
      return type.optional;
    case ArgKind::kValue: {
      if (method.Spec(arg.value) != nullptr) return type.kind == K::kTensor;
      const ValueId& v = arg.value;
      if (v.node < 0 || v.node >= static_cast<int32_t>(method.nodes.size()) ||
          v.element >= 0) {
        return false;
      }
      const Node& node = method.nodes[v.node];
      if (node.result != ResultKind::kScalar) return false;
      switch (node.scalar) {
        case ScalarType::kInt:
          return type.kind == K::kInt || type.kind == K::kFloat ||
                 type.kind == K::kScalar;
        case ScalarType::kFloat:
          return type.kind == K::kFloat || type.kind == K::kScalar;
        case ScalarType::kBool:
          return type.kind == K::kBool || type.kind == K::kScalar;
        case ScalarType::kInvalid:
          return false;
      }
      return false;
    }
    case ArgKind::kValueList: {
      if (type.kind == K::kTensorList) {
        for (const ValueId& v : arg.values) {
          if (method.Spec(v) == nullptr) return false;
        }
        return true;
      }
      if (type.kind == K::kIntList) {
        for (const ValueId& v : arg.values) {
          if (!is_int_scalar(v)) return false;
        }
        return true;
      }
      return false;
    }
    case ArgKind::kInt:
      // ATen passes enums (dtype, layout, memory format) as ints, and an int
      // for a fixed-size list repeats it.
      return type.kind == K::kInt || type.kind == K::kFloat ||
             type.kind == K::kScalar || type.kind == K::kScalarType ||
             type.kind == K::kLayout || type.kind == K::kMemoryFormat ||
             ((type.kind == K::kIntList || type.kind == K::kFloatList) &&
              type.fixed_size > 0);
    case ArgKind::kFloat:
      return type.kind == K::kFloat || type.kind == K::kScalar;
    case ArgKind::kBool:
      return type.kind == K::kBool || type.kind == K::kScalar;
    case ArgKind::kInts:
      // As in ATen, `int[N]` takes a list of any length (N only lets a
      // single int stand for N copies): `int[1] dim` takes [0, 2].
      if (type.kind == K::kIntList) return true;
      // An empty list fits any list type.
      return arg.ints.empty() &&
             (type.kind == K::kFloatList || type.kind == K::kBoolList ||
              type.kind == K::kTensorList);
    case ArgKind::kDType:
      return type.kind == K::kScalarType;
    case ArgKind::kString:
      return type.kind == K::kString || type.kind == K::kDevice;
  }
  return false;
}

absl::StatusOr<std::vector<TensorSpec>> InferResultSpecs(const OpInfo& info,
                                                         const Method& method,
                                                         const Node& call) {
  if (info.schema == nullptr || info.shape_rule == ShapeRule::kNone) {
    return absl::UnimplementedError(
        absl::StrCat("no shape rule for '", call.target, "'"));
  }
  const OpSchema& schema = *info.schema;
  absl::StatusOr<std::vector<const Argument*>> bound =
      BindArguments(schema, call.args);
  if (!bound.ok()) return bound.status();
  // The rules rely on every argument having its parameter's type.
  for (size_t i = 0; i < bound->size(); ++i) {
    const Argument* arg = (*bound)[i];
    if (arg != nullptr &&
        !ArgumentMatchesType(method, *arg, schema.arguments[i].type)) {
      return absl::InvalidArgumentError(
          absl::StrCat("argument '", schema.arguments[i].name, "' of '",
                       schema.QualifiedName(), "' must be ",
                       TypeText(schema.arguments[i].type)));
    }
  }
  BoundCall bound_call(schema, method, *std::move(bound));
  // The rules read sizes and strides as given; a malformed operand spec
  // (negative or overflowing sizes, strides of the wrong rank) is refused
  // here rather than computed over.
  for (const Argument& arg : call.args) {
    std::vector<ValueId> values = arg.values;
    if (arg.kind == ArgKind::kValue) values.push_back(arg.value);
    for (const ValueId& value : values) {
      const TensorSpec* spec = method.Spec(value);
      if (spec != nullptr && !spec->StorageBytes().has_value()) {
        return bound_call.Error(absl::StrCat(
            "operand '", method.ValueName(value),
            "' has a malformed spec (negative or overflowing sizes, strides "
            "or offset)"));
      }
    }
  }

  Specs results;
  switch (info.shape_rule) {
    case ShapeRule::kNone:
      return absl::UnimplementedError("no shape rule");
    case ShapeRule::kElementwise:
      results = InferElementwise(bound_call);
      break;
    case ShapeRule::kSameAsSelf:
      results = InferSameAsSelf(bound_call);
      break;
    case ShapeRule::kMatmul:
      results = InferMatmul(bound_call);
      break;
    case ShapeRule::kView:
      results = InferView(bound_call, /*fresh_storage=*/false);
      break;
    case ShapeRule::kCopy:
      results = InferView(bound_call, /*fresh_storage=*/true);
      break;
    case ShapeRule::kReduction:
      results = InferReduction(bound_call);
      break;
    case ShapeRule::kCat:
      results = InferCat(bound_call);
      break;
    case ShapeRule::kLayerNorm:
      results = InferLayerNorm(bound_call);
      break;
    case ShapeRule::kMetadata:
      results = InferMetadata(bound_call);
      break;
  }
  if (!results.ok()) return results;

  // An in-place result is the written tensor itself.
  if (std::optional<int> written = InPlaceArgument(schema);
      written && !results->empty()) {
    absl::StatusOr<const TensorSpec*> target =
        bound_call.Tensor(schema.arguments[*written].name);
    if (!target.ok()) return target.status();
    TensorSpec self = **target;
    self.device = Device{};
    self.device_present = false;
    self.memory = MemoryPlacement{};
    (*results)[0] = std::move(self);
  }
  return results;
}

}  // namespace ferry
