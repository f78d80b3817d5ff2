// Matrix products: mm, addmm, bmm, linear.
#ifndef FERRY_PASSES_OPS_LINALG_H_
#define FERRY_PASSES_OPS_LINALG_H_

#include "passes/ops/common.h"

namespace ferry {

extern const OpFamily kLinalgFamily;

}  // namespace ferry

#endif  // FERRY_PASSES_OPS_LINALG_H_
