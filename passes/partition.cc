// partition
//
// Model. A partition is a set of host operators that one lowered module will
// compute on one device. It must be convex: if a path left the partition and
// came back, the delegate would need its own output as an input.
//
//   a, b = inputs
//   t = add(a, b)        [tag d0]
//   s = sin(t)
//   u = mul(s, b)        [tag d0]      <- cycle: d0 -> sin -> d0: E0701
//
// What a partition may claim. A call is lowerable when it is a registry
// operator (a node carrying the registry's own schema counts; one carrying a
// different schema for a registered name is a custom operator, W0703), not
// metadata-only and not a copy. A partition for a backend claims only the
// operators that backend declared (LowerOptions::backend_operators, filled
// from the runtime; every lowerable operator when it declared none);
// BY_CAPABILITY narrows that by the request's allow/deny lists, so that
// e.g. a denied `relu_` stays on the host between two device partitions:
//
//   c = convolution(x, w)  [partition_0]
//   r = relu_(c)           (denied: host)      place_and_copy then inserts
//   d = convolution(r, w2) [partition_1]       D2H before r, H2D after it
//
// Delegates never write their inputs, and their results are fresh storage:
// an in-place call joins only the partition that defines what it writes, and
// an alias (a view, an in-place result) read outside its partition must not
// be of storage written outside it (CutAliases), or the write would miss the
// copy the delegate returned. BY_TAG reports both as errors; BY_CAPABILITY
// leaves such calls on the host.
//
// Phases: (1) CheckTaggedNodes (BY_TAG) or TagByCapability (BY_CAPABILITY)
// put tags on call nodes; (2) AdoptGetItems tags getitems of tagged tuple
// nodes; (3) CutAliases: BY_TAG reports, BY_CAPABILITY keeps the cut aliases
// on the host and groups again; (4) CheckConvex reports cycles; (5)
// AdoptProgramData tags program data whose every reader carries one tag
// (BY_TAG keeps only tags the request put there; BY_CAPABILITY adopts them
// all).
#include "passes/partition.h"

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "passes/alias.h"
#include "passes/diagnostic_codes.h"
#include "passes/graph.h"
#include "passes/options.h"
#include "passes/schema.h"

namespace ferry {

const OpInfo* RegistryOperator(const Node& node) {
  if (node.kind != NodeKind::kCall) return nullptr;
  const OpInfo* info = RegisteredOp(node);
  if (info == nullptr || node.schema_text.empty()) return info;
  // A schema of its own: the registry's operator only when it is the
  // registry's schema; otherwise a custom operator (no backend kernel).
  if (node.schema != nullptr && SameSchema(*node.schema, *info->schema)) {
    return info;
  }
  return nullptr;
}

std::string PartitionBackend(const LowerOptions& options,
                             std::string_view target) {
  if (!options.partition_backend.empty()) return options.partition_backend;
  absl::StatusOr<Device> device = ParseTargetDevice(target);
  return device.ok() && device->is_host() ? kHostBackendId : kCudaBackendId;
}

bool IsLowerableCall(const Node& node) {
  const OpInfo* info = RegistryOperator(node);
  if (!info || info->metadata_only) return false;
  if (node.target == kH2DCopyOp || node.target == kD2HCopyOp) return false;
  return node.result == ResultKind::kTensor ||
         node.result == ResultKind::kTuple;
}

namespace {

constexpr int32_t kNoGroup = -1;

bool Contains(const std::vector<std::string>& sorted, const std::string& name) {
  return std::binary_search(sorted.begin(), sorted.end(), name);
}

// The operators a partition for one backend may claim.
class OperatorFilter {
 public:
  // `declared`: the backend's operators (null: every lowerable one);
  // `allow` (empty: no narrowing) and `deny`: the request's lists.
  OperatorFilter(const std::vector<std::string>* declared,
                 const std::vector<std::string>* allow,
                 const std::vector<std::string>* deny)
      : declared_(declared), allow_(allow), deny_(deny) {}

  // Whether the backend runs `node`, a lowerable call.
  bool BackendRuns(const Node& node) const {
    return declared_ == nullptr || Contains(*declared_, Name(node));
  }
  // Whether a partition claims `node`.
  bool Claims(const Node& node) const {
    if (!IsLowerableCall(node) || !BackendRuns(node)) return false;
    const std::string name = Name(node);
    if (allow_ != nullptr && !allow_->empty() && !Contains(*allow_, name)) {
      return false;  // Not on the request's allow list.
    }
    return deny_ == nullptr || !Contains(*deny_, name);
  }

