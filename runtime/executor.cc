// The executor: binds every value of a method to storage once, at load,
// then runs prepared steps.
//
// Phases.
//  1. ProgramState: the device memories, every allocation, and program data
//     staged once (host copies of the constant table; module-owned
//     constants on their module's device).
//  2. MethodInstance::Load walks the nodes in order and gives each value a
//     TensorBinding {storage, spec}: storage is the root's memory, spec the
//     value's own layout over it:
//
//        t = delegate D(...)        t: arena 1 (cuda:0) @ offset 0
//        v = aten::view(t, [16])    v: t's storage, v's spec
//        r = aten::relu_(v)         r: t's storage, r's spec (writes it)
//
//     and turns each computing node into a Step with everything resolved:
//     kernel function, kernel arguments as views over fixed addresses,
//     copy spans. Checks that need only the bindings (strictness, layouts)
//     are made here too, but reported when the step runs, so the first
//     failing node in execution order is the one named.
//  3. Run writes the user inputs, runs the steps, and reads the outputs.
//
// A delegate step owns a MethodInstance of its module's subgraph whose
// placement is "everything on the delegate's memory": its user inputs are
// bound to the delegate's arguments with the compiled layouts, its
// constants to the module's staged constants, and its intermediates to
// fresh buffers on the device. After the subgraph runs, its outputs are
// copied (strided, on the device) into the delegate node's results.
#include "runtime/executor.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "passes/alias.h"
#include "passes/schema.h"
#include "passes/shape_rules.h"
#include "passes/validate.h"
#include "runtime/absl_compat.h"
#include "runtime/cancel.h"
#include "runtime/data_gen.h"
#include "runtime/device.h"
#include "runtime/host_kernels.h"

namespace ferry {

std::string_view ExecutionModeName(ExecutionMode mode) {
  switch (mode) {
    case ExecutionMode::kEager:
      return "eager";
    case ExecutionMode::kSim:
      return "sim";
    case ExecutionMode::kCuda:
      return "cuda";
  }
  return "eager";
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

TensorView HostTensor::view() const {
  return ContiguousView(const_cast<std::byte*>(data.data()), dtype, sizes);
}

std::string LayoutString(const TensorSpec& spec) {
  return absl::StrCat(AsAbsl(DTypeName(spec.dtype)), "[",
                      absl::StrJoin(spec.sizes, ","), "] strides [",
                      absl::StrJoin(spec.Strides(), ","), "] offset ",
                      spec.storage_offset);
}

bool SameElementLayout(const TensorSpec& a, const TensorSpec& b) {
  if (a.dtype != b.dtype || a.sizes != b.sizes) return false;
  std::optional<int64_t> n = a.NumElements();
  if (n && *n == 0) return true;
  if (a.storage_offset != b.storage_offset) return false;
  std::vector<int64_t> sa = a.Strides(), sb = b.Strides();
  if (sa.size() != sb.size()) return false;
  for (size_t d = 0; d < sa.size(); ++d)
    if (a.sizes[d] > 1 && sa[d] != sb[d]) return false;
  return true;
}

std::vector<HostTensor> GenerateUserInputs(const Method& method,
                                           uint64_t seed) {
  std::vector<HostTensor> inputs;
  int position = 0;
  for (const Node& node : method.nodes) {
    if (node.kind != NodeKind::kInput ||
        node.input_kind != InputKind::kUserInput)
      continue;
    HostTensor tensor;
    if (const TensorSpec* spec = node.Spec()) {
      tensor.dtype = spec->dtype;
      tensor.sizes = spec->sizes;
      tensor.data.resize(std::max<int64_t>(spec->NumBytes().value_or(0), 0));
      TensorSpec dense;
      dense.dtype = spec->dtype;
      dense.sizes = spec->sizes;
      (void)GenerateTensorData(dense,
                               UserInputSeed(seed, method.name, position),
                               tensor.data.data());
    }
    inputs.push_back(std::move(tensor));
    ++position;
  }
  return inputs;
}

namespace {

// Where a storage root lives: `bytes` bytes from `base` in `memory`.
struct Storage {
  DeviceMemory* memory = nullptr;
  std::byte* base = nullptr;
  int64_t bytes = 0;
};

// A tensor value: its root's storage seen through its own spec.
struct TensorBinding {
  Storage storage;
  const TensorSpec* spec = nullptr;

  bool bound() const { return spec != nullptr; }
  TensorView View() const { return MakeView(storage.base, *spec); }
  // Bytes [first, last) of the storage that the value's elements occupy.
  std::pair<int64_t, int64_t> Span() const {
    const int64_t bytes = spec->StorageBytes().value_or(0);
    if (bytes == 0) return {0, 0};
    return {spec->storage_offset * ElementSize(spec->dtype), bytes};
  }
};

// What a node produced.
struct Slot {
  TensorBinding tensor;                 // ResultKind::kTensor
  std::vector<TensorBinding> elements;  // ResultKind::kTuple
  std::optional<KernelArg> scalar;      // ResultKind::kScalar
};

// Prefixes a status message, keeping its code.
absl::Status WithContext(const absl::Status& status, absl::string_view prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

// Everything one Executor owns: memories, allocations, staged program data.
// Members are destroyed in reverse order: buffers before the memories.
struct ProgramState {
  ProgramState(const Program& p, ExecutionMode m, uint64_t seed)
      : program(p),
        index(p),
        mode(m),
        data_seed(seed),
        devices(m == ExecutionMode::kEager ? MemoryKind::kHostOnly
                : m == ExecutionMode::kSim ? MemoryKind::kSim
                                           : MemoryKind::kCuda) {}

  const Program& program;
  const ProgramIndex index;  // modules and constants by name
  ExecutionMode mode;
  uint64_t data_seed;
  DeviceSet devices;
  std::vector<DeviceBuffer> buffers;
  std::map<std::string, Storage, std::less<>> host_constants;
  std::map<std::pair<std::string, DeviceMemory*>, Storage> device_constants;
  // Nodes of every method and module instance loaded so far (each delegate
  // call loads its module's graph once), bounded by kMaxInstantiatedNodes.
  int64_t instantiated_nodes = 0;

  bool strict() const { return mode != ExecutionMode::kEager; }

  absl::StatusOr<Storage> Allocate(DeviceMemory* memory, int64_t bytes) {
    absl::StatusOr<DeviceBuffer> buffer = memory->Allocate(bytes);
    if (!buffer.ok()) return buffer.status();
    Storage storage{memory, buffer->data(), bytes};
    buffers.push_back(*std::move(buffer));
    return storage;
  }

  // The host copy of constant `name`: its data, or data generated from its
  // seed, laid out as its spec says. Staged on first use.
  absl::StatusOr<Storage> HostConstant(const std::string& name) {
    auto it = host_constants.find(name);
    if (it != host_constants.end()) return it->second;
    const Constant* constant = index.FindConstant(name);
    if (!constant) {
      return absl::InvalidArgumentError(
          absl::StrCat("constant '", name, "' is not in the constant table"));
    }
    std::optional<int64_t> bytes = constant->spec.StorageBytes();
    if (!bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "constant '", name, "' has a spec that spans no valid storage"));
    }
    if (!constant->data && constant->data_digest) {
      // Never generated in its place: that would verify other weights.
      return absl::FailedPreconditionError(absl::StrCat(
          "constant '", name, "' refers to blob ", constant->data_digest->hash,
          " whose bytes were not resolved before execution"));
    }
    absl::StatusOr<Storage> storage = Allocate(&devices.host(), *bytes);
    if (!storage.ok()) return storage.status();
    if (constant->data) {
      if (static_cast<int64_t>(constant->data->size()) != *bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat("constant '", name, "' has ", constant->data->size(),
                         " bytes of data but its spec spans ", *bytes));
      }
      std::memcpy(storage->base, constant->data->data(), *bytes);
    } else if (!GenerateTensorData(constant->spec,
                                   ConstantDataSeed(data_seed, constant->seed),
                                   storage->base)) {
      return CheckStop(absl::StrCat("generating constant '", name, "': "));
    }
    host_constants.emplace(name, *storage);
    return *storage;
  }

  // Constant `name` staged in `memory` (a module's owned constant).
  absl::StatusOr<Storage> ConstantOn(const std::string& name,
                                     DeviceMemory* memory) {
    absl::StatusOr<Storage> host = HostConstant(name);
    if (!host.ok() || memory->is_host()) return host;
    auto key = std::make_pair(name, memory);
    auto it = device_constants.find(key);
    if (it != device_constants.end()) return it->second;
    absl::StatusOr<Storage> staged = Allocate(memory, host->bytes);
    if (!staged.ok()) return staged.status();
    if (absl::Status s =
            memory->CopyFromHost(staged->base, host->base, host->bytes);
        !s.ok())
      return s;
    device_constants.emplace(key, *staged);
    return *staged;
  }
};

// One prepared node. `precheck` holds a problem found at load that is
// reported when the step is reached.
class Step {
 public:
  virtual ~Step() = default;
  absl::Status Run() {
    if (!precheck.ok()) return precheck;
    return Execute();
  }
  absl::Status precheck;

