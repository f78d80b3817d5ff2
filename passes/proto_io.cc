// Import and export between ferry.v1.Program and the in-memory IR.
//
// Import resolves every name to an index and reports structural problems as
// diagnostics (codes E01xx, E0201, E0206). Export writes exactly the fields
// import read, so export(import(p)) prints as p does.
#include "passes/proto_io.h"

#include <algorithm>
#include <array>
#include <climits>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ferry/file.h"
#include "ferry/v1/program.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/wire_format_lite.h"
#include "passes/diagnostic_codes.h"
#include "passes/schema.h"
#include "passes/wire_node.h"

namespace ferry {

// The one mapping between the wire's dtypes and the IR's. A dtype added to
// either enum does not build until it is mapped: this switch has no default
// (-Wswitch, an error here), and the enums must have as many values.
v1::DType DTypeToProto(DType dtype) {
  switch (dtype) {
    case DType::kInvalid:
      return v1::DTYPE_UNSPECIFIED;
    case DType::kF32:
      return v1::F32;
    case DType::kF16:
      return v1::F16;
    case DType::kBF16:
      return v1::BF16;
    case DType::kF64:
      return v1::F64;
    case DType::kI8:
      return v1::I8;
    case DType::kU8:
      return v1::U8;
    case DType::kI16:
      return v1::I16;
    case DType::kI32:
      return v1::I32;
    case DType::kI64:
      return v1::I64;
    case DType::kBool:
      return v1::BOOL;
  }
  return v1::DTYPE_UNSPECIFIED;  // not an enumerator: unreachable
}
static_assert(static_cast<int>(kLastDType) + 1 == v1::DType_ARRAYSIZE,
              "ferry::DType and ferry.v1.DType differ in size: map the new "
              "dtype in DTypeToProto");

DType DTypeFromProto(int value) {
  // The inverse of DTypeToProto (so the mapping is written once), as a
  // table made once: every spec of a request asks.
  static const std::array<DType, v1::DType_ARRAYSIZE> inverse = [] {
    std::array<DType, v1::DType_ARRAYSIZE> table;
    table.fill(DType::kInvalid);
    for (int d = 0; d <= static_cast<int>(kLastDType); ++d)
      table[DTypeToProto(static_cast<DType>(d))] = static_cast<DType>(d);
    return table;
  }();
  if (value < 0 || value >= v1::DType_ARRAYSIZE) return DType::kInvalid;
  return inverse[value];
}

namespace {

InputKind InputKindFromProto(int value) {
  if (value >= 1 && value <= 5) return static_cast<InputKind>(value);
  return InputKind::kInvalid;
}

ScalarType ScalarFromProto(int value) {
  if (value >= 1 && value <= 3) return static_cast<ScalarType>(value);
  return ScalarType::kInvalid;
}

// Converts one spec; `where` names the value for diagnostics.
class SpecImporter {
 public:
  SpecImporter(Diagnostics& diagnostics) : diagnostics_(diagnostics) {}

  // `name` names the value; `element` >= 0 one element of a tuple result
  // ("t[1]"). The name is only spelled out for a diagnostic.
  // `p` is a ferry.v1.TensorSpec or a wire::SpecView.
  template <typename SpecMessage>
  TensorSpec Import(const SpecMessage& p, const std::string& name,
                    int element = -1) {
    TensorSpec s;
    ImportInto(p, name, element, s);
    return s;
  }
  // The same into `s`, a fresh spec (a node's own, made in place).
  template <typename SpecMessage>
  void ImportInto(const SpecMessage& p, const std::string& name, int element,
                  TensorSpec& s) {
    auto where = [&] {
      return element < 0 ? name : absl::StrCat(name, "[", element, "]");
    };
    s.dtype = DTypeFromProto(p.dtype());
    if (s.dtype == DType::kInvalid)
      diagnostics_.Error(codes::kBadDType,
                         absl::StrCat("invalid dtype (", p.dtype(), ")"),
                         {where()},
                         "use one of F32, F16, BF16, F64, I8, U8, "
                         "I16, I32, I64, BOOL");
    s.sizes.assign(p.sizes().begin(), p.sizes().end());
    s.strides.assign(p.strides().begin(), p.strides().end());
    s.storage_offset = p.storage_offset();
    if (p.has_device()) {
      s.device_present = true;
      s.device = ImportDevice(p.device(), where);
    }
    if (p.has_memory()) {
      s.memory.arena = p.memory().arena();
      s.memory.offset = p.memory().offset();
      s.memory.size = p.memory().size();
      s.memory.planned = p.memory().planned();
    }
  }

  // `where` names the device's owner, asked only for a diagnostic.
  template <typename DeviceMessage>
  Device ImportDevice(const DeviceMessage& p,
                      absl::FunctionRef<std::string()> where) {
    const std::string_view type = p.type();
    if (type.empty() || type == "cpu") {
      if (p.index() != 0)
        diagnostics_.Error(codes::kBadDevice,
                           absl::StrCat("host device with index ", p.index()),
                           {where()}, "the host is always index 0");
      return Device::Cpu();
    }
    if (type == "cuda") {
      // An index out of range is reported; the device returned in its place
      // keeps its sign (a Device holds 16 bits of index).
      if (p.index() < 0) {
        diagnostics_.Error(codes::kBadDevice,
                           absl::StrCat("negative device index ", p.index()),
                           {where()});
        return Device::Cuda(-1);
      }
      if (p.index() > Device::kMaxIndex) {
        diagnostics_.Error(
            codes::kBadDevice,
            absl::StrCat("device index ", p.index(), " is over the largest, ",
                         Device::kMaxIndex),
            {where()});
        return Device::Cuda(Device::kMaxIndex);
      }
      return Device::Cuda(p.index());
    }
    diagnostics_.Error(
        codes::kBadDevice,
        absl::StrCat("unknown device type '", std::string(type), "'"),
        {where()},
        HintOr(DidYouMeanDevice(type),
               "device types are 'cpu' and 'cuda' (lower case)"));
    return Device::Cpu();
  }

 private:
  Diagnostics& diagnostics_;
};

void ExportSpec(const TensorSpec& s, v1::TensorSpec* p) {
  p->set_dtype(DTypeToProto(s.dtype));
  p->mutable_sizes()->Add(s.sizes.begin(), s.sizes.end());
  p->mutable_strides()->Add(s.strides.begin(), s.strides.end());
  p->set_storage_offset(s.storage_offset);
  if (s.device_present) {
    p->mutable_device()->set_type(s.device.is_host() ? "cpu" : "cuda");
    p->mutable_device()->set_index(s.device.index);
  }
  if (s.memory != MemoryPlacement{}) {
    v1::MemoryPlacement* m = p->mutable_memory();
    m->set_arena(s.memory.arena);
    m->set_offset(s.memory.offset);
    m->set_size(s.memory.size);
    m->set_planned(s.memory.planned);
  }
}

// A method's nodes in the wire form, as the importer reads them when it is
// given the request's bytes (ImportRequestWire): how many, the name of each
// (read from the bytes before any node is imported), and each node in turn,
// read when its turn comes, so that what import reads is in cache: in place
// where wire::NodeReader reads it, else parsed by protobuf onto an arena
// that is reset for each node.
class WireNodes {
 public:
  // `nodes[i]`: node i's value in the method (its bytes, without the tag
  // and length); `names[i]`: its name, read from it.
  WireNodes(std::vector<std::string_view> nodes,
            std::vector<std::string_view> names, google::protobuf::Arena& arena)
      : nodes_(std::move(nodes)), names_(std::move(names)), arena_(arena) {}
  int size() const { return static_cast<int>(nodes_.size()); }
  std::string_view name(int i) const { return names_[i]; }