 private:
  // The registry's spelling ("aten::relu", not "aten::relu.default").
  static std::string Name(const Node& node) {
    return RegistryOperator(node)->schema->QualifiedName();
  }

  const std::vector<std::string>* declared_;
  const std::vector<std::string>* allow_;
  const std::vector<std::string>* deny_;
};

// W0703 for every call carrying a schema that differs from the registry's
// for the same name: it stays a custom operator, on the host. Returns
// whether any node carries a delegation tag, found in the same walk (which
// partitioning by tag needs to know first).
bool ReportForeignSchemas(const Method& method, Diagnostics& diagnostics) {
  bool any_tag = false;
  for (const Node& node : method.nodes) {
    any_tag |= !node.delegation_tag.empty();
    if (node.kind != NodeKind::kCall || node.schema_text.empty()) continue;
    const OpInfo* info = RegisteredOp(node);
    if (info == nullptr || RegistryOperator(node) != nullptr) continue;
    diagnostics.Warning(
        codes::kSchemaDiffersFromRegistry,
        absl::StrCat("'", node.name, "' carries a schema for '",
                     node.target.str(),
                     "' that differs from the registry's; it is treated as a "
                     "custom operator and stays on the host"),
        {node.name},
        absl::StrCat("drop call.schema to use the registered operator (",
                     info->schema->QualifiedName(),
                     ", docs/operators.md), or give the custom operator a "
                     "name of its own"));
  }
  return any_tag;
}

// Group ids per node from tags, in order of first appearance.
struct Groups {
  std::vector<int32_t> of;  // per node
  std::vector<std::string> tags;
};

Groups GroupsFromTags(const Method& method) {
  Groups groups;
  groups.of.assign(method.nodes.size(), kNoGroup);
  absl::flat_hash_map<std::string, int32_t> ids;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    const std::string& tag = method.nodes[i].delegation_tag;
    if (tag.empty()) continue;
    auto [it, inserted] =
        ids.emplace(tag, static_cast<int32_t>(groups.tags.size()));
    if (inserted) groups.tags.push_back(tag);
    groups.of[i] = it->second;
  }
  return groups;
}

// BY_TAG: tags only on lowerable calls, getitems and program data.
void CheckTaggedNodes(Method& method, const StorageRoots& roots,
                      const Groups& groups, const LowerOptions& options,
                      Diagnostics& diagnostics) {
  std::map<std::string, std::string> tag_targets(options.tag_targets.begin(),
                                                 options.tag_targets.end());
  for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
    Node& node = method.nodes[i];
    if (node.delegation_tag.empty()) continue;
    if (node.kind == NodeKind::kCall) {
      if (!IsLowerableCall(node)) {
        diagnostics.Error(
            codes::kPartitionUnsupported,
            absl::StrCat("operator '", node.target.str(),
                         "' cannot be lowered into a delegate (tag '",
                         node.delegation_tag.str(), "')"),
            {node.name},
            "leave metadata-only operators, copies and operators with a "
            "custom schema untagged");
        continue;
      }
      auto target = tag_targets.find(node.delegation_tag);
      std::string backend = PartitionBackend(
          options, target != tag_targets.end() ? target->second
                                               : options.partition_target);
      OperatorFilter filter(options.backend_operators.For(backend), nullptr,
                            nullptr);
      if (!filter.BackendRuns(node)) {
        diagnostics.Error(
            codes::kPartitionUnsupported,
            absl::StrCat("backend '", backend, "' does not run operator '",
                         node.target.str(), "' (tag '",
                         node.delegation_tag.str(), "')"),
            {node.name},
            "leave the node untagged (it runs on the host), or tag it for a "
            "backend that runs it (GetCapabilities lists each backend's "
            "operators)");
        continue;
      }
      for (const ValueId& written : roots.WrittenBy(i)) {
        ValueId root = roots.RootOf(written);
        if (groups.of[root.node] != groups.of[i]) {
          diagnostics.Error(
              codes::kPartitionUnsupported,
              absl::StrCat("in-place operator '", node.target.str(),
                           "' writes '", method.ValueName(written),
                           "', which is defined outside partition '",
                           node.delegation_tag.str(), "'"),
              {node.name, method.ValueName(written)},
              "a delegate cannot write its inputs; leave the in-place "
              "operator on the host");
        }
      }
      continue;
    }
    if (node.kind == NodeKind::kGetItem || IsProgramDataNode(node)) continue;
    node.delegation_tag.clear();  // inputs, outputs, delegates: never lowered
  }
}