 protected:
  virtual absl::Status Execute() = 0;
};

// How a method's values get storage.
enum class Placement {
  kEager,     // fresh host storage for every node
  kPlanned,   // arenas and spec devices, as the lowered program says
  kOnMemory,  // a delegate's subgraph: everything in one device's memory
};

class MethodInstance;

class KernelStep : public Step {
 public:
  std::string prefix;  // "method 'm': node 'x': "
  std::string op;
  HostKernelFn host_kernel = nullptr;
  DeviceMemory* device = nullptr;  // when not null: device->RunKernel
  std::vector<KernelArg> args;
  std::vector<TensorView> outputs;

 protected:
  absl::Status Execute() override {
    KernelCall call{op, args, outputs};
    absl::Status status =
        host_kernel ? host_kernel(call) : device->RunKernel(call);
    return WithContext(status, prefix);
  }
};

// et_copy::_h2d_copy / _d2h_copy, or a host-to-host copy under eager.
class CopyStep : public Step {
 public:
  std::string prefix;
  TensorBinding source, result;
  bool to_device = false;

  absl::Status Execute() override {
    auto [first, last] = source.Span();
    if (last <= first) return absl::OkStatus();
    std::byte* dst = result.storage.base + first;
    const std::byte* src = source.storage.base + first;
    absl::Status status;
    if (to_device) {
      status = result.storage.memory->CopyFromHost(dst, src, last - first);
    } else {
      status = source.storage.memory->CopyToHost(dst, src, last - first);
    }
    return WithContext(status, prefix);
  }
};

class MethodInstance {
 public:
  MethodInstance(ProgramState& state, const Method& method, Placement placement,
                 DeviceMemory* memory, std::string context)
      : state_(state),
        method_(method),
        placement_(placement),
        memory_(memory),
        context_(std::move(context)),
        roots_(method) {}

  // Binds every value and prepares the steps. For a subgraph,
  // `bound_inputs` are its user inputs' bindings, in order.
  absl::Status Load(std::span<const TensorBinding> bound_inputs = {});

  // Writes the user inputs (outer methods), runs every step.
  absl::Status Run(std::span<const HostTensor> inputs,
                   const std::function<bool()>* keep_going);

  // The output node's values.
  absl::StatusOr<std::vector<HostTensor>> ReadOutputs();
  const std::vector<const Argument*>& output_args() const { return outputs_; }
  absl::StatusOr<TensorBinding> BindingOf(const ValueId& value) const;
  const Method& method() const { return method_; }
  // How many delegate calls this instance is nested in (0: a method).
  void set_depth(int depth) { depth_ = depth; }
  Executor::Locations Where() const;

 private:
  // "node 'n': ", or "node 'n' (model.py:12): " where the node carries its
  // source line, so runtime errors point at the user's code.
  std::string NodePrefix(int32_t node) const {
    const Node& n = method_.nodes[node];
    std::string where;
    if (n.source && !n.source->file.empty()) {
      where = n.source->line > 0
                  ? absl::StrCat(" (", n.source->file, ":", n.source->line, ")")
                  : absl::StrCat(" (", n.source->file, ")");
    }
    return absl::StrCat(context_, "node '", n.name, "'", where, ": ");
  }
  absl::Status NodeError(int32_t node, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(NodePrefix(node), message));
  }
  absl::Status FailedNode(int32_t node, absl::string_view message) const {
    return absl::FailedPreconditionError(
        absl::StrCat(NodePrefix(node), message));
  }

  absl::Status AllocateArenas();
  bool DetectSelfStagingDelegates() const;
  absl::StatusOr<TensorBinding> FreshBinding(int32_t node,
                                             const TensorSpec& spec);
  absl::StatusOr<TensorBinding> AliasBinding(int32_t node,
                                             const TensorBinding& root,
                                             const TensorSpec& spec);
  absl::Status LoadInput(int32_t node,
                         std::span<const TensorBinding> bound_inputs,
                         int& next_bound);
  absl::Status LoadConstantNode(int32_t node, const std::string& constant_name);
  absl::Status LoadCall(int32_t node);
  absl::Status LoadMetadataCall(int32_t node, const OpSchema& schema,
                                const BoundArguments& bound);
  absl::Status LoadCopy(int32_t node, bool to_device);
  absl::Status LoadDelegate(int32_t node);
  absl::Status LoadGetItem(int32_t node);
  absl::StatusOr<KernelArg> MakeKernelArg(int32_t node,
                                          const SchemaArgument& param,
                                          const Argument* arg) const;
  absl::Status WriteInput(const TensorBinding& binding, const HostTensor& value,
                          int32_t node);

  ProgramState& state_;
  const Method& method_;
  Placement placement_;
  DeviceMemory* memory_;  // kOnMemory: the subgraph's memory
  std::string context_;
  StorageRoots roots_;
  bool self_staging_delegates_ = false;
  int depth_ = 0;

  std::vector<Storage> arenas_;
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<Step>> steps_;
  std::vector<int32_t> user_inputs_;
  std::vector<const Argument*> outputs_;

