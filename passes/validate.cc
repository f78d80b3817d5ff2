// Semantic validation of an imported program.
//
// Import (proto_io.cc) has resolved every reference and schema; this pass
// checks what the references mean. It reports, never repairs.
//
// Order, so that diagnostics come out in a stable, readable order:
//  1. constants (method ""): their specs, and the size of their data;
//  2. each method, in order; then each lowered module (method
//     "module:<id>"): its input layouts, then its graph as a method;
//  3. the module call graph (ModuleCallGraph): cycles, nesting depth and
//     the nodes the delegate calls instantiate, found iteratively (the
//     nesting is the client's to choose).
//
// Within a graph, two phases:
//  - specs: every tensor spec a node declares is checked on its own (dtype,
//    strides rank and sign, sizes sign, int64 overflow of the element count
//    and of the storage extent, device). A node with a broken spec is
//    *unsound*: no shape rule runs over it, as a reader or as the call itself,
//    since a rule over garbage would only add noise (or overflow).
//  - a method's memory plan: arenas, and the placement of every value
//    that owns its storage (E0208);
//  - nodes, in order:
//      call      arity (E0301), argument types (E0302), result kind against
//                the schema's returns (E0305; a scalar only from a
//                metadata operator, E0306), aliased results inside their
//                storage (E0205), copies keeping their layout (E0303) and
//                not inside a device module (E0412), then the declared
//                result against the operator's shape rule: dtype (E0304),
//                sizes (E0303), and for results that alias an argument
//                (views, in-place results) the strides and storage offset;
//      delegate  target_device (E0401; inside a module, its parent's device,
//                E0411), argument count (E0402) and specs against the
//                module's user inputs, layouts against the compiled ones
//                (E0410), result kind and specs against the module's
//                outputs (E0403);
//      getitem, program data inputs, constant nodes: declared spec against
//                the tuple element (inside its storage, E0205) or constant
//                (same layout, E0207) they read;
//      output    every value a value (E0117); a module's, tensors (E0409).
//
// The runtime (runtime/executor.cc) refuses everything reported here too:
// a program that validates can be executed, so `ferry check` clean means
// `ferry verify` can run it.
//
// Layout comparison. Two layouts address the same elements when they have
// the same sizes, the same storage offset and the same strides in every dim
// of size > 1 (a size-1 dim's stride is never used; an empty tensor addresses
// nothing), so only those differences are reported.
#include "passes/validate.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "passes/alias.h"
#include "passes/diagnostic_codes.h"
#include "passes/resource_limits.h"
#include "passes/schema.h"
#include "passes/shape_rules.h"

