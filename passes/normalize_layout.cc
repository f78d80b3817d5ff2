// normalize_layout
//
// Model. A delegate is compiled for the layout its inputs and owned constants
// declare. If program data is stored in some other layout, the compiled code
// reads it with the wrong strides (ExecuTorch's "transposed parameter"
// defect: its emitter silently re-lays out parameters after partitioning).
// So this pass runs before partitioning and makes every such tensor
// contiguous, in the data and in every spec that describes it:
//
//   constants { name: "w" spec { sizes: [4,3] strides: [1,4] } data: ... }
//   w = input(PARAMETER, target "w")  f32[4,3] strides [1,4]
//   wt = aten::t(w)                    f32[3,4] strides [4,1]
// ==>
//   constants { name: "w" spec { sizes: [4,3] strides: [3,1] } data: permuted }
//   w = input(PARAMETER, target "w")  f32[4,3] strides [3,1]
//   wt = aten::t(w)                    f32[3,4] strides [1,3]
//   warning[FERRY-W0601]: parameter 'w' ... made contiguous
//
// Phases: (1) FindTensorsToNormalize picks the constant-table entries that
// are neither contiguous nor channels-last and that no already-lowered
// delegate reads; (2) Relayout rewrites each one's data and spec; (3)
// UpdateReaders rewrites the specs of the nodes naming it and of views of it.
#include "passes/normalize_layout.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/alias.h"
#include "passes/diagnostic_codes.h"
#include "passes/resource_limits.h"
#include "passes/schema.h"
#include "passes/shape_rules.h"