  friend class DelegateStep;
};

// A delegate call: the module's subgraph on the delegate's memory.
class DelegateStep : public Step {
 public:
  std::string prefix;
  DeviceMemory* memory = nullptr;
  std::unique_ptr<MethodInstance> subgraph;
  std::vector<TensorBinding> sub_outputs;  // the subgraph's output values
  std::vector<TensorBinding> results;      // where the delegate writes them
  // Self-staging delegates: (host value, device copy) pairs.
  std::vector<std::pair<TensorBinding, TensorBinding>> staged_inputs;
  std::vector<std::pair<TensorBinding, TensorBinding>> staged_results;

 protected:
  absl::Status Execute() override {
    for (const auto& [host, device] : staged_inputs) {
      auto [first, last] = host.Span();
      if (last > first) {
        absl::Status s =
            memory->CopyFromHost(device.storage.base + first,
                                 host.storage.base + first, last - first);
        if (!s.ok()) return WithContext(s, prefix);
      }
    }
    if (absl::Status s = subgraph->Run({}, nullptr); !s.ok()) return s;
    for (size_t i = 0; i < results.size(); ++i) {
      absl::Status s =
          memory->CopyStrided(results[i].View(), sub_outputs[i].View());
      if (!s.ok()) {
        return WithContext(s, absl::StrCat(prefix, "writing result ", i, ": "));
      }
    }
    for (const auto& [host, device] : staged_results) {
      auto [first, last] = host.Span();
      if (last > first) {
        absl::Status s =
            memory->CopyToHost(host.storage.base + first,
                               device.storage.base + first, last - first);
        if (!s.ok()) return WithContext(s, prefix);
      }
    }
    return absl::OkStatus();
  }
};

// Copies a constant's host data into a planned slot on every call.
class StageDataStep : public Step {
 public:
  Storage from;
  TensorBinding to;

 protected:
  absl::Status Execute() override {
    auto [first, last] = to.Span();
    if (last <= first) return absl::OkStatus();
    return to.storage.memory->CopyFromHost(to.storage.base + first,
                                           from.base + first, last - first);
  }
};

// --- Load
// ---------------------------------------------------------------------

bool MethodInstance::DetectSelfStagingDelegates() const {
  if (placement_ != Placement::kPlanned || method_.arenas.empty()) return false;
  for (const Arena& arena : method_.arenas)
    if (!arena.device.is_host()) return false;
  bool device_delegate = false;
  for (const Node& node : method_.nodes) {
    if (node.kind == NodeKind::kCall &&
        (node.target == kH2DCopyOp || node.target == kD2HCopyOp))
      return false;
    if (node.kind == NodeKind::kDelegate) {
      const LoweredModule* module = state_.index.FindModule(node.target);
      if (module && !module->device().is_host()) device_delegate = true;
    }
  }
  return device_delegate;
}

absl::Status MethodInstance::AllocateArenas() {
  if (placement_ != Placement::kPlanned) return absl::OkStatus();
  for (size_t i = 0; i < method_.arenas.size(); ++i) {
    const Arena& arena = method_.arenas[i];
    if (arena.size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(context_, "arena ", i, " has a negative size"));
    }
    absl::StatusOr<DeviceMemory*> memory = state_.devices.For(arena.device);
    if (!memory.ok()) {
      return WithContext(memory.status(),
                         absl::StrCat(context_, "arena ", i, " on ",
                                      arena.device.ToString(), ": "));
    }
    absl::StatusOr<Storage> storage = state_.Allocate(*memory, arena.size);
    if (!storage.ok()) return storage.status();
    arenas_.push_back(*storage);
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorBinding> MethodInstance::FreshBinding(
    int32_t node, const TensorSpec& spec) {
  std::optional<int64_t> bytes = spec.StorageBytes();
  if (!bytes) {
    return NodeError(node, absl::StrCat("its spec ", LayoutString(spec),
                                        " spans no valid storage"));
  }
  TensorBinding binding;
  binding.spec = &spec;
  if (placement_ == Placement::kPlanned && spec.memory.planned) {
    const MemoryPlacement& m = spec.memory;
    if (m.arena < 0 || m.arena >= static_cast<int32_t>(arenas_.size())) {
      return NodeError(node, absl::StrCat("planned in arena ", m.arena,
                                          ", but the method has ",
                                          arenas_.size(), " arenas"));
    }
    const Storage& arena = arenas_[m.arena];
    const int64_t reserved = m.size > 0 ? m.size : *bytes;
    if (m.offset < 0 || reserved < *bytes ||
        m.offset + reserved > arena.bytes) {
      return NodeError(
          node,
          absl::StrCat("planned at offset ", m.offset, " size ", m.size,
                       " of arena ", m.arena, " (", arena.bytes,
                       " bytes), but its storage spans ", *bytes, " bytes"));
    }
    binding.storage = Storage{arena.memory, arena.base + m.offset, reserved};
    return binding;
  }
  DeviceMemory* memory = nullptr;
  switch (placement_) {
    case Placement::kEager:
      memory = &state_.devices.host();
      break;
    case Placement::kOnMemory:
      memory = memory_;
      break;
    case Placement::kPlanned: {
      if (self_staging_delegates_) {
        memory = &state_.devices.host();
        break;
      }
      absl::StatusOr<DeviceMemory*> m = state_.devices.For(spec.device);
      if (!m.ok()) return WithContext(m.status(), NodePrefix(node));
      memory = *m;
      break;
    }
  }
  absl::StatusOr<Storage> storage = state_.Allocate(memory, *bytes);
  if (!storage.ok()) return storage.status();
  binding.storage = *storage;
  return binding;
}

absl::StatusOr<TensorBinding> MethodInstance::AliasBinding(
    int32_t node, const TensorBinding& root, const TensorSpec& spec) {
  std::optional<int64_t> bytes = spec.StorageBytes();
  if (!bytes || *bytes > root.storage.bytes) {
    return NodeError(node,
                     absl::StrCat("its spec ", LayoutString(spec),
                                  " reaches outside the storage it aliases (",
                                  root.storage.bytes, " bytes)"));
  }
  return TensorBinding{root.storage, &spec};
}

absl::StatusOr<TensorBinding> MethodInstance::BindingOf(
    const ValueId& value) const {
  if (value.node < 0 || value.node >= static_cast<int32_t>(slots_.size()))
    return absl::InternalError("value out of range");
  const Slot& slot = slots_[value.node];
  if (value.element >= 0) {
    if (value.element >= static_cast<int32_t>(slot.elements.size()))
      return absl::InvalidArgumentError(absl::StrCat(
          context_, "value '", method_.ValueName(value), "' is not a tensor"));
    return slot.elements[value.element];
  }
  if (!slot.tensor.bound()) {
    return absl::InvalidArgumentError(absl::StrCat(
        context_, "value '", method_.ValueName(value), "' is not a tensor"));
  }
  return slot.tensor;
}

absl::Status MethodInstance::Load(std::span<const TensorBinding> bound_inputs) {
  // Validation bounds the module call graph (validate.h); a program handed
  // to the runtime directly is bounded here, never by the stack.
  state_.instantiated_nodes += static_cast<int64_t>(method_.nodes.size());
  if (state_.instantiated_nodes > kMaxInstantiatedNodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        context_, "the program instantiates more than ", kMaxInstantiatedNodes,
        " nodes through its delegates' modules"));
  }
  self_staging_delegates_ = DetectSelfStagingDelegates();
  if (absl::Status s = AllocateArenas(); !s.ok()) return s;
  slots_.resize(method_.nodes.size());
  int next_bound = 0;
  for (int32_t i = 0; i < static_cast<int32_t>(method_.nodes.size()); ++i) {
    const Node& node = method_.nodes[i];
    absl::Status status;
    switch (node.kind) {
      case NodeKind::kInput:
        status = LoadInput(i, bound_inputs, next_bound);
        break;
      case NodeKind::kConstant:
        status = LoadConstantNode(i, node.target);
        break;
      case NodeKind::kCall:
        status = LoadCall(i);
        break;
      case NodeKind::kDelegate:
        status = LoadDelegate(i);
        break;
      case NodeKind::kGetItem:
        status = LoadGetItem(i);
        break;
      case NodeKind::kOutput:
        for (const Argument& arg : node.args) outputs_.push_back(&arg);
        break;
    }
    if (!status.ok()) return status;
  }
  if (!bound_inputs.empty() &&
      next_bound != static_cast<int>(bound_inputs.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        context_, "the subgraph has ", next_bound, " user inputs but is given ",
        bound_inputs.size(), " arguments"));
  }
  return absl::OkStatus();
}

