// lower
//
//   t = add(a, b)   [tag d0]          delegate_d0 = delegate(a, b)
//   s = mul(t, a)   [tag d0]    ==>     module "forward.d0", tuple
//   r = relu(s)                        s = getitem(delegate_d0, 0)
//                                      r = relu(s)
//
// Phases: (1) CollectGroup finds, per tag, the members, the values read from
// outside (module inputs) and the values read outside (module outputs);
// (2) BuildModule makes the LoweredModule; (3) Reorder rebuilds the method
// with delegate + getitems in place of the members, in a stable topological
// order (Kahn's algorithm keyed by original position).
#include "passes/lower.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "passes/alias.h"
#include "passes/graph.h"
#include "passes/partition.h"
#include "passes/schema.h"

namespace ferry {
namespace {

TensorSpec LayoutOnly(const TensorSpec& spec) {
  TensorSpec out;
  out.dtype = spec.dtype;
  out.sizes = spec.sizes;
  out.strides = spec.strides;
  out.storage_offset = spec.storage_offset;
  return out;
}

struct Group {
  std::string tag;
  std::vector<int32_t> members;  // node order
  std::vector<ValueId> inputs;   // read from outside, first-read order
  std::vector<ValueId> outputs;  // read outside, (node, element) order
  int32_t last_member = -1;
};

// Phase 1.
std::vector<Group> CollectGroups(const Method& method,
                                 std::vector<int32_t>& group_of) {
  std::vector<Group> groups;
  absl::flat_hash_map<std::string, int32_t> ids;
  group_of.assign(method.nodes.size(), -1);
  for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
    const std::string& tag = method.nodes[i].delegation_tag;
    if (tag.empty()) continue;
    auto [it, inserted] = ids.emplace(tag, static_cast<int32_t>(groups.size()));
    if (inserted) {
      groups.emplace_back();
      groups.back().tag = tag;
    }
    groups[it->second].members.push_back(i);
    groups[it->second].last_member = i;
    group_of[i] = it->second;
  }
  std::vector<std::set<ValueId>> outputs(groups.size());
  std::vector<absl::flat_hash_set<ValueId>> seen_inputs(groups.size());
  for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
    const int32_t own = group_of[i];
    ForEachOperand(method.nodes[i], [&](const ValueId& v) {
      const int32_t from = group_of[v.node];
      if (from != -1 && from != own) outputs[from].insert(v);
      if (own != -1 && from != own) {
        if (seen_inputs[own].insert(v).second) groups[own].inputs.push_back(v);
      }
    });
  }
  for (size_t g = 0; g < groups.size(); ++g)
    groups[g].outputs.assign(outputs[g].begin(), outputs[g].end());
  return groups;
}

std::string UniqueName(std::string base,
                       absl::flat_hash_set<std::string>& used) {
  std::string name = base;
  for (int k = 1; !used.insert(name).second; ++k)
    name = absl::StrCat(base, "_", k);
  return name;
}

std::string SafeName(const Method& method, ValueId v) {
  if (v.element < 0) return method.nodes[v.node].name;
  return absl::StrCat(method.nodes[v.node].name, "_", v.element);
}