namespace ferry {
namespace {

// --- Specs on their own
// -------------------------------------------------------

// The text of a message and the nodes it is about are spelled out only when
// there is something to report: validation of a sound program allocates no
// message text.
using LazyText = absl::FunctionRef<std::string()>;
using LazyNodes = absl::FunctionRef<std::vector<std::string>()>;

// Checks one spec; `subject` names it in messages ("'y'", "constant 'w'").
// Returns whether it is sound.
bool CheckSpec(const TensorSpec& spec, LazyText subject, LazyNodes nodes,
               Diagnostics& diagnostics) {
  bool sound = true;
  if (spec.dtype == DType::kInvalid || ElementSize(spec.dtype) == 0) {
    diagnostics.Error(codes::kBadDType,
                      absl::StrCat(subject(), " has no valid dtype"), nodes(),
                      "use one of F32, F16, BF16, F64, I8, U8, I16, I32, I64, "
                      "BOOL");
    sound = false;
  }
  bool sizes_sound = true;
  for (size_t d = 0; d < spec.sizes.size(); ++d) {
    if (spec.sizes[d] < 0) {
      diagnostics.Error(codes::kBadSizes,
                        absl::StrCat(subject(), " has negative size ",
                                     spec.sizes[d], " in dim ", d),
                        nodes());
      sizes_sound = false;
      break;
    }
  }
  bool strides_sound = true;
  if (!spec.strides.empty() && spec.strides.size() != spec.sizes.size()) {
    diagnostics.Error(
        codes::kBadStrides,
        absl::StrCat(subject(), " has ", spec.strides.size(), " strides for ",
                     spec.sizes.size(), " sizes"),
        nodes(), "give one stride per dim, or none (contiguous)");
    strides_sound = false;
  } else {
    for (size_t d = 0; d < spec.strides.size(); ++d) {
      if (spec.strides[d] < 0) {
        diagnostics.Error(codes::kBadStrides,
                          absl::StrCat(subject(), " has negative stride ",
                                       spec.strides[d], " in dim ", d),
                          nodes());
        strides_sound = false;
        break;
      }
    }
  }
  if (spec.storage_offset < 0) {
    diagnostics.Error(codes::kBadStrides,
                      absl::StrCat(subject(), " has negative storage offset ",
                                   spec.storage_offset),
                      nodes());
    strides_sound = false;
  }
  const std::optional<int64_t> numel =
      sizes_sound ? spec.NumElements() : std::nullopt;
  if (sizes_sound && !numel.has_value()) {
    diagnostics.Error(
        codes::kSpecOverflow,
        absl::StrCat("the element count of ", subject(), " (sizes ",
                     ShapeText(spec.sizes), ") overflows int64"),
        nodes());
    sizes_sound = false;
  }
  // Empty tensors too: their contiguous strides (a 0 counted as 1) are what
  // normalize_layout and the runtime compute. Those of a non-empty tensor
  // are products of its sizes, so they fit when its element count does.
  if (sizes_sound && *numel == 0 && !ContiguousStridesFit(spec.sizes)) {
    diagnostics.Error(
        codes::kSpecOverflow,
        absl::StrCat("the contiguous strides of ", subject(), " (sizes ",
                     ShapeText(spec.sizes), ") overflow int64"),
        nodes());
    sizes_sound = false;
  }
  // The extent needs sound sizes, strides and dtype (its element size).
  if (sound && sizes_sound && strides_sound &&
      !spec.StorageBytes().has_value()) {
    diagnostics.Error(
        codes::kSpecOverflow,
        absl::StrCat("the storage ", subject(), " spans (sizes ",
                     ShapeText(spec.sizes), ", strides ",
                     ShapeText(spec.Strides()), ", offset ",
                     spec.storage_offset, ") overflows int64 bytes"),
        nodes());
    sound = false;
  }
  bool known_type = spec.device.type == Device::Type::kCpu ||
                    spec.device.type == Device::Type::kCuda;
  if (!known_type) {
    diagnostics.Error(codes::kBadDevice,
                      absl::StrCat(subject(), " has an unknown device type"),
                      nodes(), "devices are 'cpu' and 'cuda'");
    sound = false;
  } else if (spec.device.index < 0) {
    diagnostics.Error(
        codes::kBadDevice,
        absl::StrCat(subject(), " is on device '", spec.device.ToString(),
                     "': the device index must be >= 0"),
        nodes());
    sound = false;
  }
  return sound && sizes_sound && strides_sound;
}

// --- Comparing specs
// ------------------------------------------------------------

bool SameAddressing(const TensorSpec& a, const TensorSpec& b) {
  if (a.sizes != b.sizes) return false;
  if (a.NumElements().value_or(1) == 0) return true;
  if (a.storage_offset != b.storage_offset) return false;
  // Both contiguous, and of one shape (the usual case): no strides to build.
  if (a.strides.empty() && b.strides.empty()) return true;
  const Dims a_strides = a.Strides();
  const Dims b_strides = b.Strides();
  if (a_strides.size() != a.sizes.size() ||
      b_strides.size() != b.sizes.size()) {
    return false;
  }
  for (size_t d = 0; d < a.sizes.size(); ++d) {
    if (a.sizes[d] > 1 && a_strides[d] != b_strides[d]) return false;
  }
  return true;
}

std::string LayoutText(const TensorSpec& spec) {
  return absl::StrCat(SpecText(spec), " with strides ",
                      ShapeText(spec.Strides()), " and offset ",
                      spec.storage_offset);
}

// Reports a dtype or sizes difference between what `source` says a value is
// and what `subject` declares. Returns whether they agree.
bool CompareDTypeAndSizes(const TensorSpec& expected,
                          const TensorSpec& declared, LazyText source,
                          LazyText subject, LazyNodes nodes,
                          Diagnostics& diagnostics) {
  if (expected.dtype == declared.dtype && expected.sizes == declared.sizes) {
    return true;
  }
  diagnostics.Error(
      expected.dtype != declared.dtype ? codes::kDTypeMismatch
                                       : codes::kShapeMismatch,
      absl::StrCat(source(), " ", SpecText(expected), ", but ", subject(),
                   " is declared ", SpecText(declared)),
      nodes());
  return false;
}

// --- Text for messages
// -----------------------------------------------------------

std::string DeclaredResultText(const Node& node) {
  switch (node.result) {
    case ResultKind::kNone:
      return "no result";
    case ResultKind::kTensor:
      return "a tensor";
    case ResultKind::kTuple:
      return absl::StrCat("a tuple of ", node.tuple.size());
    case ResultKind::kScalar:
      switch (node.scalar) {
        case ScalarType::kInt:
          return "an int scalar";
        case ScalarType::kFloat:
          return "a float scalar";
        case ScalarType::kBool:
          return "a bool scalar";
        case ScalarType::kInvalid:
          break;
      }
      return "a scalar";
  }
  return "a result";
}

std::string ArgumentText(const Method& graph, const Argument& arg) {
  switch (arg.kind) {
    case ArgKind::kValue: {
      const TensorSpec* spec = graph.Spec(arg.value);
      std::string name = absl::StrCat("'", graph.ValueName(arg.value), "'");
      if (spec != nullptr) return absl::StrCat("tensor ", name);
      if (arg.value.node >= 0 &&
          arg.value.node < static_cast<int32_t>(graph.nodes.size())) {
        const Node& node = graph.nodes[arg.value.node];
        if (node.result == ResultKind::kScalar) {
          return absl::StrCat("scalar ", name);
        }
        if (node.result == ResultKind::kTuple) {
          return absl::StrCat("tuple ", name);
        }
      }
      return name;
    }
    case ArgKind::kValueList:
      return absl::StrCat("a list of ", arg.values.size(), " values");
    case ArgKind::kInt:
      return absl::StrCat("int ", arg.int_value);
    case ArgKind::kFloat:
      return absl::StrCat("float ", arg.float_value);
    case ArgKind::kBool:
      return arg.bool_value ? "bool True" : "bool False";
    case ArgKind::kInts:
      return absl::StrCat("int list ", ShapeText(arg.ints));
    case ArgKind::kDType:
      return absl::StrCat("dtype ", std::string(DTypeName(arg.dtype)));
    case ArgKind::kNone:
      return "None";
    case ArgKind::kString:
      return absl::StrCat("string '", arg.string_value.str(), "'");
  }
  return "an argument";
}

// Whether two schemas take the same parameters (names and types) and return
// as many values; a node's own schema for a registered operator must, for the
// registered shape rule to apply to it.
bool SameSignature(const OpSchema& a, const OpSchema& b) {
  if (a.arguments.size() != b.arguments.size() ||
      a.returns.size() != b.returns.size()) {
    return false;
  }
  for (size_t i = 0; i < a.arguments.size(); ++i) {
    if (a.arguments[i].name != b.arguments[i].name ||
        a.arguments[i].type.kind != b.arguments[i].type.kind) {
      return false;
    }
  }
  return true;
}

std::vector<int32_t> UserInputs(const Method& graph) {
  std::vector<int32_t> inputs;
  for (int32_t i = 0; i < static_cast<int32_t>(graph.nodes.size()); ++i) {
    const Node& node = graph.nodes[i];
    if (node.kind == NodeKind::kInput &&
        node.input_kind == InputKind::kUserInput) {
      inputs.push_back(i);
    }
  }
  return inputs;
}

const Node* OutputNode(const Method& graph) {
  for (auto it = graph.nodes.rbegin(); it != graph.nodes.rend(); ++it) {
    if (it->kind == NodeKind::kOutput) return &*it;
  }
  return nullptr;
}

// --- One graph
// ---------------------------------------------------------------------

class GraphValidator {
 public:
  // `module`: the lowered module whose graph this is; null for a method.
  // `addressable`, when given, counts every declared spec (AddressableCount,
  // for CheckAddressable's answer) in the validator's own walk over them;
  // `calls` gets the module each delegate calls, in node order (for the
  // module call graph); `seen`, when given, what the walk saw of the nodes.
  GraphValidator(const ProgramIndex& program, const Method& graph,
                 Diagnostics& diagnostics,
                 const LoweredModule* module = nullptr,
                 AddressableCount* addressable = nullptr,
                 std::vector<const LoweredModule*>* calls = nullptr,
                 MethodNodesSeen* seen = nullptr)
      : program_(program),
        graph_(graph),
        diagnostics_(diagnostics),
        module_(module),
        addressable_(addressable),
        calls_(calls),
        seen_(seen) {
    // An invalid target is reported with the module; read it as the host.
    if (module_ != nullptr) module_device_ = module_->device();
  }

  void Run() {
    sound_.assign(graph_.nodes.size(), true);
    // One walk over the nodes, the one that finds the storage roots: each
    // node's specs, then the node itself, which reads what comes before it
    // only (import refuses a forward reference; Sound reads one as unsound).
    const StorageRoots roots(graph_, [&](const StorageRoots& known, int32_t i) {
      roots_ = &known;
      CheckSpecs(i);
      checked_ = i + 1;
      CheckNode(i);
    });
    roots_ = &roots;
    // Placements are checked only where there are some (a request to lower
    // has none: plan_memory makes them).
    if (module_ == nullptr) CheckArenas();
    roots_ = nullptr;
  }

 private:
  int32_t NodeCount() const {
    return static_cast<int32_t>(graph_.nodes.size());
  }

  // Whether node `node`, which node `checked_ - 1` reads, has sound specs:
  // a node not checked yet (after its reader, or past the end) has not.
  bool Sound(int32_t node) const {
    return node >= 0 && node < checked_ && sound_[node];
  }

  void CheckNode(int32_t i) {
    if (seen_ != nullptr) {
      seen_->tagged |= !graph_.nodes[i].delegation_tag.empty();
      seen_->own_schema |= !graph_.nodes[i].schema_text.empty();
    }
    switch (graph_.nodes[i].kind) {
      case NodeKind::kCall:
        CheckCall(i);
        break;
      case NodeKind::kDelegate:
        CheckDelegate(i);
        break;
      case NodeKind::kGetItem:
        CheckGetItem(i);
        break;
      case NodeKind::kInput:
      case NodeKind::kConstant:
        CheckProgramData(i);
        break;
      case NodeKind::kOutput:
        CheckOutputs(i);
        break;
    }
  }

