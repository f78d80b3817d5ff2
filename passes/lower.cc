// lower
//
//   t = add(a, b)   [tag d0]          delegate_d0 = delegate(a, b)
//   s = mul(t, a)   [tag d0]    ==>     module "forward.d0", tuple
//   r = relu(s)                        s = getitem(delegate_d0, 0)
//                                      r = relu(s)
//
// Phases, each a unit with one entry, state handed on explicitly:
// (1) CollectGroups finds, per tag, the members, the values read from
// outside (module inputs) and the values read outside (module outputs):
// a Grouping; (2) BuildModule makes each group's LoweredModule;
// (3) ReplaceGroups puts a delegate and its getitems in place of each
// group's members: the Replaced items, unordered, with the ordering that
// in-place writes add; (4) Reorder puts them in a stable topological order
// (Kahn's algorithm keyed by original position). The driver,
// LowerPartitions, is at the bottom.
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

// A tag's group: what phase 1 finds, what phases 2 and 3 consume.
struct Group {
  std::string tag;
  std::vector<int32_t> members;  // node order
  std::vector<ValueId> inputs;   // read from outside, first-read order
  std::vector<ValueId> outputs;  // read outside, (node, element) order
  int32_t last_member = -1;
};

struct Grouping {
  std::vector<Group> groups;      // in order of first member
  std::vector<int32_t> group_of;  // per node; -1: not lowered
};

// Phase 1: the groups of a method, their inputs and outputs.
//
//   t = add(a, b) [d0]; s = mul(t, a) [d0]; r = relu(s)
//   ==> d0: members {t, s}, inputs {a, b}, outputs {s}
class CollectGroups {
 public:
  explicit CollectGroups(const Method& method) : method_(method) {}

  absl::StatusOr<Grouping> Run() {
    const int32_t n = static_cast<int32_t>(method_.nodes.size());
    Grouping out;
    absl::flat_hash_map<std::string, int32_t> ids;
    out.group_of.assign(n, -1);
    for (int32_t i = 0; i < n; ++i) {
      const std::string& tag = method_.nodes[i].delegation_tag;
      if (tag.empty()) continue;
      auto [it, inserted] =
          ids.emplace(tag, static_cast<int32_t>(out.groups.size()));
      if (inserted) {
        out.groups.emplace_back();
        out.groups.back().tag = tag;
      }
      out.groups[it->second].members.push_back(i);
      out.groups[it->second].last_member = i;
      out.group_of[i] = it->second;
    }
    if (out.groups.empty()) return out;  // nothing tagged: nothing to lower
    std::vector<std::set<ValueId>> outputs(out.groups.size());
    std::vector<absl::flat_hash_set<ValueId>> seen_inputs(out.groups.size());
    for (int32_t i = 0; i < n; ++i) {
      const int32_t own = out.group_of[i];
      bool in_range = true;
      ForEachOperand(method_.nodes[i], [&](const ValueId& v) {
        if (v.node < 0 || v.node >= i) {
          in_range = false;
          return;
        }
        const int32_t from = out.group_of[v.node];
        if (from != -1 && from != own) outputs[from].insert(v);
        if (own != -1 && from != own) {
          if (seen_inputs[own].insert(v).second)
            out.groups[own].inputs.push_back(v);
        }
      });
      // Validation resolved every operand to an earlier node.
      FERRY_RET_CHECK(in_range);
    }
    for (size_t g = 0; g < out.groups.size(); ++g)
      out.groups[g].outputs.assign(outputs[g].begin(), outputs[g].end());
    return out;
  }

 private:
  const Method& method_;
};

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

// Where a module's graph is built from and what it runs on.
struct ModuleTarget {
  std::string id;
  std::string target_device;
  std::string backend;
};

// Phase 2: the LoweredModule of one group: a USER_INPUT per input, the
// members (program data becomes `constant` nodes the module owns), an output
// node returning the group's outputs.
//
//   d0: members {t = add(a, b), s = mul(t, a)}, inputs {a, b}, outputs {s}
//   ==> module "forward.d0" { a = input; b = input; t = add(a, b);
//                             s = mul(t, a); output(s) }
class BuildModule {
 public:
  BuildModule(const Method& method, const Group& group)
      : method_(method), group_(group) {}