absl::Status MethodInstance::LoadInput(
    int32_t node, std::span<const TensorBinding> bound_inputs,
    int& next_bound) {
  const Node& n = method_.nodes[node];
  const TensorSpec* spec = n.Spec();
  if (!spec) return NodeError(node, "an input must be a tensor");
  if (n.input_kind != InputKind::kUserInput)
    return LoadConstantNode(node, n.target);
  if (placement_ == Placement::kOnMemory) {
    // A subgraph's user input: the delegate's argument, read with the
    // compiled layout (the binding's spec, set by the delegate).
    if (next_bound >= static_cast<int>(bound_inputs.size()))
      return NodeError(
          node,
          "the delegate passes fewer arguments than the subgraph has inputs");
    slots_[node].tensor = bound_inputs[next_bound++];
    return absl::OkStatus();
  }
  absl::StatusOr<TensorBinding> binding = FreshBinding(node, *spec);
  if (!binding.ok()) return binding.status();
  slots_[node].tensor = *binding;
  user_inputs_.push_back(node);
  return absl::OkStatus();
}

// Program data (parameters, buffers, lifted constants, `constant` nodes):
// the host copy of the constant, read with the node's spec, which must lay
// the elements out as the constant table does.
absl::Status MethodInstance::LoadConstantNode(
    int32_t node, const std::string& constant_name) {
  const Node& n = method_.nodes[node];
  const TensorSpec* spec = n.Spec();
  if (!spec) return NodeError(node, "program data must be a tensor");
  const Constant* constant = state_.index.FindConstant(constant_name);
  if (!constant) {
    return NodeError(node, absl::StrCat("constant '", constant_name,
                                        "' is not in the constant table"));
  }
  DeviceMemory* memory =
      placement_ == Placement::kOnMemory ? memory_ : &state_.devices.host();
  absl::StatusOr<Storage> storage = state_.ConstantOn(constant_name, memory);
  if (!storage.ok()) return WithContext(storage.status(), NodePrefix(node));
  if (!SameElementLayout(*spec, constant->spec)) {
    std::string reader = placement_ == Placement::kOnMemory
                             ? "the module reads it as"
                             : "the node reads it as";
    return FailedNode(
        node, absl::StrCat("constant '", constant_name, "' is stored as ",
                           LayoutString(constant->spec), " but ", reader, " ",
                           LayoutString(*spec)));
  }
  absl::StatusOr<TensorBinding> binding =
      AliasBinding(node, TensorBinding{*storage, &constant->spec}, *spec);
  if (!binding.ok()) return binding.status();
  slots_[node].tensor = *binding;
  return absl::OkStatus();
}

namespace {

// A schema default's text as a kernel argument.
KernelArg ParseDefault(const SchemaArgument& param, absl::string_view text) {
  KernelArg arg;
  text = absl::StripAsciiWhitespace(text);
  int64_t int_value;
  double float_value;
  if (text == "None") return arg;
  if (text == "True" || text == "False") {
    arg.kind = KernelArg::Kind::kBool;
    arg.bool_value = text == "True";
  } else if (absl::SimpleAtoi(text, &int_value)) {
    if (param.type.kind == SchemaTypeKind::kIntList) {
      arg.kind = KernelArg::Kind::kInts;
      arg.ints.assign(std::max(param.type.fixed_size, 1), int_value);
    } else {
      arg.kind = KernelArg::Kind::kInt;
      arg.int_value = int_value;
    }
  } else if (absl::SimpleAtod(text, &float_value)) {
    arg.kind = KernelArg::Kind::kFloat;
    arg.float_value = float_value;
  } else if (absl::ConsumePrefix(&text, "[") &&
             absl::ConsumeSuffix(&text, "]")) {
    arg.kind = KernelArg::Kind::kInts;
    for (absl::string_view item :
         absl::StrSplit(text, ',', absl::SkipWhitespace())) {
      int64_t v = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(item), &v))
        arg.ints.push_back(v);
    }
  } else {
    arg.kind = KernelArg::Kind::kString;
    if (text.size() >= 2 && (text.front() == '\'' || text.front() == '"'))
      text = text.substr(1, text.size() - 2);
    arg.string_value = std::string(text);
  }
  return arg;
}

}  // namespace

absl::StatusOr<KernelArg> MethodInstance::MakeKernelArg(
    int32_t node, const SchemaArgument& param, const Argument* arg) const {
  if (!arg) {
    // Built in place: moving an empty KernelArg trips GCC 12's
    // -Wmaybe-uninitialized inside absl::InlinedVector.
    if (!param.default_value) return absl::StatusOr<KernelArg>(absl::in_place);
    return ParseDefault(param, *param.default_value);
  }
  KernelArg out;
  switch (arg->kind) {
    case ArgKind::kValue: {
      const Slot& slot = slots_[arg->value.node];
      if (arg->value.element < 0 && slot.scalar) return *slot.scalar;
      absl::StatusOr<TensorBinding> binding = BindingOf(arg->value);
      if (!binding.ok()) return WithContext(binding.status(), NodePrefix(node));
      out.kind = KernelArg::Kind::kTensor;
      out.tensor = binding->View();
      return out;
    }
    case ArgKind::kValueList:
      out.kind = KernelArg::Kind::kTensorList;
      for (const ValueId& v : arg->values) {
        absl::StatusOr<TensorBinding> binding = BindingOf(v);
        if (!binding.ok())
          return WithContext(binding.status(), NodePrefix(node));
        out.tensors.push_back(binding->View());
      }
      return out;
    case ArgKind::kInt:
      if (param.type.kind == SchemaTypeKind::kIntList) {
        out.kind = KernelArg::Kind::kInts;
        out.ints.assign(std::max(param.type.fixed_size, 1), arg->int_value);
        return out;
      }
      out.kind = KernelArg::Kind::kInt;
      out.int_value = arg->int_value;
      return out;
    case ArgKind::kFloat:
      out.kind = KernelArg::Kind::kFloat;
      out.float_value = arg->float_value;
      return out;
    case ArgKind::kBool:
      out.kind = KernelArg::Kind::kBool;
      out.bool_value = arg->bool_value;
      return out;
    case ArgKind::kInts:
      out.kind = KernelArg::Kind::kInts;
      out.ints = arg->ints;
      return out;
    case ArgKind::kDType:
      out.kind = KernelArg::Kind::kDType;
      out.dtype = arg->dtype;
      return out;
    case ArgKind::kNone:
      return out;
    case ArgKind::kString:
      out.kind = KernelArg::Kind::kString;
      out.string_value = arg->string_value;
      return out;
  }
  return out;
}

