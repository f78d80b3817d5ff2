// The Ferry IR in memory.
//
// Mirrors ferry.v1.Program (proto/ferry/v1/program.proto) with resolved
// references: an argument names a value by the index of its producing node in
// the method (plus a tuple element index), not by name. Import from and export
// to the proto live in proto_io.h; an imported program exports to the same
// bytes.
//
// Storage: a value that is a view of another, or the result of an in-place
// operator, aliases its argument's storage. StorageRoots() (alias.h) follows
// these chains using the operator schemas; devices and memory belong to the
// storage root, never to a view.
#ifndef FERRY_PASSES_IR_H_
#define FERRY_PASSES_IR_H_

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "passes/compact.h"
#include "passes/dtype.h"

namespace ferry {

struct OpSchema;  // schema.h

// ---------------------------------------------------------------------------
// Element types and devices.

// DType: passes/dtype.h.

// Bytes per element; 0 for kInvalid. (Inline: every spec's size asks.)
inline int64_t ElementSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
    case DType::kI16:
      return 2;
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      return 1;
    case DType::kInvalid:
      return 0;
  }
  return 0;
}

// "f32", "f16", ..., "bool"; "invalid" for kInvalid.
std::string_view DTypeName(DType dtype);
bool IsFloatingPoint(DType dtype);

struct Device {
  enum class Type : uint8_t { kCpu = 0, kCuda = 1 };
  // The largest index a device may have. An index is kept in 16 bits, so
  // that a Device takes 4 bytes and a TensorSpec 88 (every node holds one);
  // ParseTargetDevice and the importer refuse a larger one.
  static constexpr int32_t kMaxIndex = std::numeric_limits<int16_t>::max();
  Type type = Type::kCpu;
  int16_t index = 0;

  static Device Cpu() { return Device{}; }
  // `index` in [0, kMaxIndex].
  static Device Cuda(int32_t index) {
    return Device{Type::kCuda, static_cast<int16_t>(index)};
  }
  bool is_host() const { return type == Type::kCpu; }
  std::string ToString() const;  // "cpu", "cuda:1"
  friend bool operator==(const Device&, const Device&) = default;
  friend auto operator<=>(const Device&, const Device&) = default;
};

// Parses a `target_device` compile-spec value: surrounding whitespace is
// ignored, the type is case-insensitive ("cpu", "cuda"), the index defaults
// to 0 and must be a non-negative decimal integer. "cpu:N" is the host.
absl::StatusOr<Device> ParseTargetDevice(std::string_view text);
// The hint for a device text ParseTargetDevice refuses for its type:
// "did you mean 'cuda:0'?" for "cdua:0" (the index kept), "" when no device
// type is close (DidYouMean, diagnostics.h).
std::string DidYouMeanDevice(std::string_view text);

// ---------------------------------------------------------------------------
// Tensor specs.

// (Fields ordered for packing: 24 bytes. Initialise by name.)
struct MemoryPlacement {
  int32_t arena = 0;
  bool planned = false;
  int64_t offset = 0;
  int64_t size = 0;
  friend bool operator==(const MemoryPlacement&,
                         const MemoryPlacement&) = default;
};