namespace ferry {

std::string ToContiguousBytes(const TensorSpec& from, std::string_view data) {
  const int64_t elem = ElementSize(from.dtype);
  const int64_t numel = from.NumElements().value_or(0);
  std::string out(static_cast<size_t>(numel * elem), '\0');
  if (numel == 0) return out;
  const Dims strides = from.Strides();
  std::vector<int64_t> index(from.sizes.size(), 0);
  for (int64_t linear = 0; linear < numel; ++linear) {
    int64_t offset = from.storage_offset;
    for (size_t d = 0; d < index.size(); ++d) offset += index[d] * strides[d];
    std::memcpy(&out[linear * elem], data.data() + offset * elem, elem);
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < from.sizes[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

namespace {

bool NeedsRelayout(const TensorSpec& spec) {
  return !spec.IsContiguous() && !spec.IsChannelsLast();
}

// The constant-table entry a node stands for, or empty.
std::string_view ConstantNameOf(const Node& node) {
  if (node.kind == NodeKind::kConstant) return node.target;
  if (node.kind == NodeKind::kInput && node.input_kind != InputKind::kUserInput)
    return node.target;
  return {};
}

// Phase 1: constants that need a new layout and may get one.
class FindTensorsToNormalize {
 public:
  std::vector<std::string> Run(const Program& program) {
    // Most programs store every constant dense: then nothing is pinned
    // either, and the methods need no walk.
    bool any_candidate = false;
    for (const Constant& constant : program.constants)
      any_candidate |= NeedsRelayout(constant.spec);
    if (!any_candidate) return {};
    absl::flat_hash_set<std::string> pinned;
    // Owned by an already-lowered module: compiled for the stored layout.
    for (const LoweredModule& module : program.modules)
      for (const Node& node : module.graph.nodes)
        if (std::string_view name = ConstantNameOf(node); !name.empty())
          pinned.emplace(std::string(name));
    // Read (directly or through views) by an already-lowered delegate.
    for (const Method& method : program.methods) {
      StorageRoots roots(method);
      for (const Node& node : method.nodes) {
        if (node.kind != NodeKind::kDelegate) continue;
        ForEachOperand(node, [&](const ValueId& v) {
          ValueId root = roots.RootOf(v);
          if (root.element >= 0) return;
          std::string_view name = ConstantNameOf(method.nodes[root.node]);
          if (!name.empty()) pinned.emplace(std::string(name));
        });
      }
    }
    std::vector<std::string> result;
    for (const Constant& constant : program.constants)
      if (NeedsRelayout(constant.spec) && !pinned.contains(constant.name))
        result.push_back(constant.name);
    return result;
  }
};

// Phase 2: new data and spec for one constant. The contiguous copy is
// counted before it is made: it must fit max_tensor_bytes, and everything
// this pass adds must fit the lowering's max_expansion allowance (a 4-byte
// constant with strides [0,0] declared f32[8000,8000] would grow to 256 MB).
class Relayout {
 public:
  explicit Relayout(const LowerOptions& options)
      : limits_(options.limits),
        allowed_(ExpansionAllowance(options.request_bytes, options.limits)),
        fetch_blob_(options.fetch_blob) {}

  absl::Status Run(Constant& constant) {
    if (constant.data_digest) {
      if (absl::Status fetched = FetchBlob(constant); !fetched.ok())
        return fetched;
    }
    if (constant.data) {
      std::optional<int64_t> span = constant.spec.StorageBytes();
      if (span && *span <= static_cast<int64_t>(constant.data->size())) {
        if (absl::Status fits = Charge(constant); !fits.ok()) return fits;
        constant.data = ToContiguousBytes(constant.spec, *constant.data);
      }
    }
    constant.spec.strides = ContiguousStrides(constant.spec.sizes);
    constant.spec.storage_offset = 0;
    return absl::OkStatus();
  }

 private:
  absl::Status Charge(const Constant& constant) {
    const int64_t old_bytes = static_cast<int64_t>(constant.data->size());
    std::optional<int64_t> new_bytes = constant.spec.NumBytes();
    if (!new_bytes || *new_bytes > limits_.max_tensor_bytes)
      return ResourceLimitError(ResourceViolation{
          "max_tensor_bytes", ConstantSubject(constant.name),
          new_bytes.value_or(std::numeric_limits<int64_t>::max()),
          limits_.max_tensor_bytes});
    std::optional<int64_t> grown =
        CheckedAdd(added_, std::max<int64_t>(*new_bytes - old_bytes, 0));
    if (!grown || *grown > allowed_)
      return ResourceLimitError(ResourceViolation{
          "max_expansion", ConstantSubject(constant.name),
          grown.value_or(std::numeric_limits<int64_t>::max()), allowed_});
    added_ = *grown;
    return absl::OkStatus();
  }

  // The blob's bytes become the constant's data: rewriting them is this
  // pass's job, and without them the new layout would describe other bytes.
  absl::Status FetchBlob(Constant& constant) {
    if (!fetch_blob_)
      return absl::FailedPreconditionError(absl::StrCat(
          "constant '", constant.name, "' is stored with strides ",
          absl::StrJoin(constant.spec.strides, ","),
          " and must be re-laid out, but its data is blob ",
          constant.data_digest->hash, " and no blob store was given"));
    absl::StatusOr<std::string> bytes = fetch_blob_(*constant.data_digest);
    if (!bytes.ok()) return bytes.status();
    constant.data = *std::move(bytes);
    constant.data_digest.reset();
    return absl::OkStatus();
  }

  const ResourceLimits& limits_;
  const int64_t allowed_;
  const BlobFetcher& fetch_blob_;
  int64_t added_ = 0;  // bytes of data this pass has added so far
};

// Phase 3: specs of the nodes naming a changed constant, and of views of
// them, follow the new layout.
class UpdateReaders {
 public:
  UpdateReaders(const Program& program,
                const absl::flat_hash_set<std::string>& changed)
      : program_(program), changed_(changed) {}

  // Returns the first node (by method order) naming each changed constant.
  void Run(Method& method,
           absl::flat_hash_map<std::string, std::string>& first_node) {
    std::vector<char> relaid(method.nodes.size(), 0);
    for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
      Node& node = method.nodes[i];
      std::string_view name = ConstantNameOf(node);
      if (!name.empty() && changed_.contains(std::string(name)) &&
          node.result == ResultKind::kTensor) {
        const Constant* constant = program_.FindConstant(name);
        node.tensor.strides = constant->spec.strides;
        node.tensor.storage_offset = 0;
        relaid[i] = 1;
        first_node.try_emplace(std::string(name), node.name);
        continue;
      }
      if (node.kind != NodeKind::kCall || node.result != ResultKind::kTensor)
        continue;
      const OpInfo* info = RegisteredOp(node);
      if (!info || info->shape_rule != ShapeRule::kView || !node.schema)
        continue;
      std::optional<int> self = node.schema->AliasedArgument(0);
      absl::StatusOr<BoundArguments> bound =
          BindArguments(*node.schema, node.args);
      if (!self || !bound.ok() || !(*bound)[*self] ||
          !(*bound)[*self]->is_value())
        continue;
      const ValueId source = (*bound)[*self]->value;
      if (source.element >= 0 || !relaid[source.node]) continue;
      absl::StatusOr<std::vector<TensorSpec>> inferred =
          InferResultSpecs(*info, method, node);
      if (!inferred.ok() || inferred->empty()) continue;
      node.tensor.strides = (*inferred)[0].Strides();
      node.tensor.storage_offset = (*inferred)[0].storage_offset;
      relaid[i] = 1;
    }
  }

 private:
  const Program& program_;
  const absl::flat_hash_set<std::string>& changed_;
};

}  // namespace

absl::StatusOr<PassStats> NormalizeLayout(Program& program,
                                          const LowerOptions& options,
                                          Diagnostics& diagnostics) {
  PassStats stats;
  std::vector<std::string> names = FindTensorsToNormalize().Run(program);
  if (names.empty()) {
    stats.Add("tensors_normalized", 0);
    return stats;
  }
  absl::flat_hash_set<std::string> changed(names.begin(), names.end());
  absl::flat_hash_map<std::string, std::vector<int64_t>> old_strides;
  Relayout relayout(options);
  for (const std::string& name : names) {
    Constant* constant = program.FindConstant(name);
    FERRY_RET_CHECK(constant != nullptr);
    old_strides[name] = constant->spec.Strides();
    if (absl::Status fits = relayout.Run(*constant); !fits.ok()) return fits;
  }
  absl::flat_hash_map<std::string, std::string> first_node;
  for (Method& method : program.methods) {
    UpdateReaders(program, changed).Run(method, first_node);
  }
  for (const std::string& name : names) {
    const Constant* constant = program.FindConstant(name);
    auto it = first_node.find(name);
    std::string node = it == first_node.end() ? name : it->second;
    std::string sizes, strides;
    for (int64_t s : constant->spec.sizes)
      absl::StrAppend(&sizes, sizes.empty() ? "" : ",", s);
    for (int64_t s : old_strides[name])
      absl::StrAppend(&strides, strides.empty() ? "" : ",", s);
    diagnostics.Warning(
        codes::kLayoutNormalized,
        absl::StrCat("'", name, "' [", sizes, "] with strides [", strides,
                     "] is neither contiguous nor channels-last; made "
                     "contiguous before partitioning"),
        node == name ? std::vector<std::string>{name}
                     : std::vector<std::string>{node, name},
        "store the tensor contiguous to avoid the copy at compile time");
  }
  stats.Add("tensors_normalized", static_cast<int64_t>(names.size()));
  return stats;
}

}  // namespace ferry