  // Node `i` read in place; null when the reader leaves it to protobuf
  // (Parsed). Valid until the next View.
  const wire::NodeView* View(int i) {
    const wire::NodeView* node = reader_.Read(nodes_[i]);
    return node != nullptr && node->name() == names_[i] ? node : nullptr;
  }
  // Node `i` parsed; null when its bytes do not parse, or when it is not
  // named as read ahead (a second name field would win). Valid until the
  // next Parsed.
  const v1::Node* Parsed(int i) {
    arena_.Reset();
    auto* node = google::protobuf::Arena::CreateMessage<v1::Node>(&arena_);
    const std::string_view bytes = nodes_[i];
    if (bytes.size() > static_cast<size_t>(INT_MAX) ||
        !node->ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) ||
        node->name() != names_[i])
      return nullptr;
    return node;
  }

 private:
  std::vector<std::string_view> nodes_;
  std::vector<std::string_view> names_;
  wire::NodeReader reader_;
  google::protobuf::Arena& arena_;
};

// Imports one method (or a lowered module's graph).
class MethodImporter {
 public:
  MethodImporter(const ProgramIndex& index, Diagnostics& diagnostics,
                 NameSuggester& suggester)
      : modules_(index),
        diagnostics_(diagnostics),
        specs_(diagnostics),
        suggester_(suggester) {}

  Method Import(const v1::Method& p) {
    const int size = p.nodes_size();
    Method m = Begin(p, size, [&p](int32_t i) -> std::string_view {
      return p.nodes(i).name();
    });
    // Names first, so a reference to a later node is reported as a forward
    // reference (a cycle or a wrong order) rather than as dangling.
    for (int i = 0; i < size; ++i) {
      // The parsed nodes and their names are objects of their own on the
      // request's arena, reached through pointers that the hardware does
      // not prefetch: ask for them ahead. A node message 16 nodes on, the
      // name of the one 8 on (whose message is in cache by then), and the
      // index's room for the name of the one 4 on (whose name is).
      if (i + 16 < size) __builtin_prefetch(&p.nodes(i + 16));
      if (i + 8 < size) __builtin_prefetch(&p.nodes(i + 8).name());
      if (i + 4 < size) PrefetchIndex(p.nodes(i + 4).name());
      IndexName(p.nodes(i).name(), i);
    }
    // Each node is made as it is imported (not all made first and then
    // filled): one write of its memory rather than two, which shows on
    // methods too large for the caches.
    ReserveNodes(m.nodes, size);
    building_ = &m;
    for (int i = 0; i < size; ++i) ImportNode(p.nodes(i), i, m);
    return Finish(p, m);
  }

  // The same with the nodes read from the wire form: `p` gives the method's
  // name, arenas and options, `nodes` its nodes. Sets failed() when a node's
  // bytes do not parse; the method is then incomplete.
  Method Import(const v1::Method& p, WireNodes& nodes) {
    const int size = nodes.size();
    Method m = Begin(p, size, [&nodes](int32_t i) { return nodes.name(i); });
    for (int i = 0; i < size; ++i) {
      if (i + kIndexAhead < size) PrefetchIndex(nodes.name(i + kIndexAhead));
      IndexName(nodes.name(i), i);
    }
    ReserveNodes(m.nodes, size);
    building_ = &m;
    for (int i = 0; i < size; ++i) {
      if (const wire::NodeView* view = nodes.View(i)) {
        ImportNode(*view, i, m);
      } else if (const v1::Node* node = nodes.Parsed(i)) {
        ImportNode(*node, i, m);
      } else {
        failed_ = true;
        break;
      }
    }
    return Finish(p, m);
  }

  bool failed() const { return failed_; }

 private:
  // A method named as `p`, its `size` nodes named by `name_of`, to import.
  Method Begin(const v1::Method& p, int size,
               std::function<std::string_view(int32_t)> name_of) {
    Method m;
    m.name = p.name();
    failed_ = false;
    name_of_ = std::move(name_of);
    node_count_ = size;
    node_names_.clear();
    index_.clear();
    index_.reserve(size);
    names_are_plain_ = true;
    outputs_.clear();
    return m;
  }

  // The rest of `p` (its arenas and options) into `m`, and the checks of
  // the whole method.
  Method Finish(const v1::Method& p, Method& m) {
    building_ = nullptr;
    name_of_ = nullptr;
    for (const v1::Arena& a : p.arenas()) {
      Arena arena;
      arena.device = specs_.ImportDevice(
          a.device(), [&] { return absl::StrCat("arena of ", p.name()); });
      arena.size = a.size();
      arena.lower_bound = a.lower_bound();
      m.arenas.push_back(arena);
    }
    if (p.has_lowered_with()) {
      const v1::LoweredWith& w = p.lowered_with();
      LoweredWith& with = m.lowered_with.emplace();
      with.skip_h2d_for_method_inputs = w.skip_h2d_for_method_inputs();
      with.skip_d2h_for_method_outputs = w.skip_d2h_for_method_outputs();
      with.error_on_per_call_copies = w.error_on_per_call_copies();
      with.enable_non_cpu_memory_planning = w.enable_non_cpu_memory_planning();
      with.alloc_graph_input = w.alloc_graph_input();
      with.alloc_graph_output = w.alloc_graph_output();
      with.constant_staging = static_cast<int32_t>(w.constant_staging());
    }
    CheckOutput(m);
    return std::move(m);
  }

  // Where a name will go in the index, asked for ahead: in a large method
  // the index is larger than the caches, and each name a miss.
  static constexpr int kIndexAhead = 8;
  void PrefetchIndex(std::string_view name) const {
    index_.prefetch(absl::string_view(name.data(), name.size()));
  }

  // Indexes node `i`'s name, reporting it when empty or repeated.
  void IndexName(std::string_view given, int32_t i) {
    const absl::string_view name(given.data(), given.size());
    if (name.empty()) {
      names_are_plain_ = false;
      diagnostics_.Error(codes::kEmptyName,
                         absl::StrCat("node #", i, " has no name"),
                         {absl::StrCat("#", i)});
      return;
    }
    auto [it, inserted] = index_.emplace(name, i);
    if (!inserted) {
      names_are_plain_ = false;
      diagnostics_.Error(
          codes::kDuplicateName,
          absl::StrCat("duplicate node name '", name,
                       "' (first defined as node #", it->second, ")"),
          {std::string(name)});
    }
  }

  // Resolves `name` read by node `reader` (at index `at`). A program mostly
  // reads values made a few nodes earlier: those nodes' names, just
  // imported and still in cache, are compared first, and the index (a hash
  // map over every name, one cache miss per lookup in a large method) is
  // asked only for the rest. When names are empty or repeated the index
  // alone decides (it knows only given names, and keeps a name's first
  // node).
  int32_t Resolve(std::string_view name, const std::string& reader,
                  int32_t at) {
    if (names_are_plain_ && building_ != nullptr) {
      for (int32_t j = at - 1; j >= 0 && j >= at - kRecentNodes; --j)
        if (building_->nodes[j].name == name) return j;
    }
    auto it = index_.find(absl::string_view(name.data(), name.size()));
    if (it == index_.end()) {
      diagnostics_.Error(codes::kDanglingReference,
                         absl::StrCat("reference to undefined value '",
                                      std::string(name), "'"),
                         {reader},
                         suggester_.DidYouMean(name, NamesBefore(at)));
      return -1;
    }
    if (it->second >= at) {
      diagnostics_.Error(
          codes::kForwardReference,
          it->second == at
              ? absl::StrCat("node reads its own result")
              : absl::StrCat("reads '", std::string(name),
                             "', which is defined later: nodes must be in "
                             "topological order (is there a cycle?)"),
          {reader, std::string(name)});
      return -1;
    }
    return it->second;
  }

