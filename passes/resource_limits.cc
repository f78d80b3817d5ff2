#include "passes/resource_limits.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ferry {
namespace {

constexpr int64_t kOverflow = std::numeric_limits<int64_t>::max();
// absl::Status payload key of a ResourceViolation.
constexpr char kViolationPayload[] = "ferry.dev/ResourceViolation";

// Sums bytes, saturating at kOverflow.
class ByteTotal {
 public:
  void Add(int64_t bytes) {
    std::optional<int64_t> sum = CheckedAdd(total_, bytes);
    total_ = sum ? *sum : kOverflow;
  }
  void Add(std::optional<int64_t> bytes) { Add(bytes.value_or(kOverflow)); }
  int64_t value() const { return total_; }

 private:
  int64_t total_ = 0;
};

// Walks every tensor spec of a method's nodes, with the node it belongs to.
template <typename Fn>
void ForEachNodeSpec(const Method& method, Fn&& fn) {
  for (const Node& node : method.nodes) {
    if (node.result == ResultKind::kTensor) fn(node, node.tensor);
    if (node.result == ResultKind::kTuple)
      for (const TensorSpec& spec : node.tuple) fn(node, spec);
  }
}

// The dense bytes of the values a method returns.
ByteTotal OutputBytes(const Method& method) {
  ByteTotal total;
  for (const Node& node : method.nodes) {
    if (node.kind != NodeKind::kOutput) continue;
    for (const Argument& arg : node.args) {
      if (!arg.is_value()) continue;
      if (const TensorSpec* spec = method.Spec(arg.value))
        total.Add(spec->NumBytes());
    }
  }
  return total;
}

// The largest single allocation seen, to name in an error.
struct Largest {
  int64_t bytes = -1;
  std::string subject;
  void See(int64_t b, const std::string& s) {
    if (b > bytes) {
      bytes = b;
      subject = s;
    }
  }
};

// What one executor of `program` allocates (see VerifyBytes); error for the
// first tensor over max_tensor_bytes.
absl::StatusOr<int64_t> ExecutorBytes(const Program& program,
                                      int64_t constant_copies,
                                      const ResourceLimits& limits,
                                      Largest& largest) {
  if (absl::Status tensors = CheckTensorBytes(program, limits); !tensors.ok())
    return tensors;
  ByteTotal total;
  for (const Constant& constant : program.constants) {
    int64_t bytes = TensorBytes(constant.spec).value_or(kOverflow);
    largest.See(bytes, ConstantSubject(constant.name));
    total.Add(CheckedMul(bytes, constant_copies));
  }
  auto add_method = [&](const Method& method, auto subject) {
    ForEachNodeSpec(method, [&](const Node& node, const TensorSpec& spec) {
      int64_t bytes = TensorBytes(spec).value_or(kOverflow);
      if (bytes > largest.bytes) largest.See(bytes, subject(node.name));
      total.Add(bytes);
    });
    for (const Arena& arena : method.arenas) total.Add(arena.size);
  };
  for (const Method& method : program.methods) {
    add_method(method, [&](absl::string_view node) {
      return NodeSubject(method.name, node);
    });
    total.Add(OutputBytes(method).value());
  }
  for (const LoweredModule& module : program.modules)
    add_method(module.graph, [&](absl::string_view node) {
      return ModuleNodeSubject(module.id, node);
    });
  return total.value();
}

}  // namespace

std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t product = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &product))
    return std::nullopt;
  return product;
}

std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

std::optional<int64_t> TensorBytes(const TensorSpec& spec) {
  std::optional<int64_t> storage = spec.StorageBytes();
  // Contiguous storage from an offset spans at least the elements.
  if (spec.strides.empty()) return storage;
  std::optional<int64_t> dense = spec.NumBytes();
  if (!storage || !dense) return std::nullopt;
  return std::max(*storage, *dense);
}

