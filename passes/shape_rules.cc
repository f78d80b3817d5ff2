// Shape rules: the public entry points over the operator catalogue.
//
// Model. Each registered operator's row (passes/ops/<family>.cc) names its
// rule; InferResultSpecs binds the call's arguments to the schema, checks
// their types and their specs, runs the rule and, for an in-place result,
// returns the written argument's spec itself. The rules read arguments by
// their schema parameter names through BoundCall (passes/ops/common.h); the
// type promotion, view geometry and layer formulas live with their
// operators' rows.
//
// In place. When the schema says result 0 is a written argument (`Tensor(a!)`
// on both), the result IS that argument: its spec is the argument's spec
// exactly (strides and offset included). The rule still checks that the
// computed shape equals the written tensor's (ATen refuses to resize in
// place) and, for arithmetic, that the computed dtype can be cast into it.
#include "passes/shape_rules.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/ops/common.h"

namespace ferry {
namespace {

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

}  // namespace

// --- Public entry points ----------------------------------------------------

std::string ShapeText(std::span<const int64_t> sizes) {
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

std::optional<Dims> BroadcastShapes(std::span<const int64_t> a,
                                    std::span<const int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  Dims result(rank, 1);
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

absl::StatusOr<BoundArguments> BindArguments(
    const OpSchema& schema, const std::vector<Argument>& args) {
  BoundArguments bound(schema.arguments.size(), nullptr);
  // The operator's name, spelled only for an error.
  auto op = [&] { return schema.QualifiedName(); };
  size_t positional = 0;
  for (const Argument& arg : args) {
    if (arg.name.empty()) ++positional;
  }
  if (positional > schema.arguments.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", op(), "' takes ", schema.arguments.size(),
                     " argument", schema.arguments.size() == 1 ? "" : "s",
                     ", got ", positional, " positional"));
  }
  // Positional arguments may fill keyword-only parameters too: serialized
  // edge graphs pass every argument by position.
  size_t next = 0;
  for (const Argument& arg : args) {
    if (arg.name.empty()) bound[next++] = &arg;
  }
  for (const Argument& arg : args) {
    if (arg.name.empty()) continue;
    int index = schema.ArgumentIndex(arg.name.str());
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", op(), "' has no parameter called '", arg.name.str(), "'"));
    }
    if (bound[index] != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "argument '", arg.name.str(), "' of '", op(), "' is given twice"));
    }
    bound[index] = &arg;
  }
  for (size_t i = 0; i < bound.size(); ++i) {
    if (bound[i] == nullptr && !schema.arguments[i].default_value) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", op(), "' is missing argument '", schema.arguments[i].name, "'"));
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

namespace {
// Whether `info` has a schema and a rule to infer with; NoRule otherwise.
bool HasRule(const OpInfo& info) {
  return info.schema != nullptr && info.rule != nullptr;
}
absl::Status NoRule(const Node& call) {
  return absl::UnimplementedError(
      absl::StrCat("no shape rule for '", call.target.str(), "'"));
}
}  // namespace

absl::StatusOr<std::vector<TensorSpec>> InferResultSpecs(const OpInfo& info,
                                                         const Method& method,
                                                         const Node& call) {
  if (!HasRule(info)) return NoRule(call);
  const OpSchema& schema = *info.schema;
  absl::StatusOr<BoundArguments> bound = BindArguments(schema, call.args);
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
  // The rules read sizes and strides as given; a malformed operand spec
  // (negative or overflowing sizes, strides of the wrong rank) is refused
  // here rather than computed over.
  std::optional<ValueId> malformed;
  ForEachOperand(call, [&](ValueId value) {
    const TensorSpec* spec = method.Spec(value);
    if (!malformed && spec != nullptr && !spec->StorageBytes().has_value())
      malformed = value;
  });
  if (malformed) {
    return BoundCall(schema, method, *std::move(bound), &call)
        .Error(absl::StrCat("operand '", method.ValueName(*malformed),
                            "' has a malformed spec (negative or overflowing "
                            "sizes, strides or offset)"));
  }
  return InferBoundResultSpecs(info, method, call, *std::move(bound));
}

absl::StatusOr<std::vector<TensorSpec>> InferBoundResultSpecs(
    const OpInfo& info, const Method& method, const Node& call,
    BoundArguments bound) {
  if (!HasRule(info)) return NoRule(call);
  const OpSchema& schema = *info.schema;
  BoundCall bound_call(schema, method, std::move(bound), &call);
  Specs results = info.rule(bound_call);
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
