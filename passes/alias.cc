#include "passes/alias.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "passes/schema.h"
#include "passes/shape_rules.h"

namespace ferry {

StorageRoots::StorageRoots(const Method& method)
    : StorageRoots(method, [](const StorageRoots&, int32_t) {}) {}

StorageRoots::StorageRoots(const Method& method, ValueSlots& slots)
    : StorageRoots(method, slots, [](const StorageRoots&, int32_t) {}) {}

StorageRoots::StorageRoots(size_t nodes)
    : node_root_(nodes),
      written_start_(nodes + 1, 0),
      metadata_only_(nodes, 0) {}

void StorageRoots::Add(const Method& method, int32_t i) {
  AddAliasing(method.nodes[i], i);
  written_start_[i + 1] = static_cast<int32_t>(written_.size());
}

// What a node's schema says about aliasing was worked out when the schema
// was parsed (OpSchema::DeriveAliasFacts). A node without schema text
// carries the registry's schema for its operator (import resolves it so),
// whose entry says whether it reads metadata only.
void StorageRoots::AddAliasing(const Node& node, int32_t i) {
  node_root_[i] = ValueId{i, -1};
  if (node.kind == NodeKind::kGetItem) {
    // A getitem is the tuple element it reads.
    node_root_[i] = ValueId{node.getitem_source, node.getitem_index};
    return;
  }
  if (node.kind != NodeKind::kCall || !node.schema) return;
  const OpSchema& schema = *node.schema;
  if (node.schema_text.empty()) {
    const OpInfo* info = RegisteredOp(node);
    metadata_only_[i] = info != nullptr && info->metadata_only;
  }
  // Reads its arguments, returns fresh storage.
  if (!schema.HasAliasAnnotations()) return;
  absl::StatusOr<BoundArguments> bound = BindArguments(schema, node.args);
  if (!bound.ok()) return;  // reported by validation
  auto add_written = [&](const Argument* arg) {
    if (!arg) return;
    if (arg->kind == ArgKind::kValue) written_.push_back(arg->value);
    if (arg->kind == ArgKind::kValueList)
      for (const ValueId& v : arg->values) written_.push_back(v);
  };
  for (int k : schema.WrittenArguments())
    if (k < static_cast<int>(bound->size())) add_written((*bound)[k]);
  if (node.result == ResultKind::kTensor) {
    const std::optional<int> aliased = schema.AliasedArgument(0);
    if (aliased && *aliased < static_cast<int>(bound->size())) {
      const Argument* arg = (*bound)[*aliased];
      if (arg && arg->kind == ArgKind::kValue && arg->value.valid())
        node_root_[i] = RootOf(arg->value);
    }
  }
}

std::vector<std::vector<int32_t>> EffectDependencies(
    const Method& method, const StorageRoots& roots) {
  const int32_t n = static_cast<int32_t>(method.nodes.size());
  std::vector<std::vector<int32_t>> deps(n);
  struct State {
    int32_t last_writer = -1;
    std::vector<int32_t> readers_since_write;
  };
  absl::flat_hash_map<ValueId, State> state;
  // Only storages that something writes need tracking.
  std::vector<char> written_root(n, 0);
  std::map<ValueId, char> written_element;
  bool any_write = false;
  for (int32_t i = 0; i < n; ++i)
    for (const ValueId& w : roots.WrittenBy(i)) {
      ValueId root = roots.RootOf(w);
      if (root.element < 0)
        written_root[root.node] = 1;
      else
        written_element[root] = 1;
      any_write = true;
    }
  if (!any_write) return deps;
  auto tracked = [&](const ValueId& root) {
    return root.element < 0 ? written_root[root.node] != 0
                            : written_element.count(root) > 0;
  };
  for (int32_t i = 0; i < n; ++i) {
    if (method.nodes[i].kind == NodeKind::kGetItem) continue;
    std::vector<ValueId> read_roots;
    ForEachOperand(method.nodes[i], [&](const ValueId& v) {
      ValueId root = roots.RootOf(v);
      if (tracked(root)) read_roots.push_back(root);
    });
    for (const ValueId& root : read_roots) {
      auto it = state.find(root);
      if (it == state.end()) continue;
      if (it->second.last_writer >= 0)
        deps[i].push_back(it->second.last_writer);
    }
    std::vector<ValueId> written;
    for (const ValueId& w : roots.WrittenBy(i))
      written.push_back(roots.RootOf(w));
    for (const ValueId& root : written) {
      State& s = state[root];
      if (s.last_writer >= 0) deps[i].push_back(s.last_writer);
      for (int32_t r : s.readers_since_write)
        if (r != i) deps[i].push_back(r);
      s.readers_since_write.clear();
      s.last_writer = i;
    }
    for (const ValueId& root : read_roots) {
      bool writes =
          std::find(written.begin(), written.end(), root) != written.end();
      if (!writes) state[root].readers_since_write.push_back(i);
    }
    std::sort(deps[i].begin(), deps[i].end());
    deps[i].erase(std::unique(deps[i].begin(), deps[i].end()), deps[i].end());
  }
  return deps;
}

}  // namespace ferry
