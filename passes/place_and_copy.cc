// place_and_copy
//
// Model: a coherence walk. Each storage root is a cache line with a set of
// valid locations. Device delegates' results start valid on their device;
// method inputs and program data on the host (a skip_h2d input on the device
// of its first device-delegate reader); host results on the host. Walking
// the nodes in order, each reader needs its operand somewhere; if the
// storage is not valid there at its current version, a copy is made from a
// valid location, once, keyed by (value, version, destination). Writes only
// happen on the host (delegates never write their inputs), so the host copy
// of a storage, once made, stays valid; a host write bumps the version and
// so invalidates every device copy.
//
// The rewrites, before ==> after:
//
//   host reader of a device value      t = D0@cuda:0(a, b)[0]; s = sin(t)
//                                 ==>  ... t; t_to_cpu = _d2h_copy(t); s = sin(t_to_cpu)
//   device reader of a host value      u = D1@cuda:0(x)
//                                 ==>  x_to_cuda0 = _h2d_copy(x); u = D1(x_to_cuda0)
//   same-device reader                 u = D1@cuda:0(t)       (unchanged)
//   other device                       w = D2@cuda:1(t)
//                                 ==>  t_to_cpu (shared); t_to_cuda1 = _h2d_copy(t_to_cpu)
//   host write between device readers  relu_(t); u = D1@cuda:0(t)
//                                 ==>  relu_(t_to_cpu); t_to_cuda0_v1 = _h2d_copy(t_to_cpu); D1(t_to_cuda0_v1)
//   metadata-only reader               n = sym_size(t, 0)      (unchanged)
//
// Phases: (1) StripCopies removes the copies of an earlier run; (2)
// AssignHomes finds where each storage starts; (3) CoherenceWalk rewrites
// operands and creates copies; (4) Assemble lays the copies out (H2D before
// its first reader, D2H after its source) and labels every value's device.
#include "passes/place_and_copy.h"

#include <deque>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "passes/alias.h"
#include "passes/diagnostic_codes.h"
#include "passes/graph.h"
#include "passes/schema.h"

namespace ferry {

bool IsH2DCopy(const Node& node) {
  return node.kind == NodeKind::kCall && node.target == kH2DCopyOp;
}
bool IsD2HCopy(const Node& node) {
  return node.kind == NodeKind::kCall && node.target == kD2HCopyOp;
}

Device DelegateDevice(const Program& program, const Node& delegate) {
  return DelegateDevice(ProgramIndex(program), delegate);
}

Device DelegateDevice(const ProgramIndex& index, const Node& delegate) {
  const LoweredModule* module = index.FindModule(delegate.target);
  return module ? module->device() : Device::Cpu();
}

namespace {

std::string DeviceTag(Device d) {
  return d.is_host() ? "cpu" : absl::StrCat("cuda", d.index);
}

// Phase 1: readers of a copy read its source again; copies disappear.
void StripCopies(Method& method) {
  const int32_t n = static_cast<int32_t>(method.nodes.size());
  std::vector<ValueId> replacement(n);
  std::vector<int32_t> new_index(n, -1);
  bool any = false;
  for (int32_t i = 0; i < n; ++i) {
    replacement[i] = ValueId{i, -1};
    const Node& node = method.nodes[i];
    if ((IsH2DCopy(node) || IsD2HCopy(node)) && !node.args.empty() &&
        node.args[0].is_value()) {
      ValueId source = node.args[0].value;
      replacement[i] = source.element < 0 ? replacement[source.node] : source;
      any = true;
    }
  }
  if (!any) return;
  std::vector<Node> kept;
  kept.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    if (replacement[i].node != i || replacement[i].element >= 0) continue;
    new_index[i] = static_cast<int32_t>(kept.size());
    kept.push_back(std::move(method.nodes[i]));
  }
  for (Node& node : kept) {
    ForEachOperandMutable(node, [&](ValueId& v) {
      if (v.element < 0) v = replacement[v.node];
      v.node = new_index[v.node];
    });
  }
  method.nodes = std::move(kept);
}

struct Options {
  bool skip_h2d = false;
  bool skip_d2h = false;
  bool strict = false;
  bool at_load = false;
};

// Phases 2-4 for one method.
class CoherenceWalk {
 public:
  CoherenceWalk(const ProgramIndex& program, Method& method, Options options,
                Diagnostics& diagnostics)
      : program_(program),
        method_(method),
        options_(options),
        diagnostics_(diagnostics),
        roots_(method),
        n_(static_cast<int32_t>(method.nodes.size())),
        before_(n_),
        after_(n_) {
    names_.reserve(method.nodes.size());
    for (const Node& node : method.nodes) names_.insert(node.name);
  }

