// Metadata operators (sym_size.int, sym_numel, sym_stride.int: read specs,
// never data) and the host/device copy kernels.
#ifndef FERRY_PASSES_OPS_METADATA_H_
#define FERRY_PASSES_OPS_METADATA_H_

#include "passes/ops/common.h"

namespace ferry {

extern const OpFamily kMetadataFamily;

}  // namespace ferry

#endif  // FERRY_PASSES_OPS_METADATA_H_