  void CheckSpecs(int32_t i) {
    const Node& node = graph_.nodes[i];
    if (addressable_ != nullptr) {
      if (node.result == ResultKind::kTensor)
        addressable_->Add(node, node.tensor);
      if (node.result == ResultKind::kTuple)
        for (const TensorSpec& spec : node.tuple) addressable_->Add(node, spec);
    }
    if (node.result == ResultKind::kTensor) {
      planned_ |= node.tensor.memory.planned;
      sound_[i] = CheckSpec(
          node.tensor, [&] { return absl::StrCat("'", node.name, "'"); },
          [&] { return std::vector<std::string>{node.name}; }, diagnostics_);
    } else if (node.result == ResultKind::kTuple) {
      for (int32_t e = 0; e < static_cast<int32_t>(node.tuple.size()); ++e) {
        planned_ |= node.tuple[e].memory.planned;
        auto subject = [&] {
          return absl::StrCat("'", graph_.ValueName(ValueId{i, e}), "'");
        };
        if (!CheckSpec(
                node.tuple[e], subject,
                [&] { return std::vector<std::string>{node.name}; },
                diagnostics_)) {
          sound_[i] = false;
        }
      }
    }
  }

  // Whether node `i` and everything it reads declared sound specs.
  bool SoundWithOperands(int32_t i) const {
    bool sound = sound_[i];
    ForEachOperand(graph_.nodes[i], [&](const ValueId& v) {
      if (!Sound(v.node)) sound = false;
    });
    return sound;
  }

  // --- Calls

  void CheckCall(int32_t i) {
    const Node& node = graph_.nodes[i];
    const OpInfo* info = RegisteredOp(node);
    const OpSchema* schema =
        node.schema != nullptr
            ? node.schema.get()
            : (info != nullptr ? info->schema.get() : nullptr);
    if (schema == nullptr) return;  // Import reported the unknown operator.
    // The operator's name, for messages.
    auto op = [&] { return schema->QualifiedName(); };
    const bool is_copy = node.target == kH2DCopyOp || node.target == kD2HCopyOp;
    if (is_copy && module_ != nullptr && !module_device_.is_host()) {
      diagnostics_.Error(
          codes::kCopyInDeviceModule,
          absl::StrCat("'", node.name, "' calls ", node.target.str(),
                       " inside ", "module '", module_->id, "', which runs on ",
                       module_device_.ToString(),
                       ": host/device copies cannot run inside a device "
                       "delegate"),
          {node.name}, "copy before the delegate call, in the calling method");
    }

    absl::StatusOr<BoundArguments> bound = BindArguments(*schema, node.args);
    if (!bound.ok()) {
      diagnostics_.Error(codes::kArity, std::string(bound.status().message()),
                         {node.name});
      return;
    }
    bool types_match = true;
    for (size_t p = 0; p < bound->size(); ++p) {
      const Argument* arg = (*bound)[p];
      const SchemaArgument& param = schema->arguments[p];
      if (arg == nullptr || ArgumentMatchesType(graph_, *arg, param.type)) {
        continue;
      }
      std::vector<std::string> nodes = {node.name};
      if (arg->kind == ArgKind::kValue && arg->value.valid()) {
        nodes.push_back(graph_.nodes[arg->value.node].name);
      }
      diagnostics_.Error(codes::kArgumentType,
                         absl::StrCat("argument '", param.name, "' of '", op(),
                                      "' must be ", TypeText(param.type),
                                      ", got ", ArgumentText(graph_, *arg)),
                         std::move(nodes));
      types_match = false;
    }
    if (!CheckResultKind(node, *schema) || !types_match) return;
    if (node.result == ResultKind::kScalar &&
        !(node.schema_text.empty() && info != nullptr && info->metadata_only)) {
      diagnostics_.Error(
          codes::kScalarFromDataOp,
          absl::StrCat("'", node.name, "' calls '", op(),
                       "', which returns a scalar but is not a registered "
                       "metadata operator: the runtime can compute scalars "
                       "only from specs (sym_size.int, sym_numel, "
                       "sym_stride.int)"),
          {node.name});
      return;
    }
    const bool sound = SoundWithOperands(i);
    if (sound) {
      CheckAliasedResults(i, *schema, *bound);
      if (is_copy) CheckCopyLayout(i);
    }
    if (info == nullptr || !sound) return;
    if (node.schema != nullptr && node.schema != info->schema &&
        !SameSignature(*node.schema, *info->schema)) {
      return;  // The node's own schema differs from the registered one.
    }

    // Bound to the registry's own schema, with every argument of its type
    // and every operand sound: the rule needs no second binding.
    absl::StatusOr<std::vector<TensorSpec>> inferred =
        schema == info->schema.get()
            ? InferBoundResultSpecs(*info, graph_, node, *std::move(bound))
            : InferResultSpecs(*info, graph_, node);
    if (!inferred.ok()) {
      if (absl::IsUnimplemented(inferred.status())) return;
      diagnostics_.Error(IsDTypeError(inferred.status())
                             ? codes::kDTypeMismatch
                             : codes::kShapeMismatch,
                         std::string(inferred.status().message()), {node.name});
      return;
    }
    CompareResults(i, *info->schema, *schema, *inferred);
  }

  // Bytes of the storage `value` lives in, as the runtime allocates it: a
  // fresh value's own extent, program data's constant-table entry. nullopt
  // when unknown (a module's user input lives in its caller's storage).
  std::optional<int64_t> RootStorageBytes(const ValueId& value) const {
    ValueId root = roots_->RootOf(value);
    if (!Sound(root.node)) return std::nullopt;
    const Node& node = graph_.nodes[root.node];
    if (node.kind == NodeKind::kConstant ||
        (node.kind == NodeKind::kInput &&
         node.input_kind != InputKind::kUserInput)) {
      const Constant* constant = program_.FindConstant(node.target);
      if (constant == nullptr) return std::nullopt;
      return constant->spec.StorageBytes();
    }
    if (node.kind == NodeKind::kInput && module_ != nullptr) {
      return std::nullopt;
    }
    const TensorSpec* spec = graph_.Spec(root);
    if (spec == nullptr) return std::nullopt;
    return spec->StorageBytes();
  }

  // A view or an in-place result reads its argument's storage through its
  // own spec, which must stay inside that storage (the runtime refuses it
  // otherwise; shape rules pin registered views, custom ones are checked
  // here).
  void CheckAliasedResults(int32_t i, const OpSchema& schema,
                           const BoundArguments& bound) {
    const Node& node = graph_.nodes[i];
    const int32_t results = node.result == ResultKind::kTuple
                                ? static_cast<int32_t>(node.tuple.size())
                                : (node.result == ResultKind::kTensor ? 1 : 0);
    for (int32_t r = 0; r < results; ++r) {
      std::optional<int> aliased = schema.AliasedArgument(r);
      if (!aliased.has_value() || *aliased >= static_cast<int>(bound.size()) ||
          bound[*aliased] == nullptr ||
          bound[*aliased]->kind != ArgKind::kValue) {
        continue;
      }
      const TensorSpec* spec =
          node.Spec(node.result == ResultKind::kTuple ? r : -1);
      std::optional<int64_t> root = RootStorageBytes(bound[*aliased]->value);
      if (spec == nullptr || !root.has_value()) continue;
      std::optional<int64_t> reads = spec->StorageBytes();
      if (reads.has_value() && *reads <= *root) continue;
      diagnostics_.Error(
          codes::kOutsideStorage,
          absl::StrCat("'",
                       graph_.ValueName(ValueId{
                           i, node.result == ResultKind::kTuple ? r : -1}),
                       "' aliases '", graph_.ValueName(bound[*aliased]->value),
                       "', whose storage has ", *root, " bytes, but its spec ",
                       LayoutText(*spec), " reaches ", reads.value_or(-1),
                       " bytes"),
          {node.name},
          "a view's sizes, strides and offset must address its input's "
          "storage");
    }
  }

