// The checkers of checks.h. Each walks the program in node order and stops
// at the first violation; the message names the pass, the method and the
// nodes, so a failing test points at the rewrite that broke the promise.
#include "passes/checks.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "passes/alias.h"
#include "passes/partition.h"
#include "passes/place_and_copy.h"
#include "passes/plan_memory.h"

namespace ferry {
namespace {

// "<pass>: method '<m>': <what>".
class Violation {
 public:
  Violation(std::string_view pass, const Method& method)
      : prefix_(absl::StrCat(std::string(pass), ": method '", method.name,
                             "': ")) {}
  template <typename... Parts>
  absl::Status operator()(const Parts&... parts) const {
    return absl::InternalError(absl::StrCat(prefix_, parts...));
  }

 private:
  std::string prefix_;
};

// Every value of a node with a tensor spec: the whole result, or each tuple
// element.
template <typename Fn>
void ForEachTensorValue(const Node& node, int32_t i, Fn&& fn) {
  if (node.result == ResultKind::kTensor) fn(ValueId{i, -1}, node.tensor);
  for (int32_t e = 0; e < static_cast<int32_t>(node.tuple.size()); ++e)
    fn(ValueId{i, e}, node.tuple[e]);
}

// Operands refer to earlier nodes, and to elements their producer has.
absl::Status CheckOperandsInRange(const Method& method,
                                  const Violation& violation) {
  for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
    absl::Status status;
    ForEachOperand(method.nodes[i], [&](const ValueId& v) {
      if (!status.ok()) return;
      if (v.node < 0 || v.node >= i) {
        status = violation("'", method.nodes[i].name,
                           "' reads a node that does not precede it");
        return;
      }
      const Node& producer = method.nodes[v.node];
      if (v.element >= static_cast<int32_t>(producer.tuple.size()))
        status =
            violation("'", method.nodes[i].name, "' reads element ", v.element,
                      " of '", producer.name, "', which has no such element");
    });
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// --- normalize_layout -------------------------------------------------------

bool NeedsRelayout(const TensorSpec& spec) {
  return !spec.IsContiguous() && !spec.IsChannelsLast();
}

// The constant-table entry a node names, or empty.
absl::string_view ConstantNameOf(const Node& node) {
  if (node.kind == NodeKind::kConstant) return node.target.str();
  if (node.kind == NodeKind::kInput && node.input_kind != InputKind::kUserInput)
    return node.target.str();
  return {};
}

// Constants a lowered delegate was compiled for: owned by a module, or read
// by a delegate directly or through views.
absl::flat_hash_set<std::string> PinnedConstants(const Program& program) {
  absl::flat_hash_set<std::string> pinned;
  for (const LoweredModule& module : program.modules)
    for (const Node& node : module.graph.nodes)
      if (absl::string_view name = ConstantNameOf(node); !name.empty())
        pinned.emplace(name);
  for (const Method& method : program.methods) {
    const StorageRoots roots(method);
    for (const Node& node : method.nodes) {
      if (node.kind != NodeKind::kDelegate) continue;
      ForEachOperand(node, [&](const ValueId& v) {
        const ValueId root = roots.RootOf(v);
        if (root.element >= 0) return;
        if (absl::string_view name = ConstantNameOf(method.nodes[root.node]);
            !name.empty())
          pinned.emplace(name);
      });
    }
  }
  return pinned;
}

// --- partition
// ----------------------------------------------------------------

// Convexity over data edges: no path leaves `tag`'s group and comes back.
// Nodes are in topological order, so one forward sweep marks every node
// outside the group that depends on it.
absl::Status CheckConvexGroup(const Method& method, const std::string& tag,
                              const Violation& violation) {
  const int32_t n = static_cast<int32_t>(method.nodes.size());
  std::vector<char> below(n, 0);  // outside the group, downstream of it
  for (int32_t i = 0; i < n; ++i) {
    const Node& node = method.nodes[i];
    const bool member = node.delegation_tag == tag;
    bool reads_group = false, reads_below = false;
    ForEachOperand(node, [&](const ValueId& v) {
      reads_group |= method.nodes[v.node].delegation_tag == tag;
      reads_below |= below[v.node] != 0;
    });
    if (member && reads_below)
      return violation("partition '", tag, "' is not convex: '", node.name,
                       "' depends on a node outside it that depends on it");
    if (!member) below[i] = reads_group || reads_below;
  }
  return absl::OkStatus();
}

// --- place_and_copy
// -------------------------------------------------------------

bool IsCopy(const Node& node) { return IsH2DCopy(node) || IsD2HCopy(node); }

// The device a reader needs its operands on; nullopt for a reader that takes
// them anywhere (a metadata-only call, a copy, and with skip_d2h an output).
std::optional<Device> NeededDevice(const ProgramIndex& index,
                                   const StorageRoots& roots,
                                   const Method& method, int32_t i,
                                   bool skip_d2h) {
  const Node& node = method.nodes[i];
  switch (node.kind) {
    case NodeKind::kInput:
    case NodeKind::kConstant:
    case NodeKind::kGetItem:
      return std::nullopt;
    case NodeKind::kCall:
      if (IsCopy(node) || roots.IsMetadataOnly(i)) return std::nullopt;
      return Device::Cpu();
    case NodeKind::kDelegate:
      return DelegateDevice(index, node);
    case NodeKind::kOutput:
      if (skip_d2h) return std::nullopt;
      return Device::Cpu();
  }
  return std::nullopt;
}

absl::Status CheckCopy(const ProgramIndex& index, const Method& method,
                       const std::vector<std::vector<Use>>& uses, int32_t i,
                       const Violation& violation) {
  const Node& copy = method.nodes[i];
  const bool h2d = IsH2DCopy(copy);
  if (copy.args.size() != 1 || !copy.args[0].is_value() ||
      copy.result != ResultKind::kTensor)
    return violation("copy '", copy.name,
                     "' does not take one tensor to one tensor");
  const ValueId source = copy.args[0].value;
  const TensorSpec* from = method.Spec(source);
  if (from == nullptr)
    return violation("copy '", copy.name, "' copies a value without a spec");
  if (from->device.is_host() != h2d || copy.tensor.device.is_host() == h2d)
    return violation("copy '", copy.name, "' goes from ",
                     from->device.ToString(), " to ",
                     copy.tensor.device.ToString());
  if (!copy.tensor.SameLayout(*from))
    return violation("copy '", copy.name, "' changes the layout of '",
                     method.ValueName(source), "'");
  if (uses[i].empty()) return violation("copy '", copy.name, "' has no reader");
  for (const Use& use : uses[i]) {
    const Node& reader = method.nodes[use.reader];
    const bool device_reader = reader.kind == NodeKind::kDelegate &&
                               !DelegateDevice(index, reader).is_host();
    if (h2d &&
        (!device_reader || DelegateDevice(index, reader) != copy.tensor.device))
      return violation("H2D copy '", copy.name, "' is read by '", reader.name,
                       "', which does not run on ",
                       copy.tensor.device.ToString());
    if (!h2d && device_reader)
      return violation("D2H copy '", copy.name,
                       "' is read by device delegate '", reader.name, "'");
  }
  // Where it sits: only copies between an H2D and its first reader, and
  // between a D2H and the node it copies.
  const int32_t from_node = h2d ? i + 1 : source.node + 1;
  const int32_t to_node = h2d ? uses[i].front().reader : i;
  for (int32_t k = from_node; k < to_node; ++k)
    if (!IsCopy(method.nodes[k]))
      return violation("'", method.nodes[k].name, "' sits between copy '",
                       copy.name, "' and ",
                       h2d ? "its first reader" : "the value it copies");
  return absl::OkStatus();
}

absl::Status CheckLabelledOnly(const ProgramIndex& index, const Method& method,
                               const Violation& violation) {
  std::vector<Device> device_of(method.nodes.size(), Device::Cpu());
  for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
    const Node& node = method.nodes[i];
    if (IsCopy(node))
      return violation("copy '", node.name, "' without device memory planning");
    if (node.kind == NodeKind::kDelegate)
      device_of[i] = DelegateDevice(index, node);
    else if (node.kind == NodeKind::kGetItem)
      device_of[i] = device_of[node.getitem_source];
    else
      continue;
    if (device_of[i].is_host()) continue;
    absl::Status status;
    ForEachTensorValue(node, i, [&](ValueId, const TensorSpec& spec) {
      if (status.ok() && spec.device != device_of[i])
        status =
            violation("'", node.name, "' runs on ", device_of[i].ToString(),
                      " but is labelled ", spec.device.ToString());
    });
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// --- plan_memory
// ----------------------------------------------------------------

int64_t AlignUp(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

struct PlannedBlock {
  ValueId root;
  MemoryPlacement memory;
  int32_t first = 0;  // steps it is live, inclusive
  int32_t last = 0;
};

}  // namespace

absl::Status CheckLayoutNormalized(const Program& program,
                                   const LowerOptions& options) {
  (void)options;
  const absl::flat_hash_set<std::string> pinned = PinnedConstants(program);
  for (const Constant& constant : program.constants)
    if (NeedsRelayout(constant.spec) && !pinned.contains(constant.name))
      return absl::InternalError(
          absl::StrCat("normalize_layout: constant '", constant.name,
                       "' is neither contiguous nor channels-last"));
  for (const Method& method : program.methods) {
    const Violation violation("normalize_layout", method);
    for (const Node& node : method.nodes) {
      absl::string_view name = ConstantNameOf(node);
      if (name.empty() || pinned.contains(name)) continue;
      const TensorSpec* spec = node.Spec();
      if (spec != nullptr && NeedsRelayout(*spec))
        return violation("'", node.name, "' reads constant '", name,
                         "' with a layout that is neither contiguous nor "
                         "channels-last");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPartitioned(const Program& program,
                              const LowerOptions& options) {
  (void)options;
  for (const Method& method : program.methods) {
    const Violation violation("partition", method);
    const int32_t n = static_cast<int32_t>(method.nodes.size());
    const StorageRoots roots(method);
    const std::vector<std::vector<Use>> uses = BuildUses(method);
    std::vector<std::string> tags;  // first appearance order
    for (int32_t i = 0; i < n; ++i) {
      const Node& node = method.nodes[i];
      const std::string& tag = node.delegation_tag;
      if (tag.empty()) continue;
      if (std::find(tags.begin(), tags.end(), tag) == tags.end())
        tags.push_back(tag);
      if (node.kind == NodeKind::kCall) {
        if (!IsLowerableCall(node))
          return violation("'", node.name, "' (", node.target.str(),
                           ") cannot be lowered but carries tag '", tag, "'");
        for (const ValueId& written : roots.WrittenBy(i))
          if (method.nodes[roots.RootOf(written).node].delegation_tag != tag)
            return violation("'", node.name, "' in partition '", tag,
                             "' writes '", method.ValueName(written),
                             "', defined outside it");
      } else if (node.kind == NodeKind::kGetItem) {
        if (method.nodes[node.getitem_source].delegation_tag != tag)
          return violation("getitem '", node.name, "' carries tag '", tag,
                           "' but its source does not");
      } else if (IsProgramDataNode(node)) {
        if (uses[i].empty())
          return violation("program data '", node.name, "' carries tag '", tag,
                           "' but nothing reads it");
        for (const Use& use : uses[i])
          if (method.nodes[use.reader].delegation_tag != tag)
            return violation("program data '", node.name, "' carries tag '",
                             tag, "' but '", method.nodes[use.reader].name,
                             "' outside the partition reads it");
      } else {
        return violation("'", node.name, "' (",
                         std::string(NodeKindName(node.kind)),
                         ") carries tag '", tag, "'");
      }
    }
    for (const std::string& tag : tags)
      if (absl::Status convex = CheckConvexGroup(method, tag, violation);
          !convex.ok())
        return convex;
  }
  return absl::OkStatus();
}

absl::Status CheckLowered(const Program& program, const LowerOptions& options) {
  (void)options;
  const ProgramIndex index(program);
  std::set<std::string_view> ids;
  for (const LoweredModule& module : program.modules)
    if (!ids.insert(module.id).second)
      return absl::InternalError(
          absl::StrCat("lower: two modules have id '", module.id, "'"));
  for (const Method& method : program.methods) {
    const Violation violation("lower", method);
    if (absl::Status order = CheckOperandsInRange(method, violation);
        !order.ok())
      return order;
    for (const Node& node : method.nodes) {
      if (!node.delegation_tag.empty())
        return violation("'", node.name, "' still carries tag '",
                         node.delegation_tag.str(), "'");
      if (node.kind == NodeKind::kGetItem &&
          method.nodes[node.getitem_source].kind == NodeKind::kDelegate &&
          (node.getitem_index < 0 ||
           node.getitem_index >=
               static_cast<int32_t>(
                   method.nodes[node.getitem_source].tuple.size())))
        return violation("getitem '", node.name, "' reads element ",
                         node.getitem_index, " of a shorter delegate result");
      if (node.kind != NodeKind::kDelegate) continue;
      const LoweredModule* module = index.FindModule(node.target);
      if (module == nullptr)
        return violation("delegate '", node.name, "' names module '",
                         node.target.str(), "', which does not exist");
      int64_t user_inputs = 0;
      const Node* output = nullptr;
      for (const Node& inner : module->graph.nodes) {
        user_inputs += inner.kind == NodeKind::kInput &&
                       inner.input_kind == InputKind::kUserInput;
        if (inner.kind == NodeKind::kOutput) output = &inner;
      }
      if (static_cast<int64_t>(node.args.size()) != user_inputs)
        return violation("delegate '", node.name, "' passes ", node.args.size(),
                         " arguments to module '", module->id, "', which has ",
                         user_inputs, " user inputs");
      if (static_cast<int64_t>(module->input_layouts.size()) != user_inputs)
        return violation("module '", module->id, "' has ",
                         module->input_layouts.size(), " input layouts for ",
                         user_inputs, " user inputs");
      if (module->returns_tuple &&
          (output == nullptr || node.result != ResultKind::kTuple ||
           node.tuple.size() != output->args.size()))
        return violation("delegate '", node.name,
                         "' does not return one tuple element per output of "
                         "module '",
                         module->id, "'");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPlaced(const Program& program, const LowerOptions& options) {
  const ProgramIndex index(program);
  for (const Method& method : program.methods) {
    const Violation violation("place_and_copy", method);
    if (!options.enable_non_cpu_memory_planning) {
      if (absl::Status labelled = CheckLabelledOnly(index, method, violation);
          !labelled.ok())
        return labelled;
      continue;
    }
    const int32_t n = static_cast<int32_t>(method.nodes.size());
    const StorageRoots roots(method);
    const std::vector<std::vector<Use>> uses = BuildUses(method);
    const bool skip_d2h = options.skip_d2h_for_method_outputs.For(method.name);
    // In-place writes so far per storage root, for the versions of H2Ds.
    std::map<ValueId, int32_t> writes;
    std::set<ValueId> d2h_sources;
    std::set<std::tuple<ValueId, Device, int32_t>> h2d_keys;
    for (int32_t i = 0; i < n; ++i) {
      const Node& node = method.nodes[i];
      if (IsProgramDataNode(node) && node.Spec() != nullptr &&
          !node.Spec()->device.is_host())
        return violation("program data '", node.name, "' is labelled ",
                         node.Spec()->device.ToString());
      if (node.kind == NodeKind::kDelegate || node.kind == NodeKind::kGetItem) {
        const Node& runner = node.kind == NodeKind::kDelegate
                                 ? node
                                 : method.nodes[node.getitem_source];
        const Device d = runner.kind == NodeKind::kDelegate
                             ? DelegateDevice(index, runner)
                             : Device::Cpu();
        absl::Status status;
        ForEachTensorValue(node, i, [&](ValueId, const TensorSpec& spec) {
          if (status.ok() && !d.is_host() && spec.device != d)
            status = violation("'", node.name, "' comes from ", d.ToString(),
                               " but is labelled ", spec.device.ToString());
        });
        if (!status.ok()) return status;
      }
      if (IsCopy(node)) {
        if (absl::Status copy = CheckCopy(index, method, uses, i, violation);
            !copy.ok())
          return copy;
        const ValueId source = node.args[0].value;
        if (IsD2HCopy(node) && !d2h_sources.insert(source).second)
          return violation("a second D2H copy of '", method.ValueName(source),
                           "': '", node.name, "'");
        if (IsH2DCopy(node) && !h2d_keys
                                    .emplace(source, node.tensor.device,
                                             writes[roots.RootOf(source)])
                                    .second)
          return violation("a second H2D copy of '", method.ValueName(source),
                           "' to ", node.tensor.device.ToString(),
                           " with no write between: '", node.name, "'");
      }
      if (std::optional<Device> needed =
              NeededDevice(index, roots, method, i, skip_d2h)) {
        absl::Status status;
        ForEachOperand(node, [&](const ValueId& v) {
          const TensorSpec* spec = method.Spec(v);
          if (status.ok() && spec != nullptr && spec->device != *needed)
            status = violation("'", node.name, "' needs '", method.ValueName(v),
                               "' on ", needed->ToString(), " but it is on ",
                               spec->device.ToString());
        });
        if (!status.ok()) return status;
      }
      for (const ValueId& written : roots.WrittenBy(i))
        ++writes[roots.RootOf(written)];
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPlanned(const Program& program, const LowerOptions& options) {
  for (const Method& method : program.methods) {
    const Violation violation("plan_memory", method);
    for (size_t a = 0; a < method.arenas.size(); ++a) {
      const Arena& arena = method.arenas[a];
      if (a > 0 && !(method.arenas[a - 1].device < arena.device))
        return violation("arenas are not one per device in device order");
      if (!options.enable_non_cpu_memory_planning && !arena.device.is_host())
        return violation("a ", arena.device.ToString(),
                         " arena without device memory planning");
      if (arena.size % kArenaAlignment != 0 || arena.lower_bound < 0 ||
          arena.lower_bound > arena.size)
        return violation("arena ", a, " has size ", arena.size,
                         " and lower bound ", arena.lower_bound);
    }
    const int32_t n = static_cast<int32_t>(method.nodes.size());
    const StorageRoots roots(method);
    std::map<ValueId, int32_t> last_use;
    std::set<ValueId> outputs;
    for (int32_t i = 0; i < n; ++i)
      ForEachOperand(method.nodes[i], [&](const ValueId& v) {
        const ValueId root = roots.RootOf(v);
        last_use[root] = std::max(last_use[root], i);
        if (method.nodes[i].kind == NodeKind::kOutput) outputs.insert(root);
      });
    std::vector<PlannedBlock> blocks;
    for (int32_t i = 0; i < n; ++i) {
      const Node& node = method.nodes[i];
      absl::Status status;
      ForEachTensorValue(node, i, [&](ValueId v, const TensorSpec& spec) {
        if (!status.ok()) return;
        const std::string name = method.ValueName(v);
        const ValueId root = roots.RootOf(v);
        if (root != v) {
          const TensorSpec* root_spec = method.Spec(root);
          if (root_spec == nullptr || !(spec.memory == root_spec->memory))
            status = violation("'", name,
                               "' does not carry the placement "
                               "of its storage root '",
                               method.ValueName(root), "'");
          return;
        }
        const bool mutable_buffer =
            node.kind == NodeKind::kInput &&
            node.input_kind == InputKind::kMutableBuffer;
        const bool graph_input =
            node.kind == NodeKind::kInput && !mutable_buffer;
        const bool whole_method =
            mutable_buffer || (node.kind == NodeKind::kCall && node.at_load);
        const bool needs_memory =
            !IsProgramDataNode(node) &&
            !(graph_input && !options.alloc_graph_input) &&
            !(outputs.contains(v) && !options.alloc_graph_output &&
              !mutable_buffer);
        if (spec.memory.planned != needs_memory) {
          status = violation("'", name, "' is ",
                             needs_memory ? "not planned" : "planned",
                             " but should ", needs_memory ? "" : "not ", "be");
          return;
        }
        if (!needs_memory) return;
        const MemoryPlacement& m = spec.memory;
        const std::optional<int64_t> bytes = spec.StorageBytes();
        if (m.arena < 0 ||
            m.arena >= static_cast<int32_t>(method.arenas.size()))
          status = violation("'", name, "' is in arena ", m.arena,
                             ", which does not exist");
        else if (const Device want = options.enable_non_cpu_memory_planning
                                         ? spec.device
                                         : Device::Cpu();
                 method.arenas[m.arena].device != want)
          status =
              violation("'", name, "' lives on ", want.ToString(),
                        " but is planned in the ",
                        method.arenas[m.arena].device.ToString(), " arena");
        else if (!bytes || m.size != AlignUp(*bytes) || m.offset < 0 ||
                 m.offset % kArenaAlignment != 0 ||
                 m.offset > method.arenas[m.arena].size - m.size)
          status = violation("'", name, "' at offset ", m.offset, " size ",
                             m.size, " does not fit arena ", m.arena, " (",
                             method.arenas[m.arena].size, " bytes)");
        if (!status.ok()) return;
        PlannedBlock block{v, m, graph_input ? 0 : i, 0};
        auto used = last_use.find(v);
        block.last =
            std::max(used == last_use.end() ? -1 : used->second, block.first);
        if (whole_method) {
          block.first = 0;
          block.last = n;
        }
        if (m.size > 0) blocks.push_back(block);
      });
      if (!status.ok()) return status;
    }
    // No two storages live at the same step share a byte.
    std::sort(blocks.begin(), blocks.end(),
              [](const PlannedBlock& x, const PlannedBlock& y) {
                return std::tie(x.memory.arena, x.memory.offset) <
                       std::tie(y.memory.arena, y.memory.offset);
              });
    for (size_t k = 0; k < blocks.size(); ++k) {
      const PlannedBlock& x = blocks[k];
      for (size_t j = k + 1; j < blocks.size(); ++j) {
        const PlannedBlock& y = blocks[j];
        if (y.memory.arena != x.memory.arena ||
            y.memory.offset >= x.memory.offset + x.memory.size)
          break;
        if (x.first <= y.last && y.first <= x.last)
          return violation("'", method.ValueName(x.root), "' and '",
                           method.ValueName(y.root),
                           "' are live at the same time and share bytes of "
                           "arena ",
                           x.memory.arena);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckEstablished(std::string_view pass, const Program& program,
                              const LowerOptions& options) {
  using Checker = absl::Status (*)(const Program&, const LowerOptions&);
  static constexpr std::pair<std::string_view, Checker> kCheckers[] = {
      {"normalize_layout", &CheckLayoutNormalized},
      {"partition", &CheckPartitioned},
      {"lower", &CheckLowered},
      {"place_and_copy", &CheckPlaced},
      {"plan_memory", &CheckPlanned},
  };
  for (const auto& [name, checker] : kCheckers)
    if (name == pass) return checker(program, options);
  return absl::OkStatus();
}

}  // namespace ferry
