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
//   host reader of a device value
//       t = D0@cuda:0(a, b)[0]; s = sin(t)
//   ==> t = ...; t_to_cpu = _d2h_copy(t); s = sin(t_to_cpu)
//   device reader of a host value
//       u = D1@cuda:0(x)
//   ==> x_to_cuda0 = _h2d_copy(x); u = D1(x_to_cuda0)
//   same-device reader
//       u = D1@cuda:0(t)                              (unchanged)
//   other device
//       w = D2@cuda:1(t)
//   ==> t_to_cpu (shared); t_to_cuda1 = _h2d_copy(t_to_cpu); w = D2(...)
//   host write between device readers
//       relu_(t); u = D1@cuda:0(t)
//   ==> relu_(t_to_cpu); t_to_cuda0_v1 = _h2d_copy(t_to_cpu);
//       u = D1(t_to_cuda0_v1)
//   metadata-only reader
//       n = sym_size(t, 0)                            (unchanged)
//
// Phases, each a unit with one entry, state handed on explicitly:
// (1) StripCopies removes the copies of an earlier run; (2) AssignHomes
// finds where each storage starts: the Homes; (3) CoherenceWalk rewrites
// operands and creates copies: the Walked copies and where they go; the
// safety policy is stated there, where it is enforced; (4) Assemble labels
// every value's device and lays the copies out (H2D before its first
// reader, D2H after its source). Without device memory planning, LabelOnly
// replaces (2)-(4). In the walk, each predicate sits next to the rewrite it
// calls for: NeedsHostCopy / MakeHostCopy, NeedsDeviceCopy / MakeDeviceCopy,
// HasDeviceLayout / RefuseConstantCopy. The driver, PlaceAndCopy, is at the
// bottom.
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

// The value a read of `v` stands for: the storage root when `v` has the
// root's layout (the root itself, a getitem, an in-place result), else the
// view `v` itself.
ValueId Canonical(const Method& method, const StorageRoots& roots, ValueId v) {
  ValueId root = roots.RootOf(v);
  if (root == v) return root;
  const TensorSpec* a = method.Spec(v);
  const TensorSpec* b = method.Spec(root);
  if (a && b && a->SameLayout(*b)) return root;
  return v;
}

// Whether `v` itself can be the device-resident original of its storage (a
// delegate's result, a getitem of one, a skip_h2d input), not a host alias.
bool IsDeviceResident(const Method& method, ValueId v) {
  const Node& node = method.nodes[v.node];
  return node.kind == NodeKind::kDelegate || node.kind == NodeKind::kGetItem ||
         node.kind == NodeKind::kInput;
}

// Rewrites every operand of `node` to `fn(operand)`, stopping at the first
// internal error.
template <typename Fn>
absl::Status RewriteOperands(Node& node, Fn&& fn) {
  absl::Status status;
  ForEachOperandMutable(node, [&](ValueId& v) {
    if (!status.ok()) return;
    absl::StatusOr<ValueId> rewritten = fn(v);
    if (rewritten.ok())
      v = *rewritten;
    else
      status = rewritten.status();
  });
  return status;
}

// Phase 1: readers of a copy read its source again; copies disappear.
//
//   x_to_cuda0 = _h2d_copy(x); u = D1(x_to_cuda0)  ==>  u = D1(x)
absl::Status StripCopies(Method& method) {
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
      FERRY_RET_CHECK(source.node >= 0 && source.node < i);  // topological
      replacement[i] = source.element < 0 ? replacement[source.node] : source;
      any = true;
    }
  }
  if (!any) return absl::OkStatus();  // nothing to strip
  std::vector<Node> kept;
  kept.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    if (replacement[i].node != i || replacement[i].element >= 0) continue;
    new_index[i] = static_cast<int32_t>(kept.size());
    kept.push_back(std::move(method.nodes[i]));
  }
  bool kept_source = true;
  for (Node& node : kept) {
    ForEachOperandMutable(node, [&](ValueId& v) {
      if (v.element < 0) v = replacement[v.node];
      v.node = new_index[v.node];
      kept_source &= v.node >= 0;
    });
  }
  // A replacement is never a copy itself, so it was kept.
  FERRY_RET_CHECK(kept_source);
  method.nodes = std::move(kept);
  return absl::OkStatus();
}

