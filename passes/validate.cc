// Semantic validation of an imported program.
//
// Import (proto_io.cc) has resolved every reference and schema; this pass
// checks what the references mean. It reports, never repairs.
//
// Order, so that diagnostics come out in a stable, readable order:
//  1. constants (method ""): their specs, and the size of their data;
//  2. each method, in order; then each lowered module (method
//     "module:<id>"): its input layouts, then its graph as a method.
//
// Within a graph, two phases:
//  - specs: every tensor spec a node declares is checked on its own (dtype,
//    strides rank and sign, sizes sign, int64 overflow of the element count
//    and of the storage extent, device). A node with a broken spec is
//    *unsound*: no shape rule runs over it, as a reader or as the call itself,
//    since a rule over garbage would only add noise (or overflow).
//  - nodes, in order:
//      call      arity (E0301), argument types (E0302), result kind against
//                the schema's returns (E0305), then the declared result
//                against the operator's shape rule: dtype (E0304), sizes
//                (E0303), and for results that alias an argument (views,
//                in-place results) the strides and storage offset too;
//      delegate  target_device (E0401), argument count (E0402) and specs
//                against the module's user inputs, result kind and specs
//                against the module's outputs (E0403);
//      getitem, program data inputs, constant nodes: declared spec against
//                the tuple element or constant they read.
//
// Layout comparison. Two layouts address the same elements when they have
// the same sizes, the same storage offset and the same strides in every dim
// of size > 1 (a size-1 dim's stride is never used; an empty tensor addresses
// nothing), so only those differences are reported.
#include "passes/validate.h"

#include <unordered_set>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "passes/diagnostic_codes.h"
#include "passes/schema.h"
#include "passes/shape_rules.h"

