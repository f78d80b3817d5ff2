// Reductions over a dim list: sum, mean, amax.
#ifndef FERRY_PASSES_OPS_REDUCTIONS_H_
#define FERRY_PASSES_OPS_REDUCTIONS_H_

#include "passes/ops/common.h"

namespace ferry {

extern const OpFamily kReductionsFamily;

}  // namespace ferry

#endif  // FERRY_PASSES_OPS_REDUCTIONS_H_