std::string ResourceViolation::Description() const {
  std::string needs =
      bytes == kOverflow ? std::string("more than 2^63") : absl::StrCat(bytes);
  if (limit == "max_verify_bytes")
    return absl::StrCat("verification needs ", needs,
                        " bytes (largest: ", subject, "), over ", limit, " (",
                        allowed, ")");
  return absl::StrCat(subject, " needs ", needs, " bytes, over ", limit, " (",
                      allowed, ")");
}

std::string ResourceViolation::RefusalMessage() const {
  return absl::StrCat("over a resource limit: ", Description());
}

std::string ResourceViolation::QuotaDescription() const {
  return absl::StrCat(Description(), " (see GetCapabilities.limits)");
}

absl::Status ResourceLimitError(const ResourceViolation& violation) {
  absl::Status status = absl::ResourceExhaustedError(violation.Description());
  status.SetPayload(
      kViolationPayload,
      absl::Cord(absl::StrCat(violation.limit, "\n", violation.bytes, "\n",
                              violation.allowed, "\n", violation.subject)));
  return status;
}

std::optional<ResourceViolation> GetResourceViolation(
    const absl::Status& status) {
  if (status.code() != absl::StatusCode::kResourceExhausted)
    return std::nullopt;
  auto payload = status.GetPayload(kViolationPayload);
  if (!payload) return std::nullopt;
  std::vector<std::string> parts =
      absl::StrSplit(std::string(*payload), absl::MaxSplits('\n', 3));
  ResourceViolation violation;
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[1], &violation.bytes) ||
      !absl::SimpleAtoi(parts[2], &violation.allowed))
    return std::nullopt;
  violation.limit = parts[0];
  violation.subject = parts[3];
  return violation;
}

std::string NodeSubject(absl::string_view method, absl::string_view node) {
  return absl::StrCat("program.methods['", method, "'].nodes['", node, "']");
}

std::string ModuleNodeSubject(absl::string_view module,
                              absl::string_view node) {
  return absl::StrCat("program.modules['", module, "'].nodes['", node, "']");
}

std::string ConstantSubject(absl::string_view constant) {
  return absl::StrCat("program.constants['", constant, "']");
}

absl::Status CheckTensorBytes(const Program& program,
                              const ResourceLimits& limits) {
  auto over = [&](const TensorSpec& spec) -> std::optional<int64_t> {
    std::optional<int64_t> bytes = TensorBytes(spec);
    if (bytes && *bytes <= limits.max_tensor_bytes) return std::nullopt;
    return bytes.value_or(kOverflow);
  };
  auto error = [&](std::string subject, int64_t bytes) {
    return ResourceLimitError(ResourceViolation{"max_tensor_bytes",
                                                std::move(subject), bytes,
                                                limits.max_tensor_bytes});
  };
  for (const Constant& constant : program.constants)
    if (std::optional<int64_t> bytes = over(constant.spec))
      return error(ConstantSubject(constant.name), *bytes);
  auto check_method = [&](const Method& method, auto subject) -> absl::Status {
    absl::Status status;
    ForEachNodeSpec(method, [&](const Node& node, const TensorSpec& spec) {
      if (!status.ok()) return;
      if (std::optional<int64_t> bytes = over(spec))
        status = error(subject(node.name), *bytes);
    });
    return status;
  };
  for (const Method& method : program.methods) {
    absl::Status status = check_method(method, [&](absl::string_view node) {
      return NodeSubject(method.name, node);
    });
    if (!status.ok()) return status;
  }
  for (const LoweredModule& module : program.modules) {
    absl::Status status = check_method(module.graph, [&](absl::string_view n) {
      return ModuleNodeSubject(module.id, n);
    });
    if (!status.ok()) return status;
    for (const TensorSpec& layout : module.input_layouts)
      if (std::optional<int64_t> bytes = over(layout))
        return error(
            absl::StrCat("program.modules['", module.id, "'].input_layouts"),
            *bytes);
  }
  return absl::OkStatus();
}