  absl::StatusOr<LoweredModule> Run(ModuleTarget target) {
    LoweredModule module;
    module.id = std::move(target.id);
    module.backend = std::move(target.backend);
    module.compile_specs.push_back(
        CompileSpec{"target_device", std::move(target.target_device)});
    module.ResolveTargetDevice();
    module.returns_tuple = true;
    Method& graph = module.graph;
    graph.name = module.id;
    // Sized once: a grown vector keeps up to twice what it holds, and the
    // modules hold every lowered node.
    graph.nodes.reserve(group_.inputs.size() + group_.members.size() + 1);
    module.input_layouts.reserve(group_.inputs.size());
    for (const ValueId& v : group_.inputs) {
      Node input;
      input.kind = NodeKind::kInput;
      input.input_kind = InputKind::kUserInput;
      input.name = UniqueName(SafeName(method_, v), used_);
      input.result = ResultKind::kTensor;
      const TensorSpec* spec = method_.Spec(v);
      input.tensor = spec ? LayoutOnly(*spec) : TensorSpec{};
      module.input_layouts.push_back(input.tensor);
      remap_[v] = ValueId{static_cast<int32_t>(graph.nodes.size()), -1};
      graph.nodes.push_back(std::move(input));
    }
    for (int32_t m : group_.members) {
      const Node& old = method_.nodes[m];
      Node node = old;
      node.delegation_tag.clear();
      node.name = UniqueName(old.name, used_);
      if (IsProgramDataNode(old)) {
        node.kind = NodeKind::kConstant;
        node.input_kind = InputKind::kInvalid;
      }
      if (node.result == ResultKind::kTensor)
        node.tensor = LayoutOnly(old.tensor);
      for (TensorSpec& s : node.tuple) s = LayoutOnly(s);
      bool mapped = true;
      ForEachOperandMutable(node, [&](ValueId& v) {
        // An external value (whole or element) maps to its input node; an
        // element of a member tuple node keeps its element index.
        if (auto exact = remap_.find(v); exact != remap_.end()) {
          v = exact->second;
          return;
        }
        auto whole = remap_.find(ValueId{v.node, -1});
        if (whole == remap_.end()) {
          mapped = false;
          return;
        }
        v = ValueId{whole->second.node, v.element};
      });
      // Every operand is an input or an earlier member (phase 1).
      FERRY_RET_CHECK(mapped);
      remap_[ValueId{m, -1}] =
          ValueId{static_cast<int32_t>(graph.nodes.size()), -1};
      graph.nodes.push_back(std::move(node));
    }
    Node output;
    output.kind = NodeKind::kOutput;
    output.name = UniqueName("output", used_);
    for (const ValueId& v : group_.outputs) {
      auto base = remap_.find(ValueId{v.node, -1});
      // An output is a value of a member (phase 1).
      FERRY_RET_CHECK(base != remap_.end());
      output.args.push_back(
          Argument::Value(ValueId{base->second.node, v.element}));
    }
    graph.nodes.push_back(std::move(output));
    return module;
  }

 private:
  const Method& method_;
  const Group& group_;
  absl::flat_hash_set<std::string> used_;
  std::map<ValueId, ValueId> remap_;  // method value -> graph value
};

// What phase 3 hands to phase 4: the nodes of the new method ("items"),
// each with where it sorts, and the ordering in-place writes add, in item
// numbering.
struct Item {
  Node node;
  int32_t position;  // the original node it stands in for
  int32_t sequence;  // ties: kept nodes first, then delegates and getitems
};
struct Replaced {
  std::vector<Item> items;
  std::vector<std::vector<int32_t>> effects;  // per item
};

// Phase 3: the kept nodes, then per group a delegate and one getitem per
// output, in place of the members; operands in item numbering.
//
//   t = add(a, b) [d0]; s = mul(t, a) [d0]; r = relu(s)
//   ==> r = relu(s); delegate_d0 = delegate(a, b);
//       s = getitem(delegate_d0, 0)
// (unordered until phase 4; a getitem is named like the value it replaces)
class ReplaceGroups {
 public:
  ReplaceGroups(Method& method, const Grouping& grouping,
                const std::vector<std::vector<int32_t>>& effects)
      : method_(method), grouping_(grouping), effects_(effects) {
    for (const Node& n : method.nodes) names_.insert(n.name);
  }

