// ATen function schemas and the operator registry.
//
// The registry is the only place that knows which operator writes which
// argument, which result aliases which argument, and which operators read
// metadata only. Everything comes from the schema text (alias annotations
// such as `Tensor(a!)`) plus a small table of per-operator facts (the shape
// rule, metadata-only); nothing is guessed from an operator's name.
#ifndef FERRY_PASSES_SCHEMA_H_
#define FERRY_PASSES_SCHEMA_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "passes/compact.h"

namespace ferry {

struct Argument;  // ir.h

// A call's arguments bound to its schema's parameters: one entry per
// parameter, null where the argument was omitted (BindArguments,
// shape_rules.h). Kept inline: a call binds a handful.
using BoundArguments = absl::InlinedVector<const Argument*, 8>;

enum class SchemaTypeKind {
  kTensor,
  kInt,  // int, SymInt
  kFloat,
  kBool,
  kScalar,   // number: int, float or bool
  kIntList,  // int[], SymInt[], int[N]
  kFloatList,
  kBoolList,
  kTensorList,  // Tensor[], Tensor?[]
  kScalarType,  // dtype
  kLayout,
  kDevice,
  kMemoryFormat,
  kString,
  kAny,  // anything else ATen allows (Generator, ...)
};

struct SchemaType {
  SchemaTypeKind kind = SchemaTypeKind::kTensor;
  bool optional = false;  // `T?`
  int fixed_size = -1;    // int[2] -> 2
};

// `Tensor(a!)`: alias set "a", written. `Tensor(a)`: alias set "a", a view.
struct AliasInfo {
  std::string set;
  bool is_write = false;
};

struct SchemaArgument {
  std::string name;  // may be empty for returns
  SchemaType type;
  std::optional<AliasInfo> alias;
  std::optional<std::string> default_value;  // the default's text
  bool kwarg_only = false;                   // after `*`
};

struct OpInfo;

struct OpSchema {
  std::string ns;        // "aten"
  std::string name;      // "add"
  std::string overload;  // "Tensor"; empty for the default overload
  std::vector<SchemaArgument> arguments;
  std::vector<SchemaArgument> returns;
  bool returns_tuple = false;  // "-> (Tensor, Tensor)"
  // The registry's entry whose schema this is; null for any other schema
  // (one parsed from a node's own text). Lets a pass go from a call's
  // schema to its operator without hashing the operator's name
  // (RegisteredOp).
  const OpInfo* registered = nullptr;

  // "aten::add.Tensor"
  std::string QualifiedName() const;
  // Indices of arguments written in place (alias annotation with `!`).
  const std::vector<int>& WrittenArguments() const { return written_; }
  // The argument index result `result` aliases (a view or the written
  // argument itself), or nullopt for a fresh result. (Inline: shape
  // inference and the alias analysis ask for every call.)
  std::optional<int> AliasedArgument(int result) const {
    if (result < 0 || result >= static_cast<int>(result_aliases_.size()))
      return std::nullopt;
    const int aliased = result_aliases_[result];
    return aliased >= 0 ? std::optional<int>(aliased) : std::nullopt;
  }
  // Whether some argument has an alias annotation (a view or an in-place
  // operator; most operators read their arguments and return fresh storage).
  bool HasAliasAnnotations() const { return annotated_; }
  // Index of the argument called `name`, or -1.
  int ArgumentIndex(std::string_view name) const;

  // Works out the three facts above from the arguments' and returns' alias
  // annotations, once rather than per call node. ParseSchema does; code
  // that changes a schema's arguments or returns must call it again.
  void DeriveAliasFacts();

 private:
  std::vector<int> written_;
  std::vector<int> result_aliases_;  // per return: the argument, or -1
  bool annotated_ = false;
};

// Whether two schemas describe the same operator: name and overload,
// arguments (names, types, alias annotations, defaults up to quoting,
// keyword-only), returns (types and alias annotations). A node carrying
// the registry's own schema is the registry's operator.
bool SameSchema(const OpSchema& a, const OpSchema& b);

// Parses ATen function-schema notation, e.g.
//   aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)
// Errors are InvalidArgument with the position and what was expected.
absl::StatusOr<OpSchema> ParseSchema(std::string_view text);

// How a registered operator's result shape follows from its arguments; used
// by validation and by shape inference. kNone: not checked.
enum class ShapeRule {
  kNone,
  kElementwise,  // broadcast of tensor arguments (and scalars)
  kSameAsSelf,   // result has self's sizes (in-place ops, clone, softmax, ...)
  kMatmul,       // mm, bmm, addmm, linear
  kView,         // a view of self (view, transpose, permute, ...)
  kReduction,    // sum.dim_IntList, mean.dim, amax
  kCat,
  kLayerNorm,
  kCopy,      // view_copy, permute_copy, ...: like kView, fresh storage
  kMetadata,  // sym_size.int, ...: scalar result
  kSpecific,  // a rule of the operator's own (convolution, arange, ...)
};

class BoundCall;    // passes/ops/common.h
struct TensorSpec;  // passes/ir.h
struct Node;        // passes/ir.h
// A shape rule: the specs of a call's tensor results (passes/ops/*.cc).
using ShapeRuleFn =
    absl::StatusOr<std::vector<TensorSpec>> (*)(const BoundCall& call);

struct OpInfo {
  // "aten::add.Tensor"; in the registry, never freed (a call node's target
  // can point at it: TargetString::Lasting).
  std::string name;
  Shared<const OpSchema> schema;  // lasting in the registry
  ShapeRule shape_rule = ShapeRule::kNone;
  // The rule itself, from the operator's family file; null: not checked.
  ShapeRuleFn rule = nullptr;
  // The family that defines the operator ("elementwise", ...); empty for
  // an OpInfo made outside the registry.
  std::string_view family;
  // Reads only sizes/strides of its tensor arguments (never the data), so a
  // reader on any device needs no copy.
  bool metadata_only = false;
};

// The built-in registry. Lookup accepts "ns::name.overload" and, for the
// default overload, "ns::name" or "ns::name.default". Null when unknown.
const OpInfo* LookupOp(std::string_view qualified_name);
// The registered operator a call node calls: LookupOp(node.target), or null
// for a node that is not a call. Import gives a call without schema text the
// registry's schema, which points back to its entry, so this reads a pointer
// where LookupOp would hash the name (every pass asks, for every call).
const OpInfo* RegisteredOp(const Node& node);
// Every registered operator, in a stable order (for tests, docs and the
// "did you mean" of an unknown operator).
const std::vector<std::string>& RegisteredOps();

// The copy operators' names.
inline constexpr std::string_view kH2DCopyOp = "et_copy::_h2d_copy";
inline constexpr std::string_view kD2HCopyOp = "et_copy::_d2h_copy";

}  // namespace ferry

#endif  // FERRY_PASSES_SCHEMA_H_