void AddressableCount::Add(const Node& node, const TensorSpec& spec) {
  if (over_) return;  // the first node past the bound is the error
  // Planning aligns every buffer; 64 bytes each is more than enough.
  const int64_t bytes =
      CheckedAdd(TensorBytes(spec).value_or(kOverflow), 64).value_or(kOverflow);
  bytes_ = CheckedAdd(bytes_, bytes).value_or(kOverflow);
  if (bytes_ > kAddressableBytes) over_ = node.name;
}

absl::Status AddressableCount::Status(
    absl::FunctionRef<std::string(absl::string_view node)> subject) const {
  if (!over_) return absl::OkStatus();
  return ResourceLimitError(ResourceViolation{
      "addressable_bytes", subject(*over_), bytes_, kAddressableBytes});
}

absl::Status CheckAddressable(const Program& program) {
  auto count = [](const Method& graph) {
    AddressableCount count;
    ForEachNodeSpec(graph, [&](const Node& node, const TensorSpec& spec) {
      count.Add(node, spec);
    });
    return count;
  };
  for (const Method& method : program.methods) {
    absl::Status status = count(method).Status(
        [&](absl::string_view node) { return NodeSubject(method.name, node); });
    if (!status.ok()) return status;
  }
  for (const LoweredModule& module : program.modules) {
    absl::Status status =
        count(module.graph).Status([&](absl::string_view node) {
          return ModuleNodeSubject(module.id, node);
        });
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

int64_t ExpansionAllowance(int64_t request_bytes,
                           const ResourceLimits& limits) {
  return CheckedMul(std::max(request_bytes, kExpansionFloorBytes),
                    limits.max_expansion)
      .value_or(kOverflow);
}

int64_t ConstantDataBytes(const Program& program) {
  ByteTotal total;
  for (const Constant& constant : program.constants)
    if (constant.data) total.Add(static_cast<int64_t>(constant.data->size()));
  return total.value();
}

absl::StatusOr<int64_t> VerifyBytes(const Program& original,
                                    const Program& lowered,
                                    int64_t given_input_bytes,
                                    const ResourceLimits& limits) {
  Largest largest;
  absl::StatusOr<int64_t> eager = ExecutorBytes(original, 1, limits, largest);
  if (!eager.ok()) return eager.status();
  absl::StatusOr<int64_t> backend = ExecutorBytes(lowered, 2, limits, largest);
  if (!backend.ok()) return backend.status();
  ByteTotal total;
  total.Add(*eager);
  total.Add(*backend);
  total.Add(given_input_bytes);
  for (const Method& method : original.methods)
    for (const Node& node : method.nodes)
      if (node.kind == NodeKind::kInput &&
          node.input_kind == InputKind::kUserInput)
        if (const TensorSpec* spec = node.Spec()) total.Add(spec->NumBytes());
  // Named after its largest tensor: the likeliest thing to change.
  if (total.value() > limits.max_verify_bytes)
    return ResourceLimitError(ResourceViolation{
        "max_verify_bytes",
        largest.subject.empty() ? std::string("program") : largest.subject,
        total.value(), limits.max_verify_bytes});
  return total.value();
}

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  struct Unit {
    const char* suffix;
    int64_t bytes;
  };
  static constexpr Unit kUnits[] = {{"KiB", int64_t{1} << 10},
                                    {"MiB", int64_t{1} << 20},
                                    {"GiB", int64_t{1} << 30},
                                    {"kB", 1'000},
                                    {"KB", 1'000},
                                    {"MB", 1'000'000},
                                    {"GB", 1'000'000'000},
                                    {"B", 1}};
  int64_t scale = 1;
  for (const Unit& unit : kUnits) {
    if (absl::ConsumeSuffix(&text, unit.suffix)) {
      scale = unit.bytes;
      break;
    }
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 0 ||
      value > std::numeric_limits<int64_t>::max() / scale) {
    return absl::InvalidArgumentError("not a byte size");
  }
  return value * scale;
}

}  // namespace ferry
