#include "passes/ir.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "passes/diagnostics.h"

namespace ferry {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kF64:
      return "f64";
    case DType::kI8:
      return "i8";
    case DType::kU8:
      return "u8";
    case DType::kI16:
      return "i16";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kBool:
      return "bool";
    case DType::kInvalid:
      return "invalid";
  }
  return "invalid";
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 ||
         dtype == DType::kBF16 || dtype == DType::kF64;
}

std::string Device::ToString() const {
  if (type == Type::kCpu) return "cpu";
  return absl::StrCat("cuda:", index);
}

absl::StatusOr<Device> ParseTargetDevice(std::string_view text) {
  std::string lowered =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(std::string(text)));
  std::string_view type = lowered;
  std::string_view index_text;
  bool has_index = false;
  if (size_t colon = lowered.find(':'); colon != std::string::npos) {
    type = std::string_view(lowered).substr(0, colon);
    index_text = std::string_view(lowered).substr(colon + 1);
    has_index = true;
  }
  int32_t index = 0;
  if (has_index) {
    bool digits = !index_text.empty() &&
                  std::all_of(index_text.begin(), index_text.end(),
                              [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || !absl::SimpleAtoi(std::string(index_text), &index) ||
        index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("device index '", std::string(index_text), "' in '",
                       std::string(text), "' is not a non-negative integer"));
    }
    if (index > Device::kMaxIndex) {
      return absl::InvalidArgumentError(
          absl::StrCat("device index ", index, " in '", std::string(text),
                       "' is over the largest, ", Device::kMaxIndex));
    }
  }
  if (type == "cpu") return Device::Cpu();
  if (type == "cuda") return Device::Cuda(index);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device type '", std::string(type), "' in '",
                   std::string(text), "' (valid types: cpu, cuda)"));
}

std::string DidYouMeanDevice(std::string_view text) {
  static const std::string kTypes[] = {"cpu", "cuda"};
  std::string lowered =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(std::string(text)));
  const size_t colon = lowered.find(':');
  const std::string type = lowered.substr(0, colon);
  const std::string index =
      colon == std::string::npos ? "" : lowered.substr(colon);
  for (const std::string& known : kTypes)
    if (type == known) return {};  // the type is right; the index is not
  std::optional<std::string> closest = NameSuggester().Closest(type, kTypes);
  if (!closest.has_value()) return {};
  return DidYouMeanText(absl::StrCat(*closest, index));
}

Dims ContiguousStrides(std::span<const int64_t> sizes) {
  Dims strides(sizes.size());
  int64_t running = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    if (__builtin_mul_overflow(running, std::max<int64_t>(sizes[i], 1),
                               &running))
      running = std::numeric_limits<int64_t>::max();
  }
  return strides;
}

bool ContiguousStridesFit(std::span<const int64_t> sizes) {
  int64_t running = 1;
  for (int64_t s : sizes)
    if (__builtin_mul_overflow(running, std::max<int64_t>(s, 1), &running))
      return false;
  return true;
}

Dims TensorSpec::Strides() const {
  if (strides.empty() && !sizes.empty()) return ContiguousStrides(sizes);
  return strides;
}

std::optional<int64_t> TensorSpec::NumBytes() const {
  std::optional<int64_t> n = NumElements();
  int64_t bytes = 0;
  if (!n || __builtin_mul_overflow(*n, ElementSize(dtype), &bytes))
    return std::nullopt;
  return bytes;
}

std::optional<int64_t> TensorSpec::StridedStorageBytes() const {
  const Dims& st = strides;
  if (st.size() != sizes.size()) return std::nullopt;
  int64_t last = storage_offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    int64_t term = 0;
    if (st[i] < 0 || __builtin_mul_overflow(sizes[i] - 1, st[i], &term) ||
        __builtin_add_overflow(last, term, &last))
      return std::nullopt;
  }
  int64_t bytes = 0;
  if (__builtin_add_overflow(last, 1, &last) ||
      __builtin_mul_overflow(last, ElementSize(dtype), &bytes))
    return std::nullopt;
  return bytes;
}