// BY_CAPABILITY: greedy in node order. A lowerable call joins the open
// partition unless one of its operands is outside the partition and depends
// on it (joining would close a cycle); then a new partition opens. An
// in-place call joins only the partition that defines the storage it writes
// (a delegate never writes its inputs, as with tags); otherwise it stays on
// the host, where place_and_copy makes the write visible.
void TagByCapability(Method& method, const OperatorFilter& filter,
                     const StorageRoots& roots,
                     const std::vector<char>& demoted) {
  const size_t n = method.nodes.size();
  const std::vector<std::vector<int32_t>> effects =
      EffectDependencies(method, roots);
  std::vector<int32_t> group(n, kNoGroup);
  std::vector<int32_t> tainted_by(n, kNoGroup);  // outside g, depends on g
  int32_t open = kNoGroup;
  int32_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    Node& node = method.nodes[i];
    node.delegation_tag.clear();
    bool lowerable = !demoted[i] && filter.Claims(node);
    bool reads_tainted = false;
    bool reads_open = false;
    auto depend = [&](int32_t d) {
      if (open != kNoGroup && tainted_by[d] == open) reads_tainted = true;
      if (open != kNoGroup && group[d] == open) reads_open = true;
    };
    ForEachOperand(node, [&](const ValueId& v) { depend(v.node); });
    for (int32_t d : effects[i]) depend(d);
    if (node.kind == NodeKind::kGetItem &&
        group[node.getitem_source] != kNoGroup &&
        group[node.getitem_source] == open) {
      group[i] = open;
      continue;
    }
    const bool opens = open == kNoGroup || reads_tainted;
    if (lowerable) {
      for (const ValueId& written : roots.WrittenBy(static_cast<int32_t>(i)))
        if (opens || group[roots.RootOf(written).node] != open)
          lowerable = false;
    }
    if (lowerable) {
      if (opens) open = next++;
      group[i] = open;
      continue;
    }
    if (reads_open || reads_tainted) tainted_by[i] = open;
  }
  for (size_t i = 0; i < n; ++i)
    if (group[i] != kNoGroup)
      method.nodes[i].delegation_tag = absl::StrCat("partition_", group[i]);
}

// Aliases that a delegate boundary would cut. A delegate's results are
// fresh storage, so a member whose result aliases storage R (a view, an
// in-place result, a getitem of either) and that is read outside its
// partition (or returned) hands out a snapshot of R. The snapshot differs
// from the alias as soon as R is written outside the partition, after the
// member (a write before it is ordered before the partition, since the
// member depends on it):
//
//   v = transpose(x)   [p]      v leaves p as a copy of x's bytes
//   mul_(x, 0.5)                the host writes x
//   u = mm(v, w)                eager reads the written x through v
//
// Returns, per such member, the node to keep off the device: the member, or
// for a getitem the call producing its tuple.
std::vector<int32_t> CutAliases(const Method& method,
                                const StorageRoots& roots) {
  const int32_t n = static_cast<int32_t>(method.nodes.size());
  const Groups groups = GroupsFromTags(method);
  if (groups.tags.empty()) return {};
  const std::vector<int32_t>& group = groups.of;
  // Per root node: its writers.
  std::map<int32_t, std::vector<int32_t>> writers_of;
  for (int32_t w = 0; w < n; ++w)
    for (const ValueId& written : roots.WrittenBy(w))
      writers_of[roots.RootOf(written).node].push_back(w);
  if (writers_of.empty()) return {};
  std::vector<int32_t> cut;
  const std::vector<std::vector<Use>> uses = BuildUses(method);
  for (int32_t m = 0; m < n; ++m) {
    const Node& node = method.nodes[m];
    if (group[m] == kNoGroup || node.result != ResultKind::kTensor) continue;
    const ValueId value{m, -1};
    const ValueId root = roots.RootOf(value);
    if (root == value) continue;  // fresh storage: nothing to cut
    auto writers = writers_of.find(root.node);
    if (writers == writers_of.end()) continue;
    bool written_outside = false;
    for (int32_t w : writers->second)
      written_outside |= w > m && group[w] != group[m];
    if (!written_outside) continue;
    bool escapes = false;
    for (const Use& use : uses[m]) escapes |= group[use.reader] != group[m];
    if (!escapes) continue;
    cut.push_back(node.kind == NodeKind::kGetItem ? node.getitem_source : m);
  }
  return cut;
}