namespace ferry {
namespace {

// --- Specs on their own
// -------------------------------------------------------

// Checks one spec; `subject` names it in messages ("'y'", "constant 'w'").
// Returns whether it is sound.
bool CheckSpec(const TensorSpec& spec, const std::string& subject,
               const std::vector<std::string>& nodes,
               Diagnostics& diagnostics) {
  bool sound = true;
  if (spec.dtype == DType::kInvalid || ElementSize(spec.dtype) == 0) {
    diagnostics.Error(codes::kBadDType,
                      absl::StrCat(subject, " has no valid dtype"), nodes,
                      "use one of F32, F16, BF16, F64, I8, U8, I16, I32, I64, "
                      "BOOL");
    sound = false;
  }
  bool sizes_sound = true;
  for (size_t d = 0; d < spec.sizes.size(); ++d) {
    if (spec.sizes[d] < 0) {
      diagnostics.Error(codes::kBadSizes,
                        absl::StrCat(subject, " has negative size ",
                                     spec.sizes[d], " in dim ", d),
                        nodes);
      sizes_sound = false;
      break;
    }
  }
  bool strides_sound = true;
  if (!spec.strides.empty() && spec.strides.size() != spec.sizes.size()) {
    diagnostics.Error(
        codes::kBadStrides,
        absl::StrCat(subject, " has ", spec.strides.size(), " strides for ",
                     spec.sizes.size(), " sizes"),
        nodes, "give one stride per dim, or none (contiguous)");
    strides_sound = false;
  } else {
    for (size_t d = 0; d < spec.strides.size(); ++d) {
      if (spec.strides[d] < 0) {
        diagnostics.Error(codes::kBadStrides,
                          absl::StrCat(subject, " has negative stride ",
                                       spec.strides[d], " in dim ", d),
                          nodes);
        strides_sound = false;
        break;
      }
    }
  }
  if (spec.storage_offset < 0) {
    diagnostics.Error(codes::kBadStrides,
                      absl::StrCat(subject, " has negative storage offset ",
                                   spec.storage_offset),
                      nodes);
    strides_sound = false;
  }
  if (sizes_sound && !spec.NumElements().has_value()) {
    diagnostics.Error(codes::kSpecOverflow,
                      absl::StrCat("the element count of ", subject, " (sizes ",
                                   ShapeText(spec.sizes), ") overflows int64"),
                      nodes);
    sizes_sound = false;
  }
  // The extent needs sound sizes, strides and dtype (its element size).
  if (sound && sizes_sound && strides_sound &&
      !spec.StorageBytes().has_value()) {
    diagnostics.Error(
        codes::kSpecOverflow,
        absl::StrCat("the storage ", subject, " spans (sizes ",
                     ShapeText(spec.sizes), ", strides ",
                     ShapeText(spec.Strides()), ", offset ",
                     spec.storage_offset, ") overflows int64 bytes"),
        nodes);
    sound = false;
  }
  bool known_type = spec.device.type == Device::Type::kCpu ||
                    spec.device.type == Device::Type::kCuda;
  if (!known_type) {
    diagnostics.Error(codes::kBadDevice,
                      absl::StrCat(subject, " has an unknown device type"),
                      nodes, "devices are 'cpu' and 'cuda'");
    sound = false;
  } else if (spec.device.index < 0) {
    diagnostics.Error(
        codes::kBadDevice,
        absl::StrCat(subject, " is on device '", spec.device.ToString(),
                     "': the device index must be >= 0"),
        nodes);
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
  std::vector<int64_t> a_strides = a.Strides();
  std::vector<int64_t> b_strides = b.Strides();
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
                          const TensorSpec& declared, const std::string& source,
                          const std::string& subject,
                          const std::vector<std::string>& nodes,
                          Diagnostics& diagnostics) {
  if (expected.dtype == declared.dtype && expected.sizes == declared.sizes) {
    return true;
  }
  diagnostics.Error(expected.dtype != declared.dtype ? codes::kDTypeMismatch
                                                     : codes::kShapeMismatch,
                    absl::StrCat(source, " ", SpecText(expected), ", but ",
                                 subject, " is declared ", SpecText(declared)),
                    nodes);
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
      return absl::StrCat("string '", arg.string_value, "'");
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
  GraphValidator(const ProgramIndex& program, const Method& graph,
                 Diagnostics& diagnostics)
      : program_(program), graph_(graph), diagnostics_(diagnostics) {}

  void Run() {
    sound_.assign(graph_.nodes.size(), true);
    for (int32_t i = 0; i < NodeCount(); ++i) CheckSpecs(i);
    for (int32_t i = 0; i < NodeCount(); ++i) {
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
          break;
      }
    }
  }

 private:
  int32_t NodeCount() const {
    return static_cast<int32_t>(graph_.nodes.size());
  }

  void CheckSpecs(int32_t i) {
    const Node& node = graph_.nodes[i];
    if (node.result == ResultKind::kTensor) {
      sound_[i] = CheckSpec(node.tensor, absl::StrCat("'", node.name, "'"),
                            {node.name}, diagnostics_);
    } else if (node.result == ResultKind::kTuple) {
      for (int32_t e = 0; e < static_cast<int32_t>(node.tuple.size()); ++e) {
        std::string subject =
            absl::StrCat("'", graph_.ValueName(ValueId{i, e}), "'");
        if (!CheckSpec(node.tuple[e], subject, {node.name}, diagnostics_)) {
          sound_[i] = false;
        }
      }
    }
  }

  // Whether node `i` and everything it reads declared sound specs.
  bool SoundWithOperands(int32_t i) const {
    bool sound = sound_[i];
    ForEachOperand(graph_.nodes[i], [&](const ValueId& v) {
      if (v.node < 0 || v.node >= NodeCount() || !sound_[v.node]) {
        sound = false;
      }
    });
    return sound;
  }

  // --- Calls

  void CheckCall(int32_t i) {
    const Node& node = graph_.nodes[i];
    const OpInfo* info = LookupOp(node.target);
    std::shared_ptr<const OpSchema> schema =
        node.schema != nullptr ? node.schema
                               : (info != nullptr ? info->schema : nullptr);
    if (schema == nullptr) return;  // Import reported the unknown operator.
    std::string op = schema->QualifiedName();

    absl::StatusOr<std::vector<const Argument*>> bound =
        BindArguments(*schema, node.args);
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
                         absl::StrCat("argument '", param.name, "' of '", op,
                                      "' must be ", TypeText(param.type),
                                      ", got ", ArgumentText(graph_, *arg)),
                         std::move(nodes));
      types_match = false;
    }
    if (!CheckResultKind(node, *schema) || !types_match) return;
    if (info == nullptr || !SoundWithOperands(i)) return;
    if (node.schema != nullptr && node.schema != info->schema &&
        !SameSignature(*node.schema, *info->schema)) {
      return;  // The node's own schema differs from the registered one.
    }