  // `module_ids`: the id of each group's module (phase 2).
  absl::StatusOr<Replaced> Run(const std::vector<std::string>& module_ids) {
    const std::vector<Group>& groups = grouping_.groups;
    const std::vector<int32_t>& group_of = grouping_.group_of;
    FERRY_RET_CHECK(module_ids.size() == groups.size());
    std::vector<Item> group_items;          // delegates and getitems
    std::map<ValueId, int32_t> getitem_of;  // exported old value -> item
    size_t group_item_count = 0;
    for (const Group& group : groups)
      group_item_count += 1 + group.outputs.size();
    group_items.reserve(group_item_count);
    std::vector<int32_t> delegate_of_group(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) {
      const Group& group = groups[g];
      Item delegate;
      delegate.node.kind = NodeKind::kDelegate;
      delegate.node.name =
          UniqueName(absl::StrCat("delegate_", group.tag), names_);
      delegate.node.target = module_ids[g];
      delegate.node.args.reserve(group.inputs.size());
      for (const ValueId& v : group.inputs)
        delegate.node.args.push_back(Argument::Value(v));
      delegate.node.result = ResultKind::kTuple;
      delegate.node.tuple.reserve(group.outputs.size());
      for (const ValueId& v : group.outputs) {
        const TensorSpec* spec = method_.Spec(v);
        // Outputs are tensors: validation refuses scalars outside metadata
        // operators, which are never lowered.
        FERRY_RET_CHECK(spec != nullptr);
        delegate.node.tuple.push_back(LayoutOnly(*spec));
      }
      delegate.position = group.last_member;
      const int32_t delegate_index = static_cast<int32_t>(group_items.size());
      delegate_of_group[g] = delegate_index;
      group_items.push_back(std::move(delegate));
      for (size_t k = 0; k < group.outputs.size(); ++k) {
        const ValueId& v = group.outputs[k];
        Item getitem;
        getitem.node.kind = NodeKind::kGetItem;
        getitem.node.name = v.element < 0
                                ? method_.nodes[v.node].name
                                : UniqueName(SafeName(method_, v), names_);
        getitem.node.getitem_source = delegate_index;  // offset below
        getitem.node.getitem_index = static_cast<int32_t>(k);
        getitem.node.result = ResultKind::kTensor;
        getitem.node.tensor = group_items[delegate_index].node.tuple[k];
        getitem.node.source = method_.nodes[v.node].source;
        getitem.position = group.last_member;
        getitem_of[v] =
            static_cast<int32_t>(group_items.size());  // offset below
        group_items.push_back(std::move(getitem));
      }
    }
    const int32_t n = static_cast<int32_t>(method_.nodes.size());
    Replaced out;
    out.items.reserve(
        static_cast<size_t>(std::count(group_of.begin(), group_of.end(), -1)) +
        group_items.size());
    std::vector<int32_t> item_of(n, -1);
    for (int32_t i = 0; i < n; ++i) {
      if (group_of[i] != -1) continue;
      item_of[i] = static_cast<int32_t>(out.items.size());
      out.items.push_back(Item{std::move(method_.nodes[i]), i,
                               static_cast<int32_t>(out.items.size())});
    }
    const int32_t first_group_item = static_cast<int32_t>(out.items.size());
    for (Item& item : group_items) {
      item.sequence = static_cast<int32_t>(out.items.size());
      if (item.node.kind == NodeKind::kGetItem)
        item.node.getitem_source += first_group_item;
      out.items.push_back(std::move(item));
    }
    for (auto& [value, item] : getitem_of) item += first_group_item;
    // A member stands for its delegate.
    auto item_for_node = [&](int32_t i) {
      return group_of[i] == -1
                 ? item_of[i]
                 : first_group_item + delegate_of_group[group_of[i]];
    };
    out.effects.resize(out.items.size());
    for (int32_t i = 0; i < n; ++i) {
      const int32_t item = item_for_node(i);
      for (int32_t d : effects_[i])
        if (const int32_t dep = item_for_node(d); dep != item)
          out.effects[item].push_back(dep);
    }
    // Operands of the kept nodes and the delegates: old value -> item value.
    // (Getitems already read their delegate's item.)
    bool mapped = true;
    for (int32_t k = 0; k < static_cast<int32_t>(out.items.size()); ++k) {
      Node& node = out.items[k].node;
      if (k >= first_group_item && node.kind == NodeKind::kGetItem) continue;
      ForEachOperandMutable(node, [&](ValueId& v) {
        if (item_of[v.node] != -1) {
          v = ValueId{item_of[v.node], v.element};
          return;
        }
        auto it = getitem_of.find(v);
        if (it == getitem_of.end()) {
          // A member value nobody outside its group reads cannot be read
          // here: phase 1 made every value read outside an output.
          mapped = false;
          return;
        }
        v = ValueId{it->second, -1};
      });
    }
    FERRY_RET_CHECK(mapped);
    return out;
  }