  int64_t Run() {
    AssignHomes();
    for (int32_t i = 0; i < n_; ++i) Visit(i);
    Assemble();
    return static_cast<int64_t>(copies_.size());
  }

 private:
  // --- Homes -----------------------------------------------------------------

  Device Home(ValueId root) const {
    auto it = home_.find(root);
    return it == home_.end() ? Device::Cpu() : it->second;
  }
  int32_t Version(ValueId root) const {
    auto it = version_.find(root);
    return it == version_.end() ? 0 : it->second;
  }

  // The value a read of `v` stands for: the storage root when `v` has the
  // root's layout (the root itself, a getitem, an in-place result), else the
  // view `v` itself.
  ValueId Canonical(ValueId v) const {
    ValueId root = roots_.RootOf(v);
    if (root == v) return root;
    const TensorSpec* a = method_.Spec(v);
    const TensorSpec* b = method_.Spec(root);
    if (a && b && a->SameLayout(*b)) return root;
    return v;
  }

  // Whether `v` itself is the device-resident original (not a host alias).
  bool IsDeviceResident(ValueId v) const {
    const Node& node = method_.nodes[v.node];
    return node.kind == NodeKind::kDelegate || node.kind == NodeKind::kGetItem ||
           node.kind == NodeKind::kInput;
  }

  void AssignHomes() {
    for (int32_t i = 0; i < n_; ++i) {
      const Node& node = method_.nodes[i];
      if (node.kind != NodeKind::kDelegate) continue;
      Device d = DelegateDevice(program_, node);
      if (d.is_host()) continue;
      if (node.result == ResultKind::kTensor) home_[ValueId{i, -1}] = d;
      for (int32_t e = 0; e < static_cast<int32_t>(node.tuple.size()); ++e)
        home_[ValueId{i, e}] = d;
      if (!options_.skip_h2d) continue;
      // skip_h2d: a user input lives on the device of its first
      // device-delegate reader.
      ForEachOperand(node, [&](const ValueId& v) {
        ValueId root = roots_.RootOf(v);
        if (Canonical(v) != root || root.element >= 0) return;
        const Node& input = method_.nodes[root.node];
        if (input.kind != NodeKind::kInput ||
            input.input_kind != InputKind::kUserInput)
          return;
        home_.try_emplace(root, d);
      });
    }
    // The first getitem of each tuple element names its device original.
    for (int32_t i = 0; i < n_; ++i) {
      const Node& node = method_.nodes[i];
      if (node.kind == NodeKind::kGetItem)
        origin_.try_emplace(roots_.RootOf(ValueId{i, -1}), ValueId{i, -1});
    }
  }

  bool IsDeviceInput(ValueId root) const {
    if (root.element >= 0 || Home(root).is_host()) return false;
    return method_.nodes[root.node].kind == NodeKind::kInput;
  }

  // --- Copies ----------------------------------------------------------------

  const TensorSpec& SpecOf(ValueId token) const {
    if (token.node < n_) return *method_.Spec(token);
    return copies_[token.node - n_].tensor;
  }
  std::string NameOf(ValueId token) const {
    if (token.node < n_) {
      const Node& node = method_.nodes[token.node];
      return token.element < 0 ? node.name
                               : absl::StrCat(node.name, "_", token.element);
    }
    return copies_[token.node - n_].name;
  }
  std::string UniqueName(std::string base) const {
    std::string name = base;
    for (int k = 1; names_.contains(name); ++k)
      name = absl::StrCat(base, "_", k);
    return name;
  }