// What phase 2 hands on: where each storage starts, and which getitem names
// each device tuple element.
struct Homes {
  absl::flat_hash_map<ValueId, Device> home;     // absent: the host
  absl::flat_hash_map<ValueId, ValueId> origin;  // absent: the root itself

  Device Of(ValueId root) const {
    auto it = home.find(root);
    return it == home.end() ? Device::Cpu() : it->second;
  }
  // The value that names `root` on its device: its first getitem.
  ValueId Origin(ValueId root) const {
    auto it = origin.find(root);
    return it == origin.end() ? root : it->second;
  }
};

struct WalkOptions {
  bool skip_h2d = false;
  bool skip_d2h = false;
  bool strict = false;  // error_on_per_call_copies
  bool at_load = false;
};

// Phase 2: device delegates' results start on their device; with skip_h2d,
// a user input starts on the device of its first device-delegate reader;
// everything else on the host.
//
//   t = D0@cuda:0(x)[0]        t: cuda:0, x: cpu  (skip_h2d: x: cuda:0)
class AssignHomes {
 public:
  AssignHomes(const ProgramIndex& program, const Method& method,
              const StorageRoots& roots, const WalkOptions& options)
      : program_(program), method_(method), roots_(roots), options_(options) {}

  Homes Run() {
    Homes homes;
    const int32_t n = static_cast<int32_t>(method_.nodes.size());
    for (int32_t i = 0; i < n; ++i) {
      const Node& node = method_.nodes[i];
      if (node.kind != NodeKind::kDelegate) continue;
      Device d = DelegateDevice(program_, node);
      if (d.is_host()) continue;  // a host delegate's results are host values
      if (node.result == ResultKind::kTensor) homes.home[ValueId{i, -1}] = d;
      for (int32_t e = 0; e < static_cast<int32_t>(node.tuple.size()); ++e)
        homes.home[ValueId{i, e}] = d;
      if (!options_.skip_h2d) continue;  // inputs start on the host
      ForEachOperand(node, [&](const ValueId& v) {
        ValueId root = roots_.RootOf(v);
        // Only a whole input read with its own layout is supplied on the
        // device; a view of it still needs the host input.
        if (Canonical(method_, roots_, v) != root || root.element >= 0) return;
        const Node& input = method_.nodes[root.node];
        // Program data and intermediate values are not supplied by the
        // caller.
        if (input.kind != NodeKind::kInput ||
            input.input_kind != InputKind::kUserInput)
          return;
        homes.home.try_emplace(root, d);  // the first reader wins
      });
    }
    for (int32_t i = 0; i < n; ++i) {
      const Node& node = method_.nodes[i];
      if (node.kind == NodeKind::kGetItem)
        homes.origin.try_emplace(roots_.RootOf(ValueId{i, -1}), ValueId{i, -1});
    }
    return homes;
  }

 private:
  const ProgramIndex& program_;
  const Method& method_;
  const StorageRoots& roots_;
  const WalkOptions& options_;
};

// What phase 3 hands to phase 4: the copies (numbered n + k, after the
// method's n nodes) and where each goes: before its reader (H2D) or after
// its source (D2H).
struct Walked {
  std::deque<Node> copies;  // a deque keeps names in place for names_
  std::vector<std::vector<int32_t>> before;  // per node: H2Ds before it
  std::vector<std::vector<int32_t>> after;   // per node: D2Hs after it
};

// Phase 3: the coherence walk. Rewrites every operand to the value to read
// where its reader runs, creating copies as needed.
//
// The safety policy, enforced here and only here: a copy is valid for
// (storage, version, destination). Delegates never write their inputs, so
// only host calls write, and they write the host copy: the host copy, once
// made, stays valid for every later host reader; a host write bumps the
// version, so the next device reader gets a fresh H2D made after the write.
// A copy is shared by every reader of that storage at that version on that
// device, and by no other. Program data stays host data: a device reader
// gets a copy (a per-call warning, or an AT_LOAD copy when nothing wrote it
// first), and a constant whose layout the device code does not expect is
// refused, not copied.
class CoherenceWalk {
 public:
  CoherenceWalk(const ProgramIndex& program, Method& method,
                const StorageRoots& roots, const Homes& homes,
                const WalkOptions& options, Diagnostics& diagnostics)
      : program_(program),
        method_(method),
        roots_(roots),
        homes_(homes),
        options_(options),
        diagnostics_(diagnostics),
        n_(static_cast<int32_t>(method.nodes.size())) {
    walked_.before.resize(n_);
    walked_.after.resize(n_);
    names_.reserve(method.nodes.size());
    for (const Node& node : method.nodes) names_.insert(node.name);
  }