 private:
  Method& method_;
  const Grouping& grouping_;
  const std::vector<std::vector<int32_t>>& effects_;
  absl::flat_hash_set<std::string> names_;
};

// Phase 4: the items in a stable topological order (by original position,
// then sequence), so nodes move only as far as the delegates make them.
//
//   r = relu(s); delegate_d0; s = getitem  ==>  delegate_d0; s; r
absl::StatusOr<std::vector<Node>> Reorder(Replaced replaced) {
  std::vector<Item>& items = replaced.items;
  const int32_t count = static_cast<int32_t>(items.size());
  std::vector<std::vector<int32_t>> deps(count);
  std::vector<int32_t> position(count);
  for (int32_t i = 0; i < count; ++i) {
    // Ties break by (position, id); an item's id is its sequence number.
    FERRY_RET_CHECK(items[i].sequence == i);
    ForEachOperand(items[i].node, [&](const ValueId& v) {
      if (v.node >= 0) deps[i].push_back(v.node);
    });
    for (int32_t e : replaced.effects[i]) deps[i].push_back(e);
    position[i] = items[i].position;
  }
  const std::optional<std::vector<int32_t>> order =
      StableTopologicalOrder(deps, position);
  // Partition checked that every group is convex, so there is no cycle.
  FERRY_RET_CHECK(order.has_value());
  std::vector<Node> nodes;
  ReserveNodes(nodes, count);
  for (int32_t i : *order) nodes.push_back(std::move(items[i].node));
  RenumberOperands(nodes, InverseOrder(*order, count));
  return nodes;
}

}  // namespace

absl::StatusOr<PassStats> LowerPartitions(Program& program,
                                          const LowerOptions& options,
                                          Diagnostics& diagnostics) {
  PassStats stats;
  int64_t lowered = 0;
  absl::flat_hash_set<std::string> module_ids;
  for (const LoweredModule& m : program.modules) module_ids.insert(m.id);
  const std::map<std::string, std::string> tag_targets(
      options.tag_targets.begin(), options.tag_targets.end());
  for (Method& method : program.methods) {
    absl::StatusOr<Grouping> grouping = CollectGroups(method).Run();
    if (!grouping.ok()) return grouping.status();
    if (grouping->groups.empty()) continue;
    std::vector<std::string> ids;
    program.modules.reserve(program.modules.size() + grouping->groups.size());
    for (const Group& group : grouping->groups) {
      auto tag_target = tag_targets.find(group.tag);
      ModuleTarget target;
      target.target_device = tag_target != tag_targets.end()
                                 ? tag_target->second
                                 : options.partition_target;
      target.backend = PartitionBackend(options, target.target_device);
      target.id =
          UniqueName(absl::StrCat(method.name, ".", group.tag), module_ids);
      ids.push_back(target.id);
      absl::StatusOr<LoweredModule> module =
          BuildModule(method, group).Run(std::move(target));
      if (!module.ok()) return module.status();
      program.modules.push_back(*std::move(module));
      ++lowered;
    }
    const std::vector<std::vector<int32_t>> effects =
        EffectDependencies(method, StorageRoots(method));
    absl::StatusOr<Replaced> replaced =
        ReplaceGroups(method, *grouping, effects).Run(ids);
    if (!replaced.ok()) return replaced.status();
    absl::StatusOr<std::vector<Node>> nodes = Reorder(*std::move(replaced));
    if (!nodes.ok()) return nodes.status();
    method.nodes = *std::move(nodes);
  }
  stats.Add("delegates_created", lowered);
  (void)diagnostics;
  return stats;
}

}  // namespace ferry