  ValueId MakeCopy(std::string_view op, ValueId source, Device to,
                   std::string name) {
    Node copy;
    copy.kind = NodeKind::kCall;
    copy.target = std::string(op);
    copy.schema = LookupOp(op)->schema;
    copy.name = UniqueName(std::move(name));
    copy.args.push_back(Argument::Value(source));
    copy.result = ResultKind::kTensor;
    copy.tensor = SpecOf(source);
    copy.tensor.memory = MemoryPlacement{};
    copy.tensor.SetDevice(to);
    copies_.push_back(std::move(copy));
    names_.insert(copies_.back().name);  // the deque keeps it in place
    return ValueId{n_ + static_cast<int32_t>(copies_.size()) - 1, -1};
  }

  // The value to read for `v` on the host.
  ValueId HostValue(ValueId v) {
    if (!method_.Spec(v)) return v;  // scalars live nowhere in particular
    ValueId root = roots_.RootOf(v);
    if (Home(root).is_host() || Canonical(v) != root) return v;
    if (auto it = host_copy_.find(root); it != host_copy_.end())
      return it->second;
    ValueId source = IsDeviceResident(v) ? v : Origin(root);
    ValueId copy = MakeCopy(kD2HCopyOp, source, Device::Cpu(),
                            absl::StrCat(NameOf(source), "_to_cpu"));
    after_[source.node].push_back(copy.node);
    host_copy_[root] = copy;
    if (IsDeviceInput(root)) WarnSharedInputCopy(root);
    return copy;
  }

  ValueId Origin(ValueId root) const {
    auto it = origin_.find(root);
    return it == origin_.end() ? root : it->second;
  }

  // The value to read for `v` on device `d`, for reader `reader`.
  ValueId DeviceValue(ValueId v, Device d, int32_t reader) {
    if (!method_.Spec(v)) return v;
    ValueId root = roots_.RootOf(v);
    ValueId canonical = Canonical(v);
    const int32_t version = Version(root);
    if (canonical == root && Home(root) == d && version == 0)
      return IsDeviceResident(v) ? v : Origin(root);
    const CopyKey key{canonical, version, d};
    if (auto it = device_copy_.find(key); it != device_copy_.end())
      return it->second;
    const bool program_data = root.element < 0 &&
                              IsProgramDataNode(method_.nodes[root.node]);
    if (program_data && !CheckConstantLayout(root, reader)) {
      device_copy_[key] = v;
      return v;
    }
    ValueId source = HostValue(v);
    std::string name = absl::StrCat(NameOf(canonical == root ? Origin(root) : v),
                                    "_to_", DeviceTag(d));
    if (version > 0) absl::StrAppend(&name, "_v", version);
    ValueId copy = MakeCopy(kH2DCopyOp, source, d, std::move(name));
    before_[reader].push_back(copy.node);
    device_copy_[key] = copy;
    if (program_data) {
      if (options_.at_load && version == 0)
        copies_[copy.node - n_].at_load = true;
      else
        WarnConstantCopy(root, reader);
    }
    return copy;
  }

  // --- Checks and warnings ----------------------------------------------------

  bool CheckConstantLayout(ValueId root, int32_t reader) {
    const TensorSpec& spec = *method_.Spec(root);
    if (spec.IsContiguous() || spec.IsChannelsLast()) return true;
    if (refused_.insert(root).second) {
      const Node& node = method_.nodes[root.node];
      diagnostics_.Error(
          codes::kConstantLayoutRefused,
          absl::StrCat("'", node.name,
                       "' is neither contiguous nor channels-last, so its "
                       "per-call copy to the device of '",
                       method_.nodes[reader].name,
                       "' would be a raw copy of a layout the device code "
                       "does not expect; refused"),
          {node.name, method_.nodes[reader].name},
          "store the tensor contiguous, or let the partitioner take it into "
          "the delegate");
    }
    return false;
  }

  void WarnConstantCopy(ValueId root, int32_t reader) {
    if (!warned_.insert(root).second) return;
    const Node& node = method_.nodes[root.node];
    const bool error = options_.strict && options_.skip_h2d;
    diagnostics_.Add(
        error ? Severity::kError : Severity::kWarning,
        error ? codes::kPerCallConstantCopyError : codes::kPerCallConstantCopy,
        absl::StrCat("constant '", node.name, "' is read by device delegate '",
                     method_.nodes[reader].name,
                     "' and is copied to the device on every call"),
        {node.name, method_.nodes[reader].name},
        "let the partition take the constant in (the module then owns it), "
        "or use constant_staging=AT_LOAD");
  }

