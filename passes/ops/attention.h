// Embeddings, softmax and attention: embedding, _softmax, _log_softmax,
// _native_multi_head_attention.
#ifndef FERRY_PASSES_OPS_ATTENTION_H_
#define FERRY_PASSES_OPS_ATTENTION_H_

#include "passes/ops/common.h"

namespace ferry {

extern const OpFamily kAttentionFamily;

}  // namespace ferry

#endif  // FERRY_PASSES_OPS_ATTENTION_H_
