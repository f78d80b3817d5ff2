// The built-in operator registry.
//
// One table row per operator: ATen's schema text (copied from
// native_functions.yaml, so that edge graphs' names and argument orders
// match), the shape rule (shape_rules.h) and whether it reads metadata only.
// Everything about aliasing (which argument is written, which result is a
// view of which argument) comes from the schema's alias annotations, parsed
// once when the registry is first used.
//
// Adding an operator: add one row below; if it needs a rule the existing
// kinds do not cover, add the rule in shape_rules.cc. A row whose schema does
// not parse is left out of the registry (unit tests check that every row is
// registered).
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "passes/schema.h"

namespace ferry {
namespace {

struct BuiltinOp {
  std::string_view schema;
  ShapeRule shape_rule;
  bool metadata_only = false;
};

constexpr BuiltinOp kBuiltinOps[] = {
    // Elementwise
    {"aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
     ShapeRule::kElementwise},
    {"aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
     ShapeRule::kElementwise},
    {"aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
     ShapeRule::kElementwise},
    {"aten::sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
     ShapeRule::kElementwise},
    {"aten::mul.Tensor(Tensor self, Tensor other) -> Tensor",
     ShapeRule::kElementwise},
    {"aten::mul.Scalar(Tensor self, Scalar other) -> Tensor",
     ShapeRule::kElementwise},
    {"aten::div.Tensor(Tensor self, Tensor other) -> Tensor",
     ShapeRule::kElementwise},
    {"aten::div.Scalar(Tensor self, Scalar other) -> Tensor",
     ShapeRule::kElementwise},
    {"aten::relu(Tensor self) -> Tensor", ShapeRule::kElementwise},
    {"aten::sin(Tensor self) -> Tensor", ShapeRule::kElementwise},
    {"aten::cos(Tensor self) -> Tensor", ShapeRule::kElementwise},
    {"aten::exp(Tensor self) -> Tensor", ShapeRule::kElementwise},
    {"aten::neg(Tensor self) -> Tensor", ShapeRule::kElementwise},
    {"aten::tanh(Tensor self) -> Tensor", ShapeRule::kElementwise},
    {"aten::sigmoid(Tensor self) -> Tensor", ShapeRule::kElementwise},
    {"aten::gelu(Tensor self, *, str approximate='none') -> Tensor",
     ShapeRule::kElementwise},

    // In place (the result is `self`)
    {"aten::relu_(Tensor(a!) self) -> Tensor(a!)", ShapeRule::kElementwise},
    {"aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> "
     "Tensor(a!)",
     ShapeRule::kElementwise},
    {"aten::add_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> "
     "Tensor(a!)",
     ShapeRule::kElementwise},
    {"aten::mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)",
     ShapeRule::kElementwise},
    {"aten::mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)",
     ShapeRule::kElementwise},
    {"aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> "
     "Tensor(a!)",
     ShapeRule::kSameAsSelf},
    {"aten::fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)",
     ShapeRule::kSameAsSelf},

    // Views (the result shares `self`'s storage)
    {"aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
     ShapeRule::kView},
    {"aten::reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)",
     ShapeRule::kView},
    {"aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)",
     ShapeRule::kView},
    {"aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)",
     ShapeRule::kView},
    {"aten::t(Tensor(a) self) -> Tensor(a)", ShapeRule::kView},
    {"aten::expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> "
     "Tensor(a)",
     ShapeRule::kView},
    {"aten::slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, "
     "SymInt? end=None, SymInt step=1) -> Tensor(a)",
     ShapeRule::kView},
    {"aten::select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)",
     ShapeRule::kView},
    {"aten::unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", ShapeRule::kView},
    {"aten::squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)",
     ShapeRule::kView},
    {"aten::squeeze(Tensor(a) self) -> Tensor(a)", ShapeRule::kView},
    {"aten::alias(Tensor(a) self) -> Tensor(a)", ShapeRule::kView},

    // Copy forms of the views (fresh, contiguous storage)
    {"aten::view_copy(Tensor self, SymInt[] size) -> Tensor", ShapeRule::kCopy},
    {"aten::permute_copy(Tensor self, int[] dims) -> Tensor", ShapeRule::kCopy},
    {"aten::transpose_copy.int(Tensor self, int dim0, int dim1) -> Tensor",
     ShapeRule::kCopy},
    {"aten::t_copy(Tensor self) -> Tensor", ShapeRule::kCopy},
    {"aten::expand_copy(Tensor self, SymInt[] size, *, bool implicit=False) -> "
     "Tensor",
     ShapeRule::kCopy},
    {"aten::slice_copy.Tensor(Tensor self, int dim=0, SymInt? start=None, "
     "SymInt? end=None, SymInt step=1) -> Tensor",
     ShapeRule::kCopy},
    {"aten::select_copy.int(Tensor self, int dim, SymInt index) -> Tensor",
     ShapeRule::kCopy},
    {"aten::unsqueeze_copy(Tensor self, int dim) -> Tensor", ShapeRule::kCopy},
    {"aten::squeeze_copy.dim(Tensor self, int dim) -> Tensor",
     ShapeRule::kCopy},
    {"aten::alias_copy(Tensor self) -> Tensor", ShapeRule::kCopy},
    {"aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
     ShapeRule::kSameAsSelf},

    // Matrix products
    {"aten::mm(Tensor self, Tensor mat2) -> Tensor", ShapeRule::kMatmul},
    {"aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, "
     "Scalar alpha=1) -> Tensor",
     ShapeRule::kMatmul},
    {"aten::bmm(Tensor self, Tensor mat2) -> Tensor", ShapeRule::kMatmul},
    {"aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
     ShapeRule::kMatmul},

    // Reductions and normalizations
    {"aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, "
     "ScalarType? dtype=None) -> Tensor",
     ShapeRule::kReduction},
    {"aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, "
     "ScalarType? dtype=None) -> Tensor",
     ShapeRule::kReduction},
    {"aten::amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
     ShapeRule::kReduction},
    {"aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor",
     ShapeRule::kSameAsSelf},
    {"aten::native_layer_norm(Tensor input, SymInt[] normalized_shape, "
     "Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)",
     ShapeRule::kLayerNorm},
    {"aten::cat(Tensor[] tensors, int dim=0) -> Tensor", ShapeRule::kCat},

    // Metadata (sizes and strides only; the data is never read)
    {"aten::sym_size.int(Tensor self, int dim) -> SymInt", ShapeRule::kMetadata,
     /*metadata_only=*/true},
    {"aten::sym_numel(Tensor self) -> SymInt", ShapeRule::kMetadata,
     /*metadata_only=*/true},
    {"aten::sym_stride.int(Tensor self, int dim) -> SymInt",
     ShapeRule::kMetadata, /*metadata_only=*/true},

    // Host/device copies (ExecuTorch's copy kernels)
    {"et_copy::_h2d_copy(Tensor self) -> Tensor", ShapeRule::kSameAsSelf},
    {"et_copy::_d2h_copy(Tensor self) -> Tensor", ShapeRule::kSameAsSelf},
};

using Registry = std::map<std::string, OpInfo, std::less<>>;

const Registry& BuiltinRegistry() {
  // Built once, never destroyed (no destructor runs at exit).
  static const Registry* const registry = [] {
    auto* built = new Registry();
    for (const BuiltinOp& op : kBuiltinOps) {
      absl::StatusOr<OpSchema> schema = ParseSchema(op.schema);
      if (!schema.ok()) continue;  // Caught by the registry's unit tests.
      OpInfo info;
      info.shape_rule = op.shape_rule;
      info.metadata_only = op.metadata_only;
      std::string name = schema->QualifiedName();
      info.schema = std::make_shared<const OpSchema>(*std::move(schema));
      built->emplace(std::move(name), std::move(info));
    }
    return built;
  }();
  return *registry;
}

}  // namespace

const OpInfo* LookupOp(std::string_view qualified_name) {
  const Registry& registry = BuiltinRegistry();
  auto it = registry.find(qualified_name);
  if (it != registry.end()) return &it->second;
  // "ns::name.default" is the default overload "ns::name" (and only that:
  // "ns::name.overload.default" is no operator).
  constexpr std::string_view kDefault = ".default";
  if (!qualified_name.ends_with(kDefault)) return nullptr;
  std::string_view name =
      qualified_name.substr(0, qualified_name.size() - kDefault.size());
  size_t ns_end = name.find("::");
  if (ns_end == std::string_view::npos ||
      name.find('.', ns_end) != std::string_view::npos) {
    return nullptr;
  }
  it = registry.find(name);
  return it == registry.end() ? nullptr : &it->second;
}

std::vector<std::string> RegisteredOps() {
  std::vector<std::string> names;
  for (const auto& [name, info] : BuiltinRegistry()) names.push_back(name);
  return names;
}

}  // namespace ferry
