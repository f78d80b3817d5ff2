// Neural-network layers: convolution, max pooling, batch and layer
// normalization.
#ifndef FERRY_PASSES_OPS_NN_H_
#define FERRY_PASSES_OPS_NN_H_

#include "passes/ops/common.h"

namespace ferry {

extern const OpFamily kNnFamily;

}  // namespace ferry

#endif  // FERRY_PASSES_OPS_NN_H_
