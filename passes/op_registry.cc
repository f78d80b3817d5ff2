// The built-in operator registry, built from the operator catalogue.
//
// Each family file (passes/ops/<family>.cc) holds its operators' rows: ATen's
// schema text (as ATen prints it, so that edge graphs' names and argument
// orders match), the shape rule and whether the operator reads metadata
// only. Everything about aliasing (which argument is written, which result
// is a view of which argument) comes from the schema's alias annotations,
// parsed once when the registry is first used. A row whose schema does not
// parse, or that names an operator twice, is left out (unit tests check
// that every row is registered).
#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "passes/ir.h"
#include "passes/ops/catalogue.h"
#include "passes/schema.h"

namespace ferry {
namespace {

// Hashed, not ordered: every call node is looked up (a tree of a few hundred
// names costs about eight string comparisons a lookup). Built once and never
// changed, so the OpInfo pointers LookupOp hands out stay valid.
using Registry = absl::flat_hash_map<std::string, OpInfo>;

const Registry& BuiltinRegistry() {
  // Built once, never destroyed (no destructor runs at exit).
  static const Registry* const registry = [] {
    auto* built = new Registry();
    for (const OpFamily& family : OpFamilies()) {
      for (const OpDef& op : family.ops) {
        absl::StatusOr<OpSchema> schema = ParseSchema(op.schema);
        if (!schema.ok()) continue;  // Caught by the registry's unit tests.
        OpInfo info;
        info.shape_rule = op.kind;
        info.rule = op.rule;
        info.metadata_only = op.metadata_only;
        info.family = family.name;
        std::string name = schema->QualifiedName();
        info.name = name;
        info.schema = Shared<const OpSchema>::Make(*std::move(schema));
        built->emplace(std::move(name), std::move(info));
      }
    }
    // Each schema points back to its entry (OpSchema::registered), now that
    // the entries have their final addresses.
    // Never freed, like the registry: a lasting value, which the nodes that
    // call the operator share without counting.
    for (auto& [name, info] : *built) {
      OpSchema schema = *info.schema;
      schema.registered = &info;
      info.schema = Shared<const OpSchema>::Lasting(std::move(schema));
    }
    return built;
  }();
  return *registry;
}

}  // namespace

const OpInfo* LookupOp(std::string_view qualified_name) {
  const Registry& registry = BuiltinRegistry();
  // (absl's string hash takes absl::string_view, which here is its own type.)
  auto it = registry.find(
      absl::string_view(qualified_name.data(), qualified_name.size()));
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
  it = registry.find(absl::string_view(name.data(), name.size()));
  return it == registry.end() ? nullptr : &it->second;
}

const OpInfo* RegisteredOp(const Node& node) {
  if (node.kind != NodeKind::kCall) return nullptr;
  if (node.schema != nullptr && node.schema->registered != nullptr)
    return node.schema->registered;
  return LookupOp(node.target);
}

const std::vector<std::string>& RegisteredOps() {
  static const std::vector<std::string>* const names = [] {
    auto* built = new std::vector<std::string>();
    for (const auto& [name, info] : BuiltinRegistry()) built->push_back(name);
    std::sort(built->begin(), built->end());
    return built;
  }();
  return *names;
}

}  // namespace ferry