// Dimension sizes or strides: a vector of int64 that keeps up to 4 dims in
// place (no allocation for the tensors programs have; more spill to the
// heap). It converts to and from std::vector<int64_t> and compares with one,
// so code written against vectors reads it unchanged.
class Dims : public absl::InlinedVector<int64_t, 4> {
 public:
  using InlinedVector::InlinedVector;
  Dims(const std::vector<int64_t>& v)  // NOLINT: implicit, vector-like
      : InlinedVector(v.begin(), v.end()) {}
  // `dims = {2, 3}` assigns in place rather than moving from a temporary
  // (which GCC 12 under the sanitizers misreads as using uninitialized
  // storage: -Wmaybe-uninitialized).
  Dims& operator=(std::initializer_list<int64_t> list) {
    assign(list.begin(), list.end());
    return *this;
  }
  operator std::vector<int64_t>() const {  // NOLINT: implicit, vector-like
    return std::vector<int64_t>(begin(), end());
  }
  friend bool operator==(const Dims& a, const Dims& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
};

// A spec's strides as given (TensorSpec::strides). Most specs leave them
// out (contiguous), so they are kept out of line: 8 bytes when empty, a Dims
// on the heap when set. Reads as a const Dims&; a value like Dims (copying
// one copies its dims).
class RareDims {
 public:
  RareDims() = default;
  RareDims(const Dims& dims) { *this = dims; }            // NOLINT: Dims-like
  RareDims(const std::vector<int64_t>& v) { *this = v; }  // NOLINT: Dims-like
  RareDims(std::initializer_list<int64_t> list) { *this = list; }
  RareDims(const RareDims& other) { *this = other; }
  RareDims(RareDims&&) noexcept = default;
  RareDims& operator=(const RareDims& other) {
    if (this != &other) *this = other.dims();
    return *this;
  }
  RareDims& operator=(RareDims&&) noexcept = default;
  RareDims& operator=(const Dims& dims) {
    assign(dims.begin(), dims.end());
    return *this;
  }
  RareDims& operator=(const std::vector<int64_t>& v) {
    assign(v.begin(), v.end());
    return *this;
  }
  RareDims& operator=(std::initializer_list<int64_t> list) {
    assign(list.begin(), list.end());
    return *this;
  }

  const Dims& dims() const { return dims_ ? *dims_ : Empty(); }
  operator const Dims&() const { return dims(); }  // NOLINT: Dims-like
  bool empty() const { return dims_ == nullptr; }
  size_t size() const { return dims_ ? dims_->size() : 0; }
  int64_t operator[](size_t i) const { return (*dims_)[i]; }
  const int64_t* data() const { return dims().data(); }
  const int64_t* begin() const { return dims().data(); }
  const int64_t* end() const { return dims().data() + size(); }
  template <std::input_iterator It>
  void assign(It first, It last) {
    if (first == last)
      dims_.reset();
    else
      dims_ = std::make_unique<Dims>(first, last);
  }
  void assign(size_t count, int64_t value) {
    if (count == 0)
      dims_.reset();
    else
      dims_ = std::make_unique<Dims>(count, value);
  }
  void clear() { dims_.reset(); }

  friend bool operator==(const RareDims& a, const RareDims& b) {
    return a.dims() == b.dims();
  }
  friend bool operator==(const RareDims& a, const Dims& b) {
    return a.dims() == b;
  }
  friend bool operator==(const RareDims& a, const std::vector<int64_t>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  static const Dims& Empty() {
    static const Dims* const empty = new Dims();
    return *empty;
  }
  std::unique_ptr<Dims> dims_;  // null when empty
};

struct TensorSpec {
  Dims sizes;
  // As given. Empty means contiguous; use Strides() to read them.
  RareDims strides;
  int64_t storage_offset = 0;
  MemoryPlacement memory;
  Device device;
  DType dtype = DType::kInvalid;
  // Whether the wire form carried a `device` field (kept for round trips).
  bool device_present = false;

  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  // The strides, with empty `strides` read as contiguous.
  Dims Strides() const;
  // Number of elements; nullopt on overflow.
  std::optional<int64_t> NumElements() const;
  // Bytes of storage the spec spans from element 0 of its storage:
  // (storage_offset + largest reachable linear index + 1) * element size, or
  // 0 for an empty tensor. nullopt on overflow or negative strides/offset.
  std::optional<int64_t> StorageBytes() const;
  // Bytes of the elements themselves (numel * element size).
  std::optional<int64_t> NumBytes() const;
  bool IsContiguous() const;
  // 4-D NHWC dense layout (dim order 0,2,3,1).
  bool IsChannelsLast() const;
  // Same dtype, sizes, strides (as read by Strides()) and storage offset.
  bool SameLayout(const TensorSpec& other) const;
  void SetDevice(Device d) {
    device = d;
    device_present = true;
  }

 private:
  // StorageBytes of a non-empty spec with explicit strides.
  std::optional<int64_t> StridedStorageBytes() const;
};

// (Inline: every pass sizes every value, some several times.)
inline std::optional<int64_t> TensorSpec::NumElements() const {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s < 0 || __builtin_mul_overflow(n, s, &n)) return std::nullopt;
  }
  return n;
}

