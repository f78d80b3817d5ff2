// Embeddings, softmax and attention.
//
// Model. _softmax and _log_softmax keep self's shape (kSameAsSelf: the dim
// is range checked, half_to_float turns f16 into f32). embedding looks rows
// of `weight` up by integer indices. _native_multi_head_attention (what
// nn.MultiheadAttention runs in eval mode) has a rule for its whole
// (out, weights) result; whether a backend runs it as one kernel or as its
// decomposition is the backend's business (docs/operators.md).
//
//   embedding(w: f32[10,5], ids: i64[2,3])             ==> f32[2,3,5]
//   _native_multi_head_attention(q: f32[2,5,8], k, v, 8, 2, ...)
//       ==> (f32[2,5,8], f32[2,5,5])  need_weights, averaged over heads
//       ==> (f32[2,5,8], f32[2,2,5,5]) need_weights, per head
//       ==> (f32[2,5,8], f32[0])       no weights (an undefined tensor)
#include "passes/ops/attention.h"

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/ops/elementwise.h"
#include "passes/shape_rules.h"

namespace ferry {
namespace {

// embedding: indices.sizes + [embedding_dim], in weight's dtype.
Specs InferEmbedding(const BoundCall& call) {
  absl::StatusOr<const TensorSpec*> weight = call.Tensor("weight");
  if (!weight.ok()) return weight.status();
  absl::StatusOr<const TensorSpec*> indices = call.Tensor("indices");
  if (!indices.ok()) return indices.status();
  if (absl::Status s = CheckRank(call, "weight", **weight, 2); !s.ok()) {
    return s;
  }
  DType index_dtype = (*indices)->dtype;
  if (index_dtype != DType::kI64 && index_dtype != DType::kI32) {
    return call.DTypeMismatch(absl::StrCat("'indices' must be i64 or i32, not ",
                                           DTypeText(index_dtype)));
  }
  std::vector<int64_t> sizes = (*indices)->sizes;
  sizes.push_back((*weight)->sizes[1]);
  if (absl::Status s = CheckResultSizes(call, sizes, (*weight)->dtype);
      !s.ok()) {
    return s;
  }
  return OneResult(FreshSpec((*weight)->dtype, sizes));
}

// The tensor `name` has exactly `sizes`.
absl::Status CheckSizes(const BoundCall& call, absl::string_view name,
                        const std::vector<int64_t>& sizes) {
  absl::StatusOr<const TensorSpec*> tensor = call.Tensor(name);
  if (!tensor.ok()) return tensor.status();
  if ((*tensor)->sizes == sizes) return absl::OkStatus();
  return call.Error(absl::StrCat("'", name, "' has sizes ",
                                 ShapeText((*tensor)->sizes), ", not ",
                                 ShapeText(sizes)));
}

// _native_multi_head_attention: query [B, L, E], key and value [B, S, E],
// the packed in-projection qkv_weight [3E, E] and qkv_bias [3E], the
// out-projection proj_weight [E, E] and proj_bias [E]. out is [B, L, E];
// the attention weights are [B, L, S] averaged over heads, [B, H, L, S] per
// head, or an empty [0] when need_weights is false (ATen leaves them
// undefined; the frontend declares an empty tensor).
Specs InferMultiHeadAttention(const BoundCall& call) {
  absl::StatusOr<const TensorSpec*> query = call.Tensor("query");
  if (!query.ok()) return query.status();
  absl::StatusOr<const TensorSpec*> key = call.Tensor("key");
  if (!key.ok()) return key.status();
  absl::StatusOr<int64_t> embed_dim = call.Int("embed_dim");
  if (!embed_dim.ok()) return embed_dim.status();
  absl::StatusOr<int64_t> num_head = call.Int("num_head");
  if (!num_head.ok()) return num_head.status();
  const TensorSpec& q = **query;
  if (absl::Status s = CheckRank(call, "query", q, 3); !s.ok()) return s;
  if (absl::Status s = CheckRank(call, "key", **key, 3); !s.ok()) return s;
  const int64_t batch = q.sizes[0];
  const int64_t length = q.sizes[1];
  const int64_t embed = q.sizes[2];
  const int64_t source = (*key)->sizes[1];
  if (embed != *embed_dim) {
    return call.Error(absl::StrCat("the query's embedding size ", embed,
                                   " is not embed_dim ", *embed_dim));
  }
  if (*num_head <= 0 || embed % *num_head != 0) {
    return call.Error(absl::StrCat("embed_dim ", embed,
                                   " is not divisible into num_head ",
                                   *num_head, " heads"));
  }
  std::optional<int64_t> packed = CheckedMul(embed, 3);
  if (!packed) return call.Error("3 * embed_dim overflows int64");
  for (const auto& [name, sizes] : std::initializer_list<
           std::pair<absl::string_view, std::vector<int64_t>>>{
           {"key", {batch, source, embed}},
           {"value", {batch, source, embed}},
           {"qkv_weight", {*packed, embed}},
           {"qkv_bias", {*packed}},
           {"proj_weight", {embed, embed}},
           {"proj_bias", {embed}}}) {
    if (absl::Status s = CheckSizes(call, name, sizes); !s.ok()) return s;
  }
  for (absl::string_view name :
       {"key", "value", "qkv_weight", "qkv_bias", "proj_weight", "proj_bias"}) {
    absl::StatusOr<const TensorSpec*> tensor = call.Tensor(name);
    if (!tensor.ok()) return tensor.status();
    if ((*tensor)->dtype != q.dtype) {
      return call.DTypeMismatch(
          absl::StrCat("'", name, "' is ", DTypeText((*tensor)->dtype),
                       " but 'query' is ", DTypeText(q.dtype)));
    }
  }
  absl::StatusOr<bool> need_weights = call.Bool("need_weights");
  if (!need_weights.ok()) return need_weights.status();
  absl::StatusOr<bool> average = call.Bool("average_attn_weights");
  if (!average.ok()) return average.status();
  std::vector<int64_t> weights = {0};
  if (*need_weights && *average) weights = {batch, length, source};
  if (*need_weights && !*average) {
    weights = {batch, *num_head, length, source};
  }
  if (absl::Status s = CheckResultSizes(call, weights, q.dtype); !s.ok()) {
    return s;
  }
  return std::vector<TensorSpec>{FreshSpec(q.dtype, q.sizes),
                                 FreshSpec(q.dtype, std::move(weights))};
}

constexpr OpDef kOps[] = {
    {"aten::embedding(Tensor weight, Tensor indices, int padding_idx=-1, bool "
     "scale_grad_by_freq=False, bool sparse=False) -> Tensor",
     ShapeRule::kSpecific, &InferEmbedding},
    {"aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor",
     ShapeRule::kSameAsSelf, &InferSameAsSelf},
    {"aten::_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor",
     ShapeRule::kSameAsSelf, &InferSameAsSelf},
    {"aten::_native_multi_head_attention(Tensor query, Tensor key, Tensor "
     "value, int embed_dim, int num_head, Tensor qkv_weight, Tensor qkv_bias, "
     "Tensor proj_weight, Tensor proj_bias, Tensor? mask=None, bool "
     "need_weights=True, bool average_attn_weights=True, int? mask_type=None) "
     "-> (Tensor, Tensor)",
     ShapeRule::kSpecific, &InferMultiHeadAttention},
};

}  // namespace

constinit const OpFamily kAttentionFamily = {
    "attention",
    "Embeddings, softmax and multi-head attention.",
    kOps,
};

}  // namespace ferry