  // The names of the nodes before node `at`: what a reference there could
  // have meant (a later node would be a forward reference).
  std::span<const std::string> NamesBefore(int32_t at) {
    if (node_names_.empty())
      for (int32_t i = 0; i < node_count_; ++i)
        node_names_.emplace_back(name_of_(i));
    return std::span<const std::string>(node_names_)
        .first(static_cast<size_t>(std::clamp<int32_t>(
            at, 0, static_cast<int32_t>(node_names_.size()))));
  }

  // Checks that `source` has a tuple result with an element `index`.
  bool CheckElement(const Method& m, int32_t source, int32_t index,
                    const std::string& reader) {
    const Node& src = m.nodes[source];
    if (src.result != ResultKind::kTuple) {
      diagnostics_.Error(codes::kGetItemOfNonTuple,
                         absl::StrCat("element ", index, " of '", src.name,
                                      "', which is not a tuple"),
                         {reader, src.name});
      return false;
    }
    if (index < 0 || index >= static_cast<int32_t>(src.tuple.size())) {
      diagnostics_.Error(
          codes::kTupleIndexOutOfRange,
          absl::StrCat("element ", index, " of '", src.name, "', which has ",
                       src.tuple.size(), " elements"),
          {reader, src.name});
      return false;
    }
    return true;
  }

  ValueId ResolveWhole(const Method& m, std::string_view name,
                       const std::string& reader, int32_t at) {
    int32_t n = Resolve(name, reader, at);
    if (n < 0) return ValueId{};
    if (m.nodes[n].result == ResultKind::kTuple) {
      diagnostics_.Error(codes::kTupleUsedAsValue,
                         absl::StrCat("'", std::string(name),
                                      "' is a tuple; read one element with "
                                      "a getitem or an element reference"),
                         {reader, std::string(name)});
    } else if (m.nodes[n].result == ResultKind::kNone) {
      diagnostics_.Error(codes::kTupleUsedAsValue,
                         absl::StrCat("'", std::string(name), "' has no value"),
                         {reader, std::string(name)});
    }
    return ValueId{n, -1};
  }

  // `e` is a ferry.v1.ElementRef or a wire::ElementView, `r` a
  // ferry.v1.ValueRef or a wire::ValueRefView.
  template <typename ElementMessage>
  ValueId ResolveElement(const Method& m, const ElementMessage& e,
                         const std::string& reader, int32_t at) {
    int32_t n = Resolve(e.node(), reader, at);
    if (n < 0) return ValueId{};
    CheckElement(m, n, e.index(), reader);
    return ValueId{n, e.index()};
  }

  template <typename RefMessage>
  ValueId ResolveRef(const Method& m, const RefMessage& r,
                     const std::string& reader, int32_t at) {
    if (r.has_element()) return ResolveElement(m, r.element(), reader, at);
    return ResolveWhole(m, r.node(), reader, at);
  }

  // Imports `p` (a ferry.v1.Argument or a wire::ArgumentView) into `a`, a
  // fresh argument (made in place in its node's list, not moved there).
  template <typename ArgumentMessage>
  void ImportArgument(const Method& m, const ArgumentMessage& p,
                      const std::string& reader, int32_t at, Argument& a) {
    if (!p.name().empty()) a.name = p.name();
    switch (p.kind_case()) {
      case v1::Argument::kValue:
        a.kind = ArgKind::kValue;
        a.value = ResolveWhole(m, p.value(), reader, at);
        break;
      case v1::Argument::kElement:
        a.kind = ArgKind::kValue;
        a.value = ResolveElement(m, p.element(), reader, at);
        break;
      case v1::Argument::kValues:
        a.kind = ArgKind::kValueList;
        for (const auto& r : p.values().values())
          a.values.push_back(ResolveRef(m, r, reader, at));
        break;
      case v1::Argument::kIntValue:
        a.kind = ArgKind::kInt;
        a.int_value = p.int_value();
        break;
      case v1::Argument::kFloatValue:
        a.kind = ArgKind::kFloat;
        a.float_value = p.float_value();
        break;
      case v1::Argument::kBoolValue:
        a.kind = ArgKind::kBool;
        a.bool_value = p.bool_value();
        break;
      case v1::Argument::kInts:
        a.kind = ArgKind::kInts;
        a.ints.assign(p.ints().values().begin(), p.ints().values().end());
        break;
      case v1::Argument::kDtype:
        a.kind = ArgKind::kDType;
        a.dtype = DTypeFromProto(p.dtype());
        if (a.dtype == DType::kInvalid)
          diagnostics_.Error(
              codes::kBadDType,
              absl::StrCat("invalid dtype argument (", p.dtype(), ")"),
              {reader});
        break;
      case v1::Argument::kNone:
      case v1::Argument::KIND_NOT_SET:
        a.kind = ArgKind::kNone;
        break;
      case v1::Argument::kStringValue:
        a.kind = ArgKind::kString;
        a.string_value = p.string_value();
        break;
    }
  }