inline std::optional<int64_t> TensorSpec::StorageBytes() const {
  std::optional<int64_t> n = NumElements();
  if (!n || storage_offset < 0) return std::nullopt;
  if (*n == 0) return 0;
  if (!strides.empty()) return StridedStorageBytes();
  int64_t elements = 0, bytes = 0;  // contiguous
  if (__builtin_add_overflow(storage_offset, *n, &elements) ||
      __builtin_mul_overflow(elements, ElementSize(dtype), &bytes))
    return std::nullopt;
  return bytes;
}

// Row-major strides of `sizes` (a dim of 0 counts as 1). A stride past
// int64 saturates at its maximum: ContiguousStridesFit says whether they fit,
// and validation refuses a spec whose strides do not (E0204).
Dims ContiguousStrides(std::span<const int64_t> sizes);
bool ContiguousStridesFit(std::span<const int64_t> sizes);

// ---------------------------------------------------------------------------
// Graphs.

enum class InputKind : uint8_t {
  kInvalid = 0,
  kUserInput,
  kParameter,
  kBuffer,
  kMutableBuffer,
  kLiftedConstant,
};
std::string_view InputKindName(InputKind kind);
// Parameters, buffers and lifted constants: program data, never device.
inline bool IsProgramData(InputKind kind) {
  return kind == InputKind::kParameter || kind == InputKind::kBuffer ||
         kind == InputKind::kLiftedConstant;
}

enum class ScalarType : uint8_t { kInvalid = 0, kInt, kFloat, kBool };

// A value: a node's whole result, or one element of a tuple-valued node.
// The one key for values: ordered (std::map) and hashed (absl containers)
// as it is; per-value arrays use ValueSlots (graph.h).
struct ValueId {
  int32_t node = -1;
  int32_t element = -1;  // -1: the whole result
  bool valid() const { return node >= 0; }
  friend bool operator==(const ValueId&, const ValueId&) = default;
  friend auto operator<=>(const ValueId&, const ValueId&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ValueId& v) {
    return H::combine(std::move(h), v.node, v.element);
  }
};

enum class ArgKind : uint8_t {
  kValue,      // `value` (element == -1) or `element` (element >= 0)
  kValueList,  // Tensor[]
  kInt,
  kFloat,
  kBool,
  kInts,
  kDType,
  kNone,
  kString,
};

// The lists and strings only some kinds use are Rare (compact.h): an
// Argument is 64 bytes, and a node has one per operand.
struct Argument {
  RareString name;             // keyword name, may be empty
  RareVector<ValueId> values;  // kValueList
  RareVector<int64_t> ints;    // kInts
  RareString string_value;     // kString
  int64_t int_value = 0;
  double float_value = 0;
  ValueId value;  // kValue
  ArgKind kind = ArgKind::kNone;
  DType dtype = DType::kInvalid;
  bool bool_value = false;

  static Argument Value(ValueId v) {
    Argument a;
    a.kind = ArgKind::kValue;
    a.value = v;
    return a;
  }
  bool is_value() const { return kind == ArgKind::kValue; }
};

enum class NodeKind : uint8_t {
  kInput,
  kConstant,
  kCall,
  kDelegate,
  kGetItem,
  kOutput,
};
std::string_view NodeKindName(NodeKind kind);

enum class ResultKind : uint8_t { kNone, kTensor, kTuple, kScalar };

struct SourceLocation {
  std::string file;
  int32_t line = 0;
  std::string name;
};

// Fields are ordered by size so that a Node packs without holes.
struct Node {
  std::string name;
  // kInput: InputNode.target; kConstant: the constant's name;
  // kDelegate: the lowered module's id; kCall: the operator name (pointing
  // at the registry's name when it is one: TargetString).
  TargetString target;

  // kCall: the schema text given on the node (may be empty) and the resolved
  // schema (from the node or the registry; null when unknown).
  RareString schema_text;
  Shared<const OpSchema> schema;

  // kCall / kDelegate arguments; kOutput: the returned values.
  std::vector<Argument> args;

  TensorSpec tensor;             // kTensor
  RareVector<TensorSpec> tuple;  // kTuple