  void WarnSharedInputCopy(ValueId root) {
    if (!warned_.insert(root).second) return;
    const Node& node = method_.nodes[root.node];
    diagnostics_.Add(
        options_.strict ? Severity::kError : Severity::kWarning,
        options_.strict ? codes::kInputSharedD2HError : codes::kInputSharedD2H,
        absl::StrCat("input '", node.name, "' is supplied on ",
                     Home(root).ToString(),
                     " (skip_h2d_for_method_inputs) but is also read "
                     "elsewhere; it is copied back to the host on every call"),
        {node.name},
        "read the input only from delegates on its device, or do not skip "
        "its H2D copy");
  }

  // --- The walk ----------------------------------------------------------------

  void Visit(int32_t i) {
    Node& node = method_.nodes[i];
    switch (node.kind) {
      case NodeKind::kInput:
      case NodeKind::kConstant:
      case NodeKind::kGetItem:  // an alias of its tuple element
        return;
      case NodeKind::kCall:
        if (roots_.IsMetadataOnly(i)) return;
        ForEachOperandMutable(node, [&](ValueId& v) { v = HostValue(v); });
        for (const ValueId& written : roots_.WrittenBy(i)) Write(written, i);
        return;
      case NodeKind::kDelegate: {
        const Device d = DelegateDevice(program_, node);
        ForEachOperandMutable(node, [&](ValueId& v) {
          v = d.is_host() ? HostValue(v) : DeviceValue(v, d, i);
        });
        return;
      }
      case NodeKind::kOutput:
        ForEachOperandMutable(node, [&](ValueId& v) { v = OutputValue(v, i); });
        return;
    }
  }

  void Write(ValueId written, int32_t writer) {
    ValueId root = roots_.RootOf(written);
    if (IsDeviceInput(root)) {
      diagnostics_.Error(
          codes::kInputWrittenOnHost,
          absl::StrCat("input '", method_.nodes[root.node].name,
                       "' is supplied on ", Home(root).ToString(),
                       " (skip_h2d_for_method_inputs) but '",
                       method_.nodes[writer].name,
                       "' writes it in place on the host"),
          {method_.nodes[root.node].name, method_.nodes[writer].name},
          "do not skip the H2D copy of inputs that are written in place");
    }
    ++version_[root];
  }

  ValueId OutputValue(ValueId v, int32_t output) {
    if (!method_.Spec(v) || !options_.skip_d2h) return HostValue(v);
    ValueId root = roots_.RootOf(v);
    if (Home(root).is_host() || Canonical(v) != root) return HostValue(v);
    if (Version(root) == 0) return IsDeviceResident(v) ? v : Origin(root);
    // Written on the host: return the host copy, after the write.
    const std::string name = method_.ValueName(v);
    diagnostics_.Add(
        options_.strict ? Severity::kError : Severity::kWarning,
        options_.strict ? codes::kOutputFromHostError : codes::kOutputFromHost,
        absl::StrCat("output '", name,
                     "' is written in place on the host, so it is returned "
                     "from the host copy (copied back on every call) "
                     "although skip_d2h_for_method_outputs is set"),
        {name, method_.nodes[output].name},
        "write the value on the device (inside the delegate), or do not skip "
        "the output's D2H copy");
    return HostValue(v);
  }

  // --- Assembly -------------------------------------------------------------

