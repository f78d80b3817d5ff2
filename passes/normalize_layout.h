// normalize_layout: program data gets a layout delegates can be compiled for.
//
// Requires: a validated program.
// Establishes: every parameter, buffer, mutable buffer and lifted constant
// (and every constant-table entry a `constant` node reads) that is neither
// contiguous nor channels-last is contiguous: its data (when present) is
// permuted, its constant-table spec and every node that names it get
// contiguous strides, and views of it get recomputed strides. One warning
// (FERRY-W0601) per tensor changed, naming it. Contiguous and channels-last
// tensors are untouched. A tensor that an already-lowered delegate reads (or
// owns) is left alone: that delegate was compiled for the stored layout, and
// place_and_copy decides whether its copy can be made. A contiguous copy
// over options.limits (max_tensor_bytes, or all copies together over the
// max_expansion allowance) is RESOURCE_EXHAUSTED naming the constant, before
// it is made (resource_limits.h).
// Checked by CheckLayoutNormalized (checks.h).
#ifndef FERRY_PASSES_NORMALIZE_LAYOUT_H_
#define FERRY_PASSES_NORMALIZE_LAYOUT_H_

#include "passes/pass.h"

namespace ferry {

absl::StatusOr<PassStats> NormalizeLayout(Program& program,
                                          const LowerOptions& options,
                                          Diagnostics& diagnostics);

// Copies the logical elements of `data` (laid out as `from`) into a
// contiguous buffer of `from.sizes`. Requires from.StorageBytes() <=
// data.size().
std::string ToContiguousBytes(const TensorSpec& from, std::string_view data);

}  // namespace ferry

#endif  // FERRY_PASSES_NORMALIZE_LAYOUT_H_