absl::Status MethodInstance::LoadCall(int32_t node) {
  const Node& n = method_.nodes[node];
  const bool is_copy = n.target == kH2DCopyOp || n.target == kD2HCopyOp;
  if (is_copy && placement_ == Placement::kOnMemory && !memory_->is_host()) {
    return NodeError(node,
                     "host/device copies cannot run inside a device delegate");
  }
  if (n.target == kH2DCopyOp) return LoadCopy(node, /*to_device=*/true);
  if (n.target == kD2HCopyOp) return LoadCopy(node, /*to_device=*/false);
  if (!n.schema)
    return NodeError(
        node, absl::StrCat("operator ", n.target.str(), " has no schema"));
  const OpSchema& schema = *n.schema;
  absl::StatusOr<BoundArguments> bound = BindArguments(schema, n.args);
  if (!bound.ok()) return WithContext(bound.status(), NodePrefix(node));
  if (roots_.IsMetadataOnly(node))
    return LoadMetadataCall(node, schema, *bound);

  // Results: fresh storage, or the storage of the argument they alias.
  Slot& slot = slots_[node];
  std::vector<const TensorSpec*> result_specs;
  if (n.result == ResultKind::kTensor) {
    result_specs.push_back(&n.tensor);
  } else if (n.result == ResultKind::kTuple) {
    for (const TensorSpec& spec : n.tuple) result_specs.push_back(&spec);
  } else if (n.result == ResultKind::kScalar) {
    return NodeError(node,
                     absl::StrCat("operator ", n.target.str(),
                                  " returns a scalar but reads data; only "
                                  "metadata operators may return scalars"));
  }
  bool computes = false;
  std::vector<TensorBinding> results;
  // One Tensor[] result (split.Tensor -> Tensor(a)[]): every element
  // aliases what the list does.
  const bool list_result =
      schema.returns.size() == 1 &&
      schema.returns[0].type.kind == SchemaTypeKind::kTensorList;
  for (size_t r = 0; r < result_specs.size(); ++r) {
    std::optional<int> aliased =
        schema.AliasedArgument(list_result ? 0 : static_cast<int>(r));
    absl::StatusOr<TensorBinding> binding;
    if (aliased && *aliased < static_cast<int>(bound->size()) &&
        (*bound)[*aliased] && (*bound)[*aliased]->kind == ArgKind::kValue) {
      absl::StatusOr<TensorBinding> root = BindingOf((*bound)[*aliased]->value);
      if (!root.ok()) return WithContext(root.status(), NodePrefix(node));
      binding = AliasBinding(node, *root, *result_specs[r]);
      const std::vector<int> written = schema.WrittenArguments();
      if (std::find(written.begin(), written.end(), *aliased) != written.end())
        computes = true;
    } else {
      binding = FreshBinding(node, *result_specs[r]);
      computes = true;
    }
    if (!binding.ok()) return binding.status();
    results.push_back(*binding);
  }
  if (n.result == ResultKind::kTensor) {
    slot.tensor = results[0];
  } else {
    slot.elements = results;
  }
  if (!computes) return absl::OkStatus();  // a view: nothing moves

  auto step = std::make_unique<KernelStep>();
  step->prefix = NodePrefix(node);
  step->op = schema.QualifiedName();
  for (size_t a = 0; a < schema.arguments.size(); ++a) {
    absl::StatusOr<KernelArg> arg =
        MakeKernelArg(node, schema.arguments[a], (*bound)[a]);
    if (!arg.ok()) return arg.status();
    step->args.push_back(*std::move(arg));
  }
  for (const TensorBinding& result : results)
    step->outputs.push_back(result.View());
  if (placement_ == Placement::kOnMemory && !memory_->is_host()) {
    step->device = memory_;
  } else {
    step->host_kernel = FindHostKernel(step->op);
  }
  if (!FindHostKernel(step->op)) {
    return absl::UnimplementedError(
        absl::StrCat(NodePrefix(node), "no kernel for operator ", step->op));
  }
  // Strictness: a host operator reads and writes host memory only.
  if (placement_ == Placement::kPlanned && state_.strict()) {
    auto check = [&](const TensorBinding& b, absl::string_view what) {
      if (!step->precheck.ok() || b.storage.memory->is_host()) return;
      step->precheck = FailedNode(
          node, absl::StrCat("host operator ", step->op, " given memory on ",
                             b.storage.memory->name(), " (", what, ")"));
    };
    for (size_t a = 0; a < schema.arguments.size(); ++a) {
      const Argument* arg = (*bound)[a];
      if (!arg) continue;
      const std::string& param = schema.arguments[a].name;
      if (arg->kind == ArgKind::kValue && !slots_[arg->value.node].scalar) {
        absl::StatusOr<TensorBinding> b = BindingOf(arg->value);
        if (b.ok())
          check(*b, absl::StrCat("argument '", param, "', value '",
                                 method_.ValueName(arg->value), "'"));
      }
      if (arg->kind == ArgKind::kValueList) {
        for (const ValueId& v : arg->values) {
          absl::StatusOr<TensorBinding> b = BindingOf(v);
          if (b.ok())
            check(*b, absl::StrCat("argument '", param, "', value '",
                                   method_.ValueName(v), "'"));
        }
      }
    }
    for (size_t r = 0; r < results.size(); ++r)
      check(results[r], absl::StrCat("result ", r));
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

// sym_size.int, sym_numel, sym_stride.int (and ATen's size/stride/numel/dim
// forms): read from the operand's spec, at load.
absl::Status MethodInstance::LoadMetadataCall(int32_t node,
                                              const OpSchema& schema,
                                              const BoundArguments& bound) {
  const Node& n = method_.nodes[node];
  if (bound.empty() || !bound[0] || bound[0]->kind != ArgKind::kValue)
    return NodeError(node, "a metadata operator needs a tensor argument");
  const TensorSpec* spec = method_.Spec(bound[0]->value);
  if (!spec)
    return NodeError(node, "a metadata operator needs a tensor argument");
  const std::string name = absl::StrCat(schema.ns, "::", schema.name);
  auto dim_arg = [&]() -> absl::StatusOr<int64_t> {
    int64_t dim = bound.size() > 1 && bound[1] ? bound[1]->int_value : 0;
    const int64_t rank = spec->dim();
    if (dim < -rank || dim >= rank)
      return NodeError(
          node, absl::StrCat("dim ", dim, " is out of range for rank ", rank));
    return dim < 0 ? dim + rank : dim;
  };
  KernelArg value;
  value.kind = KernelArg::Kind::kInt;
  if (name == "aten::sym_size" || name == "aten::size") {
    absl::StatusOr<int64_t> dim = dim_arg();
    if (!dim.ok()) return dim.status();
    value.int_value = spec->sizes[*dim];
  } else if (name == "aten::sym_stride" || name == "aten::stride") {
    absl::StatusOr<int64_t> dim = dim_arg();
    if (!dim.ok()) return dim.status();
    value.int_value = spec->Strides()[*dim];
  } else if (name == "aten::sym_numel" || name == "aten::numel") {
    value.int_value = spec->NumElements().value_or(0);
  } else if (name == "aten::dim") {
    value.int_value = spec->dim();
  } else if (name == "aten::sym_storage_offset") {
    value.int_value = spec->storage_offset;
  } else {
    return absl::UnimplementedError(
        absl::StrCat(NodePrefix(node), "metadata operator ", n.target.str(),
                     " is not supported"));
  }
  slots_[node].scalar = value;
  return absl::OkStatus();
}

absl::Status MethodInstance::LoadCopy(int32_t node, bool to_device) {
  const Node& n = method_.nodes[node];
  const char* what = to_device ? "H2D copy" : "D2H copy";
  if (n.args.size() != 1 || n.args[0].kind != ArgKind::kValue || !n.Spec())
    return NodeError(node,
                     absl::StrCat(what, " takes one tensor and returns one"));
  absl::StatusOr<TensorBinding> source = BindingOf(n.args[0].value);
  if (!source.ok()) return WithContext(source.status(), NodePrefix(node));
  absl::StatusOr<TensorBinding> result;
  if (n.at_load && placement_ == Placement::kPlanned) {
    // A load-time copy's result lives as long as the program: its own
    // allocation on its device, never arena space that other values reuse.
    std::optional<int64_t> bytes = n.tensor.StorageBytes();
    absl::StatusOr<DeviceMemory*> memory = state_.devices.For(n.tensor.device);
    if (!bytes || !memory.ok())
      return NodeError(node, absl::StrCat("cannot place the load-time copy on ",
                                          n.tensor.device.ToString()));
    absl::StatusOr<Storage> storage = state_.Allocate(*memory, *bytes);
    if (!storage.ok()) return storage.status();
    result = TensorBinding{*storage, &n.tensor};
  } else {
    result = FreshBinding(node, n.tensor);
  }
  if (!result.ok()) return result.status();
  slots_[node].tensor = *result;

  auto step = std::make_unique<CopyStep>();
  step->prefix = NodePrefix(node);
  step->source = *source;
  step->result = *result;
  const bool planned = placement_ == Placement::kPlanned;
  step->to_device = planned ? to_device : true;  // eager: host to host
  if (!SameElementLayout(*source->spec, n.tensor)) {
    step->precheck =
        FailedNode(node, absl::StrCat(what, " changes the layout: source ",
                                      LayoutString(*source->spec), ", result ",
                                      LayoutString(n.tensor)));
  } else if (source->spec->StorageBytes().value_or(0) > result->storage.bytes) {
    step->precheck =
        FailedNode(node, absl::StrCat(what, " result storage is too small"));
  }
  if (planned && state_.strict() && step->precheck.ok()) {
    const std::string source_name = method_.ValueName(n.args[0].value);
    DeviceMemory* from = source->storage.memory;
    DeviceMemory* into = result->storage.memory;
    if (to_device && n.tensor.device.is_host()) {
      step->precheck = FailedNode(
          node, "H2D copy targets cpu: its result must be on a device");
    } else if (!to_device && !n.tensor.device.is_host()) {
      step->precheck = FailedNode(
          node, absl::StrCat("D2H copy targets ", n.tensor.device.ToString(),
                             ": its result must be on the host"));
    } else if (to_device && !from->is_host()) {
      step->precheck = FailedNode(
          node, absl::StrCat("H2D copy source '", source_name, "' is in ",
                             from->name(), " memory, not host memory"));
    } else if (to_device && into->is_host()) {
      step->precheck = FailedNode(
          node, "H2D copy result is in host memory, not device memory");
    } else if (!to_device && from->is_host()) {
      step->precheck = FailedNode(
          node, absl::StrCat("D2H copy source '", source_name,
                             "' is in host memory, not device memory"));
    } else if (!to_device && !into->is_host()) {
      step->precheck =
          FailedNode(node, absl::StrCat("D2H copy result is in ", into->name(),
                                        " memory, not host memory"));
    }
  }
  if (n.at_load && placement_ == Placement::kPlanned) {
    // Runs once, now.
    return step->Run();
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status MethodInstance::LoadGetItem(int32_t node) {
  const Node& n = method_.nodes[node];
  const Slot& source = slots_[n.getitem_source];
  if (n.getitem_index < 0 ||
      n.getitem_index >= static_cast<int32_t>(source.elements.size()))
    return NodeError(node, "getitem index is out of range");
  const TensorSpec* spec = n.Spec();
  if (!spec) return NodeError(node, "getitem must produce a tensor");
  absl::StatusOr<TensorBinding> binding =
      AliasBinding(node, source.elements[n.getitem_index], *spec);
  if (!binding.ok()) return binding.status();
  slots_[node].tensor = *binding;
  return absl::OkStatus();
}

absl::Status MethodInstance::LoadDelegate(int32_t node) {
  const Node& n = method_.nodes[node];
  const LoweredModule* module = state_.index.FindModule(n.target);
  if (!module)
    return NodeError(
        node, absl::StrCat("module '", n.target.str(), "' does not exist"));
  // Validation reports an invalid target (E0401); an unvalidated program
  // that carries one is refused here rather than run on the host.
  if (!module->target_device.ok())
    return WithContext(module->target_device.status(), NodePrefix(node));
  const Device target = *module->target_device;
  const std::string delegate_name =
      absl::StrCat("delegate '", n.name, "' (module '", module->id, "' on ",
                   target.ToString(), ")");
  const std::string prefix = absl::StrCat(context_, delegate_name, ": ");

  if (depth_ + 1 > kMaxModuleNesting) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "lowered modules nest more than ", kMaxModuleNesting,
        " deep here (does a module call itself?)"));
  }
  DeviceMemory* memory = nullptr;
  if (placement_ == Placement::kOnMemory) {
    // Eager execution keeps every module on the host; elsewhere a nested
    // delegate runs in its parent's device memory.
    if (state_.mode != ExecutionMode::kEager && !target.is_host() &&
        !(memory_->device() == target))
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, "a nested delegate must target its parent's device"));
    memory = memory_;
  } else {
    absl::StatusOr<DeviceMemory*> m = state_.devices.For(target);
    if (!m.ok()) return WithContext(m.status(), prefix);
    memory = *m;
  }
  const bool stage_io = self_staging_delegates_ && !memory->is_host();
  const bool check_memory = placement_ == Placement::kPlanned &&
                            state_.strict() && !self_staging_delegates_;

  auto step = std::make_unique<DelegateStep>();
  step->prefix = prefix;
  step->memory = memory;
  auto fail = [&](std::string message) {
    if (step->precheck.ok())
      step->precheck =
          absl::FailedPreconditionError(absl::StrCat(prefix, message));
  };

  // The subgraph's user inputs, in order.
  std::vector<const TensorSpec*> input_specs;
  for (const Node& sub : module->graph.nodes) {
    if (sub.kind == NodeKind::kInput && sub.input_kind == InputKind::kUserInput)
      input_specs.push_back(sub.Spec());
  }
  if (input_specs.size() != n.args.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "given ", n.args.size(), " arguments, but the module has ",
        input_specs.size(), " inputs"));
  }
  std::vector<TensorBinding> inputs;
  for (size_t i = 0; i < n.args.size(); ++i) {
    const Argument& arg = n.args[i];
    if (arg.kind != ArgKind::kValue)
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "argument ", i, " is not a tensor"));
    absl::StatusOr<TensorBinding> given = BindingOf(arg.value);
    if (!given.ok()) return WithContext(given.status(), prefix);
    const std::string value_name = method_.ValueName(arg.value);
    const TensorSpec* compiled = i < module->input_layouts.size()
                                     ? &module->input_layouts[i]
                                     : input_specs[i];
    if (!compiled)
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "input ", i, " has no spec"));
    if (check_memory && given->storage.memory != memory) {
      fail(absl::StrCat("argument ", i, " ('", value_name, "') is in ",
                        given->storage.memory->name(), " memory, not ",
                        memory->name(), " memory"));
    }
    if (!SameElementLayout(*given->spec, *compiled)) {
      fail(absl::StrCat("argument ", i, " ('", value_name, "') is laid out as ",
                        LayoutString(*given->spec),
                        " but the module was compiled for ",
                        LayoutString(*compiled)));
    }
    // Compiled code reads from the storage it is given, with its own layout.
    TensorBinding as_compiled{given->storage, compiled};
    if (compiled->StorageBytes().value_or(INT64_MAX) > given->storage.bytes) {
      fail(absl::StrCat("argument ", i, " ('", value_name, "') has ",
                        given->storage.bytes,
                        " bytes of storage; the compiled layout ",
                        LayoutString(*compiled), " reads more"));
      as_compiled.storage.bytes = 0;
    }
    if (stage_io) {
      const int64_t bytes =
          std::max(given->storage.bytes, compiled->StorageBytes().value_or(0));
      absl::StatusOr<Storage> device_copy = state_.Allocate(memory, bytes);
      if (!device_copy.ok()) return device_copy.status();
      step->staged_inputs.emplace_back(
          *given, TensorBinding{*device_copy, given->spec});
      as_compiled.storage = *device_copy;
    }
    inputs.push_back(as_compiled);
  }
  // Results: where the delegate writes (the outer value's planned memory).
  std::vector<const TensorSpec*> result_specs;
  if (n.result == ResultKind::kTuple) {
    for (const TensorSpec& spec : n.tuple) result_specs.push_back(&spec);
  } else if (n.result == ResultKind::kTensor) {
    result_specs.push_back(&n.tensor);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "a delegate must return tensors"));
  }
  std::vector<TensorBinding> results;
  for (size_t r = 0; r < result_specs.size(); ++r) {
    absl::StatusOr<TensorBinding> binding =
        FreshBinding(node, *result_specs[r]);
    if (!binding.ok()) return binding.status();
    if (check_memory && binding->storage.memory != memory) {
      fail(absl::StrCat("result ", r, " is placed in ",
                        binding->storage.memory->name(), " memory, not ",
                        memory->name(), " memory"));
    }
    results.push_back(*binding);
  }
  if (n.result == ResultKind::kTuple) {
    slots_[node].elements = results;
  } else {
    slots_[node].tensor = results[0];
  }
  if (!step->precheck.ok()) {
    steps_.push_back(std::move(step));
    return absl::OkStatus();
  }

  // The subgraph, on the delegate's memory.
  step->subgraph = std::make_unique<MethodInstance>(
      state_, module->graph, Placement::kOnMemory, memory,
      absl::StrCat(context_, delegate_name, ": "));
  step->subgraph->set_depth(depth_ + 1);
  if (absl::Status s = step->subgraph->Load(inputs); !s.ok()) {
    // Problems of the module's own data (e.g. a constant stored in another
    // layout than the module reads) are the delegate's, found when it runs.
    step->precheck = s;
    steps_.push_back(std::move(step));
    return absl::OkStatus();
  }
  const std::vector<const Argument*>& sub_outputs =
      step->subgraph->output_args();
  if (sub_outputs.size() != results.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "the module returns ", sub_outputs.size(),
                     " values, the node ", results.size()));
  }
  for (size_t r = 0; r < sub_outputs.size(); ++r) {
    const Argument* out = sub_outputs[r];
    if (out->kind != ArgKind::kValue)
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "module output ", r, " is not a tensor"));
    absl::StatusOr<TensorBinding> binding =
        step->subgraph->BindingOf(out->value);
    if (!binding.ok()) return WithContext(binding.status(), prefix);
    if (binding->spec->sizes != results[r].spec->sizes) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "module output ", r, " is ",
                       LayoutString(*binding->spec), " but the node's result ",
                       r, " is ", LayoutString(*results[r].spec)));
    }
    step->sub_outputs.push_back(*binding);
    TensorBinding write_to = results[r];
    if (stage_io) {
      absl::StatusOr<Storage> device_copy =
          state_.Allocate(memory, results[r].storage.bytes);
      if (!device_copy.ok()) return device_copy.status();
      step->staged_results.emplace_back(
          results[r], TensorBinding{*device_copy, results[r].spec});
      write_to.storage = *device_copy;
    }
    step->results.push_back(write_to);
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