// Phase 2.
LoweredModule BuildModule(const Method& method, const Group& group,
                          std::string id, const std::string& target,
                          const std::string& backend) {
  LoweredModule module;
  module.id = std::move(id);
  module.backend = backend;
  module.compile_specs.push_back(CompileSpec{"target_device", target});
  module.ResolveTargetDevice();
  module.returns_tuple = true;
  Method& graph = module.graph;
  graph.name = module.id;
  absl::flat_hash_set<std::string> used;
  std::map<ValueId, ValueId> remap;
  for (const ValueId& v : group.inputs) {
    Node input;
    input.kind = NodeKind::kInput;
    input.input_kind = InputKind::kUserInput;
    input.name = UniqueName(SafeName(method, v), used);
    input.result = ResultKind::kTensor;
    const TensorSpec* spec = method.Spec(v);
    input.tensor = spec ? LayoutOnly(*spec) : TensorSpec{};
    module.input_layouts.push_back(input.tensor);
    remap[v] = ValueId{static_cast<int32_t>(graph.nodes.size()), -1};
    graph.nodes.push_back(std::move(input));
  }
  for (int32_t m : group.members) {
    const Node& old = method.nodes[m];
    Node node = old;
    node.delegation_tag.clear();
    node.name = UniqueName(old.name, used);
    if (IsProgramDataNode(old)) {
      node.kind = NodeKind::kConstant;
      node.input_kind = InputKind::kInvalid;
    }
    if (node.result == ResultKind::kTensor)
      node.tensor = LayoutOnly(old.tensor);
    for (TensorSpec& s : node.tuple) s = LayoutOnly(s);
    ForEachOperandMutable(node, [&](ValueId& v) {
      // An external value (whole or element) maps to its input node; an
      // element of a member tuple node keeps its element index.
      if (auto exact = remap.find(v); exact != remap.end()) {
        v = exact->second;
        return;
      }
      v = ValueId{remap.at(ValueId{v.node, -1}).node, v.element};
    });
    remap[ValueId{m, -1}] =
        ValueId{static_cast<int32_t>(graph.nodes.size()), -1};
    graph.nodes.push_back(std::move(node));
  }
  Node output;
  output.kind = NodeKind::kOutput;
  output.name = UniqueName("output", used);
  for (const ValueId& v : group.outputs) {
    ValueId base = remap.at(ValueId{v.node, -1});
    output.args.push_back(Argument::Value(ValueId{base.node, v.element}));
  }
  graph.nodes.push_back(std::move(output));
  return module;
}

}  // namespace