// BY_CAPABILITY: a partition none of whose values is read outside it (dead
// code, such as a view left unread once its readers took a copy of its
// root) would be a delegate that returns nothing: its calls stay where they
// are, on the host.
void DropPartitionsWithoutResults(Method& method) {
  const std::vector<std::vector<Use>> uses = BuildUses(method);
  std::map<std::string, bool> read_outside;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    const std::string& tag = method.nodes[i].delegation_tag;
    if (tag.empty()) continue;
    bool& read = read_outside[tag];
    for (const Use& use : uses[i])
      read |= method.nodes[use.reader].delegation_tag != tag;
  }
  for (Node& node : method.nodes)
    if (!node.delegation_tag.empty() && !read_outside[node.delegation_tag])
      node.delegation_tag.clear();
}

// Tags getitems whose source is tagged, so tuple results stay whole.
void AdoptGetItems(Method& method) {
  for (Node& node : method.nodes) {
    if (node.kind != NodeKind::kGetItem) continue;
    const Node& source = method.nodes[node.getitem_source];
    if (!source.delegation_tag.empty() && source.kind == NodeKind::kCall)
      node.delegation_tag = source.delegation_tag;
    else if (source.delegation_tag.empty())
      node.delegation_tag.clear();
  }
}

// Reports each group that a path leaves and re-enters. Contract every group
// to one unit (every other node is a unit of its own): a group is convex and
// can be ordered with the others exactly when its unit is on no cycle of
// the contracted graph, i.e. alone in its strongly connected component.
void CheckConvex(const Method& method, const Groups& groups,
                 Diagnostics& diagnostics) {
  const int32_t n = static_cast<int32_t>(method.nodes.size());
  const int32_t g = static_cast<int32_t>(groups.tags.size());
  const std::vector<std::vector<int32_t>> effects =
      EffectDependencies(method, StorageRoots(method));
  auto unit = [&](int32_t node) {
    return groups.of[node] != kNoGroup ? groups.of[node] : g + node;
  };
  auto for_each_dependency = [&](int32_t i, auto&& fn) {
    ForEachOperand(method.nodes[i], [&](const ValueId& v) { fn(v.node); });
    for (int32_t d : effects[i]) fn(d);
  };
  // Edges dependency -> reader.
  const int32_t units = g + n;
  std::vector<std::vector<int32_t>> readers(units);
  for (int32_t i = 0; i < n; ++i)
    for_each_dependency(i, [&](int32_t d) {
      if (unit(d) != unit(i)) readers[unit(d)].push_back(unit(i));
    });
  const Components components = StronglyConnectedComponents(readers);
  // A group on a cycle: name its first member that depends on the cycle.
  std::vector<char> reported(g, 0);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t own = groups.of[i];
    if (own == kNoGroup || reported[own] ||
        components.size[components.of[own]] == 1)
      continue;
    bool closes = false;
    for_each_dependency(i, [&](int32_t d) {
      closes |= unit(d) != own && components.of[unit(d)] == components.of[own];
    });
    if (!closes) continue;
    reported[own] = 1;
    diagnostics.Error(
        codes::kPartitionCycle,
        absl::StrCat("partition '", groups.tags[own], "' is not convex: '",
                     method.nodes[i].name,
                     "' depends on the partition through nodes outside it"),
        {method.nodes[i].name},
        "tag the nodes on the path too, or split the partition");
  }
}

// Program data goes into a partition only when every reader is in it.
// `adopt_untagged`: BY_CAPABILITY takes in untagged program data too.
void AdoptProgramData(Method& method, bool adopt_untagged) {
  bool any = false;
  for (const Node& node : method.nodes)
    any |= IsProgramDataNode(node) &&
           (adopt_untagged || !node.delegation_tag.empty());
  if (!any) return;
  std::vector<std::vector<Use>> uses = BuildUses(method);
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    Node& node = method.nodes[i];
    if (!IsProgramDataNode(node)) continue;
    if (!adopt_untagged && node.delegation_tag.empty()) continue;
    std::string tag;
    bool one_partition = !uses[i].empty();
    for (const Use& use : uses[i]) {
      const std::string& reader_tag = method.nodes[use.reader].delegation_tag;
      if (reader_tag.empty() || (!tag.empty() && reader_tag != tag)) {
        one_partition = false;
        break;
      }
      tag = reader_tag;
    }
    if (one_partition && (adopt_untagged || tag == node.delegation_tag))
      node.delegation_tag = tag;
    else
      node.delegation_tag.clear();
  }
}

