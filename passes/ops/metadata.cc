// Metadata operators and the copy kernels.
//
// Model. kMetadata: no tensor result (the node's result is a scalar computed
// from its operand's spec); a `dim` is range checked. The copy kernels
// (ExecuTorch's et_copy) have self's dtype and sizes.
#include "passes/ops/metadata.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/ops/elementwise.h"
#include "passes/shape_rules.h"

namespace ferry {
namespace {

Specs InferMetadata(const BoundCall& call) {
  absl::StatusOr<const TensorSpec*> self = call.Tensor(
      call.schema().arguments.empty() ? "self"
                                      : call.schema().arguments[0].name);
  if (!self.ok()) return self.status();
  if (call.HasParameter("dim")) {
    absl::StatusOr<int64_t> dim = call.Int("dim");
    if (!dim.ok()) return dim.status();
    if (absl::Status s = WrapDimFor(call, *dim, (*self)->dim()).status();
        !s.ok()) {
      return s;
    }
  }
  return std::vector<TensorSpec>{};
}

constexpr OpDef kOps[] = {
    // Metadata (sizes and strides only; the data is never read)
    {"aten::sym_size.int(Tensor self, int dim) -> SymInt", ShapeRule::kMetadata,
     &InferMetadata, /*metadata_only=*/true},
    {"aten::sym_numel(Tensor self) -> SymInt", ShapeRule::kMetadata,
     &InferMetadata, /*metadata_only=*/true},
    {"aten::sym_stride.int(Tensor self, int dim) -> SymInt",
     ShapeRule::kMetadata, &InferMetadata, /*metadata_only=*/true},

    // Host/device copies (ExecuTorch's copy kernels)
    {"et_copy::_h2d_copy(Tensor self) -> Tensor", ShapeRule::kSameAsSelf,
     &InferSameAsSelf},
    {"et_copy::_d2h_copy(Tensor self) -> Tensor", ShapeRule::kSameAsSelf,
     &InferSameAsSelf},
};

}  // namespace

constinit const OpFamily kMetadataFamily = {
    "metadata and copies",
    "Operators that read only sizes and strides (scalar results), and the "
    "host/device copy kernels.",
    kOps,
};

}  // namespace ferry
