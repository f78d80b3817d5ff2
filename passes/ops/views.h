// Views and shape operators: view, reshape, transpose, permute, t, expand,
// slice, select, (un)squeeze, alias, detach, _reshape_alias, split; their
// copy forms (view_copy, ..., _unsafe_view, clone) and cat.
#ifndef FERRY_PASSES_OPS_VIEWS_H_
#define FERRY_PASSES_OPS_VIEWS_H_

#include "passes/ops/common.h"

namespace ferry {

extern const OpFamily kViewsFamily;

}  // namespace ferry

#endif  // FERRY_PASSES_OPS_VIEWS_H_