namespace {
// Whether `strides` are the dense strides of `sizes` visited in `order`
// (outermost first), ignoring dims of size 1 as ATen does.
bool DenseInOrder(std::span<const int64_t> sizes,
                  std::span<const int64_t> strides,
                  std::initializer_list<int64_t> order) {
  int64_t expected = 1;
  for (size_t k = order.size(); k-- > 0;) {
    int64_t d = order.begin()[k];
    if (sizes[d] == 0) return true;
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}
}  // namespace

bool TensorSpec::IsContiguous() const {
  if (strides.empty()) return true;  // implicit strides are contiguous
  if (strides.size() != sizes.size()) return false;
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 0) return true;
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

bool TensorSpec::IsChannelsLast() const {
  const Dims st = Strides();
  if (sizes.size() != 4 || st.size() != 4) return false;
  return DenseInOrder(sizes, st, {0, 2, 3, 1});
}

bool TensorSpec::SameLayout(const TensorSpec& other) const {
  if (dtype != other.dtype || sizes != other.sizes ||
      storage_offset != other.storage_offset)
    return false;
  if (strides == other.strides) return true;
  // One side may leave its (contiguous) strides implicit.
  return Strides() == other.Strides();
}

std::string_view InputKindName(InputKind kind) {
  switch (kind) {
    case InputKind::kUserInput:
      return "user input";
    case InputKind::kParameter:
      return "parameter";
    case InputKind::kBuffer:
      return "buffer";
    case InputKind::kMutableBuffer:
      return "mutable buffer";
    case InputKind::kLiftedConstant:
      return "lifted constant";
    case InputKind::kInvalid:
      return "invalid";
  }
  return "invalid";
}

std::string_view NodeKindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::kInput:
      return "input";
    case NodeKind::kConstant:
      return "constant";
    case NodeKind::kCall:
      return "call";
    case NodeKind::kDelegate:
      return "delegate";
    case NodeKind::kGetItem:
      return "getitem";
    case NodeKind::kOutput:
      return "output";
  }
  return "node";
}

std::string Method::ValueName(ValueId v) const {
  if (v.node < 0 || v.node >= static_cast<int32_t>(nodes.size()))
    return "<invalid>";
  if (v.element < 0) return nodes[v.node].name;
  return absl::StrCat(nodes[v.node].name, "[", v.element, "]");
}

std::optional<std::string> LoweredModule::TargetDeviceText() const {
  for (const CompileSpec& spec : compile_specs)
    if (spec.key == "target_device") return spec.value;
  return std::nullopt;
}

void LoweredModule::ResolveTargetDevice() {
  std::optional<std::string> text = TargetDeviceText();
  if (text)
    target_device = ParseTargetDevice(*text);
  else
    target_device = Device::Cpu();
}

const Constant* Program::FindConstant(std::string_view name) const {
  for (const Constant& c : constants)
    if (c.name == name) return &c;
  return nullptr;
}
Constant* Program::FindConstant(std::string_view name) {
  return const_cast<Constant*>(
      static_cast<const Program*>(this)->FindConstant(name));
}
const LoweredModule* Program::FindModule(std::string_view id) const {
  for (const LoweredModule& m : modules)
    if (m.id == id) return &m;
  return nullptr;
}
LoweredModule* Program::FindModule(std::string_view id) {
  return const_cast<LoweredModule*>(
      static_cast<const Program*>(this)->FindModule(id));
}

ProgramIndex::ProgramIndex(const Program& program) {
  modules_.reserve(program.modules.size());
  for (const LoweredModule& m : program.modules) modules_.emplace(m.id, &m);
  constants_.reserve(program.constants.size());
  for (const Constant& c : program.constants) constants_.emplace(c.name, &c);
}

const LoweredModule* ProgramIndex::FindModule(std::string_view id) const {
  auto it = modules_.find(id);  // the first module of that id, as Program's
  return it == modules_.end() ? nullptr : it->second;
}

const Constant* ProgramIndex::FindConstant(std::string_view name) const {
  auto it = constants_.find(name);
  return it == constants_.end() ? nullptr : it->second;
}

std::vector<std::vector<Use>> BuildUses(const Method& method) {
  std::vector<std::vector<Use>> uses(method.nodes.size());
  for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
    ForEachOperand(method.nodes[i], [&](const ValueId& v) {
      if (v.node >= 0 && v.node < static_cast<int32_t>(uses.size()))
        uses[v.node].push_back(Use{i, v});
    });
  }
  return uses;
}

}  // namespace ferry