  RareString delegation_tag;
  // Where the node came from; null when the wire form had no `source`.
  // Shared and immutable: copies of a node (copy insertion, module
  // inlining) share it.
  Shared<const SourceLocation> source;

  // kGetItem: source node index and element.
  int32_t getitem_source = -1;
  int32_t getitem_index = 0;

  NodeKind kind = NodeKind::kCall;
  // kInput: kind and the constant-table entry holding its data (if any).
  InputKind input_kind = InputKind::kInvalid;
  ResultKind result = ResultKind::kNone;
  ScalarType scalar = ScalarType::kInvalid;  // kScalar
  bool at_load = false;                      // kCall

  // The tensor spec of `element` of this node's result (-1: the whole
  // result). Null when that is not a tensor. (Inline: every pass asks.)
  const TensorSpec* Spec(int32_t element = -1) const {
    if (element < 0) return result == ResultKind::kTensor ? &tensor : nullptr;
    if (result != ResultKind::kTuple ||
        element >= static_cast<int32_t>(tuple.size()))
      return nullptr;
    return &tuple[element];
  }
  TensorSpec* MutableSpec(int32_t element = -1) {
    return const_cast<TensorSpec*>(std::as_const(*this).Spec(element));
  }
};

// Makes room in `nodes` for `count` nodes and as many again: the copies
// place_and_copy may add, which it lays out in the same array rather than a
// second one. The room costs address space only until it is written (a large
// vector's untouched pages are never faulted in); a method that needs more
// copies than that grows the array once.
inline void ReserveNodes(std::vector<Node>& nodes, size_t count) {
  nodes.reserve(2 * count);
}

// How many nodes ahead a walk over a method's nodes that reads their
// operands asks for them (PrefetchOperands).
inline constexpr int32_t kOperandsAhead = 8;

// Asks for the operands of `nodes[i]`, when there is such a node, to be
// fetched into cache, for a write (`for_write`) or a read. A node's
// arguments are an array of their own on the heap: a walk in order over a
// large method finds the node array streaming in, but not those.
inline void PrefetchOperands(const std::vector<Node>& nodes, int64_t i,
                             bool for_write = false) {
  if (i < 0 || i >= static_cast<int64_t>(nodes.size())) return;
  const std::vector<Argument>& args = nodes[i].args;
  if (args.empty()) return;
  if (for_write)
    __builtin_prefetch(args.data(), 1);
  else
    __builtin_prefetch(args.data());
}

// A node that produces program data: a constant node, or an input that is a
// parameter, buffer or lifted constant (IsProgramData).
inline bool IsProgramDataNode(const Node& node) {
  return node.kind == NodeKind::kConstant ||
         (node.kind == NodeKind::kInput && IsProgramData(node.input_kind));
}

struct Arena {
  Device device;
  int64_t size = 0;
  int64_t lower_bound = 0;
};

// The options a method was lowered with (ferry.v1.LoweredWith), resolved
// for that method. Recorded by the pipeline; read by verification.
struct LoweredWith {
  bool skip_h2d_for_method_inputs = false;
  bool skip_d2h_for_method_outputs = false;
  bool error_on_per_call_copies = false;
  bool enable_non_cpu_memory_planning = true;
  bool alloc_graph_input = true;
  bool alloc_graph_output = true;
  int32_t constant_staging = 0;  // ferry.v1.ConstantStaging, as given
  friend bool operator==(const LoweredWith&, const LoweredWith&) = default;
};

struct Method {
  std::string name;
  // Their names are unique: import refuses a duplicate, and the passes that
  // add nodes name them so (place_and_copy's copy names rely on it).
  std::vector<Node> nodes;
  std::vector<Arena> arenas;
  // Set on the methods of a lowered program; nullopt when not recorded.
  std::optional<LoweredWith> lowered_with;

  const TensorSpec* Spec(ValueId v) const {
    return v.node >= 0 && v.node < static_cast<int32_t>(nodes.size())
               ? nodes[v.node].Spec(v.element)
               : nullptr;
  }
  // The name used for `v` in diagnostics: "t" or "t[1]".
  std::string ValueName(ValueId v) const;
};