  absl::StatusOr<Walked> Run() {
    for (int32_t i = 0; i < n_; ++i)
      if (absl::Status visited = Visit(i); !visited.ok()) return visited;
    return std::move(walked_);
  }

 private:
  int32_t Version(ValueId root) const {
    auto it = version_.find(root);
    return it == version_.end() ? 0 : it->second;
  }
  bool IsDeviceInput(ValueId root) const {
    if (root.element >= 0 || homes_.Of(root).is_host()) return false;
    return method_.nodes[root.node].kind == NodeKind::kInput;
  }
  // The device original standing for `v` where it lives: `v` itself, or the
  // getitem that names its storage.
  ValueId Resident(ValueId v, ValueId root) const {
    return IsDeviceResident(method_, v) ? v : homes_.Origin(root);
  }

  // --- Visiting readers
  // --------------------------------------------------------

  absl::Status Visit(int32_t i) {
    Node& node = method_.nodes[i];
    switch (node.kind) {
      case NodeKind::kInput:
      case NodeKind::kConstant:
        return absl::OkStatus();  // reads nothing
      case NodeKind::kGetItem:
        return absl::OkStatus();  // an alias of its tuple element, not a read
      case NodeKind::kCall: {
        // A metadata-only operator reads sizes, never data: it takes its
        // operand wherever it is.
        if (roots_.IsMetadataOnly(i)) return absl::OkStatus();
        if (absl::Status read =
                RewriteOperands(node, [&](ValueId v) { return HostValue(v); });
            !read.ok())
          return read;
        for (const ValueId& written : roots_.WrittenBy(i)) Write(written, i);
        return absl::OkStatus();
      }
      case NodeKind::kDelegate: {
        const Device d = DelegateDevice(program_, node);
        return RewriteOperands(node, [&](ValueId v) {
          return d.is_host() ? HostValue(v) : DeviceValue(v, d, i);
        });
      }
      case NodeKind::kOutput:
        return RewriteOperands(node,
                               [&](ValueId v) { return OutputValue(v, i); });
    }
    FERRY_RET_CHECK(false && "unknown node kind");
    return absl::OkStatus();
  }

  // The value to read for `v` on the host.
  absl::StatusOr<ValueId> HostValue(ValueId v) {
    if (!NeedsHostCopy(v)) return v;
    const ValueId root = roots_.RootOf(v);
    // Shared: the host copy of a storage stays valid (the policy above).
    if (auto it = host_copy_.find(root); it != host_copy_.end())
      return it->second;
    return MakeHostCopy(v, root);
  }

  // The value to read for `v` on device `d`, for reader `reader`.
  absl::StatusOr<ValueId> DeviceValue(ValueId v, Device d, int32_t reader) {
    if (!method_.Spec(v)) return v;  // a scalar lives nowhere in particular
    const ValueId root = roots_.RootOf(v);
    if (!NeedsDeviceCopy(v, d)) return Resident(v, root);
    const CopyKey key{Canonical(method_, roots_, v), Version(root), d};
    // Shared by every reader at this version on this device (the policy).
    if (auto it = device_copy_.find(key); it != device_copy_.end())
      return it->second;
    const bool program_data =
        root.element < 0 && IsProgramDataNode(method_.nodes[root.node]);
    if (program_data && !HasDeviceLayout(root)) {
      // Refused (an error): the reader keeps the host value, once per key.
      RefuseConstantCopy(root, reader);
      device_copy_[key] = v;
      return v;
    }
    absl::StatusOr<ValueId> copy = MakeDeviceCopy(v, d, reader);
    if (!copy.ok()) return copy.status();
    device_copy_[key] = *copy;
    return copy;
  }

  // The value an output returns for `v`: the host value, or with skip_d2h
  // the device original when nothing wrote it on the host.
  absl::StatusOr<ValueId> OutputValue(ValueId v, int32_t output) {
    if (!ReturnsDeviceOriginal(v)) return HostValue(v);
    const ValueId root = roots_.RootOf(v);
    if (Version(root) == 0) return Resident(v, root);
    // Written on the host: return the host copy, after the write.
    WarnOutputFromHost(v, output);
    return HostValue(v);
  }