  // A copy moves its source's bytes unchanged: the result must lay the
  // elements out as the source does.
  void CheckCopyLayout(int32_t i) {
    const Node& node = graph_.nodes[i];
    if (node.args.size() != 1 || node.args[0].kind != ArgKind::kValue) return;
    const TensorSpec* source = graph_.Spec(node.args[0].value);
    const TensorSpec* result = node.Spec();
    if (source == nullptr || result == nullptr) return;
    if (source->dtype == result->dtype && SameAddressing(*source, *result)) {
      return;
    }
    diagnostics_.Error(
        codes::kShapeMismatch,
        absl::StrCat("'", node.name, "' copies '",
                     graph_.ValueName(node.args[0].value), "' (",
                     LayoutText(*source), ") into ", LayoutText(*result),
                     ": a copy cannot change the layout"),
        {node.name}, "give the copy its source's dtype, sizes and strides");
  }

  // The node's result kind must be what the schema returns. Returns whether
  // it is.
  bool CheckResultKind(const Node& node, const OpSchema& schema) {
    // What the schema returns, for the message (a tuple's is spelled there).
    std::string_view expected;
    bool matches = true;
    if (schema.returns.empty()) {
      expected = "nothing";
      matches = node.result == ResultKind::kNone;
    } else if (schema.returns_tuple) {
      matches = node.result == ResultKind::kTuple &&
                node.tuple.size() == schema.returns.size();
    } else {
      switch (schema.returns[0].type.kind) {
        case SchemaTypeKind::kTensor:
          expected = "a tensor";
          matches = node.result == ResultKind::kTensor;
          break;
        case SchemaTypeKind::kInt:
          expected = "an int scalar";
          matches = node.result == ResultKind::kScalar &&
                    node.scalar == ScalarType::kInt;
          break;
        case SchemaTypeKind::kFloat:
          expected = "a float scalar";
          matches = node.result == ResultKind::kScalar &&
                    node.scalar == ScalarType::kFloat;
          break;
        case SchemaTypeKind::kBool:
          expected = "a bool scalar";
          matches = node.result == ResultKind::kScalar &&
                    node.scalar == ScalarType::kBool;
          break;
        case SchemaTypeKind::kScalar:
          expected = "a scalar";
          matches = node.result == ResultKind::kScalar;
          break;
        default:
          return true;  // Lists and others: not representable; not checked.
      }
    }
    if (matches) return true;
    diagnostics_.Error(
        codes::kResultCount,
        absl::StrCat("'", schema.QualifiedName(), "' returns ",
                     expected.empty()
                         ? absl::StrCat("a tuple of ", schema.returns.size())
                         : std::string(expected),
                     ", but '", node.name, "' declares ",
                     DeclaredResultText(node)),
        {node.name});
    return false;
  }

  // `named`: the schema whose name the messages use (the node's own).
  void CompareResults(int32_t i, const OpSchema& schema, const OpSchema& named,
                      const std::vector<TensorSpec>& inferred) {
    const Node& node = graph_.nodes[i];
    for (int32_t r = 0; r < static_cast<int32_t>(inferred.size()); ++r) {
      // A list result (split's Tensor[]) is held as a tuple too.
      int32_t element =
          schema.returns_tuple || node.result == ResultKind::kTuple ? r : -1;
      const TensorSpec* declared = node.Spec(element);
      if (declared == nullptr) continue;
      const TensorSpec& computed = inferred[r];
      auto subject = [&] {
        return absl::StrCat("'", graph_.ValueName(ValueId{i, element}), "'");
      };
      if (!CompareDTypeAndSizes(
              computed, *declared,
              [&] {
                return absl::StrCat("'", named.QualifiedName(), "' computes");
              },
              subject, [&] { return std::vector<std::string>{node.name}; },
              diagnostics_)) {
        continue;
      }
      // A view or an in-place result addresses its argument's storage: its
      // layout is fully determined.
      if (schema.AliasedArgument(r).has_value() &&
          !SameAddressing(computed, *declared)) {
        diagnostics_.Error(
            codes::kShapeMismatch,
            absl::StrCat("'", named.QualifiedName(), "' computes ",
                         LayoutText(computed), ", but ", subject(),
                         " is declared with strides ",
                         ShapeText(declared->Strides()), " and offset ",
                         declared->storage_offset),
            {node.name},
            "a view's (or in-place result's) strides and storage offset "
            "follow from its input's");
      }
    }
  }

  // --- Delegates

  const std::vector<int32_t>& UserInputsOf(const LoweredModule& module) {
    auto [it, inserted] = user_inputs_.try_emplace(&module);
    if (inserted) it->second = UserInputs(module.graph);
    return it->second;
  }

  void CheckDelegate(int32_t i) {
    const Node& node = graph_.nodes[i];
    const LoweredModule* module = program_.FindModule(node.target);
    if (module == nullptr) return;  // Import reported it.
    if (calls_ != nullptr) calls_->push_back(module);
    auto called = [&] { return absl::StrCat("module '", module->id, "'"); };

    if (!module->target_device.ok()) {
      diagnostics_.Error(
          codes::kBadTargetDevice,
          absl::StrCat(
              "delegate '", node.name, "' calls ", called(),
              ", whose target_device '",
              module->TargetDeviceText().value_or(""),
              "' is invalid: ", module->target_device.status().message()),
          {node.name},
          HintOr(DidYouMeanDevice(module->TargetDeviceText().value_or("")),
                 "use 'cpu' or 'cuda:N' (N >= 0; the type is "
                 "case-insensitive)"));
    } else if (const Device device = module->device();
               module_ != nullptr && !device.is_host() &&
               !(device == module_device_)) {
      // Compiled code runs on its module's device and can call only code
      // on the same device (or host code, which runs there too).
      diagnostics_.Error(
          codes::kNestedDelegateDevice,
          absl::StrCat("delegate '", node.name, "' inside module '",
                       module_->id, "' (on ", module_device_.ToString(),
                       ") calls ", called(), " on ", device.ToString(),
                       ": a nested delegate must target its parent's "
                       "device"),
          {node.name});
    }

    const std::vector<int32_t>& inputs = UserInputsOf(*module);
    if (node.args.size() != inputs.size()) {
      diagnostics_.Error(
          codes::kDelegateArity,
          absl::StrCat("delegate '", node.name, "' passes ", node.args.size(),
                       " argument", node.args.size() == 1 ? "" : "s", " to ",
                       called(), ", which has ", inputs.size(), " user input",
                       inputs.size() == 1 ? "" : "s"),
          {node.name});
    } else {
      for (size_t a = 0; a < inputs.size(); ++a) {
        CheckDelegateArgument(node, a, *module, inputs[a]);
      }
    }
    CheckDelegateResult(i, *module);
  }

