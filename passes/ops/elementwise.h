// Elementwise operators: arithmetic with broadcasting and ATen's type
// promotion, activations, their in-place forms, masked_fill, copy_ and
// fill_. elementwise.cc holds the schema rows and the rules side by side.
#ifndef FERRY_PASSES_OPS_ELEMENTWISE_H_
#define FERRY_PASSES_OPS_ELEMENTWISE_H_

#include "passes/ops/common.h"

namespace ferry {

extern const OpFamily kElementwiseFamily;

// self's dtype and sizes for every result; a `dim` parameter is range
// checked, `half_to_float` turns f16 into f32, other tensors must broadcast
// to self. Shared with the families whose operators keep self's shape
// (clone, _softmax, the copy kernels).
Specs InferSameAsSelf(const BoundCall& call);

}  // namespace ferry

#endif  // FERRY_PASSES_OPS_ELEMENTWISE_H_
