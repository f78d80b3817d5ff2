// Creation operators: arange, ones, zeros, empty.memory_format (results
// from arguments alone) and triu (a masked copy of self).
#ifndef FERRY_PASSES_OPS_CREATION_H_
#define FERRY_PASSES_OPS_CREATION_H_

#include "passes/ops/common.h"

namespace ferry {

extern const OpFamily kCreationFamily;

}  // namespace ferry

#endif  // FERRY_PASSES_OPS_CREATION_H_