  // Imports node `i`, appending it to `m` (which holds nodes 0..i-1). `p`
  // is a ferry.v1.Node or a wire::NodeView (passes/wire_node.h).
  template <typename NodeMessage>
  void ImportNode(const NodeMessage& p, int32_t i, Method& m) {
    Node& n = m.nodes.emplace_back();
    // (Assigned, not built and moved: one copy of the name.)
    if (p.name().empty())
      n.name = absl::StrCat("#", i);
    else
      n.name = p.name();
    const std::string& name = n.name;
    if (!p.delegation_tag().empty()) n.delegation_tag = p.delegation_tag();
    if (p.has_source()) {
      n.source = Shared<const SourceLocation>::Make(
          SourceLocation{std::string(p.source().file()), p.source().line(),
                         std::string(p.source().name())});
    }
    switch (p.result_case()) {
      case v1::Node::kTensor:
        n.result = ResultKind::kTensor;
        specs_.ImportInto(p.tensor(), name, -1, n.tensor);
        break;
      case v1::Node::kTuple:
        n.result = ResultKind::kTuple;
        n.tuple.reserve(p.tuple().elements_size());
        for (int e = 0; e < p.tuple().elements_size(); ++e)
          n.tuple.push_back(specs_.Import(p.tuple().elements(e), name, e));
        break;
      case v1::Node::kScalar:
        n.result = ResultKind::kScalar;
        n.scalar = ScalarFromProto(p.scalar());
        if (n.scalar == ScalarType::kInvalid)
          diagnostics_.Error(codes::kBadResult, "invalid scalar result type",
                             {name});
        break;
      case v1::Node::RESULT_NOT_SET:
        n.result = ResultKind::kNone;
        break;
    }
    switch (p.kind_case()) {
      case v1::Node::kInput: {
        n.kind = NodeKind::kInput;
        n.input_kind = InputKindFromProto(p.input().kind());
        n.target = p.input().target();
        if (n.input_kind == InputKind::kInvalid) {
          diagnostics_.Error(codes::kBadInputKind, "input without a valid kind",
                             {name},
                             "set input.kind to USER_INPUT, PARAMETER, "
                             "BUFFER, MUTABLE_BUFFER or LIFTED_CONSTANT");
        } else if (n.input_kind != InputKind::kUserInput &&
                   !modules_.FindConstant(n.target)) {
          diagnostics_.Error(
              codes::kMissingConstant,
              absl::StrCat(std::string(InputKindName(n.input_kind)), " '", name,
                           "' names constant '", n.target.str(),
                           "', which is not in the program"),
              {name});
        }
        RequireTensorResult(n);
        break;
      }
      case v1::Node::kConstant:
        n.kind = NodeKind::kConstant;
        n.target = p.constant().name();
        if (!modules_.FindConstant(n.target))
          diagnostics_.Error(codes::kMissingConstant,
                             absl::StrCat("constant '", n.target.str(),
                                          "' is not in the program"),
                             {name});
        RequireTensorResult(n);
        break;
      case v1::Node::kCall: {
        n.kind = NodeKind::kCall;
        // A call without schema text calls a registered operator (or is
        // refused): its target points at the registry's name when it is
        // that name exactly.
        const OpInfo* registered =
            p.call().schema().empty() ? Operator(p.call().op()) : nullptr;
        if (registered != nullptr && registered->name == p.call().op())
          n.target = TargetString::Lasting(registered->name);
        else
          n.target = p.call().op();
        if (!p.call().schema().empty()) n.schema_text = p.call().schema();
        n.at_load = p.call().at_load();
        n.args.reserve(p.call().args_size());
        for (const auto& a : p.call().args())
          ImportArgument(m, a, name, i, n.args.emplace_back());
        ResolveSchema(n, registered);
        break;
      }
      case v1::Node::kDelegate:
        n.kind = NodeKind::kDelegate;
        n.target = p.delegate().module();
        n.args.reserve(p.delegate().args_size());
        for (const auto& a : p.delegate().args())
          ImportArgument(m, a, name, i, n.args.emplace_back());
        if (!modules_.FindModule(n.target))
          diagnostics_.Error(
              codes::kMissingModule,
              absl::StrCat("delegate calls lowered module '", n.target.str(),
                           "', which is not in the program"),
              {name});
        if (n.result != ResultKind::kTensor && n.result != ResultKind::kTuple)
          diagnostics_.Error(codes::kBadResult,
                             "delegate without a tensor or tuple result",
                             {name});
        break;
      case v1::Node::kGetitem: {
        n.kind = NodeKind::kGetItem;
        n.getitem_index = p.getitem().index();
        int32_t src = Resolve(p.getitem().source(), name, i);
        n.getitem_source = src;
        if (src >= 0) CheckElement(m, src, n.getitem_index, name);
        RequireTensorResult(n);
        break;
      }
      case v1::Node::kOutput:
        n.kind = NodeKind::kOutput;
        outputs_.push_back(i);
        n.args.reserve(p.output().values_size());
        for (const auto& a : p.output().values())
          ImportArgument(m, a, name, i, n.args.emplace_back());
        if (n.result != ResultKind::kNone)
          diagnostics_.Error(codes::kBadResult, "output node with a result",
                             {name});
        break;
      case v1::Node::KIND_NOT_SET:
        n.kind = NodeKind::kCall;
        diagnostics_.Error(codes::kMissingNodeKind,
                           "node has no kind (input, constant, call, "
                           "delegate, getitem or output)",
                           {name});
        break;
    }
  }

  void RequireTensorResult(const Node& n) {
    if (n.result != ResultKind::kTensor)
      diagnostics_.Error(codes::kBadResult,
                         absl::StrCat(std::string(NodeKindName(n.kind)),
                                      " node needs a tensor result"),
                         {n.name});
  }

  // `registered`: the registry's entry for the call's target, looked up
  // when it has no schema text.
  void ResolveSchema(Node& n, const OpInfo* registered) {
    if (!n.schema_text.empty()) {
      absl::StatusOr<OpSchema> parsed = ParseSchema(n.schema_text.str());
      if (!parsed.ok()) {
        diagnostics_.Error(
            codes::kBadSchema,
            absl::StrCat("schema of '", n.target.str(),
                         "' does not parse: ", parsed.status().message()),
            {n.name});
        return;
      }
      if (parsed->QualifiedName() != n.target &&
          !absl::StartsWith(n.target.str(), parsed->QualifiedName() + ".") &&
          !(parsed->overload.empty() &&
            n.target.str() == parsed->QualifiedName() + ".default")) {
        diagnostics_.Error(
            codes::kBadSchema,
            absl::StrCat("schema names '", parsed->QualifiedName(),
                         "' but the node calls '", n.target.str(), "'"),
            {n.name});
        return;
      }
      n.schema = Shared<const OpSchema>::Make(*std::move(parsed));
      return;
    }
    if (registered != nullptr) {
      n.schema = registered->schema;
      return;
    }
    diagnostics_.Error(
        codes::kUnknownOperator,
        absl::StrCat("unknown operator '", n.target.str(), "'"), {n.name},
        HintOr(suggester_.DidYouMean(n.target.str(), RegisteredOps()),
               "give the node its ATen schema in call.schema, or use a "
               "registered operator (see docs/format.md)"));
  }

  // Checks the output nodes ImportNode found (outputs_): one, the last.
  void CheckOutput(const Method& m) {
    for (int32_t i : outputs_) {
      if (i != static_cast<int32_t>(m.nodes.size()) - 1)
        diagnostics_.Error(
            codes::kOutputNotLast, "output node is not the last node",
            {m.nodes[i].name}, "move the output node to the end of the method");
    }
    if (outputs_.empty())
      diagnostics_.Error(
          codes::kMissingOutput,
          absl::StrCat("method '", m.name, "' has no output node"), {},
          "add an output node as the last node");
  }

  // LookupOp(op), asked of the operators met last first: a program calls a
  // few operators many times, and comparing a name with a few is cheaper
  // than hashing it into the registry.
  const OpInfo* Operator(std::string_view op) {
    for (const OpInfo* met : recent_ops_)
      if (met != nullptr && met->name == op) return met;
    const OpInfo* info = LookupOp(op);
    if (info != nullptr && info->name == op) {
      recent_ops_[next_recent_op_] = info;
      next_recent_op_ = (next_recent_op_ + 1) % recent_ops_.size();
    }
    return info;
  }