// --- Run
// ------------------------------------------------------------------------

absl::Status MethodInstance::WriteInput(const TensorBinding& binding,
                                        const HostTensor& value, int32_t node) {
  const TensorSpec& spec = *binding.spec;
  if (value.dtype != spec.dtype || value.sizes != spec.sizes ||
      static_cast<int64_t>(value.data.size()) !=
          value.numel() * ElementSize(value.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        NodePrefix(node), "expects ", AsAbsl(DTypeName(spec.dtype)), "[",
        absl::StrJoin(spec.sizes, ","), "], given ",
        AsAbsl(DTypeName(value.dtype)), "[", absl::StrJoin(value.sizes, ","),
        "] with ", value.data.size(), " bytes"));
  }
  auto [first, last] = binding.Span();
  if (last <= first) return absl::OkStatus();
  if (binding.storage.memory->is_host()) {
    TensorView view = binding.View();
    return CopyStridedHost(view, value.view());
  }
  std::vector<std::byte> staging(last);
  TensorView view = MakeView(staging.data(), spec);
  if (absl::Status s = CopyStridedHost(view, value.view()); !s.ok()) return s;
  return binding.storage.memory->CopyFromHost(
      binding.storage.base + first, staging.data() + first, last - first);
}

absl::Status MethodInstance::Run(std::span<const HostTensor> inputs,
                                 const std::function<bool()>* keep_going) {
  if (placement_ != Placement::kOnMemory) {
    if (inputs.size() != user_inputs_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(context_, "expects ", user_inputs_.size(),
                       " user inputs, given ", inputs.size()));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      absl::Status s = WriteInput(slots_[user_inputs_[i]].tensor, inputs[i],
                                  user_inputs_[i]);
      if (!s.ok()) return s;
    }
  }
  for (const std::unique_ptr<Step>& step : steps_) {
    if (keep_going && *keep_going && !(*keep_going)()) {
      return absl::CancelledError(absl::StrCat(context_, "cancelled"));
    }
    if (absl::Status stop = CheckStop(context_); !stop.ok()) return stop;
    absl::Status s = step->Run();
    // A kernel asked to stop gives up part-way (cancel.h): its result is
    // discarded, whatever it returned.
    if (absl::Status stop = CheckStop(context_); !stop.ok()) return stop;
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<HostTensor>> MethodInstance::ReadOutputs() {
  if (absl::Status s = state_.devices.SynchronizeAll(); !s.ok()) return s;
  std::vector<HostTensor> values;
  for (const Argument* arg : outputs_) {
    HostTensor value;
    if (arg->kind == ArgKind::kValue && arg->value.element < 0 &&
        slots_[arg->value.node].scalar) {
      const KernelArg& scalar = *slots_[arg->value.node].scalar;
      value.dtype = scalar.kind == KernelArg::Kind::kFloat  ? DType::kF64
                    : scalar.kind == KernelArg::Kind::kBool ? DType::kBool
                                                            : DType::kI64;
      value.data.resize(ElementSize(value.dtype));
      if (value.dtype == DType::kF64) {
        std::memcpy(value.data.data(), &scalar.float_value, 8);
      } else if (value.dtype == DType::kBool) {
        value.data[0] = std::byte{scalar.bool_value ? uint8_t{1} : uint8_t{0}};
      } else {
        std::memcpy(value.data.data(), &scalar.int_value, 8);
      }
      values.push_back(std::move(value));
      continue;
    }
    if (arg->kind != ArgKind::kValue)
      return absl::InvalidArgumentError(
          absl::StrCat(context_, "an output is not a value"));
    absl::StatusOr<TensorBinding> binding = BindingOf(arg->value);
    if (!binding.ok()) return binding.status();
    value.dtype = binding->spec->dtype;
    value.sizes = binding->spec->sizes;
    auto [first, last] = binding->Span();
    if (binding->storage.memory->is_host() || last <= first) {
      value.data = GatherContiguous(binding->View());
    } else {
      // The runtime (not the program) brings device outputs back to compare.
      std::vector<std::byte> staging(last);
      absl::Status s = binding->storage.memory->CopyToHost(
          staging.data() + first, binding->storage.base + first, last - first);
      if (!s.ok()) return s;
      value.data = GatherContiguous(MakeView(staging.data(), *binding->spec));
    }
    values.push_back(std::move(value));
  }
  return values;
}

Executor::Locations MethodInstance::Where() const {
  Executor::Locations where;
  for (int32_t node : user_inputs_) {
    where.inputs.push_back(slots_[node].tensor.storage.memory->device());
  }
  for (const Argument* arg : outputs_) {
    std::optional<Device> device;
    if (arg->kind == ArgKind::kValue && arg->value.node >= 0 &&
        arg->value.node < static_cast<int32_t>(slots_.size()) &&
        !(arg->value.element < 0 && slots_[arg->value.node].scalar)) {
      absl::StatusOr<TensorBinding> binding = BindingOf(arg->value);
      if (binding.ok()) device = binding->storage.memory->device();
    }
    where.outputs.push_back(device);
  }
  return where;
}

}  // namespace

