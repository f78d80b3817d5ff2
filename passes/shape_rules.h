// Shape rules of the built-in operators: argument binding and result specs.
//
// Used by validation (a node's declared result must match what its operator
// computes, where the rule is simple), by normalize_layout (a view of a
// re-laid-out parameter gets new strides) and by the runtime (views are
// computed, not copied).
#ifndef FERRY_PASSES_SHAPE_RULES_H_
#define FERRY_PASSES_SHAPE_RULES_H_

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/ir.h"
#include "passes/schema.h"

namespace ferry {

// Binds a call's arguments to the schema's parameters: positional arguments
// first, then keyword arguments by name. The result has one entry per schema
// argument; null where the argument was omitted (its default applies).
// InvalidArgument on too many arguments, an unknown or repeated keyword, or a
// missing argument without a default.
absl::StatusOr<BoundArguments> BindArguments(const OpSchema& schema,
                                             const std::vector<Argument>& args);

// Whether `arg` can be passed where `type` is expected. Value references are
// checked against the referenced value's kind in `method` (tensor, tuple
// element, scalar).
bool ArgumentMatchesType(const Method& method, const Argument& arg,
                         const SchemaType& type);

// The specs the call's results must have, inferred from its operands' specs
// and its scalar arguments: dtype, sizes and, for views (kView), strides and
// storage offset relative to the viewed storage; fresh results are
// contiguous. Device and memory are left default. Unimplemented when the
// operator has no rule (kNone); InvalidArgument when the operands do not fit
// the rule (e.g. mm of [2,3] and [4,5]), with the reason.
absl::StatusOr<std::vector<TensorSpec>> InferResultSpecs(const OpInfo& info,
                                                         const Method& method,
                                                         const Node& call);
// The same for a call whose arguments are already bound to `info`'s schema
// (`bound`, from BindArguments), have their parameters' types and whose
// operands' specs are sound (StorageBytes has a value): validation has
// checked all three, so it does not pay for them twice.
absl::StatusOr<std::vector<TensorSpec>> InferBoundResultSpecs(
    const OpInfo& info, const Method& method, const Node& call,
    BoundArguments bound);

// Broadcast of two shapes as ATen does; nullopt when incompatible.
std::optional<Dims> BroadcastShapes(std::span<const int64_t> a,
                                    std::span<const int64_t> b);

// Whether an error from InferResultSpecs is about the operands' dtypes (mm of
// f32 and f16, an in-place write of a float result into an int tensor, ...)
// rather than their shapes. Validation reports these as dtype mismatches.
bool IsDTypeError(const absl::Status& status);

// "[2,3]" ("[]" for a 0-dim tensor).
std::string ShapeText(std::span<const int64_t> sizes);
// "f32[2,3]": dtype and sizes, as diagnostics print a spec.
std::string SpecText(const TensorSpec& spec);
// A schema type as ATen writes it: "Tensor", "int[2]?", "Tensor[]".
std::string TypeText(const SchemaType& type);

}  // namespace ferry

#endif  // FERRY_PASSES_SHAPE_RULES_H_