  const ProgramIndex& modules_;  // modules and constants are imported first
  Diagnostics& diagnostics_;
  SpecImporter specs_;
  std::array<const OpInfo*, 8> recent_ops_ = {};  // Operator's
  size_t next_recent_op_ = 0;
  NameSuggester& suggester_;  // shared by every method of the program
  // The names of the method being imported, for NamesBefore.
  std::function<std::string_view(int32_t)> name_of_;
  int32_t node_count_ = 0;
  bool failed_ = false;  // a node's bytes did not parse
  // Keys point into the names the nodes give, which outlive the import.
  absl::flat_hash_map<absl::string_view, int32_t> index_;
  // Resolve's look back: how many nodes, whether it may (every node has a
  // name of its own), and the method being imported.
  static constexpr int32_t kRecentNodes = 16;
  bool names_are_plain_ = true;
  const Method* building_ = nullptr;
  std::vector<std::string> node_names_;  // built on first need, NamesBefore
  std::vector<int32_t> outputs_;         // the output nodes, in order
};

void ExportArgument(const Method& m, const Argument& a, v1::Argument* p) {
  if (!a.name.empty()) p->set_name(a.name);
  auto ref = [&](const ValueId& v, v1::ValueRef* r) {
    if (v.element >= 0) {
      r->mutable_element()->set_node(m.nodes[v.node].name);
      r->mutable_element()->set_index(v.element);
    } else {
      r->set_node(m.nodes[v.node].name);
    }
  };
  switch (a.kind) {
    case ArgKind::kValue:
      if (a.value.element >= 0) {
        p->mutable_element()->set_node(m.nodes[a.value.node].name);
        p->mutable_element()->set_index(a.value.element);
      } else {
        p->set_value(m.nodes[a.value.node].name);
      }
      break;
    case ArgKind::kValueList: {
      v1::ValueList* list = p->mutable_values();
      for (const ValueId& v : a.values) ref(v, list->add_values());
      break;
    }
    case ArgKind::kInt:
      p->set_int_value(a.int_value);
      break;
    case ArgKind::kFloat:
      p->set_float_value(a.float_value);
      break;
    case ArgKind::kBool:
      p->set_bool_value(a.bool_value);
      break;
    case ArgKind::kInts:
      for (int64_t v : a.ints) p->mutable_ints()->add_values(v);
      if (a.ints.empty()) p->mutable_ints();
      break;
    case ArgKind::kDType:
      p->set_dtype(DTypeToProto(a.dtype));
      break;
    case ArgKind::kNone:
      p->mutable_none();
      break;
    case ArgKind::kString:
      p->set_string_value(a.string_value);
      break;
  }
}

void ExportMethod(const Method& m, v1::Method* p) {
  p->set_name(m.name);
  p->mutable_nodes()->Reserve(static_cast<int>(m.nodes.size()));
  for (const Node& n : m.nodes) {
    v1::Node* pn = p->add_nodes();
    pn->set_name(n.name);
    switch (n.kind) {
      case NodeKind::kInput:
        pn->mutable_input()->set_kind(
            static_cast<v1::InputKind>(static_cast<int>(n.input_kind)));
        pn->mutable_input()->set_target(n.target);
        break;
      case NodeKind::kConstant:
        pn->mutable_constant()->set_name(n.target);
        break;
      case NodeKind::kCall: {
        v1::CallNode* c = pn->mutable_call();
        c->set_op(n.target);
        for (const Argument& a : n.args) ExportArgument(m, a, c->add_args());
        // Empty strings are not on the wire (proto3): setting one would only
        // allocate it on the response's arena.
        if (!n.schema_text.empty()) c->set_schema(n.schema_text);
        c->set_at_load(n.at_load);
        break;
      }
      case NodeKind::kDelegate: {
        v1::DelegateNode* d = pn->mutable_delegate();
        d->set_module(n.target);
        for (const Argument& a : n.args) ExportArgument(m, a, d->add_args());
        break;
      }
      case NodeKind::kGetItem:
        pn->mutable_getitem()->set_source(m.nodes[n.getitem_source].name);
        pn->mutable_getitem()->set_index(n.getitem_index);
        break;
      case NodeKind::kOutput: {
        v1::OutputNode* o = pn->mutable_output();
        for (const Argument& a : n.args) ExportArgument(m, a, o->add_values());
        break;
      }
    }
    switch (n.result) {
      case ResultKind::kTensor:
        ExportSpec(n.tensor, pn->mutable_tensor());
        break;
      case ResultKind::kTuple: {
        v1::TupleSpec* t = pn->mutable_tuple();
        for (const TensorSpec& s : n.tuple) ExportSpec(s, t->add_elements());
        break;
      }
      case ResultKind::kScalar:
        pn->set_scalar(static_cast<v1::ScalarType>(static_cast<int>(n.scalar)));
        break;
      case ResultKind::kNone:
        break;
    }
    if (!n.delegation_tag.empty()) pn->set_delegation_tag(n.delegation_tag);
    if (n.source != nullptr) {
      pn->mutable_source()->set_file(n.source->file);
      pn->mutable_source()->set_line(n.source->line);
      pn->mutable_source()->set_name(n.source->name);
    }
  }
  for (const Arena& a : m.arenas) {
    v1::Arena* pa = p->add_arenas();
    pa->mutable_device()->set_type(a.device.is_host() ? "cpu" : "cuda");
    pa->mutable_device()->set_index(a.device.index);
    pa->set_size(a.size);
    pa->set_lower_bound(a.lower_bound);
  }
  if (m.lowered_with.has_value()) {
    const LoweredWith& with = *m.lowered_with;
    v1::LoweredWith* w = p->mutable_lowered_with();
    w->set_skip_h2d_for_method_inputs(with.skip_h2d_for_method_inputs);
    w->set_skip_d2h_for_method_outputs(with.skip_d2h_for_method_outputs);
    w->set_error_on_per_call_copies(with.error_on_per_call_copies);
    w->set_enable_non_cpu_memory_planning(with.enable_non_cpu_memory_planning);
    w->set_alloc_graph_input(with.alloc_graph_input);
    w->set_alloc_graph_output(with.alloc_graph_output);
    w->set_constant_staging(
        static_cast<v1::ConstantStaging>(with.constant_staging));
  }
}

// The text between the first `open` after `from` and the next quote.
std::string_view QuotedAfter(std::string_view message, std::string_view open) {
  size_t start = message.find(open);
  if (start == std::string_view::npos) return {};
  start += open.size();
  size_t end = message.find('"', start);
  if (end == std::string_view::npos) return {};
  return message.substr(start, end - start);
}

// "did you mean" for the text parser's two misspelling errors, from the
// descriptors of the ferry.v1 messages:
//   Message type "ferry.v1.LowerOptions" has no field named "skip_h2d".
//   Unknown enumeration value of "AT_LAOD" for field "constant_staging".
std::string TextParseHint(std::string_view message) {
  namespace pb = google::protobuf;
  std::vector<std::string> known;
  std::string_view name;
  if (std::string_view type = QuotedAfter(message, "Message type \"");
      !type.empty()) {
    name = QuotedAfter(message, "has no field named \"");
    const pb::Descriptor* descriptor =
        pb::DescriptorPool::generated_pool()->FindMessageTypeByName(
            std::string(type));
    if (descriptor == nullptr) return {};
    for (int i = 0; i < descriptor->field_count(); ++i)
      known.push_back(descriptor->field(i)->name());
  } else if (std::string_view value =
                 QuotedAfter(message, "Unknown enumeration value of \"");
             !value.empty()) {
    name = value;
    // The message does not say whose field: every ferry.v1 enum field of
    // that name offers its values.
    const std::string field(QuotedAfter(message, "for field \""));
    const pb::FileDescriptor* file = v1::Program::descriptor()->file();
    for (int m = 0; m < file->message_type_count(); ++m) {
      const pb::FieldDescriptor* f =
          file->message_type(m)->FindFieldByName(field);
      if (f == nullptr || f->enum_type() == nullptr) continue;
      for (int v = 0; v < f->enum_type()->value_count(); ++v)
        known.push_back(f->enum_type()->value(v)->name());
    }
  }
  return DidYouMean(name, known);
}

// Collects protobuf parser errors into one message.
class CollectingErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (!text.empty()) text += "; ";
    absl::StrAppend(&text, "line ", line + 1, ":", column + 1, ": ", message);
    if (std::string hint = TextParseHint(message); !hint.empty())
      absl::StrAppend(&text, " (", hint, ")");
  }
  void AddWarning(int, int, const std::string&) override {}
  std::string text;
};