  void CheckDelegateArgument(const Node& node, size_t index,
                             const LoweredModule& module, int32_t input) {
    const Argument& arg = node.args[index];
    const TensorSpec* spec =
        arg.kind == ArgKind::kValue ? graph_.Spec(arg.value) : nullptr;
    if (spec == nullptr) {
      diagnostics_.Error(
          codes::kArgumentType,
          absl::StrCat("argument ", index, " of delegate '", node.name,
                       "' must be a tensor, got ", ArgumentText(graph_, arg)),
          {node.name});
      return;
    }
    const Node& input_node = module.graph.nodes[input];
    if (!Sound(arg.value.node) || input_node.result != ResultKind::kTensor) {
      return;
    }
    if (!CompareDTypeAndSizes(
            input_node.tensor, *spec,
            [&] {
              return absl::StrCat("module '", module.id, "' takes input '",
                                  input_node.name, "' as");
            },
            [&] {
              return absl::StrCat("argument ", index, " '",
                                  graph_.ValueName(arg.value),
                                  "' of delegate '", node.name, "'");
            },
            [&] {
              return std::vector<std::string>{
                  node.name, graph_.nodes[arg.value.node].name};
            },
            diagnostics_)) {
      return;
    }
    // Compiled code reads the argument with the layout it was compiled for
    // (its input layout; the input's own spec when there is none).
    const TensorSpec& compiled = index < module.input_layouts.size()
                                     ? module.input_layouts[index]
                                     : input_node.tensor;
    if (compiled.dtype != spec->dtype || compiled.sizes != spec->sizes) {
      return;  // The module's layouts disagree with its inputs: E0404.
    }
    if (!SameAddressing(compiled, *spec)) {
      diagnostics_.Error(
          codes::kDelegateLayout,
          absl::StrCat("argument ", index, " '", graph_.ValueName(arg.value),
                       "' of delegate '", node.name, "' is laid out as ",
                       LayoutText(*spec), ", but module '", module.id,
                       "' was compiled for ", LayoutText(compiled)),
          {node.name, graph_.nodes[arg.value.node].name},
          "pass the value in the layout the module was compiled for (copy "
          "it with that layout first), or compile the module for this one");
    }
  }

  void CheckDelegateResult(int32_t i, const LoweredModule& module) {
    const Node& node = graph_.nodes[i];
    const Node* output = OutputNode(module.graph);
    auto called = [&] { return absl::StrCat("module '", module.id, "'"); };
    if (module.returns_tuple != (node.result == ResultKind::kTuple) ||
        (!module.returns_tuple && node.result != ResultKind::kTensor)) {
      diagnostics_.Error(
          codes::kDelegateResult,
          absl::StrCat(
              "delegate '", node.name, "' calls ", called(), ", which returns ",
              module.returns_tuple ? "a tuple" : "one bare tensor", ", but '",
              node.name, "' declares ", DeclaredResultText(node)),
          {node.name},
          module.returns_tuple
              ? "give the delegate a tuple result and read it with getitem"
              : "give the delegate a tensor result");
      return;
    }
    if (output == nullptr) return;
    size_t outputs = output->args.size();
    size_t declared = module.returns_tuple ? node.tuple.size() : 1;
    if (outputs != declared) {
      diagnostics_.Error(
          codes::kDelegateResult,
          absl::StrCat(
              called(), " returns ", outputs, " value", outputs == 1 ? "" : "s",
              ", but delegate '", node.name, "' declares ",
              module.returns_tuple ? absl::StrCat("a tuple of ", declared)
                                   : std::string("one bare tensor")),
          {node.name});
      return;
    }
    if (!sound_[i]) return;
    for (size_t r = 0; r < outputs; ++r) {
      const Argument& value = output->args[r];
      const TensorSpec* computed = value.kind == ArgKind::kValue
                                       ? module.graph.Spec(value.value)
                                       : nullptr;
      int32_t element = module.returns_tuple ? static_cast<int32_t>(r) : -1;
      const TensorSpec* spec = node.Spec(element);
      if (computed == nullptr || spec == nullptr) continue;
      CompareDTypeAndSizes(
          *computed, *spec, [&] { return absl::StrCat(called(), " returns"); },
          [&] {
            return absl::StrCat("'", graph_.ValueName(ValueId{i, element}),
                                "'");
          },
          [&] { return std::vector<std::string>{node.name}; }, diagnostics_);
    }
  }

  // --- Getitems and program data

  void CheckGetItem(int32_t i) {
    const Node& node = graph_.nodes[i];
    if (node.result != ResultKind::kTensor || !SoundWithOperands(i)) return;
    ValueId element{node.getitem_source, node.getitem_index};
    const TensorSpec* source = graph_.Spec(element);
    if (source == nullptr) return;  // Import reported it.
    if (!CompareDTypeAndSizes(
            *source, node.tensor,
            [&] {
              return absl::StrCat("'", graph_.ValueName(element), "' is");
            },
            [&] { return absl::StrCat("'", node.name, "'"); },
            [&] { return std::vector<std::string>{node.name}; },
            diagnostics_)) {
      return;
    }
    // A getitem reads the element's storage through its own spec (when
    // that spec is the element's layout, it reads exactly that storage).
    if (node.tensor.storage_offset == source->storage_offset &&
        node.tensor.strides == source->strides) {
      return;
    }
    std::optional<int64_t> storage = source->StorageBytes();
    std::optional<int64_t> reads = node.tensor.StorageBytes();
    if (storage.has_value() && reads.has_value() && *reads > *storage) {
      diagnostics_.Error(
          codes::kOutsideStorage,
          absl::StrCat("'", node.name, "' reads '", graph_.ValueName(element),
                       "' (", *storage, " bytes of storage) as ",
                       LayoutText(node.tensor), ", which reaches ", *reads,
                       " bytes"),
          {node.name}, "give the getitem the element's strides and offset");
    }
  }

  void CheckProgramData(int32_t i) {
    const Node& node = graph_.nodes[i];
    bool reads_constant = node.kind == NodeKind::kConstant ||
                          (node.kind == NodeKind::kInput &&
                           node.input_kind != InputKind::kUserInput &&
                           node.input_kind != InputKind::kInvalid);
    if (!reads_constant || node.result != ResultKind::kTensor || !sound_[i]) {
      return;
    }
    const Constant* constant = program_.FindConstant(node.target);
    if (constant == nullptr) return;  // Import reported it.
    if (!CompareDTypeAndSizes(
            constant->spec, node.tensor,
            [&] { return absl::StrCat("constant '", constant->name, "' is"); },
            [&] { return absl::StrCat("'", node.name, "'"); },
            [&] { return std::vector<std::string>{node.name}; },
            diagnostics_)) {
      return;
    }
    // The node reads the table's storage in place: with the table's layout.
    if (!SameAddressing(constant->spec, node.tensor)) {
      diagnostics_.Error(
          codes::kConstantLayout,
          absl::StrCat("constant '", constant->name, "' is stored as ",
                       LayoutText(constant->spec), ", but '", node.name,
                       "' reads it as ", LayoutText(node.tensor)),
          {node.name},
          "give the node the constant's strides and storage offset");
    }
  }

  // --- Outputs