    absl::StatusOr<std::vector<TensorSpec>> inferred =
        InferResultSpecs(*info, graph_, node);
    if (absl::IsUnimplemented(inferred.status())) return;
    if (!inferred.ok()) {
      diagnostics_.Error(IsDTypeError(inferred.status())
                             ? codes::kDTypeMismatch
                             : codes::kShapeMismatch,
                         std::string(inferred.status().message()), {node.name});
      return;
    }
    CompareResults(i, *info->schema, op, *inferred);
  }

  // The node's result kind must be what the schema returns. Returns whether
  // it is.
  bool CheckResultKind(const Node& node, const OpSchema& schema) {
    std::string expected;
    bool matches = true;
    if (schema.returns.empty()) {
      expected = "nothing";
      matches = node.result == ResultKind::kNone;
    } else if (schema.returns_tuple) {
      expected = absl::StrCat("a tuple of ", schema.returns.size());
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
    diagnostics_.Error(codes::kResultCount,
                       absl::StrCat("'", schema.QualifiedName(), "' returns ",
                                    expected, ", but '", node.name,
                                    "' declares ", DeclaredResultText(node)),
                       {node.name});
    return false;
  }

  void CompareResults(int32_t i, const OpSchema& schema, const std::string& op,
                      const std::vector<TensorSpec>& inferred) {
    const Node& node = graph_.nodes[i];
    for (int32_t r = 0; r < static_cast<int32_t>(inferred.size()); ++r) {
      int32_t element = schema.returns_tuple ? r : -1;
      const TensorSpec* declared = node.Spec(element);
      if (declared == nullptr) continue;
      const TensorSpec& computed = inferred[r];
      std::string subject =
          absl::StrCat("'", graph_.ValueName(ValueId{i, element}), "'");
      if (!CompareDTypeAndSizes(computed, *declared,
                                absl::StrCat("'", op, "' computes"), subject,
                                {node.name}, diagnostics_)) {
        continue;
      }
      // A view or an in-place result addresses its argument's storage: its
      // layout is fully determined.
      if (schema.AliasedArgument(r).has_value() &&
          !SameAddressing(computed, *declared)) {
        diagnostics_.Error(
            codes::kShapeMismatch,
            absl::StrCat("'", op, "' computes ", LayoutText(computed), ", but ",
                         subject, " is declared with strides ",
                         ShapeText(declared->Strides()), " and offset ",
                         declared->storage_offset),
            {node.name},
            "a view's (or in-place result's) strides and storage offset "
            "follow from its input's");
      }
    }
  }

  // --- Delegates

  void CheckDelegate(int32_t i) {
    const Node& node = graph_.nodes[i];
    const LoweredModule* module = program_.FindModule(node.target);
    if (module == nullptr) return;  // Import reported it.
    std::string called = absl::StrCat("module '", module->id, "'");

    if (std::optional<std::string> text = module->TargetDeviceText()) {
      absl::StatusOr<Device> device = ParseTargetDevice(*text);
      if (!device.ok()) {
        diagnostics_.Error(
            codes::kBadTargetDevice,
            absl::StrCat("delegate '", node.name, "' calls ", called,
                         ", whose target_device '", *text,
                         "' is invalid: ", device.status().message()),
            {node.name},
            "use 'cpu' or 'cuda:N' (N >= 0; the type is case-insensitive)");
      }
    }

    std::vector<int32_t> inputs = UserInputs(module->graph);
    if (node.args.size() != inputs.size()) {
      diagnostics_.Error(
          codes::kDelegateArity,
          absl::StrCat("delegate '", node.name, "' passes ", node.args.size(),
                       " argument", node.args.size() == 1 ? "" : "s", " to ",
                       called, ", which has ", inputs.size(), " user input",
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
    if (!sound_[arg.value.node] || input_node.result != ResultKind::kTensor) {
      return;
    }
    CompareDTypeAndSizes(
        input_node.tensor, *spec,
        absl::StrCat("module '", module.id, "' takes input '", input_node.name,
                     "' as"),
        absl::StrCat("argument ", index, " '", graph_.ValueName(arg.value),
                     "' of delegate '", node.name, "'"),
        {node.name, graph_.nodes[arg.value.node].name}, diagnostics_);
  }

  void CheckDelegateResult(int32_t i, const LoweredModule& module) {
    const Node& node = graph_.nodes[i];
    const Node* output = OutputNode(module.graph);
    std::string called = absl::StrCat("module '", module.id, "'");
    if (module.returns_tuple != (node.result == ResultKind::kTuple) ||
        (!module.returns_tuple && node.result != ResultKind::kTensor)) {
      diagnostics_.Error(
          codes::kDelegateResult,
          absl::StrCat(
              "delegate '", node.name, "' calls ", called, ", which returns ",
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
              called, " returns ", outputs, " value", outputs == 1 ? "" : "s",
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
          *computed, *spec, absl::StrCat(called, " returns"),
          absl::StrCat("'", graph_.ValueName(ValueId{i, element}), "'"),
          {node.name}, diagnostics_);
    }
  }

  // --- Getitems and program data

  void CheckGetItem(int32_t i) {
    const Node& node = graph_.nodes[i];
    if (node.result != ResultKind::kTensor || !SoundWithOperands(i)) return;
    ValueId element{node.getitem_source, node.getitem_index};
    const TensorSpec* source = graph_.Spec(element);
    if (source == nullptr) return;  // Import reported it.
    CompareDTypeAndSizes(*source, node.tensor,
                         absl::StrCat("'", graph_.ValueName(element), "' is"),
                         absl::StrCat("'", node.name, "'"), {node.name},
                         diagnostics_);
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
    CompareDTypeAndSizes(constant->spec, node.tensor,
                         absl::StrCat("constant '", constant->name, "' is"),
                         absl::StrCat("'", node.name, "'"), {node.name},
                         diagnostics_);
  }

  const ProgramIndex& program_;
  const Method& graph_;
  Diagnostics& diagnostics_;
  std::vector<char> sound_;  // Per node: its declared specs are sound.
};

// --- Program level
// ------------------------------------------------------------------

void CheckConstants(const Program& program, Diagnostics& diagnostics) {
  for (const Constant& constant : program.constants) {
    std::string subject = absl::StrCat("constant '", constant.name, "'");
    if (!CheckSpec(constant.spec, subject, {constant.name}, diagnostics)) {
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
  if (!called) {
    if (std::optional<std::string> text = module.TargetDeviceText()) {
      absl::StatusOr<Device> device = ParseTargetDevice(*text);
      if (!device.ok()) {
        diagnostics.Error(codes::kBadTargetDevice,
                          absl::StrCat(name, " has an invalid target_device '",
                                       *text, "': ", device.status().message()),
                          {}, "use 'cpu' or 'cuda:N' (N >= 0)");
      }
    }
  }
  std::vector<int32_t> inputs = UserInputs(module.graph);
  std::vector<std::string> input_names;
  for (int32_t input : inputs) {
    input_names.push_back(module.graph.nodes[input].name);
  }
  for (size_t l = 0; l < module.input_layouts.size(); ++l) {
    std::vector<std::string> nodes;
    if (l < input_names.size()) nodes.push_back(input_names[l]);
    if (!CheckSpec(module.input_layouts[l],
                   absl::StrCat("input layout ", l, " of ", name), nodes,
                   diagnostics) ||
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

// Whether any graph of the program has a delegate calling `id`.
// The ids of the modules some delegate calls.
std::unordered_set<std::string> CalledModules(const Program& program) {
  std::unordered_set<std::string> called;
  auto collect = [&](const Method& graph) {
    for (const Node& node : graph.nodes)
      if (node.kind == NodeKind::kDelegate) called.insert(node.target);
  };
  for (const Method& method : program.methods) collect(method);
  for (const LoweredModule& module : program.modules) collect(module.graph);
  return called;
}

}  // namespace

bool ValidateProgram(const Program& program, Diagnostics& diagnostics) {
  int errors_before = diagnostics.error_count();
  diagnostics.SetMethod("");
  CheckConstants(program, diagnostics);
  const ProgramIndex index(program);
  for (const Method& method : program.methods) {
    diagnostics.SetMethod(method.name);
    GraphValidator(index, method, diagnostics).Run();
  }
  const std::unordered_set<std::string> called = CalledModules(program);
  for (const LoweredModule& module : program.modules) {
    diagnostics.SetMethod(absl::StrCat("module:", module.id));
    CheckModule(module, called.count(module.id) > 0, diagnostics);
    GraphValidator(index, module.graph, diagnostics).Run();
  }
  diagnostics.SetMethod("");
  return diagnostics.error_count() == errors_before;
}

}  // namespace ferry