bool IsBlank(std::string_view bytes) {
  for (char c : bytes)
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) return false;
  return true;
}

absl::Status ParseText(std::string_view bytes, google::protobuf::Message* msg,
                       std::string* error) {
  google::protobuf::TextFormat::Parser parser;
  CollectingErrors errors;
  parser.RecordErrorsTo(&errors);
  google::protobuf::io::ArrayInputStream input(bytes.data(),
                                               static_cast<int>(bytes.size()));
  if (parser.Parse(&input, msg)) return absl::OkStatus();
  *error = errors.text;
  return absl::InvalidArgumentError(errors.text);
}

// A binary LowerRequest and a binary Program share field numbers, so pick the
// reading that yields a plausible program: named methods with nodes.
bool PlausibleProgram(const v1::Program& p) {
  if (p.methods_size() == 0) return false;
  for (const v1::Method& m : p.methods())
    if (m.name().empty() || m.nodes_size() == 0) return false;
  return p.GetReflection()->GetUnknownFields(p).empty();
}

// The methods of a program as ImportProgramFrom reads them: how many, each
// one's message (its name, arenas and options; its nodes for ProtoMethods),
// and each one imported by a given importer.
class ProtoMethods {
 public:
  explicit ProtoMethods(const v1::Program& program) : program_(program) {}
  int size() const { return program_.methods_size(); }
  const v1::Method& message(int k) const { return program_.methods(k); }
  Method Import(int k, MethodImporter& importer) {
    return importer.Import(program_.methods(k));
  }

 private:
  const v1::Program& program_;
};

// `proto` gives the constants and modules; `methods` the methods.
template <typename Methods>
Program ImportProgramFrom(const v1::Program& proto, Methods& methods,
                          Diagnostics& diagnostics) {
  Program program;
  SpecImporter specs(diagnostics);
  absl::flat_hash_map<std::string, int> seen;
  for (const v1::Constant& c : proto.constants()) {
    Constant constant;
    constant.name = c.name();
    if (c.name().empty())
      diagnostics.Error(codes::kEmptyName, "constant without a name", {});
    else if (!seen.emplace("c:" + c.name(), 0).second)
      diagnostics.Error(codes::kDuplicateName,
                        absl::StrCat("duplicate constant '", c.name(), "'"),
                        {c.name()});
    constant.spec = specs.Import(c.spec(), c.name());
    if (c.has_data()) constant.data = c.data();
    if (c.has_data_digest())
      constant.data_digest =
          BlobRef{c.data_digest().hash(), c.data_digest().size_bytes()};
    constant.seed = c.seed();
    program.constants.push_back(std::move(constant));
  }
  // Modules before methods: delegates refer to them. A module's graph may
  // refer to constants.
  for (const v1::LoweredModule& mod : proto.modules()) {
    LoweredModule m;
    m.id = mod.id();
    if (mod.id().empty())
      diagnostics.Error(codes::kEmptyName, "lowered module without an id", {});
    else if (!seen.emplace("m:" + mod.id(), 0).second)
      diagnostics.Error(
          codes::kDuplicateModule,
          absl::StrCat("duplicate lowered module '", mod.id(), "'"),
          {mod.id()});
    m.backend = mod.backend();
    for (const v1::CompileSpec& cs : mod.compile_specs())
      m.compile_specs.push_back(CompileSpec{cs.key(), cs.value()});
    m.ResolveTargetDevice();
    for (int i = 0; i < mod.input_layouts_size(); ++i)
      m.input_layouts.push_back(
          specs.Import(mod.input_layouts(i),
                       absl::StrCat(mod.id(), ".input_layouts[", i, "]")));
    m.returns_tuple = mod.returns_tuple();
    program.modules.push_back(std::move(m));
  }
  // The modules vector is complete: the index's pointers stay valid.
  const ProgramIndex index(program);
  NameSuggester suggester;
  for (int i = 0; i < proto.modules_size(); ++i) {
    Diagnostics module_diagnostics;
    module_diagnostics.SetMethod("module:" + proto.modules(i).id());
    MethodImporter importer(index, module_diagnostics, suggester);
    Method graph = importer.Import(proto.modules(i).graph());
    program.modules[i].graph = std::move(graph);
    diagnostics.Append(module_diagnostics);
  }
  if (methods.size() == 0)
    diagnostics.Error(codes::kNoMethods, "program has no methods", {});
  for (int k = 0; k < methods.size(); ++k) {
    const v1::Method& pm = methods.message(k);
    if (pm.name().empty())
      diagnostics.Error(codes::kEmptyName, "method without a name", {});
    else if (!seen.emplace("f:" + pm.name(), 0).second)
      diagnostics.Error(codes::kDuplicateName,
                        absl::StrCat("duplicate method '", pm.name(), "'"),
                        {pm.name()});
    Diagnostics method_diagnostics;
    method_diagnostics.SetMethod(pm.name());
    MethodImporter importer(index, method_diagnostics, suggester);
    program.methods.push_back(methods.Import(k, importer));
    diagnostics.Append(method_diagnostics);
  }
  return program;
}

}  // namespace

Program ImportProgram(const v1::Program& proto, Diagnostics& diagnostics) {
  ProtoMethods methods(proto);
  return ImportProgramFrom(proto, methods, diagnostics);
}