// Every call whose result aliases storage that some node writes in place
// (in-place operators included): with none of them in a partition, no
// member aliases written storage, so CutAliases finds nothing.
void DemoteAliasesOfWrittenStorage(const Method& method,
                                   const StorageRoots& roots,
                                   std::vector<char>& demoted) {
  std::vector<char> written(method.nodes.size(), 0);
  for (size_t w = 0; w < method.nodes.size(); ++w)
    for (const ValueId& v : roots.WrittenBy(static_cast<int32_t>(w)))
      written[roots.RootOf(v).node] = 1;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    const Node& node = method.nodes[i];
    if (node.kind != NodeKind::kCall && node.kind != NodeKind::kGetItem)
      continue;
    const ValueId value{static_cast<int32_t>(i), -1};
    const ValueId root = roots.RootOf(value);
    if (root == value || !written[root.node]) continue;
    demoted[node.kind == NodeKind::kGetItem ? node.getitem_source
                                            : static_cast<int32_t>(i)] = 1;
  }
}

}  // namespace

absl::StatusOr<PassStats> Partition(Program& program,
                                    const LowerOptions& options,
                                    Diagnostics& diagnostics) {
  PassStats stats;
  int64_t partitions = 0;
  for (Method& method : program.methods) {
    diagnostics.SetMethod(method.name);
    bool any_tag = false;
    if (options.partitioner != LowerOptions::Partitioner::kNone)
      any_tag = ReportForeignSchemas(method, diagnostics);
    switch (options.partitioner) {
      case LowerOptions::Partitioner::kNone:
        for (Node& node : method.nodes) node.delegation_tag.clear();
        continue;
      case LowerOptions::Partitioner::kByCapability: {
        const OperatorFilter filter(
            options.backend_operators.For(
                PartitionBackend(options, options.partition_target)),
            &options.allow_operators, &options.deny_operators);
        const StorageRoots roots(method);
        // Aliases the partitions would cut stay on the host; grouping again
        // may cut others. After kMaxRegroupings, every alias of written
        // storage stays on the host, which cuts none.
        constexpr int kMaxRegroupings = 4;
        std::vector<char> demoted(method.nodes.size(), 0);
        for (int round = 0;; ++round) {
          TagByCapability(method, filter, roots, demoted);
          AdoptGetItems(method);
          DropPartitionsWithoutResults(method);
          if (round > kMaxRegroupings) break;  // after the fallback
          const std::vector<int32_t> cut = CutAliases(method, roots);
          if (cut.empty()) break;
          if (round == kMaxRegroupings)
            DemoteAliasesOfWrittenStorage(method, roots, demoted);
          else
            for (int32_t node : cut) demoted[node] = 1;
        }
        AdoptProgramData(method, /*adopt_untagged=*/true);
        break;
      }
      case LowerOptions::Partitioner::kByTag: {
        if (!any_tag) continue;
        StorageRoots roots(method);
        CheckTaggedNodes(method, roots, GroupsFromTags(method), options,
                         diagnostics);
        AdoptGetItems(method);
        for (int32_t cut : CutAliases(method, roots)) {
          const Node& node = method.nodes[cut];
          const std::string root =
              method.ValueName(roots.RootOf(ValueId{cut, -1}));
          diagnostics.Error(
              codes::kPartitionUnsupported,
              absl::StrCat(
                  "'", node.name, "' (", node.target.str(),
                  ") is an alias of '", root, "' that leaves partition '",
                  node.delegation_tag.str(), "', and '", root,
                  "' is written in place outside it afterwards: the delegate "
                  "would return a copy the write does not reach"),
              {node.name, root},
              "leave the view (or in-place operator) untagged: on the host "
              "it stays an alias");
        }
        AdoptProgramData(method, /*adopt_untagged=*/false);
        break;
      }
    }
    Groups groups = GroupsFromTags(method);
    if (groups.tags.empty()) continue;
    CheckConvex(method, groups, diagnostics);
    partitions += static_cast<int64_t>(groups.tags.size());
  }
  diagnostics.SetMethod("");
  stats.Add(kPartitionsCounter, partitions);
  return stats;
}

}  // namespace ferry
