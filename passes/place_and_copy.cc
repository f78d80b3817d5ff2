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
// finds where each storage starts, in the walk that finds the storage roots
// (which also shows whether (1) is needed): the Homes; (3) CoherenceWalk
// decides what each operand reads and records the copies to make: the
// Walked operands, copies and where they go; the safety policy is stated
// there, where it is enforced. Without skip_h2d, (3) is made in (2)'s walk,
// node by node. (4) Assemble labels every value's device and builds the
// placed node list in one walk, each node moved once with its operands set
// to what (3) read, and each copy made in its place (H2D before its first
// reader, D2H after its source). Without device memory planning, LabelOnly
// replaces (2)-(4).
//
// Cost: linear in the nodes. The walk's state is per value, in arrays
// indexed by ValueSlots (graph.h), not in maps; a copy is a small record
// until Assemble makes its node. In the walk, each predicate sits next to the
// rewrite it calls for: NeedsHostCopy / MakeHostCopy, NeedsDeviceCopy /
// MakeDeviceCopy, HasDeviceLayout / RefuseConstantCopy. The driver,
// PlaceAndCopy, is at the bottom.
#include "passes/place_and_copy.h"

#include <algorithm>
#include <charconv>
#include <deque>
#include <iterator>
#include <memory>
#include <string_view>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "passes/alias.h"
#include "passes/diagnostic_codes.h"
#include "passes/graph.h"
#include "passes/schema.h"

namespace ferry {

Device DelegateDevice(const Program& program, const Node& delegate) {
  return DelegateDevice(ProgramIndex(program), delegate);
}

Device DelegateDevice(const ProgramIndex& index, const Node& delegate) {
  const LoweredModule* module = index.FindModule(delegate.target);
  return module ? module->device() : Device::Cpu();
}

namespace {

// Every copy name contains this, so only names containing it can collide
// with one.
constexpr char kCopyInfix[] = "_to_";

// A decimal number, written where `out` points, which has room for it;
// returns the end.
char* WriteDecimal(int64_t value, char* out, char* end) {
  return std::to_chars(out, end, value).ptr;
}

// The suffix of a copy's name: "_to_cpu", "_to_cuda<index>", and
// "_v<version>" after host writes. Written into a buffer, so that the whole
// name is sized once (copies are many: one allocation each, no more).
class CopySuffix {
 public:
  CopySuffix(Device d, int32_t version) {
    char* out = buffer_;
    char* const end = buffer_ + sizeof(buffer_);
    out = std::copy_n(kCopyInfix, sizeof(kCopyInfix) - 1, out);
    if (d.is_host()) {
      out = std::copy_n("cpu", 3, out);
    } else {
      out = std::copy_n("cuda", 4, out);
      out = WriteDecimal(d.index, out, end);
    }
    if (version > 0) {
      out = std::copy_n("_v", 2, out);
      out = WriteDecimal(version, out, end);
    }
    size_ = out - buffer_;
  }
  std::string_view view() const { return {buffer_, size_}; }