  // --- Predicates and the rewrites they call for
  // -------------------------------

  // Whether a host reader of `v` needs a D2H copy.
  bool NeedsHostCopy(ValueId v) const {
    if (!method_.Spec(v)) return false;  // a scalar lives nowhere in particular
    const ValueId root = roots_.RootOf(v);
    if (homes_.Of(root).is_host()) return false;  // host storage: read in place
    // A view with a layout of its own is the result of a host call, which
    // read (and so aliases) the host copy of its storage.
    if (Canonical(method_, roots_, v) != root) return false;
    return true;
  }
  // t_to_cpu = _d2h_copy(t), right after t (or the getitem naming it).
  absl::StatusOr<ValueId> MakeHostCopy(ValueId v, ValueId root) {
    const ValueId source = Resident(v, root);
    absl::StatusOr<ValueId> copy =
        MakeCopy(kD2HCopyOp, source, Device::Cpu(),
                 absl::StrCat(NameOf(source), "_to_cpu"));
    if (!copy.ok()) return copy.status();
    FERRY_RET_CHECK(source.node >= 0 && source.node < n_);
    walked_.after[source.node].push_back(copy->node);
    host_copy_[root] = *copy;
    if (IsDeviceInput(root)) WarnSharedInputCopy(root);
    return copy;
  }

  // Whether a reader on device `d` needs an H2D copy of `v`: unless `v`
  // stands for its whole storage, which lives on `d` and no host call has
  // written since.
  bool NeedsDeviceCopy(ValueId v, Device d) const {
    const ValueId root = roots_.RootOf(v);
    return !(Canonical(method_, roots_, v) == root && homes_.Of(root) == d &&
             Version(root) == 0);
  }
  // x_to_cuda0 = _h2d_copy(x) (x_to_cuda0_v1 after a host write), right
  // before `reader`, from the host value of `v`.
  absl::StatusOr<ValueId> MakeDeviceCopy(ValueId v, Device d, int32_t reader) {
    const ValueId root = roots_.RootOf(v);
    const int32_t version = Version(root);
    absl::StatusOr<ValueId> source = HostValue(v);
    if (!source.ok()) return source.status();
    const bool whole = Canonical(method_, roots_, v) == root;
    std::string name = absl::StrCat(NameOf(whole ? homes_.Origin(root) : v),
                                    "_to_", DeviceTag(d));
    if (version > 0) absl::StrAppend(&name, "_v", version);
    absl::StatusOr<ValueId> copy =
        MakeCopy(kH2DCopyOp, *source, d, std::move(name));
    if (!copy.ok()) return copy.status();
    walked_.before[reader].push_back(copy->node);
    if (root.element < 0 && IsProgramDataNode(method_.nodes[root.node])) {
      if (options_.at_load && version == 0)
        walked_.copies[copy->node - n_].at_load = true;
      else
        WarnConstantCopy(root, reader);
    }
    return copy;
  }