absl::StatusOr<PassStats> LowerPartitions(Program& program,
                                          const LowerOptions& options,
                                          Diagnostics& diagnostics) {
  PassStats stats;
  int64_t lowered = 0;
  absl::flat_hash_set<std::string> module_ids;
  for (const LoweredModule& m : program.modules) module_ids.insert(m.id);
  std::map<std::string, std::string> tag_targets(options.tag_targets.begin(),
                                                 options.tag_targets.end());
  for (Method& method : program.methods) {
    std::vector<int32_t> group_of;
    std::vector<Group> groups = CollectGroups(method, group_of);
    if (groups.empty()) continue;
    const std::vector<std::vector<int32_t>> effects =
        EffectDependencies(method, StorageRoots(method));
    absl::flat_hash_set<std::string> names;
    for (const Node& n : method.nodes) names.insert(n.name);

    // Items of the new method: kept nodes, then per group a delegate and
    // its getitems. Operands still use old node numbering until Reorder.
    struct Item {
      Node node;
      int32_t position;  // where it sorts
      int32_t sequence;
      bool operands_are_items = false;
    };
    std::vector<Item> items;
    std::vector<int32_t> item_of(method.nodes.size(), -1);
    std::map<ValueId, int32_t> getitem_of;  // exported old value -> item
    std::vector<Item> group_items;          // delegates and getitems
    std::vector<int32_t> delegate_of_group(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) {
      const Group& group = groups[g];
      auto target_it = tag_targets.find(group.tag);
      std::string target = target_it != tag_targets.end()
                               ? target_it->second
                               : options.partition_target;
      std::string backend = PartitionBackend(options, target);
      std::string id =
          UniqueName(absl::StrCat(method.name, ".", group.tag), module_ids);
      program.modules.push_back(
          BuildModule(method, group, id, target, backend));
      Item delegate;
      delegate.node.kind = NodeKind::kDelegate;
      delegate.node.name =
          UniqueName(absl::StrCat("delegate_", group.tag), names);
      delegate.node.target = id;
      for (const ValueId& v : group.inputs)
        delegate.node.args.push_back(Argument::Value(v));
      delegate.node.result = ResultKind::kTuple;
      for (const ValueId& v : group.outputs)
        delegate.node.tuple.push_back(LayoutOnly(*method.Spec(v)));
      delegate.position = group.last_member;
      const int32_t delegate_index = static_cast<int32_t>(group_items.size());
      delegate_of_group[g] = delegate_index;
      group_items.push_back(std::move(delegate));
      for (size_t k = 0; k < group.outputs.size(); ++k) {
        const ValueId& v = group.outputs[k];
        Item getitem;
        getitem.node.kind = NodeKind::kGetItem;
        getitem.node.name = v.element < 0
                                ? method.nodes[v.node].name
                                : UniqueName(SafeName(method, v), names);
        getitem.node.getitem_source = delegate_index;  // offset below
        getitem.node.getitem_index = static_cast<int32_t>(k);
        getitem.node.result = ResultKind::kTensor;
        getitem.node.tensor = LayoutOnly(*method.Spec(v));
        getitem.node.source = method.nodes[v.node].source;
        getitem.position = group.last_member;
        getitem.operands_are_items = true;
        getitem_of[v] =
            static_cast<int32_t>(group_items.size());  // offset below
        group_items.push_back(std::move(getitem));
      }
      ++lowered;
    }
    for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
      if (group_of[i] != -1) continue;
      item_of[i] = static_cast<int32_t>(items.size());
      items.push_back(Item{std::move(method.nodes[i]), i,
                           static_cast<int32_t>(items.size())});
    }
    const int32_t first_group_item = static_cast<int32_t>(items.size());
    for (Item& item : group_items) {
      item.sequence = static_cast<int32_t>(items.size());
      if (item.node.kind == NodeKind::kGetItem)
        item.node.getitem_source += first_group_item;
      items.push_back(std::move(item));
    }
    for (auto& [value, item] : getitem_of) item += first_group_item;
    // Ordering from in-place writes, in item numbering (a member stands
    // for its delegate).
    std::vector<std::vector<int32_t>> item_effects(items.size());
    for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
      const int32_t item =
          group_of[i] == -1 ? item_of[i]
                            : first_group_item + delegate_of_group[group_of[i]];
      for (int32_t d : effects[i]) {
        const int32_t dep =
            group_of[d] == -1
                ? item_of[d]
                : first_group_item + delegate_of_group[group_of[d]];
        if (dep != item) item_effects[item].push_back(dep);
      }
    }
    // Old value -> item value.
    auto to_item = [&](ValueId v) -> ValueId {
      if (item_of[v.node] != -1) return ValueId{item_of[v.node], v.element};
      auto it = getitem_of.find(v);
      if (it != getitem_of.end()) return ValueId{it->second, -1};
      return ValueId{};  // a member value nobody outside reads: unreachable
    };
    for (Item& item : items)
      if (!item.operands_are_items)
        ForEachOperandMutable(item.node, [&](ValueId& v) { v = to_item(v); });

    // Phase 3: stable topological order (ties: by position, then item).
    const int32_t count = static_cast<int32_t>(items.size());
    std::vector<std::vector<int32_t>> deps(count);
    std::vector<int32_t> position(count);
    for (int32_t i = 0; i < count; ++i) {
      FERRY_RET_CHECK(items[i].sequence == i);
      ForEachOperand(items[i].node, [&](const ValueId& v) {
        if (v.node >= 0) deps[i].push_back(v.node);
      });
      for (int32_t d : item_effects[i]) deps[i].push_back(d);
      position[i] = items[i].position;
    }
    std::optional<std::vector<int32_t>> order =
        StableTopologicalOrder(deps, position);
    FERRY_RET_CHECK(order.has_value());
    std::vector<Node> nodes;
    nodes.reserve(count);
    for (int32_t i : *order) nodes.push_back(std::move(items[i].node));
    RenumberOperands(nodes, InverseOrder(*order, count));
    method.nodes = std::move(nodes);
  }
  stats.Add("delegates_created", lowered);
  (void)diagnostics;
  return stats;
}

}  // namespace ferry