 private:
  // "_to_cuda" and "_v", and two numbers of at most 20 digits and a sign.
  char buffer_[64];
  size_t size_ = 0;
};

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

// Phase 1: readers of a copy read its source again; copies disappear.
//
//   x_to_cuda0 = _h2d_copy(x); u = D1(x_to_cuda0)  ==>  u = D1(x)
absl::Status StripCopies(Method& method) {
  const int32_t n = static_cast<int32_t>(method.nodes.size());
  bool any = false;
  for (const Node& node : method.nodes)
    any |= IsH2DCopy(node) || IsD2HCopy(node);
  if (!any) return absl::OkStatus();  // nothing to strip
  std::vector<ValueId> replacement(n);
  std::vector<int32_t> new_index(n, -1);
  any = false;
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
  ReserveNodes(kept, n);
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

// What phase 2 hands on: where each storage starts, which getitem names
// each device tuple element (per value slot, ValueSlots, of the method), and
// where each delegate runs.
struct Homes {
  Homes(const ValueSlots& value_slots, size_t nodes)
      : slots(value_slots), runs_on(nodes, Device::Cpu()) {
    home.reserve(2 * nodes);
    origin.reserve(2 * nodes);
  }

  const ValueSlots& slots;
  std::vector<Device> home;     // per slot: the host unless set
  std::vector<ValueId> origin;  // per slot: invalid means the root itself
  std::vector<Device> runs_on;  // per node: where a delegate runs

  Device Of(ValueId root) const { return home[slots.Of(root)]; }
  // The value that names `root` on its device: its first getitem.
  ValueId Origin(ValueId root) const {
    const ValueId o = origin[slots.Of(root)];
    return o.valid() ? o : root;
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
// everything else on the host. Made node by node in the walk that finds the
// storage roots (StorageRoots' visit), which is also where a method lowered
// before shows its copies (phase 1 is then made, and the walk again).
//
//   t = D0@cuda:0(x)[0]        t: cuda:0, x: cpu  (skip_h2d: x: cuda:0)
class AssignHomes {
 public:
  AssignHomes(const ProgramIndex& program, const Method& method,
              const ValueSlots& slots, const WalkOptions& options)
      : program_(program),
        method_(method),
        slots_(slots),
        options_(options),
        homes_(slots, method.nodes.size()) {}

  // Node i, with `roots` known up to it.
  void Visit(const StorageRoots& roots, int32_t i) {
    // Node i's values, numbered by the walk: host values unless set below.
    slots_.Cover(homes_.home, Device::Cpu());
    slots_.Cover(homes_.origin, ValueId{});
    const Node& node = method_.nodes[i];
    if (node.kind == NodeKind::kGetItem) {
      ValueId& origin = homes_.origin[slots_.Of(roots.RootOf(ValueId{i, -1}))];
      if (!origin.valid()) origin = ValueId{i, -1};  // the first getitem
      return;
    }
    has_copies_ |= IsH2DCopy(node) || IsD2HCopy(node);
    if (node.kind != NodeKind::kDelegate) return;
    const Device d = homes_.runs_on[i] = DelegateDevice(program_, node);
    if (d.is_host()) return;  // a host delegate's results are host values
    if (node.result == ResultKind::kTensor)
      homes_.home[slots_.Of(ValueId{i, -1})] = d;
    for (int32_t e = 0; e < static_cast<int32_t>(node.tuple.size()); ++e)
      homes_.home[slots_.Of(ValueId{i, e})] = d;
    if (!options_.skip_h2d) return;  // inputs start on the host
    ForEachOperand(node, [&](const ValueId& v) {
      ValueId root = roots.RootOf(v);
      // Only a whole input read with its own layout is supplied on the
      // device; a view of it still needs the host input.
      if (Canonical(method_, roots, v) != root || root.element >= 0) return;
      const Node& input = method_.nodes[root.node];
      // Program data and intermediate values are not supplied by the
      // caller.
      if (input.kind != NodeKind::kInput ||
          input.input_kind != InputKind::kUserInput)
        return;
      // The first reader wins (d is a device, so a set home is not the
      // host).
      Device& home = homes_.home[slots_.Of(root)];
      if (home.is_host()) home = d;
    });
  }

  // Whether the method has copies of an earlier run.
  bool has_copies() const { return has_copies_; }
  // The homes of the values of the nodes visited so far.
  const Homes& homes() const { return homes_; }

 private:
  const ProgramIndex& program_;
  const Method& method_;
  const ValueSlots& slots_;
  const WalkOptions& options_;
  Homes homes_;
  bool has_copies_ = false;
};

// A copy the walk decided on, made into a node by phase 4. Copies are
// numbered n + k after the method's n nodes ("tokens"); `source` is a token.
struct PlannedCopy {
  bool to_host = false;  // a D2H (else an H2D)
  ValueId source;
  Device to;
  bool at_load = false;
  // An H2D goes right before this node (its reader), a D2H right after it
  // (its source's node).
  int32_t anchor = -1;
};

// What phase 3 hands to phase 4: the copies, in the order they were made,
// and every operand of every node as it is to be read, in node order (as
// ForEachOperand lists them): the walk records its rewrites here rather than
// in the nodes, which phase 4 renumbers anyway, so a walk stopped part way
// (a method with copies of an earlier run: PlaceMethod) has changed nothing.
struct Walked {
  std::vector<ValueId> operands;  // tokens
  bool rewrote = false;           // whether an operand differs from the node's
  std::vector<PlannedCopy> copies;
  // names[k]: copy k's name (a deque: names stay in place, so the walk's
  // set of taken names can refer to them).
  std::deque<std::string> names;
};

// What the pass leaves in a method, counted as it is made: the figures of
// the lowering's statistics (LowerStats, pipeline.h), which would otherwise
// take one more walk over every node of the lowered program.
struct Tally {
  int64_t h2d = 0;      // per call
  int64_t d2h = 0;      // per call
  int64_t at_load = 0;  // H2Ds made at load
  int64_t h2d_bytes = 0;
  int64_t d2h_bytes = 0;
  // Delegates per device, in the order met (a program has a few devices and
  // many delegates: the last one met is tried first).
  std::vector<std::pair<Device, int64_t>> delegates;

  void Copy(bool to_host, bool at_load_copy, const TensorSpec& spec) {
    const int64_t bytes = spec.StorageBytes().value_or(0);
    if (to_host) {
      ++d2h;
      d2h_bytes += bytes;
    } else if (at_load_copy) {
      ++at_load;
    } else {
      ++h2d;
      h2d_bytes += bytes;
    }
  }
  void Delegate(Device d) {
    if (delegates.empty() || delegates.back().first != d) {
      auto met = std::find_if(delegates.begin(), delegates.end(),
                              [&](const auto& e) { return e.first == d; });
      if (met == delegates.end())
        delegates.emplace_back(d, 0);
      else
        std::iter_swap(met, delegates.end() - 1);
    }
    ++delegates.back().second;
  }
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
  // `homes` may still be in the making (AssignHomes), as long as each node's
  // operands have theirs when it is visited.
  CoherenceWalk(const Method& method, const ValueSlots& slots,
                const Homes& homes, const WalkOptions& options,
                Diagnostics& diagnostics)
      : method_(method),
        slots_(slots),
        homes_(homes),
        options_(options),
        diagnostics_(diagnostics),
        n_(static_cast<int32_t>(method.nodes.size())) {
    // Room for a copy per node, a few values and operands per node: more
    // than most methods need (a large vector's untouched room is address
    // space only), so that the lists rarely grow and move.
    walked_.copies.reserve(n_);
    walked_.operands.reserve(2 * n_);
    device_copies_.reserve(n_);
    version_.reserve(2 * n_);
    host_copy_.reserve(2 * n_);
    first_device_copy_.reserve(2 * n_);
    whole_.reserve(2 * n_);
  }

  // Node i, the next, with `roots` known up to it (StorageRoots' visit, or
  // a walk of its own once the roots are known).
  absl::Status Visit(const StorageRoots& roots, int32_t i) {
    roots_ = &roots;
    // Node i's values, numbered by the walk that finds the roots: not
    // written, copied or sized up yet.
    slots_.Cover(version_, 0);
    slots_.Cover(host_copy_, ValueId{});
    slots_.Cover(first_device_copy_, -1);
    slots_.Cover(whole_, int8_t{-1});
    PrefetchOperands(method_.nodes, i + kOperandsAhead);
    NoteTakenNames(i + 1);  // while the node is at hand
    return VisitNode(i);
  }

  // The walk's result, once every node has been visited.
  Walked Finish() && {
    ResolveNames();
    return std::move(walked_);
  }

 private:
  int32_t Version(ValueId root) const { return version_[slots_.Of(root)]; }
  bool IsDeviceInput(ValueId root) const {
    if (root.element >= 0 || homes_.Of(root).is_host()) return false;
    return method_.nodes[root.node].kind == NodeKind::kInput;
  }
  // Whether a read of `v` (whose root is `root`) stands for its whole
  // storage: Canonical(v) is the root. The walk asks it several times per
  // operand, so it is worked out once per value.
  bool IsWhole(ValueId v, ValueId root) const {
    if (v == root) return true;
    int8_t& whole = whole_[slots_.Of(v)];
    if (whole < 0) whole = Canonical(method_, *roots_, v) == root;
    return whole;
  }
  // The device original standing for `v` where it lives: `v` itself, or the
  // getitem that names its storage.
  ValueId Resident(ValueId v, ValueId root) const {
    return IsDeviceResident(method_, v) ? v : homes_.Origin(root);
  }

  // --- Visiting readers
  // --------------------------------------------------------

  absl::Status VisitNode(int32_t i) {
    const Node& node = method_.nodes[i];
    switch (node.kind) {
      case NodeKind::kInput:
      case NodeKind::kConstant:
        return Read(node, Kept);  // reads nothing
      case NodeKind::kGetItem:
        return Read(node, Kept);  // an alias of its tuple element, not a read
      case NodeKind::kCall: {
        // A metadata-only operator reads sizes, never data: it takes its
        // operand wherever it is.
        if (roots_->IsMetadataOnly(i)) return Read(node, Kept);
        if (absl::Status read =
                Read(node, [&](ValueId v) { return HostValue(v); });
            !read.ok())
          return read;
        for (const ValueId& written : roots_->WrittenBy(i)) Write(written, i);
        return absl::OkStatus();
      }
      case NodeKind::kDelegate: {
        const Device d = homes_.runs_on[i];
        return Read(node, [&](ValueId v) {
          return d.is_host() ? HostValue(v) : DeviceValue(v, d, i);
        });
      }
      case NodeKind::kOutput:
        return Read(node, [&](ValueId v) { return OutputValue(v, i); });
    }
    FERRY_RET_CHECK(false && "unknown node kind");
    return absl::OkStatus();
  }

  // Records every operand of `node` as `fn(operand)` reads it, stopping at
  // the first internal error.
  template <typename Fn>
  absl::Status Read(const Node& node, Fn&& fn) {
    absl::Status status;
    ForEachOperand(node, [&](const ValueId& v) {
      if (!status.ok()) return;
      absl::StatusOr<ValueId> read = fn(v);
      if (!read.ok()) {
        status = read.status();
        return;
      }
      walked_.operands.push_back(*read);
      walked_.rewrote |= *read != v;
    });
    return status;
  }
  // An operand read as it is.
  static absl::StatusOr<ValueId> Kept(ValueId v) { return v; }

  // The value to read for `v` on the host.
  absl::StatusOr<ValueId> HostValue(ValueId v) {
    if (!NeedsHostCopy(v)) return v;
    const ValueId root = roots_->RootOf(v);
    // Shared: the host copy of a storage stays valid (the policy above).
    if (const ValueId shared = host_copy_[slots_.Of(root)]; shared.valid())
      return shared;
    return MakeHostCopy(v, root);
  }

  // The value to read for `v` on device `d`, for reader `reader`.
  absl::StatusOr<ValueId> DeviceValue(ValueId v, Device d, int32_t reader) {
    if (!method_.Spec(v)) return v;  // a scalar lives nowhere in particular
    const ValueId root = roots_->RootOf(v);
    if (!NeedsDeviceCopy(v, d)) return Resident(v, root);
    const ValueId canonical = IsWhole(v, root) ? root : v;
    const int32_t version = Version(root);
    // Shared by every reader at this version on this device (the policy).
    if (const ValueId* shared = FindDeviceCopy(canonical, version, d))
      return *shared;
    const bool program_data =
        root.element < 0 && IsProgramDataNode(method_.nodes[root.node]);
    if (program_data && !HasDeviceLayout(root)) {
      // Refused (an error): the reader keeps the host value, once per key.
      RefuseConstantCopy(root, reader);
      AddDeviceCopy(canonical, version, d, v);
      return v;
    }
    absl::StatusOr<ValueId> copy = MakeDeviceCopy(v, d, reader);
    if (!copy.ok()) return copy.status();
    AddDeviceCopy(canonical, version, d, *copy);
    return copy;
  }

  // The value an output returns for `v`: the host value, or with skip_d2h
  // the device original when nothing wrote it on the host.
  absl::StatusOr<ValueId> OutputValue(ValueId v, int32_t output) {
    if (!ReturnsDeviceOriginal(v)) return HostValue(v);
    const ValueId root = roots_->RootOf(v);
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
    const ValueId root = roots_->RootOf(v);
    if (homes_.Of(root).is_host()) return false;  // host storage: read in place
    // A view with a layout of its own is the result of a host call, which
    // read (and so aliases) the host copy of its storage.
    return IsWhole(v, root);
  }
  // t_to_cpu = _d2h_copy(t), right after t (or the getitem naming it).
  absl::StatusOr<ValueId> MakeHostCopy(ValueId v, ValueId root) {
    const ValueId source = Resident(v, root);
    FERRY_RET_CHECK(source.node >= 0 && source.node < n_);
    absl::StatusOr<ValueId> copy =
        MakeCopy(/*to_host=*/true, source, Device::Cpu(),
                 CopyName(source, /*view=*/false, CopySuffix(Device::Cpu(), 0)),
                 /*anchor=*/source.node);
    if (!copy.ok()) return copy.status();
    host_copy_[slots_.Of(root)] = *copy;
    if (IsDeviceInput(root)) WarnSharedInputCopy(root);
    return copy;
  }

  // Whether a reader on device `d` needs an H2D copy of `v`: unless `v`
  // stands for its whole storage, which lives on `d` and no host call has
  // written since.
  bool NeedsDeviceCopy(ValueId v, Device d) const {
    const ValueId root = roots_->RootOf(v);
    return !(IsWhole(v, root) && homes_.Of(root) == d && Version(root) == 0);
  }
  // x_to_cuda0 = _h2d_copy(x) (x_to_cuda0_v1 after a host write), right
  // before `reader`, from the host value of `v`.
  absl::StatusOr<ValueId> MakeDeviceCopy(ValueId v, Device d, int32_t reader) {
    const ValueId root = roots_->RootOf(v);
    const int32_t version = Version(root);
    absl::StatusOr<ValueId> source = HostValue(v);
    if (!source.ok()) return source.status();
    const bool whole = IsWhole(v, root);
    absl::StatusOr<ValueId> copy = MakeCopy(
        /*to_host=*/false, *source, d,
        CopyName(whole ? homes_.Origin(root) : v, /*view=*/!whole,
                 CopySuffix(d, version)),
        reader);
    if (!copy.ok()) return copy.status();
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
    const ValueId root = roots_->RootOf(v);
    return !homes_.Of(root).is_host() && IsWhole(v, root);
  }

  // --- Copies
  // ------------------------------------------------------------------

  // The spec of `token`: a copy has its (original) source's.
  const TensorSpec* SpecOf(ValueId token) const {
    while (token.node >= n_) token = walked_.copies[token.node - n_].source;
    return method_.Spec(token);
  }
  // The name of a copy of `token` before it is made unique: the name of
  // `token` (a node's, "node_e" for element e, or a copy's, made unique
  // first), then `suffix`. Sized once. `view`: `token` is read with a
  // layout other than its storage's.
  std::string CopyName(ValueId token, bool view, const CopySuffix& suffix) {
    NameCopyAfter(token, view);
    std::string_view base;
    char element[24];
    size_t element_size = 0;
    if (token.node >= n_) {
      ResolveNames();
      base = walked_.names[token.node - n_];
    } else {
      base = method_.nodes[token.node].name;
      if (token.element >= 0) {
        element[0] = '_';
        element_size =
            WriteDecimal(token.element, element + 1, std::end(element)) -
            element;
      }
    }
    std::string name;
    name.reserve(base.size() + element_size + suffix.view().size());
    name.append(base).append(element, element_size).append(suffix.view());
    return name;
  }
  // Makes the names of the copies made since the last call unique, in the
  // order made: each keeps its base name, or gets base_1, base_2, ... when a
  // node or an earlier copy has it. The walk leaves this until it ends (or
  // until it needs a copy's final name): the set of taken names is large and
  // is probed at random, and inserts in a row, each fetched ahead, wait far
  // less on memory than one insert between every two copies' other work.
  //
  // Usually no name can be taken, and the set is not needed: when no node's
  // name contains kCopyInfix and every copy is named after a node that names
  // one storage (NameCopyAfter). A copy's name is then its node's name,
  // which has no kCopyInfix, then a suffix whose last kCopyInfix is its
  // first: so two equal copy names would mean one node, one device and one
  // version, which the walk gives one copy (node names are unique in a
  // method: import refuses duplicates, and the passes that add nodes keep
  // them so). No node's name can equal a copy's, which has kCopyInfix.
  void ResolveNames() {
    constexpr size_t kAhead = 8;
    NoteTakenNames(n_);
    const size_t made = walked_.names.size();
    if (names_.empty() && !names_may_collide_) {
      resolved_names_ = made;  // each keeps its base name
      return;
    }
    // The copies named without the set (on an earlier call) are unique:
    // they take their places in it first.
    for (; in_set_ < resolved_names_; ++in_set_)
      names_.insert(walked_.names[in_set_]);
    names_.reserve(names_.size() + (made - resolved_names_));
    for (size_t c = resolved_names_; c < made; ++c) {
      if (c + kAhead < made) names_.prefetch(walked_.names[c + kAhead]);
      // One hash per name that is free (the usual case); the set refers to
      // the kept string.
      std::string& name = walked_.names[c];
      if (names_.insert(name).second) continue;
      const size_t base_size = name.size();
      for (int k = 1;; ++k) {
        name.resize(base_size);
        absl::StrAppend(&name, "_", k);
        if (names_.insert(name).second) break;
      }
    }
    resolved_names_ = in_set_ = made;
  }

  // Notes that a copy is named after `token`: a copy whose name could equal
  // another copy's without a node's name containing kCopyInfix turns the set
  // of taken names on (ResolveNames). That is a copy named after a tuple
  // element ("node_e" can be a node's name), after another copy, or after a
  // getitem read with a layout of its own (`view`): the getitem can also be
  // the name of its whole storage (Homes::Origin), which gets copies of its
  // own.
  void NameCopyAfter(ValueId token, bool view) {
    if (token.node >= n_ || token.element >= 0 ||
        (view && method_.nodes[token.node].kind == NodeKind::kGetItem))
      names_may_collide_ = true;
  }

  // Adds the names of nodes [noted_names_, end) that a copy's could equal:
  // those containing kCopyInfix, as every copy's does.
  void NoteTakenNames(int32_t end) {
    for (; noted_names_ < end; ++noted_names_) {
      const std::string& name = method_.nodes[noted_names_].name;
      if (name.find(kCopyInfix) != std::string::npos) names_.insert(name);
    }
  }

  absl::StatusOr<ValueId> MakeCopy(bool to_host, ValueId source, Device to,
                                   std::string name, int32_t anchor) {
    // Callers copy tensors only.
    FERRY_RET_CHECK(SpecOf(source) != nullptr);
    PlannedCopy& copy = walked_.copies.emplace_back();
    copy.to_host = to_host;
    copy.source = source;
    copy.to = to;
    walked_.names.push_back(std::move(name));  // made unique later
    copy.anchor = anchor;
    return ValueId{n_ + static_cast<int32_t>(walked_.copies.size()) - 1, -1};
  }

  // The copy shared at (canonical value, version, device), or null. Each
  // value's copies are a short list in device_copies_ (one per device and
  // version it was copied at).
  const ValueId* FindDeviceCopy(ValueId canonical, int32_t version,
                                Device d) const {
    for (int32_t k = first_device_copy_[slots_.Of(canonical)]; k != -1;
         k = device_copies_[k].next) {
      const DeviceCopy& c = device_copies_[k];
      if (c.version == version && c.device == d) return &c.copy;
    }
    return nullptr;
  }
  void AddDeviceCopy(ValueId canonical, int32_t version, Device d,
                     ValueId copy) {
    int32_t& first = first_device_copy_[slots_.Of(canonical)];
    device_copies_.push_back(DeviceCopy{version, d, copy, first});
    first = static_cast<int32_t>(device_copies_.size()) - 1;
  }

  // --- Writes and warnings
  // -----------------------------------------------------

  // A host write of `written` by `writer`: a new version of its storage.
  void Write(ValueId written, int32_t writer) {
    ValueId root = roots_->RootOf(written);
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
    ++version_[slots_.Of(root)];
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

  struct DeviceCopy {
    int32_t version;
    Device device;
    ValueId copy;  // the copy, or the host value when it was refused
    int32_t next;  // the value's next entry, or -1
  };

  const Method& method_;
  const StorageRoots* roots_ = nullptr;  // the visit's: nodes [0, i]
  const ValueSlots& slots_;
  const Homes& homes_;
  const WalkOptions& options_;
  Diagnostics& diagnostics_;
  const int32_t n_;
  Walked walked_;
  // The names of nodes [0, noted_names_) that could collide with a copy's,
  // and the names of the copies [0, in_set_). Copies [0, resolved_names_)
  // have their final names.
  absl::flat_hash_set<absl::string_view> names_;
  int32_t noted_names_ = 0;
  size_t resolved_names_ = 0;
  size_t in_set_ = 0;
  bool names_may_collide_ = false;  // NameCopyAfter
  std::vector<int32_t> version_;    // per slot: host writes so far
  std::vector<ValueId> host_copy_;  // per slot: the D2H made, or invalid
  std::vector<int32_t> first_device_copy_;  // per slot: into device_copies_
  std::vector<DeviceCopy> device_copies_;
  mutable std::vector<int8_t> whole_;  // per slot: IsWhole, or -1 not yet
  absl::flat_hash_set<ValueId> warned_;
  absl::flat_hash_set<ValueId> refused_;
};

// Phase 4: every value's device on its spec, and the copies laid out in the
// method's own node array: each H2D right before its reader, each D2H right
// after its source. Every token's place is found first; then the nodes move
// back to front to theirs (a node's place is at or after its index, so it
// lands on a slot already vacated), labelled and with their operands
// renumbered on the way, and each node's copies are made beside it in the
// same visit, while it and their sources are in cache: a copy's spec is its
// source node's, which is the node at hand (a D2H) or one before it, not yet
// moved (an H2D). Nodes before the first copy do not move at all.
//
//   nodes [x, D1, ...], copies [x_to_cuda0 before D1]
//   ==> [x, x_to_cuda0, D1, ...]; D1's results labelled cuda:0
class Assemble {
 public:
  Assemble(Method& method, const StorageRoots& roots, const Homes& homes,
           Tally& tally)
      : method_(method), roots_(roots), homes_(homes), tally_(tally) {}

  absl::Status Run(Walked walked) {
    const int32_t n = static_cast<int32_t>(method_.nodes.size());
    if (walked.copies.empty()) {  // nothing to lay out: nodes stay in place
      size_t next = 0;            // node i's first operand in walked.operands
      for (int32_t i = 0; i < n; ++i) {
        LabelNode(i);
        if (!walked.rewrote) continue;
        ForEachOperandMutable(method_.nodes[i], [&](ValueId& v) {
          if (next < walked.operands.size()) v = walked.operands[next];
          ++next;
        });
      }
      FERRY_RET_CHECK(!walked.rewrote || next == walked.operands.size());
      return absl::OkStatus();
    }
    h2d_op_ = LookupOp(kH2DCopyOp);
    d2h_op_ = LookupOp(kD2HCopyOp);
    FERRY_RET_CHECK(h2d_op_ != nullptr && d2h_op_ != nullptr);  // registered
    const std::vector<PlannedCopy>& copies = walked.copies;
    const int32_t count = static_cast<int32_t>(copies.size());
    // Each node's H2Ds and D2Hs, grouped by anchor in the order made (a
    // counting sort, stable): h2ds[h2d_start[i] .. h2d_start[i + 1]) go
    // right before node i, d2hs[d2h_start[i] .. d2h_start[i + 1]) right
    // after it.
    std::vector<int32_t> h2d_start(n + 1, 0), d2h_start(n + 1, 0);
    for (const PlannedCopy& c : copies) {
      FERRY_RET_CHECK(c.anchor >= 0 && c.anchor < n);
      ++(c.to_host ? d2h_start : h2d_start)[c.anchor + 1];
    }
    for (int32_t i = 0; i < n; ++i) {
      h2d_start[i + 1] += h2d_start[i];
      d2h_start[i + 1] += d2h_start[i];
    }
    std::vector<int32_t> h2ds(h2d_start[n]), d2hs(d2h_start[n]);
    {
      std::vector<int32_t> next_h2d(h2d_start.begin(), h2d_start.end() - 1);
      std::vector<int32_t> next_d2h(d2h_start.begin(), d2h_start.end() - 1);
      for (int32_t c = 0; c < count; ++c) {
        if (copies[c].to_host)
          d2hs[next_d2h[copies[c].anchor]++] = c;
        else
          h2ds[next_h2d[copies[c].anchor]++] = c;
      }
    }

    // Every token's place: before node i come the nodes before it, every
    // H2D up to its own and every D2H of the nodes before it.
    final_index_.assign(n + count, -1);
    for (int32_t i = 0; i < n; ++i) {
      const int32_t at = i + h2d_start[i + 1] + d2h_start[i];
      final_index_[i] = at;
      for (int32_t k = h2d_start[i]; k < h2d_start[i + 1]; ++k)
        final_index_[n + h2ds[k]] = at - (h2d_start[i + 1] - k);
      for (int32_t k = d2h_start[i]; k < d2h_start[i + 1]; ++k)
        final_index_[n + d2hs[k]] = at + 1 + (k - d2h_start[i]);
    }
    // The last node and its D2Hs end the array.
    FERRY_RET_CHECK(final_index_[n - 1] + d2h_start[n] - d2h_start[n - 1] ==
                    n + count - 1);

    // Room for the copies: the importer and the passes that rebuild a
    // method's nodes leave it (ReserveNodes), so the array does not usually
    // move.
    std::vector<Node>& nodes = method_.nodes;
    nodes.resize(n + count);
    // Where node i's operands end in walked.operands (back to front).
    size_t operands_end = walked.operands.size();
    for (int32_t i = n - 1; i >= 0; --i) {
      // The node's operands and its place, ahead: the array is walked back
      // to front, and a node's place is not the node's own slot.
      PrefetchOperands(nodes, i - kOperandsAhead, /*for_write=*/true);
      if (i >= kOperandsAhead)
        PrefetchNode(nodes[final_index_[i - kOperandsAhead]]);
      LabelNode(i);  // while the node is at hand
      const int32_t to = final_index_[i];
      if (to != i) MoveInto(nodes[to], nodes[i]);
      if (absl::Status renumbered =
              Renumber(nodes[to], to, walked.operands, operands_end);
          !renumbered.ok())
        return renumbered;
      // Its copies: group[start[i] .. start[i + 1]).
      auto place = [&](const std::vector<int32_t>& group,
                       const std::vector<int32_t>& start) {
        for (int32_t k = start[i]; k < start[i + 1]; ++k)
          if (absl::Status placed =
                  PlaceCopy(copies, group[k], walked.names[group[k]], i, n);
              !placed.ok())
            return placed;
        return absl::OkStatus();
      };
      if (absl::Status placed = place(d2hs, d2h_start); !placed.ok())
        return placed;
      if (absl::Status placed = place(h2ds, h2d_start); !placed.ok())
        return placed;
    }
    FERRY_RET_CHECK(operands_end == 0);  // every token read
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
  void LabelNode(int32_t i) {
    Node& node = method_.nodes[i];
    if (node.kind == NodeKind::kDelegate) tally_.Delegate(homes_.runs_on[i]);
    if (node.result == ResultKind::kTensor) Label(node.tensor, ValueId{i, -1});
    for (int32_t e = 0; e < static_cast<int32_t>(node.tuple.size()); ++e)
      Label(node.tuple[e], ValueId{i, e});
  }

  // Asks for every cache line of `slot`, a node about to be written, to be
  // fetched for writing.
  static void PrefetchNode(Node& slot) {
    const char* bytes = reinterpret_cast<const char*>(&slot);
    for (size_t at = 0; at < sizeof(Node); at += 64)
      __builtin_prefetch(bytes + at, 1);
    __builtin_prefetch(bytes + sizeof(Node) - 1, 1);
  }

  // Moves `from` into `slot`, a node made by `resize` or moved from: by
  // construction, as the slot holds nothing to release or keep.
  static void MoveInto(Node& slot, Node& from) {
    std::destroy_at(&slot);
    std::construct_at(&slot, std::move(from));
  }

  // Points the operands of `node`, placed at `at`, at the places of the
  // tokens the walk read for them: those of `operands` that end at `end`
  // (the nodes come back to front, so `end` then moves to where they
  // start).
  absl::Status Renumber(Node& node, int32_t at,
                        const std::vector<ValueId>& operands, size_t& end) {
    size_t count = 0;
    ForEachOperand(node, [&](const ValueId&) { ++count; });
    FERRY_RET_CHECK(count <= end);  // one token per operand
    end -= count;
    size_t next = end;
    bool before = true;
    ForEachOperandMutable(node, [&](ValueId& v) {
      v = operands[next++];
      v.node = final_index_[v.node];
      before &= v.node >= 0 && v.node < at;
    });
    FERRY_RET_CHECK(before);  // every operand comes before its reader
    return absl::OkStatus();
  }

  // Makes copy `c` in its place, beside node `i` (its anchor, placed): the
  // spec of its source on its device. A copy's source is a node or an
  // earlier copy; followed back to a node, that is node `i` (a D2H's) or
  // one before it, which has not moved yet (an H2D's).
  absl::Status PlaceCopy(const std::vector<PlannedCopy>& copies, int32_t c,
                         std::string& name, int32_t i, int32_t n) {
    const PlannedCopy& planned = copies[c];
    const int32_t at = final_index_[n + c];
    const int32_t source = final_index_[planned.source.node];
    FERRY_RET_CHECK(source >= 0 && source < at);  // placed before the copy
    ValueId origin = planned.source;
    for (int32_t reader = c; origin.node >= n;) {
      const int32_t k = origin.node - n;
      FERRY_RET_CHECK(k < reader);  // made before the copy that reads it
      reader = k;
      origin = copies[k].source;
    }
    FERRY_RET_CHECK(origin.node >= 0 && origin.node <= i);
    const Node& original =
        method_.nodes[origin.node == i ? final_index_[i] : origin.node];
    // The walk copies tensors only.
    const TensorSpec* spec = original.Spec(origin.element);
    FERRY_RET_CHECK(spec != nullptr);
    const OpInfo* op = planned.to_host ? d2h_op_ : h2d_op_;
    // Made in its slot (a node made by `resize` or moved from).
    Node& copy = method_.nodes[at];
    std::destroy_at(&copy);
    std::construct_at(&copy);
    copy.kind = NodeKind::kCall;
    copy.target = TargetString::Lasting(op->name);
    copy.schema = op->schema;
    copy.name = std::move(name);
    copy.at_load = planned.at_load;
    copy.args.reserve(1);  // (then push_back takes its fast path, not growth)
    copy.args.push_back(
        Argument::Value(ValueId{source, planned.source.element}));
    copy.result = ResultKind::kTensor;
    copy.tensor = *spec;
    copy.tensor.memory = MemoryPlacement{};
    copy.tensor.SetDevice(planned.to);
    tally_.Copy(planned.to_host, planned.at_load, copy.tensor);
    return absl::OkStatus();
  }

  Method& method_;
  const StorageRoots& roots_;
  const Homes& homes_;
  Tally& tally_;
  const OpInfo* h2d_op_ = nullptr;
  const OpInfo* d2h_op_ = nullptr;
  std::vector<int32_t> final_index_;  // per token (node, then copy)
};

// Without device memory planning there are no copies: only delegate results
// (and their getitems) are labelled with their device.
absl::Status LabelOnly(const ProgramIndex& program, Method& method,
                       Tally& tally) {
  std::vector<Device> device_of(method.nodes.size(), Device::Cpu());
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    Node& node = method.nodes[i];
    if (node.kind == NodeKind::kDelegate) {
      device_of[i] = DelegateDevice(program, node);
      tally.Delegate(device_of[i]);
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

// Phases 1-4 for one method. Phase 1 is made only when the walk of
// phase 2 finds copies, which a method lowered before has: then that walk
// is made again, on the method without them. Without skip_h2d every value's
// home is known where it is defined, before its readers, so the coherence
// walk (phase 3) is made in that same walk, node by node, up to a copy of
// an earlier run (it changes nothing in the method: Walked). With it, an
// input's home is the device of its first device reader, which a host
// reader before that one must already know: phase 3 is then a walk of its
// own.
absl::Status PlaceMethod(const ProgramIndex& index, Method& method,
                         const WalkOptions& options, Diagnostics& diagnostics,
                         Tally& tally, bool stripped = false) {
  ValueSlots slots;
  AssignHomes assign(index, method, slots, options);
  CoherenceWalk walk(method, slots, assign.homes(), options, diagnostics);
  const bool one_walk = !options.skip_h2d;
  absl::Status walked;
  const StorageRoots roots(
      method, slots, [&](const StorageRoots& known, int32_t i) {
        assign.Visit(known, i);
        const bool strip = assign.has_copies() && !stripped;
        if (one_walk && !strip && walked.ok()) walked = walk.Visit(known, i);
      });
  if (assign.has_copies() && !stripped) {
    if (absl::Status strip = StripCopies(method); !strip.ok()) return strip;
    return PlaceMethod(index, method, options, diagnostics, tally,
                       /*stripped=*/true);
  }
  const int32_t n = static_cast<int32_t>(method.nodes.size());
  for (int32_t i = 0; !one_walk && walked.ok() && i < n; ++i)
    walked = walk.Visit(roots, i);
  if (!walked.ok()) return walked;
  return Assemble(method, roots, assign.homes(), tally)
      .Run(std::move(walk).Finish());
}

}  // namespace

absl::StatusOr<PassStats> PlaceAndCopy(Program& program,
                                       const LowerOptions& options,
                                       Diagnostics& diagnostics) {
  Tally tally;
  const ProgramIndex index(program);
  for (Method& method : program.methods) {
    diagnostics.SetMethod(method.name);
    if (!options.enable_non_cpu_memory_planning) {
      if (absl::Status stripped = StripCopies(method); !stripped.ok())
        return stripped;
      if (absl::Status labelled = LabelOnly(index, method, tally);
          !labelled.ok())
        return labelled;
      continue;
    }
    WalkOptions o;
    o.skip_h2d = options.skip_h2d_for_method_inputs.For(method.name);
    o.skip_d2h = options.skip_d2h_for_method_outputs.For(method.name);
    o.strict = options.error_on_per_call_copies;
    o.at_load = options.constant_staging_at_load;
    if (absl::Status placed = PlaceMethod(index, method, o, diagnostics, tally);
        !placed.ok())
      return placed;
  }
  diagnostics.SetMethod("");
  // Delegates per device in the devices' order, as the counters name them.
  std::sort(tally.delegates.begin(), tally.delegates.end());
  PassStats stats;
  stats.Add(kCopiesCounter, tally.h2d + tally.d2h + tally.at_load);
  stats.Add(kH2DCopiesCounter, tally.h2d);
  stats.Add(kD2HCopiesCounter, tally.d2h);
  stats.Add(kLoadTimeCopiesCounter, tally.at_load);
  stats.Add(kH2DBytesCounter, tally.h2d_bytes);
  stats.Add(kD2HBytesCounter, tally.d2h_bytes);
  for (const auto& [device, count] : tally.delegates)
    stats.Add(absl::StrCat(kDelegatesOnCounter, device.ToString()), count);
  return stats;
}

}  // namespace ferry