  // Every returned value is a value: a tensor (or, from a method, a scalar
  // of a metadata operator); a lowered module returns tensors only.
  void CheckOutputs(int32_t i) {
    const Node& node = graph_.nodes[i];
    for (size_t o = 0; o < node.args.size(); ++o) {
      const Argument& arg = node.args[o];
      if (arg.kind != ArgKind::kValue) {
        diagnostics_.Error(
            codes::kOutputNotAValue,
            absl::StrCat("output ", o, " of ",
                         module_ != nullptr
                             ? absl::StrCat("module '", module_->id, "'")
                             : absl::StrCat("method '", graph_.name, "'"),
                         " is ", ArgumentText(graph_, arg), ", not a value"),
            {node.name}, "return values by node name (or tuple element)");
        continue;
      }
      if (module_ != nullptr && arg.value.valid() &&
          graph_.Spec(arg.value) == nullptr) {
        diagnostics_.Error(
            codes::kModuleOutputNotTensor,
            absl::StrCat("output ", o, " of module '", module_->id, "' is ",
                         ArgumentText(graph_, arg),
                         ": a lowered module returns tensors"),
            {node.name, graph_.ValueName(arg.value)});
      }
    }
  }

  // --- Memory plan (methods; a module's graph lives in fresh buffers)

  // Every planned value that owns its storage (the runtime binds it at
  // `arena base + offset`) lies inside an arena of the method.
  void CheckArenas() {
    for (size_t a = 0; a < graph_.arenas.size(); ++a) {
      if (graph_.arenas[a].size < 0) {
        diagnostics_.Error(
            codes::kBadPlacement,
            absl::StrCat("arena ", a, " of method '", graph_.name,
                         "' has negative size ", graph_.arenas[a].size),
            {});
      }
    }
    for (int32_t i = 0; planned_ && i < NodeCount(); ++i) {
      if (!sound_[i] || !OwnsStorage(i)) continue;
      const Node& node = graph_.nodes[i];
      const int32_t results =
          node.result == ResultKind::kTuple
              ? static_cast<int32_t>(node.tuple.size())
              : (node.result == ResultKind::kTensor ? 1 : 0);
      for (int32_t r = 0; r < results; ++r) {
        const int32_t element = node.result == ResultKind::kTuple ? r : -1;
        if (node.kind == NodeKind::kCall && node.schema != nullptr &&
            node.schema->AliasedArgument(r).has_value()) {
          continue;  // shares an argument's storage
        }
        CheckPlacement(ValueId{i, element}, *node.Spec(element));
      }
    }
  }

  // Whether the runtime gives node `i`'s result storage of its own (the
  // planned placement is used) rather than an alias or program data.
  bool OwnsStorage(int32_t i) const {
    const Node& node = graph_.nodes[i];
    switch (node.kind) {
      case NodeKind::kInput:
        return node.input_kind == InputKind::kUserInput;
      case NodeKind::kDelegate:
        return true;
      case NodeKind::kCall:
        if (node.at_load) return false;  // its own allocation
        return node.result == ResultKind::kTuple ||
               roots_->RootOfNode(i) == ValueId{i, -1};
      default:
        return false;
    }
  }

  void CheckPlacement(const ValueId& value, const TensorSpec& spec) {
    const MemoryPlacement& m = spec.memory;
    if (!m.planned) return;
    const std::string name = graph_.ValueName(value);
    const std::vector<std::string> nodes = {graph_.nodes[value.node].name};
    if (m.arena < 0 || m.arena >= static_cast<int32_t>(graph_.arenas.size())) {
      diagnostics_.Error(codes::kBadPlacement,
                         absl::StrCat("'", name, "' is planned in arena ",
                                      m.arena, ", but method '", graph_.name,
                                      "' has ", graph_.arenas.size(), " arena",
                                      graph_.arenas.size() == 1 ? "" : "s"),
                         nodes);
      return;
    }
    const int64_t bytes = spec.StorageBytes().value_or(0);
    const int64_t reserved = m.size > 0 ? m.size : bytes;
    const int64_t arena = graph_.arenas[m.arena].size;
    if (m.offset < 0 || m.size < 0 || reserved < bytes || reserved > arena ||
        m.offset > arena - reserved) {
      diagnostics_.Error(
          codes::kBadPlacement,
          absl::StrCat("'", name, "' is planned at offset ", m.offset, " size ",
                       m.size, " of arena ", m.arena, " (", arena,
                       " bytes), but its storage spans ", bytes, " bytes"),
          nodes, "the planned bytes must cover the storage, inside the arena");
    }
  }