  void Assemble() {
    // Devices of the original values.
    for (int32_t i = 0; i < n_; ++i) {
      Node& node = method_.nodes[i];
      if (node.result == ResultKind::kTensor)
        Label(node.tensor, ValueId{i, -1});
      for (int32_t e = 0; e < static_cast<int32_t>(node.tuple.size()); ++e)
        Label(node.tuple[e], ValueId{i, e});
    }
    if (copies_.empty()) return;
    std::vector<int32_t> final_index(n_ + copies_.size(), -1);
    int32_t next = 0;
    for (int32_t i = 0; i < n_; ++i) {
      for (int32_t c : before_[i]) final_index[c] = next++;
      final_index[i] = next++;
      for (int32_t c : after_[i]) final_index[c] = next++;
    }
    std::vector<Node> nodes(next);
    for (int32_t i = 0; i < n_; ++i)
      nodes[final_index[i]] = std::move(method_.nodes[i]);
    for (size_t c = 0; c < copies_.size(); ++c)
      nodes[final_index[n_ + c]] = std::move(copies_[c]);
    RenumberOperands(nodes, final_index);
    method_.nodes = std::move(nodes);
  }

  // Device values are labelled; host values keep whether they named a device.
  void Label(TensorSpec& spec, ValueId v) {
    ValueId root = roots_.RootOf(v);
    const Node& node = method_.nodes[v.node];
    bool on_device = !Home(root).is_host() &&
                     (node.kind == NodeKind::kDelegate ||
                      node.kind == NodeKind::kGetItem ||
                      node.kind == NodeKind::kInput);
    if (on_device) {
      spec.SetDevice(Home(root));
    } else {
      spec.device = Device::Cpu();
    }
  }

  const ProgramIndex& program_;
  Method& method_;
  const Options options_;
  Diagnostics& diagnostics_;
  const StorageRoots roots_;
  const int32_t n_;
  std::deque<Node> copies_;
  std::vector<std::vector<int32_t>> before_;
  std::vector<std::vector<int32_t>> after_;
  // Views of the node and copy names (both stay in place during the walk).
  absl::flat_hash_set<absl::string_view> names_;
  absl::flat_hash_map<ValueId, Device> home_;
  absl::flat_hash_map<ValueId, int32_t> version_;
  absl::flat_hash_map<ValueId, ValueId> origin_;
  absl::flat_hash_map<ValueId, ValueId> host_copy_;
  struct CopyKey {
    ValueId value;
    int32_t version;
    Device device;
    friend bool operator==(const CopyKey&, const CopyKey&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const CopyKey& k) {
      return H::combine(std::move(h), k.value, k.version,
                        static_cast<int>(k.device.type), k.device.index);
    }
  };
  absl::flat_hash_map<CopyKey, ValueId> device_copy_;
  absl::flat_hash_set<ValueId> warned_;
  absl::flat_hash_set<ValueId> refused_;
};

// Without device memory planning only delegate results are labelled.
void LabelOnly(const ProgramIndex& program, Method& method) {
  std::vector<Device> device_of(method.nodes.size(), Device::Cpu());
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    Node& node = method.nodes[i];
    if (node.kind == NodeKind::kDelegate) {
      device_of[i] = DelegateDevice(program, node);
      if (device_of[i].is_host()) continue;
      if (node.result == ResultKind::kTensor) node.tensor.SetDevice(device_of[i]);
      for (TensorSpec& s : node.tuple) s.SetDevice(device_of[i]);
    } else if (node.kind == NodeKind::kGetItem &&
               !device_of[node.getitem_source].is_host()) {
      node.tensor.SetDevice(device_of[node.getitem_source]);
    }
  }
}

}  // namespace

absl::StatusOr<PassStats> PlaceAndCopy(Program& program,
                                       const LowerOptions& options,
                                       Diagnostics& diagnostics) {
  PassStats stats;
  int64_t copies = 0;
  const ProgramIndex index(program);
  for (Method& method : program.methods) {
    diagnostics.SetMethod(method.name);
    StripCopies(method);
    if (!options.enable_non_cpu_memory_planning) {
      LabelOnly(index, method);
      continue;
    }
    Options o;
    o.skip_h2d = options.skip_h2d_for_method_inputs.For(method.name);
    o.skip_d2h = options.skip_d2h_for_method_outputs.For(method.name);
    o.strict = options.error_on_per_call_copies;
    o.at_load = options.constant_staging_at_load;
    copies += CoherenceWalk(index, method, o, diagnostics).Run();
  }
  diagnostics.SetMethod("");
  stats.Add("copies", copies);
  return stats;
}

}  // namespace ferry