// A constant's data by reference: a blob the service stores (Constant's
// `data_digest` on the wire).
struct BlobRef {
  std::string hash;  // lowercase hex SHA-256
  int64_t size_bytes = 0;
};

struct Constant {
  std::string name;
  TensorSpec spec;
  std::optional<std::string> data;
  // Instead of `data` (never both): the bytes are a blob, fetched only by
  // what needs them (LowerOptions::fetch_blob, the service's Verify).
  std::optional<BlobRef> data_digest;
  uint64_t seed = 0;
};

struct CompileSpec {
  std::string key;
  std::string value;
};

// The backends a lowered module's `backend` names: the partitioner emits
// these ids, the service advertises them, and the capability partitioner
// claims only what a backend's table declares (runtime/ops/backend_ops.h).
inline constexpr char kCudaBackendId[] = "FerryCudaBackend";
inline constexpr char kHostBackendId[] = "FerryHostBackend";

struct LoweredModule {
  std::string id;
  std::string backend;  // kCudaBackendId, kHostBackendId or a client's own
  std::vector<CompileSpec> compile_specs;
  Method graph;
  std::vector<TensorSpec> input_layouts;
  bool returns_tuple = false;
  // The first `target_device` compile spec, parsed (ResolveTargetDevice):
  // the host when there is none, the parse error when it is invalid.
  // Validation reports that error (E0401), the one place it is reported;
  // code that runs on validated programs reads device().
  absl::StatusOr<Device> target_device = Device::Cpu();

  // The first `target_device` compile spec's value, or nullopt.
  std::optional<std::string> TargetDeviceText() const;
  // Parses TargetDeviceText() into target_device. Import calls it once per
  // module; code that adds or edits compile specs calls it again.
  void ResolveTargetDevice();
  // The device the module runs on: target_device, or the host when it is
  // invalid (validation has reported that).
  Device device() const { return target_device.value_or(Device::Cpu()); }
};

struct Program {
  std::vector<Method> methods;
  std::vector<Constant> constants;
  std::vector<LoweredModule> modules;

  const Constant* FindConstant(std::string_view name) const;
  Constant* FindConstant(std::string_view name);
  const LoweredModule* FindModule(std::string_view id) const;
  LoweredModule* FindModule(std::string_view id);
};

// Constant-time lookups of a program's modules and constants by name, for
// code that looks up many (Program::FindModule is a linear scan). Refers to
// the program it was built from: rebuild it after adding modules or
// constants, and do not let it outlive the program.
class ProgramIndex {
 public:
  explicit ProgramIndex(const Program& program);
  const LoweredModule* FindModule(std::string_view id) const;
  const Constant* FindConstant(std::string_view name) const;

 private:
  std::unordered_map<std::string_view, const LoweredModule*> modules_;
  std::unordered_map<std::string_view, const Constant*> constants_;
};

// Calls `fn(ValueId)` for every value a node reads (arguments, list elements,
// the getitem source), in argument order.
template <typename Fn>
void ForEachOperand(const Node& node, Fn&& fn) {
  if (node.kind == NodeKind::kGetItem) {
    fn(ValueId{node.getitem_source, -1});
    return;
  }
  for (const Argument& arg : node.args) {
    if (arg.kind == ArgKind::kValue) fn(arg.value);
    if (arg.kind == ArgKind::kValueList)
      for (const ValueId& v : arg.values) fn(v);
  }
}

// Same, with mutable access, for rewrites.
template <typename Fn>
void ForEachOperandMutable(Node& node, Fn&& fn) {
  if (node.kind == NodeKind::kGetItem) {
    ValueId v{node.getitem_source, -1};
    fn(v);
    node.getitem_source = v.node;
    return;
  }
  for (Argument& arg : node.args) {
    if (arg.kind == ArgKind::kValue) fn(arg.value);
    if (arg.kind == ArgKind::kValueList)
      for (ValueId& v : arg.values) fn(v);
  }
}

// Use lists: for each node, the (reader node, operand) pairs reading any of
// its values, in node order.
struct Use {
  int32_t reader = -1;
  ValueId value;
};
std::vector<std::vector<Use>> BuildUses(const Method& method);

}  // namespace ferry

#endif  // FERRY_PASSES_IR_H_