namespace {

// Calls `fn(field, length_delimited, value, raw)` for each field of
// `message`, a message in wire form, in order: `value` is a length-delimited
// field's value (empty for other wire types), `raw` the whole field, tag
// included. False when the bytes are not a well-formed message.
template <typename Fn>
bool ForEachField(std::string_view message, Fn&& fn) {
  using google::protobuf::internal::WireFormatLite;
  if (message.size() > static_cast<size_t>(INT_MAX)) return false;
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(message.data()),
      static_cast<int>(message.size()));
  while (true) {
    const int start = in.CurrentPosition();
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return in.ConsumedEntireMessage();
    const bool length_delimited = WireFormatLite::GetTagWireType(tag) ==
                                  WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    std::string_view value;
    if (length_delimited) {
      uint32_t length = 0;
      if (!in.ReadVarint32(&length)) return false;
      const size_t at = static_cast<size_t>(in.CurrentPosition());
      if (length > message.size() - at) return false;
      value = message.substr(at, length);
      if (!in.Skip(static_cast<int>(length))) return false;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
    fn(static_cast<int>(WireFormatLite::GetTagFieldNumber(tag)),
       length_delimited, value,
       message.substr(static_cast<size_t>(start),
                      static_cast<size_t>(in.CurrentPosition() - start)));
  }
}

// Splits `message` into the values of its length-delimited field `field`,
// in order, and the rest of its fields (`rest`, in wire form, in order).
// Parsing `rest` gives the message without that field: the same as parsing
// the whole message and clearing it. `rest` points into `message` when the
// other fields are next to each other there (as serializers write a
// program: its methods, then its constants and modules, whose data is not
// copied then), else into `storage`, where they are joined. False when the
// bytes are malformed.
bool SplitField(std::string_view message, int field,
                std::vector<std::string_view>& values, std::string& storage,
                std::string_view& rest) {
  const char* begin = nullptr;
  const char* end = nullptr;
  bool joined = false;
  const bool read =
      ForEachField(message, [&](int number, bool length_delimited,
                                std::string_view value, std::string_view raw) {
        if (number == field && length_delimited) {
          values.push_back(value);
        } else if (joined) {
          storage.append(raw);
        } else if (begin == nullptr || raw.data() == end) {
          if (begin == nullptr) begin = raw.data();
          end = raw.data() + raw.size();
        } else {
          storage.assign(begin, end);
          storage.append(raw);
          joined = true;
        }
      });
  if (joined)
    rest = storage;
  else if (begin != nullptr)
    rest = std::string_view(begin, static_cast<size_t>(end - begin));
  else
    rest = std::string_view();
  return read;
}

// Parses `bytes`, a message in wire form, into `message`.
bool ParseView(std::string_view bytes, google::protobuf::MessageLite& message) {
  return bytes.size() <= static_cast<size_t>(INT_MAX) &&
         message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

// Field numbers of ferry.v1 messages (proto/ferry/v1/program.proto).
constexpr int kRequestProgramField = 1;  // LowerRequest.program
constexpr int kProgramMethodsField = 1;  // Program.methods
constexpr int kProgramModulesField = 3;  // Program.modules
constexpr int kModuleGraphField = 4;     // LoweredModule.graph
constexpr int kMethodNodesField = 2;     // Method.nodes
constexpr int kNodeNameField = 1;        // Node.name
constexpr char kNodeNameTag = 0x0a;      // its tag: field 1, length-delimited

// The methods of a program in wire form, each split into its nodes' bytes
// and the rest of it, parsed (name, arenas, options).
class WireMethods {
 public:
  WireMethods() : block_(new char[kBlockBytes]) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block_.get();
    options.initial_block_size = kBlockBytes;
    arena_ = std::make_unique<google::protobuf::Arena>(options);
  }

  // Adds the method `bytes`; false when they are malformed.
  bool Add(std::string_view bytes) {
    std::vector<std::string_view> nodes;
    std::string storage;
    std::string_view rest;
    if (!SplitField(bytes, kMethodNodesField, nodes, storage, rest))
      return false;
    auto method = std::make_unique<v1::Method>();
    if (!ParseView(rest, *method)) return false;
    std::vector<std::string_view> names(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      // Serializers write the name first (field 1): then it is read there
      // (WireNodes checks it against the node read, where a later name
      // field would win). Otherwise the last name field is the name.
      const std::string_view node = nodes[i];
      if (node.size() >= 2 && node[0] == kNodeNameTag &&
          static_cast<unsigned char>(node[1]) < 0x80 &&
          static_cast<size_t>(node[1]) + 2 <= node.size()) {
        names[i] = node.substr(2, static_cast<size_t>(node[1]));
        continue;
      }
      if (!ForEachField(node, [&](int number, bool length_delimited,
                                  std::string_view value, std::string_view) {
            if (number == kNodeNameField && length_delimited) names[i] = value;
          }))
        return false;
    }
    messages_.push_back(std::move(method));
    nodes_.push_back(std::make_unique<WireNodes>(std::move(nodes),
                                                 std::move(names), *arena_));
    return true;
  }

  int size() const { return static_cast<int>(messages_.size()); }
  const v1::Method& message(int k) const { return *messages_[k]; }
  Method Import(int k, MethodImporter& importer) {
    Method method = importer.Import(*messages_[k], *nodes_[k]);
    failed_ = failed_ || importer.failed();
    return method;
  }
  // Whether a node's bytes did not parse.
  bool failed() const { return failed_; }

 private:
  // Room for a node that protobuf parses (WireNodes::Parsed): one at a
  // time, the arena reset for each. A larger one takes more blocks.
  static constexpr size_t kBlockBytes = 64 << 10;
  std::unique_ptr<char[]> block_;
  std::unique_ptr<google::protobuf::Arena> arena_;
  std::vector<std::unique_ptr<v1::Method>> messages_;
  std::vector<std::unique_ptr<WireNodes>> nodes_;
  bool failed_ = false;
};

// Adds to `nodes` how many nodes `method` (a Method in wire form) has.
bool CountMethodNodes(std::string_view method, int64_t& nodes) {
  return ForEachField(method, [&](int number, bool length_delimited,
                                  std::string_view, std::string_view) {
    nodes += number == kMethodNodesField && length_delimited;
  });
}

// ReadRequestWire but for the node count, left 0.
std::optional<RequestWire> SplitRequestWire(std::string_view request,
                                            v1::LowerRequest* rest) {
  rest->Clear();
  std::vector<std::string_view> programs;
  std::string storage;
  std::string_view request_rest;
  // A program given in parts is merged by protobuf: leave it to it.
  if (!SplitField(request, kRequestProgramField, programs, storage,
                  request_rest) ||
      programs.size() > 1 || !ParseView(request_rest, *rest))
    return std::nullopt;
  RequestWire wire;
  if (!programs.empty()) wire.program = programs.front();
  return wire;
}

}  // namespace

std::optional<RequestWire> ReadRequestWire(std::string_view request,
                                           v1::LowerRequest* rest) {
  std::optional<RequestWire> split = SplitRequestWire(request, rest);
  if (!split || !split->program) return split;
  RequestWire wire = *split;
  // CountNodes, without parsing: the nodes of each method and of each
  // module's graph (a graph given in parts has the nodes of all of them).
  bool ok = true;
  const bool read = ForEachField(
      *wire.program, [&](int number, bool length_delimited,
                         std::string_view value, std::string_view) {
        if (!length_delimited) return;
        if (number == kProgramMethodsField)
          ok = CountMethodNodes(value, wire.nodes) && ok;
        if (number == kProgramModulesField)
          ok = ForEachField(value,
                            [&](int field, bool delimited,
                                std::string_view graph, std::string_view) {
                              if (field == kModuleGraphField && delimited)
                                ok = CountMethodNodes(graph, wire.nodes) && ok;
                            }) &&
               ok;
      });
  if (!read || !ok) return std::nullopt;
  return wire;
}

std::optional<Program> ImportRequestWire(std::string_view request,
                                         v1::LowerRequest* rest,
                                         Diagnostics& diagnostics) {
  std::optional<RequestWire> wire = SplitRequestWire(request, rest);
  if (!wire) return std::nullopt;
  std::vector<std::string_view> method_bytes;
  std::string storage;
  std::string_view program_rest;
  if (!SplitField(wire->program.value_or(std::string_view()),
                  kProgramMethodsField, method_bytes, storage, program_rest))
    return std::nullopt;
  v1::Program program_message;
  if (!ParseView(program_rest, program_message)) return std::nullopt;
  WireMethods methods;
  for (std::string_view bytes : method_bytes)
    if (!methods.Add(bytes)) return std::nullopt;
  Diagnostics found;
  Program program = ImportProgramFrom(program_message, methods, found);
  if (methods.failed()) return std::nullopt;
  diagnostics.Append(found);
  return program;
}