// --- Executor
// ---------------------------------------------------------------------

struct Executor::Impl {
  Impl(const Program& program, ExecutionMode mode, uint64_t data_seed)
      : state(program, mode, data_seed) {}
  ProgramState state;
  std::map<std::string, std::unique_ptr<MethodInstance>, std::less<>> methods;
};

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::~Executor() = default;

ExecutionMode Executor::mode() const { return impl_->state.mode; }

absl::StatusOr<std::unique_ptr<Executor>> Executor::Load(const Program& program,
                                                         ExecutionMode mode,
                                                         uint64_t data_seed) {
  if (mode == ExecutionMode::kCuda && !CudaAvailable()) {
    return absl::FailedPreconditionError("no CUDA device is visible");
  }
  // Every delegate call instantiates its module's graph: a cycle, a deep
  // chain or an exponential fan-out of module calls is refused before any
  // is (validation says the same; programs may arrive unvalidated).
  Diagnostics call_graph;
  if (!ValidateModuleCallGraph(program, call_graph)) {
    for (const Diagnostic& d : call_graph.items()) {
      if (d.severity == Severity::kError)
        return absl::InvalidArgumentError(d.message);
    }
  }
  auto impl = std::make_unique<Impl>(program, mode, data_seed);
  const Placement placement =
      mode == ExecutionMode::kEager ? Placement::kEager : Placement::kPlanned;
  for (const Method& method : program.methods) {
    auto instance = std::make_unique<MethodInstance>(
        impl->state, method, placement, nullptr,
        absl::StrCat("method '", method.name, "': "));
    if (absl::Status s = instance->Load(); !s.ok()) return s;
    impl->methods.emplace(method.name, std::move(instance));
  }
  return std::unique_ptr<Executor>(new Executor(std::move(impl)));
}

absl::StatusOr<std::vector<HostTensor>> Executor::Run(
    std::string_view method, std::span<const HostTensor> inputs,
    const std::function<bool()>& keep_going) {
  auto it = impl_->methods.find(method);
  if (it == impl_->methods.end()) {
    return absl::NotFoundError(
        absl::StrCat("method '", AsAbsl(method), "' does not exist"));
  }
  if (absl::Status s =
          it->second->Run(inputs, keep_going ? &keep_going : nullptr);
      !s.ok())
    return s;
  absl::StatusOr<std::vector<HostTensor>> outputs = it->second->ReadOutputs();
  // Reading outputs gathers them with host loops, which give up when asked
  // to stop: outputs read then are incomplete.
  if (absl::Status stop = CheckStop(
          absl::StrCat("method '", AsAbsl(method), "': reading outputs: "));
      !stop.ok())
    return stop;
  return outputs;
}

absl::StatusOr<Executor::Locations> Executor::Where(
    std::string_view method) const {
  auto it = impl_->methods.find(method);
  if (it == impl_->methods.end()) {
    return absl::NotFoundError(
        absl::StrCat("method '", AsAbsl(method), "' does not exist"));
  }
  return it->second->Where();
}

}  // namespace ferry