  const ProgramIndex& program_;
  const Method& graph_;
  Diagnostics& diagnostics_;
  const LoweredModule* module_;  // null for a method
  Device module_device_;         // where module_ runs (the host by default)
  AddressableCount* addressable_;
  std::vector<const LoweredModule*>* calls_;
  MethodNodesSeen* seen_;
  const StorageRoots* roots_ = nullptr;  // during Run: nodes [0, checked_)
  std::vector<char> sound_;  // Per node: its declared specs are sound.
  int32_t checked_ = 0;   // The nodes whose specs are checked: [0, checked_).
  bool planned_ = false;  // Some declared spec has a memory placement.
  // UserInputs of each module a delegate calls, found once per module.
  std::unordered_map<const LoweredModule*, std::vector<int32_t>> user_inputs_;
};

// --- Program level
// ------------------------------------------------------------------

bool IsLowerHex(std::string_view text) {
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

void CheckBlobRef(const Constant& constant, const std::string& subject,
                  Diagnostics& diagnostics) {
  const BlobRef& blob = *constant.data_digest;
  if (constant.data) {
    diagnostics.Error(codes::kBadBlobRef,
                      absl::StrCat(subject, " has both data and data_digest"),
                      {constant.name},
                      "send the bytes one way: inline or as a blob");
    return;
  }
  if (blob.hash.size() != 64 || !IsLowerHex(blob.hash)) {
    diagnostics.Error(
        codes::kBadBlobRef,
        absl::StrCat(subject, "'s data_digest hash '", blob.hash.substr(0, 80),
                     "' is not 64 lowercase hex digits (SHA-256)"),
        {constant.name});
    return;
  }
  std::optional<int64_t> spans = constant.spec.StorageBytes();
  if (spans.has_value() && *spans != blob.size_bytes) {
    diagnostics.Error(
        codes::kBadBlobRef,
        absl::StrCat(subject, "'s blob has ", blob.size_bytes,
                     " bytes, but its spec ", LayoutText(constant.spec),
                     " spans ", *spans, " bytes"),
        {constant.name},
        "a blob must cover exactly the storage its spec addresses, as "
        "inline data does");
  }
}

void CheckConstants(const Program& program, Diagnostics& diagnostics) {
  for (const Constant& constant : program.constants) {
    std::string subject = absl::StrCat("constant '", constant.name, "'");
    if (!CheckSpec(
            constant.spec, [&] { return subject; },
            [&] { return std::vector<std::string>{constant.name}; },
            diagnostics)) {
      continue;
    }
    if (constant.data_digest) {
      CheckBlobRef(constant, subject, diagnostics);
      continue;
    }
    if (!constant.data.has_value()) continue;
    std::optional<int64_t> spans = constant.spec.StorageBytes();
    int64_t given = static_cast<int64_t>(constant.data->size());
    if (spans.has_value() && *spans != given) {
      diagnostics.Error(
          codes::kOutsideStorage,
          absl::StrCat(subject, " has ", given, " bytes of data, but its spec ",
                       LayoutText(constant.spec), " spans ", *spans, " bytes"),
          {constant.name},
          "data must cover exactly the storage its spec addresses, from "
          "element 0 of the storage");
    }
  }
}

// Module facts beyond its graph: input layouts, and the target device of a
// module no delegate calls (delegates report their module's otherwise).
void CheckModule(const LoweredModule& module, bool called,
                 Diagnostics& diagnostics) {
  std::string name = absl::StrCat("module '", module.id, "'");
  if (!called && !module.target_device.ok()) {
    diagnostics.Error(
        codes::kBadTargetDevice,
        absl::StrCat(name, " has an invalid target_device '",
                     module.TargetDeviceText().value_or(""),
                     "': ", module.target_device.status().message()),
        {},
        HintOr(DidYouMeanDevice(module.TargetDeviceText().value_or("")),
               "use 'cpu' or 'cuda:N' (N >= 0)"));
  }
  std::vector<int32_t> inputs = UserInputs(module.graph);
  std::vector<std::string> input_names;
  for (int32_t input : inputs) {
    input_names.push_back(module.graph.nodes[input].name);
  }
  for (size_t l = 0; l < module.input_layouts.size(); ++l) {
    std::vector<std::string> nodes;
    if (l < input_names.size()) nodes.push_back(input_names[l]);
    if (!CheckSpec(
            module.input_layouts[l],
            [&] { return absl::StrCat("input layout ", l, " of ", name); },
            [&] { return nodes; }, diagnostics) ||
        l >= inputs.size()) {
      continue;
    }
    const Node& input = module.graph.nodes[inputs[l]];
    const TensorSpec& layout = module.input_layouts[l];
    if (input.result == ResultKind::kTensor &&
        (input.tensor.dtype != layout.dtype ||
         input.tensor.sizes != layout.sizes)) {
      diagnostics.Error(
          codes::kBadModule,
          absl::StrCat("input layout ", l, " of ", name, " is ",
                       SpecText(layout), ", but its user input '", input.name,
                       "' is ", SpecText(input.tensor)),
          nodes);
    }
  }
  if (module.input_layouts.size() != inputs.size()) {
    diagnostics.Error(
        codes::kBadModule,
        absl::StrCat(
            name, " has ", module.input_layouts.size(), " input layout",
            module.input_layouts.size() == 1 ? "" : "s", " for ", inputs.size(),
            " user input", inputs.size() == 1 ? "" : "s"),
        input_names, "give one input layout per user input, in order");
  }
}

// --- The module call graph
// ----------------------------------------------------------

// "a -> b -> c"; long chains keep their ends: "a -> b -> ... (n more) -> z".
std::string ChainText(const std::vector<const LoweredModule*>& chain) {
  constexpr size_t kEnds = 4;
  std::string text;
  for (size_t k = 0; k < chain.size(); ++k) {
    if (chain.size() > 2 * kEnds + 1 && k == kEnds) {
      absl::StrAppend(&text, " -> ... (", chain.size() - 2 * kEnds, " more)");
      k = chain.size() - kEnds - 1;
      continue;
    }
    absl::StrAppend(&text, k > 0 ? " -> " : "", "'", chain[k]->id, "'");
  }
  return text;
}

// The module graph: which modules each module's delegates call.
//
// The runtime instantiates a module's graph for every delegate that calls
// it, inside its caller's instance, so calls must not cycle (that recursion
// has no end), nest deeper than kMaxModuleNesting, or multiply into more
// than kMaxInstantiatedNodes nodes (two calls per level double the work at
// every level). Everything here is iterative: the nesting is the client's.
class ModuleCallGraph {
 public:
  // The delegates of each method, the modules they call in node order (a
  // module is named by the first module with its id), when a walk over the
  // methods found them already (validation's own); else this finds them.
  using MethodCalls = std::vector<std::vector<const LoweredModule*>>;

  ModuleCallGraph(const Program& program, Diagnostics& diagnostics,
                  const MethodCalls* method_calls = nullptr)
      : program_(program), diagnostics_(diagnostics) {
    const int32_t count = static_cast<int32_t>(program.modules.size());
    std::unordered_map<std::string_view, int32_t> by_id;
    first_with_id_.resize(count);
    for (int32_t m = 0; m < count; ++m)
      first_with_id_[m] = by_id.emplace(program.modules[m].id, m).first->second;
    called_.assign(count, 0);
    calls_.resize(count);
    for (int32_t m = 0; m < count; ++m) {
      const Method& graph = program.modules[m].graph;
      for (int32_t i = 0; i < static_cast<int32_t>(graph.nodes.size()); ++i) {
        if (graph.nodes[i].kind != NodeKind::kDelegate) continue;
        auto it = by_id.find(graph.nodes[i].target);
        if (it == by_id.end()) continue;
        calls_[m].push_back(Call{i, it->second});
        called_[it->second] = 1;
      }
    }
    method_calls_.resize(program.methods.size());
    auto add_call = [&](size_t k, int32_t callee) {
      method_calls_[k].push_back(callee);
      called_[callee] = 1;
    };
    if (method_calls != nullptr) {
      for (size_t k = 0; k < method_calls->size(); ++k)
        for (const LoweredModule* callee : (*method_calls)[k])
          add_call(k, static_cast<int32_t>(callee - program.modules.data()));
      return;
    }
    for (size_t k = 0; k < program.methods.size(); ++k) {
      for (const Node& node : program.methods[k].nodes) {
        if (node.kind != NodeKind::kDelegate) continue;
        auto it = by_id.find(node.target);
        if (it != by_id.end()) add_call(k, it->second);
      }
    }
  }

  // Whether a delegate, in a method or a module's graph, calls module `m`'s
  // id (which names the first module with that id).
  bool IsCalled(int32_t m) const { return called_[first_with_id_[m]]; }

  void Check() {
    if (!CheckAcyclic()) return;  // heights and sizes need an order
    ComputeHeightsAndSizes();
    CheckNesting();
    CheckExpansion();
  }

 private:
  struct Call {
    int32_t node;    // the delegate node in the caller's graph
    int32_t callee;  // module index
  };

  // Depth-first search with an explicit stack; a call to a module that is
  // on the stack closes a cycle, reported (once per calling module) naming
  // the modules on it.
  // Leaves `postorder_` (callees before callers) when there is none.
  bool CheckAcyclic() {
    const int32_t count = static_cast<int32_t>(calls_.size());
    enum : char { kNew, kOnStack, kDone };
    std::vector<char> state(count, kNew);
    struct Frame {
      int32_t module;
      size_t next_call;
    };
    bool acyclic = true;
    std::vector<char> reported(count, 0);  // one cycle per calling module
    for (int32_t start = 0; start < count; ++start) {
      if (state[start] != kNew) continue;
      std::vector<Frame> stack = {{start, 0}};
      state[start] = kOnStack;
      while (!stack.empty()) {
        Frame& top = stack.back();
        if (top.next_call == calls_[top.module].size()) {
          state[top.module] = kDone;
          postorder_.push_back(top.module);
          stack.pop_back();
          continue;
        }
        const Call call = calls_[top.module][top.next_call++];
        if (state[call.callee] == kNew) {
          state[call.callee] = kOnStack;
          stack.push_back({call.callee, 0});
        } else if (state[call.callee] == kOnStack) {
          if (!reported[top.module]) ReportCycle(stack, call);
          reported[top.module] = 1;
          acyclic = false;
        }
      }
    }
    return acyclic;
  }

  template <typename Frames>
  void ReportCycle(const Frames& stack, const Call& closing) {
    size_t first = 0;
    while (stack[first].module != closing.callee) ++first;
    std::vector<const LoweredModule*> cycle;
    for (size_t k = first; k < stack.size(); ++k) {
      cycle.push_back(&program_.modules[stack[k].module]);
    }
    cycle.push_back(&program_.modules[closing.callee]);
    const LoweredModule& caller = program_.modules[stack.back().module];
    diagnostics_.SetMethod(absl::StrCat("module:", caller.id));
    diagnostics_.Error(
        codes::kModuleCycle,
        cycle.size() == 2
            ? absl::StrCat("module '", caller.id, "' calls itself (delegate '",
                           caller.graph.nodes[closing.node].name,
                           "'): lowered modules cannot recurse")
            : absl::StrCat("lowered modules call each other in a cycle: ",
                           ChainText(cycle),
                           "; lowered modules cannot recurse"),
        {caller.graph.nodes[closing.node].name},
        "a delegate may call only modules that do not call back");
  }

  // In postorder, so every callee is done before its callers: a module's
  // height (the longest chain of nested modules it starts, itself
  // included) and the nodes one call of it instantiates, saturating just
  // above the limit so the sums cannot overflow.
  void ComputeHeightsAndSizes() {
    const int32_t count = static_cast<int32_t>(calls_.size());
    height_.assign(count, 1);
    deepest_callee_.assign(count, -1);
    size_.assign(count, 0);
    for (int32_t m : postorder_) {
      int64_t size =
          static_cast<int64_t>(program_.modules[m].graph.nodes.size());
      for (const Call& call : calls_[m]) {
        if (height_[call.callee] + 1 > height_[m]) {
          height_[m] = height_[call.callee] + 1;
          deepest_callee_[m] = call.callee;
        }
        size = SaturatingAdd(size, size_[call.callee]);
      }
      size_[m] = size;
    }
  }

  static int64_t SaturatingAdd(int64_t a, int64_t b) {
    return std::min<int64_t>(a + b, kMaxInstantiatedNodes + 1);
  }

  // One diagnostic, for the module starting the deepest chain (the first
  // such in program order).
  void CheckNesting() {
    int32_t deepest = -1;
    for (int32_t m = 0; m < static_cast<int32_t>(height_.size()); ++m) {
      if (height_[m] > kMaxModuleNesting &&
          (deepest < 0 || height_[m] > height_[deepest])) {
        deepest = m;
      }
    }
    if (deepest < 0) return;
    std::vector<const LoweredModule*> chain;
    for (int32_t m = deepest; m >= 0; m = deepest_callee_[m]) {
      chain.push_back(&program_.modules[m]);
    }
    const LoweredModule& top = program_.modules[deepest];
    std::vector<std::string> nodes;
    for (const Call& call : calls_[deepest]) {
      if (call.callee == deepest_callee_[deepest]) {
        nodes.push_back(top.graph.nodes[call.node].name);
        break;
      }
    }
    diagnostics_.SetMethod(absl::StrCat("module:", top.id));
    diagnostics_.Error(
        codes::kModuleNestingTooDeep,
        absl::StrCat("module '", top.id, "' starts a chain of ",
                     height_[deepest], " nested lowered modules (",
                     ChainText(chain), "); at most ", kMaxModuleNesting,
                     " may nest"),
        nodes, "flatten the nested modules into fewer levels");
  }

  // The nodes each method instantiates: its own, plus one copy of a
  // module's (with everything it calls) per delegate call.
  void CheckExpansion() {
    for (size_t k = 0; k < program_.methods.size(); ++k) {
      const Method& method = program_.methods[k];
      int64_t total = static_cast<int64_t>(method.nodes.size());
      for (int32_t callee : method_calls_[k]) {
        total = SaturatingAdd(total, size_[callee]);
      }
      if (total <= kMaxInstantiatedNodes) continue;
      diagnostics_.SetMethod(method.name);
      diagnostics_.Error(
          codes::kModuleExpansionTooLarge,
          absl::StrCat("method '", method.name, "' instantiates more than ",
                       kMaxInstantiatedNodes,
                       " nodes through its delegates' modules (each call of "
                       "a module instantiates its graph once)"),
          {}, "call fewer modules from modules, or lower fewer, larger ones");
    }
  }

  const Program& program_;
  Diagnostics& diagnostics_;
  std::vector<std::vector<Call>> calls_;            // per module, node order
  std::vector<std::vector<int32_t>> method_calls_;  // per method
  std::vector<int32_t> first_with_id_;  // per module: first with its id
  std::vector<char> called_;            // per module: a delegate calls it
  std::vector<int32_t> postorder_;
  std::vector<int32_t> height_;
  std::vector<int32_t> deepest_callee_;
  std::vector<int64_t> size_;
};

}  // namespace

bool ValidateProgram(const Program& program, Diagnostics& diagnostics,
                     absl::Status* addressable, MethodNodesSeen* seen) {
  int errors_before = diagnostics.error_count();
  diagnostics.SetMethod("");
  CheckConstants(program, diagnostics);
  const ProgramIndex index(program);
  // CheckAddressable's answer: the first graph past the bound, methods
  // first, as it looks.
  absl::Status first_over;
  auto count = [&](const AddressableCount& counted, auto subject) {
    if (first_over.ok()) first_over = counted.Status(subject);
  };
  // The modules the methods' delegates call, found by the validators.
  ModuleCallGraph::MethodCalls method_calls(program.methods.size());
  for (size_t k = 0; k < program.methods.size(); ++k) {
    const Method& method = program.methods[k];
    diagnostics.SetMethod(method.name);
    AddressableCount counted;
    GraphValidator(index, method, diagnostics, nullptr, &counted,
                   &method_calls[k], seen)
        .Run();
    count(counted, [&](absl::string_view node) {
      return NodeSubject(method.name, node);
    });
  }
  // Which modules are called is read from the call graph; its checks run
  // after the modules' own, as their reports come after.
  ModuleCallGraph calls(program, diagnostics, &method_calls);
  for (int32_t m = 0; m < static_cast<int32_t>(program.modules.size()); ++m) {
    const LoweredModule& module = program.modules[m];
    diagnostics.SetMethod(absl::StrCat("module:", module.id));
    CheckModule(module, calls.IsCalled(m), diagnostics);
    AddressableCount counted;
    GraphValidator(index, module.graph, diagnostics, &module, &counted).Run();
    count(counted, [&](absl::string_view node) {
      return ModuleNodeSubject(module.id, node);
    });
  }
  calls.Check();
  diagnostics.SetMethod("");
  const bool valid = diagnostics.error_count() == errors_before;
  if (valid && addressable != nullptr) *addressable = first_over;
  return valid;
}

bool ValidateModuleCallGraph(const Program& program, Diagnostics& diagnostics) {
  int errors_before = diagnostics.error_count();
  ModuleCallGraph(program, diagnostics).Check();
  diagnostics.SetMethod("");
  return diagnostics.error_count() == errors_before;
}

}  // namespace ferry