namespace {

void ExportConstant(const Constant& c, v1::Constant* pc) {
  pc->set_name(c.name);
  ExportSpec(c.spec, pc->mutable_spec());
  if (c.data) pc->set_data(*c.data);
  if (c.data_digest) {
    pc->mutable_data_digest()->set_hash(c.data_digest->hash);
    pc->mutable_data_digest()->set_size_bytes(c.data_digest->size_bytes);
  }
  pc->set_seed(c.seed);
}

void ExportModule(const LoweredModule& m, v1::LoweredModule* pm) {
  pm->set_id(m.id);
  pm->set_backend(m.backend);
  for (const CompileSpec& cs : m.compile_specs) {
    v1::CompileSpec* p = pm->add_compile_specs();
    p->set_key(cs.key);
    p->set_value(cs.value);
  }
  ExportMethod(m.graph, pm->mutable_graph());
  for (const TensorSpec& s : m.input_layouts)
    ExportSpec(s, pm->add_input_layouts());
  pm->set_returns_tuple(m.returns_tuple);
}

// Frees what `v` holds now, not when its owner goes.
template <typename T>
void Release(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

}  // namespace

void ExportProgram(const Program& program, v1::Program* proto) {
  proto->Clear();
  for (const Method& m : program.methods) ExportMethod(m, proto->add_methods());
  for (const Constant& c : program.constants)
    ExportConstant(c, proto->add_constants());
  for (const LoweredModule& m : program.modules)
    ExportModule(m, proto->add_modules());
}

void ExportProgram(Program&& program, v1::Program* proto) {
  proto->Clear();
  // The same message: each repeated field gets its items in the same order
  // (the wire form orders fields by number, whatever order they were set).
  for (LoweredModule& m : program.modules) {
    ExportModule(m, proto->add_modules());
    m = LoweredModule{};
  }
  Release(program.modules);
  for (Constant& c : program.constants) {
    ExportConstant(c, proto->add_constants());
    c = Constant{};
  }
  Release(program.constants);
  for (Method& m : program.methods) {
    ExportMethod(m, proto->add_methods());
    m = Method{};
  }
  Release(program.methods);
}

FileFormat FormatFromPath(std::string_view path_view) {
  const std::string path(path_view);
  if (absl::EndsWith(path, ".textproto") || absl::EndsWith(path, ".txtpb") ||
      absl::EndsWith(path, ".pbtxt"))
    return FileFormat::kText;
  if (absl::EndsWith(path, ".binpb") || absl::EndsWith(path, ".pb"))
    return FileFormat::kBinary;
  if (absl::EndsWith(path, ".json")) return FileFormat::kJson;
  return FileFormat::kUnknown;
}

FileFormat ParseFormatName(std::string_view name) {
  if (name == "text" || name == "textproto" || name == "txtpb")
    return FileFormat::kText;
  if (name == "binary" || name == "binpb" || name == "pb")
    return FileFormat::kBinary;
  if (name == "json") return FileFormat::kJson;
  return FileFormat::kUnknown;
}

google::protobuf::ArenaOptions RequestArenaOptions(size_t wire_bytes) {
  constexpr size_t kFirst = 4 << 10, kLargest = 1 << 20;
  google::protobuf::ArenaOptions options;
  options.start_block_size = std::clamp(wire_bytes, kFirst, kLargest);
  options.max_block_size = kLargest;
  return options;
}

absl::Status ParseRequest(std::string_view bytes, FileFormat format,
                          std::string_view what, v1::LowerRequest* request,
                          bool* was_bare_program) {
  request->Clear();
  *was_bare_program = false;
  if (format == FileFormat::kUnknown)
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(what),
        ": unknown file format (use .textproto, .txtpb, .pb, .binpb or "
        ".json, or --format)"));
  if (bytes.empty() || (format != FileFormat::kBinary && IsBlank(bytes)))
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(what), ": empty input"));
  switch (format) {
    case FileFormat::kText: {
      std::string error;
      if (ParseText(bytes, request, &error).ok()) {
        if (request->has_program() || request->has_options())
          return absl::OkStatus();
      }
      request->Clear();
      v1::Program program;
      std::string program_error;
      if (ParseText(bytes, &program, &program_error).ok()) {
        *request->mutable_program() = std::move(program);
        *was_bare_program = true;
        return absl::OkStatus();
      }
      // Report the error of the reading that got further.
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(what), ": not a LowerRequest or Program in text form: ",
          absl::StrContains(error, "program") || error.empty() ? program_error
                                                               : error));
    }
    case FileFormat::kBinary: {
      // Parsed in place (the request may live on an arena).
      const int size = static_cast<int>(bytes.size());
      const bool request_ok = request->ParseFromArray(bytes.data(), size);
      if (request_ok &&
          request->GetReflection()->GetUnknownFields(*request).empty() &&
          PlausibleProgram(request->program()))
        return absl::OkStatus();
      request->Clear();
      if (request->mutable_program()->ParseFromArray(bytes.data(), size)) {
        *was_bare_program = true;
        return absl::OkStatus();
      }
      request->Clear();
      if (request_ok && request->ParseFromArray(bytes.data(), size))
        return absl::OkStatus();
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(what),
                       ": not a LowerRequest or Program in binary "
                       "protobuf form (truncated or corrupt?)"));
    }
    case FileFormat::kJson: {
      google::protobuf::util::JsonParseOptions options;
      std::string json(bytes);
      auto st =
          google::protobuf::util::JsonStringToMessage(json, request, options);
      if (st.ok() && (request->has_program() || request->has_options()))
        return absl::OkStatus();
      request->Clear();
      v1::Program program;
      auto program_st =
          google::protobuf::util::JsonStringToMessage(json, &program, options);
      if (program_st.ok()) {
        *request->mutable_program() = std::move(program);
        *was_bare_program = true;
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(what), ": not a LowerRequest or Program in JSON form: ",
          std::string(st.message())));
    }
    case FileFormat::kUnknown:
      break;
  }
  return absl::InvalidArgumentError("unknown format");
}

absl::Status ReadRequestFile(std::string_view path, FileFormat format,
                             v1::LowerRequest* request,
                             bool* was_bare_program) {
  absl::StatusOr<std::string> bytes = ReadFile(std::string(path));
  if (!bytes.ok()) return bytes.status();
  if (format == FileFormat::kUnknown) format = FormatFromPath(path);
  return ParseRequest(*bytes, format, path, request, was_bare_program);
}

std::string ToText(const v1::Program& program) {
  std::string out;
  google::protobuf::TextFormat::PrintToString(program, &out);
  return out;
}

std::string ToText(const v1::LowerRequest& request) {
  std::string out;
  google::protobuf::TextFormat::PrintToString(request, &out);
  return out;
}

std::string SerializeProgram(const v1::Program& program, FileFormat format) {
  switch (format) {
    case FileFormat::kBinary: {
      std::string out;
      {
        google::protobuf::io::StringOutputStream stream(&out);
        google::protobuf::io::CodedOutputStream coded(&stream);
        coded.SetSerializationDeterministic(true);
        program.SerializeToCodedStream(&coded);
      }
      return out;
    }
    case FileFormat::kJson: {
      std::string out;
      google::protobuf::util::JsonPrintOptions options;
      options.add_whitespace = true;
      options.preserve_proto_field_names = true;
      (void)google::protobuf::util::MessageToJsonString(program, &out, options);
      return out;
    }
    case FileFormat::kText:
    case FileFormat::kUnknown:
      break;
  }
  return ToText(program);
}

int64_t CountNodes(const v1::Program& program) {
  int64_t nodes = 0;
  for (const v1::Method& method : program.methods())
    nodes += method.nodes_size();
  for (const v1::LoweredModule& module : program.modules()) {
    nodes += module.graph().nodes_size();
  }
  return nodes;
}

}  // namespace ferry