  // Whether program data `root` may be copied to a device as it is: its
  // layout is one the device code expects.
  bool HasDeviceLayout(ValueId root) const {
    const TensorSpec* spec = method_.Spec(root);
    return spec != nullptr && (spec->IsContiguous() || spec->IsChannelsLast());
  }
  // The error when it may not (FERRY-E0805), once per constant.
  void RefuseConstantCopy(ValueId root, int32_t reader) {
    if (!refused_.insert(root).second) return;  // reported
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

  // Whether an output returns `v` where it lives (skip_d2h) rather than on
  // the host.
  bool ReturnsDeviceOriginal(ValueId v) const {
    if (!method_.Spec(v) || !options_.skip_d2h) return false;
    const ValueId root = roots_.RootOf(v);
    return !homes_.Of(root).is_host() && Canonical(method_, roots_, v) == root;
  }

  // --- Copies
  // ------------------------------------------------------------------

  const TensorSpec* SpecOf(ValueId token) const {
    if (token.node < n_) return method_.Spec(token);
    return &walked_.copies[token.node - n_].tensor;
  }
  std::string NameOf(ValueId token) const {
    if (token.node < n_) {
      const Node& node = method_.nodes[token.node];
      return token.element < 0 ? node.name
                               : absl::StrCat(node.name, "_", token.element);
    }
    return walked_.copies[token.node - n_].name;
  }
  std::string UniqueName(std::string base) const {
    std::string name = base;
    for (int k = 1; names_.contains(name); ++k)
      name = absl::StrCat(base, "_", k);
    return name;
  }

  absl::StatusOr<ValueId> MakeCopy(std::string_view op, ValueId source,
                                   Device to, std::string name) {
    const TensorSpec* spec = SpecOf(source);
    FERRY_RET_CHECK(spec != nullptr);  // callers copy tensors only
    const OpInfo* info = LookupOp(op);
    FERRY_RET_CHECK(info != nullptr);  // the copy operators are registered
    Node copy;
    copy.kind = NodeKind::kCall;
    copy.target = std::string(op);
    copy.schema = info->schema;
    copy.name = UniqueName(std::move(name));
    copy.args.push_back(Argument::Value(source));
    copy.result = ResultKind::kTensor;
    copy.tensor = *spec;
    copy.tensor.memory = MemoryPlacement{};
    copy.tensor.SetDevice(to);
    walked_.copies.push_back(std::move(copy));
    names_.insert(walked_.copies.back().name);  // the deque keeps it in place
    return ValueId{n_ + static_cast<int32_t>(walked_.copies.size()) - 1, -1};
  }

  // --- Writes and warnings
  // -----------------------------------------------------

  // A host write of `written` by `writer`: a new version of its storage.
  void Write(ValueId written, int32_t writer) {
    ValueId root = roots_.RootOf(written);
    if (IsDeviceInput(root)) {
      diagnostics_.Error(
          codes::kInputWrittenOnHost,
          absl::StrCat(
              "input '", method_.nodes[root.node].name, "' is supplied on ",
              homes_.Of(root).ToString(), " (skip_h2d_for_method_inputs) but '",
              method_.nodes[writer].name, "' writes it in place on the host"),
          {method_.nodes[root.node].name, method_.nodes[writer].name},
          "do not skip the H2D copy of inputs that are written in place");
    }
    ++version_[root];
  }

  void WarnConstantCopy(ValueId root, int32_t reader) {
    if (!warned_.insert(root).second) return;  // warned once
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
    if (!warned_.insert(root).second) return;  // warned once
    const Node& node = method_.nodes[root.node];
    diagnostics_.Add(
        options_.strict ? Severity::kError : Severity::kWarning,
        options_.strict ? codes::kInputSharedD2HError : codes::kInputSharedD2H,
        absl::StrCat("input '", node.name, "' is supplied on ",
                     homes_.Of(root).ToString(),
                     " (skip_h2d_for_method_inputs) but is also read "
                     "elsewhere; it is copied back to the host on every call"),
        {node.name},
        "read the input only from delegates on its device, or do not skip "
        "its H2D copy");
  }

  void WarnOutputFromHost(ValueId v, int32_t output) {
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
  }

  const ProgramIndex& program_;
  Method& method_;
  const StorageRoots& roots_;
  const Homes& homes_;
  const WalkOptions& options_;
  Diagnostics& diagnostics_;
  const int32_t n_;
  Walked walked_;
  // Views of the node and copy names (both stay in place during the walk).
  absl::flat_hash_set<absl::string_view> names_;
  absl::flat_hash_map<ValueId, int32_t> version_;
  absl::flat_hash_map<ValueId, ValueId> host_copy_;
  struct CopyKey {
    ValueId value;  // the canonical value
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

// Phase 4: every value's device on its spec, then the copies laid out: each
// H2D right before its reader, each D2H right after its source.
//
//   nodes [x, D1, ...], copies [x_to_cuda0 before D1]
//   ==> [x, x_to_cuda0, D1, ...]; D1's results labelled cuda:0
class Assemble {
 public:
  Assemble(Method& method, const StorageRoots& roots, const Homes& homes)
      : method_(method), roots_(roots), homes_(homes) {}

  absl::Status Run(Walked walked) {
    const int32_t n = static_cast<int32_t>(method_.nodes.size());
    for (int32_t i = 0; i < n; ++i) {
      Node& node = method_.nodes[i];
      if (node.result == ResultKind::kTensor)
        Label(node.tensor, ValueId{i, -1});
      for (int32_t e = 0; e < static_cast<int32_t>(node.tuple.size()); ++e)
        Label(node.tuple[e], ValueId{i, e});
    }
    if (walked.copies.empty()) return absl::OkStatus();  // nothing to lay out
    FERRY_RET_CHECK(static_cast<int32_t>(walked.before.size()) == n &&
                    static_cast<int32_t>(walked.after.size()) == n);
    std::vector<int32_t> final_index(n + walked.copies.size(), -1);
    int32_t next = 0;
    for (int32_t i = 0; i < n; ++i) {
      for (int32_t c : walked.before[i]) final_index[c] = next++;
      final_index[i] = next++;
      for (int32_t c : walked.after[i]) final_index[c] = next++;
    }
    // Every copy has exactly one place.
    FERRY_RET_CHECK(next == static_cast<int32_t>(final_index.size()));
    std::vector<Node> nodes(next);
    for (int32_t i = 0; i < n; ++i)
      nodes[final_index[i]] = std::move(method_.nodes[i]);
    for (size_t c = 0; c < walked.copies.size(); ++c)
      nodes[final_index[n + c]] = std::move(walked.copies[c]);
    RenumberOperands(nodes, final_index);
    method_.nodes = std::move(nodes);
    return absl::OkStatus();
  }

 private:
  // Device values are labelled; host values keep whether they named a device.
  void Label(TensorSpec& spec, ValueId v) {
    const Device home = homes_.Of(roots_.RootOf(v));
    if (!home.is_host() && IsDeviceResident(method_, v))
      spec.SetDevice(home);
    else
      spec.device = Device::Cpu();
  }

  Method& method_;
  const StorageRoots& roots_;
  const Homes& homes_;
};

// Without device memory planning there are no copies: only delegate results
// (and their getitems) are labelled with their device.
absl::Status LabelOnly(const ProgramIndex& program, Method& method) {
  std::vector<Device> device_of(method.nodes.size(), Device::Cpu());
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    Node& node = method.nodes[i];
    if (node.kind == NodeKind::kDelegate) {
      device_of[i] = DelegateDevice(program, node);
      if (device_of[i].is_host()) continue;  // host values stay unlabelled
      if (node.result == ResultKind::kTensor)
        node.tensor.SetDevice(device_of[i]);
      for (TensorSpec& s : node.tuple) s.SetDevice(device_of[i]);
    } else if (node.kind == NodeKind::kGetItem) {
      FERRY_RET_CHECK(node.getitem_source >= 0 &&
                      node.getitem_source < static_cast<int32_t>(i));
      if (!device_of[node.getitem_source].is_host())
        node.tensor.SetDevice(device_of[node.getitem_source]);
    }
  }
  return absl::OkStatus();
}

// Phases 2-4 for one method.
absl::StatusOr<int64_t> PlaceMethod(const ProgramIndex& index, Method& method,
                                    const WalkOptions& options,
                                    Diagnostics& diagnostics) {
  const StorageRoots roots(method);
  const Homes homes = AssignHomes(index, method, roots, options).Run();
  absl::StatusOr<Walked> walked =
      CoherenceWalk(index, method, roots, homes, options, diagnostics).Run();
  if (!walked.ok()) return walked.status();
  const int64_t copies = static_cast<int64_t>(walked->copies.size());
  if (absl::Status assembled =
          Assemble(method, roots, homes).Run(*std::move(walked));
      !assembled.ok())
    return assembled;
  return copies;
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
    if (absl::Status stripped = StripCopies(method); !stripped.ok())
      return stripped;
    if (!options.enable_non_cpu_memory_planning) {
      if (absl::Status labelled = LabelOnly(index, method); !labelled.ok())
        return labelled;
      continue;
    }
    WalkOptions o;
    o.skip_h2d = options.skip_h2d_for_method_inputs.For(method.name);
    o.skip_d2h = options.skip_d2h_for_method_outputs.For(method.name);
    o.strict = options.error_on_per_call_copies;
    o.at_load = options.constant_staging_at_load;
    absl::StatusOr<int64_t> placed = PlaceMethod(index, method, o, diagnostics);
    if (!placed.ok()) return placed.status();
    copies += *placed;
  }
  diagnostics.SetMethod("");
  stats.Add("copies", copies);
  return stats;
}

}  // namespace ferry
