// Views and shape operators.
//
// Model. kView: exact ATen view geometry over self's strides and storage
// offset; the result shares self's storage, so its strides and offset are
// part of the result and validation compares them. kCopy (view_copy, ...,
// _unsafe_view): the view's sizes in fresh contiguous storage. Each row names
// its geometry (ViewRule<geometry, fresh_storage>).
//
//   transpose(x: f32[2,3] strides [3,1], 0, 1)  ==> f32[3,2] strides [1,3]
//   slice(x: f32[4,6], 1, 2, 5)   ==> f32[4,3] strides [6,1] offset 2
//   view(transpose(x), [6])       ==> error: not compatible with the strides
//   split(x: f32[5,4], 2)         ==> (f32[2,4] @0, f32[2,4] @8, f32[1,4] @16)
//
// cat concatenates along a dim (fresh storage); split returns a list of
// views of self, which the IR holds as a tuple read through getitem.
#include "passes/ops/views.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/ops/elementwise.h"
#include "passes/shape_rules.h"

namespace ferry {
namespace {

// The strides that let `new_sizes` view a tensor of `sizes` and `strides`
// without a copy, or nullopt when no strides can (ATen's computeStride).
//
// The old dims are grouped, innermost first, into chunks that are contiguous
// among themselves (a dim joins the chunk inside it when its stride equals the
// chunk's extent; size-1 dims join anything). A view is possible exactly when
// the new dims, innermost first, tile each chunk's element count; each new dim
// gets the stride its position in its chunk implies.
std::optional<std::vector<int64_t>> ComputeViewStrides(
    const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
    const std::vector<int64_t>& new_sizes) {
  std::vector<int64_t> new_strides(new_sizes.size(), 1);
  if (sizes.empty()) return new_strides;  // A 0-dim tensor: all new sizes 1.
  std::optional<int64_t> numel = NumElementsOf(sizes);
  if (!numel) return std::nullopt;
  if (*numel == 0) {
    // No element is ever addressed: any strides do.
    if (sizes == new_sizes) return strides;
    return DenseStrides(new_sizes);
  }
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t chunk_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    chunk_numel *= sizes[d];  // Bounded by numel: cannot overflow.
    bool chunk_ends = d == 0;
    if (!chunk_ends && sizes[d - 1] != 1) {
      std::optional<int64_t> extent =
          CheckedMul(chunk_numel, chunk_base_stride);
      chunk_ends = !extent || strides[d - 1] != *extent;
    }
    if (!chunk_ends) continue;
    while (view_d >= 0 &&
           (view_numel < chunk_numel || new_sizes[view_d] == 1)) {
      std::optional<int64_t> stride = CheckedMul(view_numel, chunk_base_stride);
      if (!stride) return std::nullopt;
      new_strides[view_d] = *stride;
      view_numel *= new_sizes[view_d];
      --view_d;
    }
    if (view_numel != chunk_numel) return std::nullopt;
    if (d > 0) {
      chunk_base_stride = strides[d - 1];
      chunk_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// Resolves a `-1` in a view's requested sizes against `numel` elements.
absl::StatusOr<std::vector<int64_t>> InferViewSizes(
    const BoundCall& call, std::vector<int64_t> requested, int64_t numel) {
  int64_t inferred = -1;
  int64_t known = 1;
  for (size_t d = 0; d < requested.size(); ++d) {
    if (requested[d] == -1) {
      if (inferred >= 0) return call.Error("only one dimension can be -1");
      inferred = static_cast<int64_t>(d);
    } else if (requested[d] < 0) {
      return call.Error(
          absl::StrCat("invalid size ", requested[d], " in dim ", d));
    } else {
      std::optional<int64_t> product = CheckedMul(known, requested[d]);
      if (!product) return call.Error("the requested sizes overflow int64");
      known = *product;
    }
  }
  if (inferred >= 0) {
    if (known == 0) {
      return call.Error(absl::StrCat("size ", ShapeText(requested),
                                     " cannot infer dim ", inferred,
                                     " of a tensor with 0 elements"));
    }
    if (numel % known == 0) {
      requested[inferred] = numel / known;
      return requested;
    }
  } else if (known == numel) {
    return requested;
  }
  return call.Error(absl::StrCat("size ", ShapeText(requested),
                                 " is invalid for ", numel, " elements"));
}

// The geometry of a view result, relative to self's storage.
struct ViewGeometry {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;
};

absl::Status ViewReshape(const BoundCall& call, bool needs_strides,
                         ViewGeometry& view) {
  absl::string_view param = call.HasParameter("size") ? "size" : "shape";
  absl::StatusOr<std::optional<std::vector<int64_t>>> requested =
      call.IntList(param);
  if (!requested.ok()) return requested.status();
  if (!requested->has_value()) {
    return call.Error(absl::StrCat("argument '", param, "' must be a list"));
  }
  std::optional<int64_t> numel = NumElementsOf(view.sizes);
  if (!numel) return call.Error("the number of elements overflows int64");
  absl::StatusOr<std::vector<int64_t>> sizes =
      InferViewSizes(call, **std::move(requested), *numel);
  if (!sizes.ok()) return sizes.status();
  if (needs_strides) {
    std::optional<std::vector<int64_t>> strides =
        ComputeViewStrides(view.sizes, view.strides, *sizes);
    if (!strides) {
      return call.Error(
          absl::StrCat("view is not compatible with input strides ",
                       ShapeText(view.strides), " (size ", ShapeText(*sizes),
                       "); make the input contiguous or use view_copy"));
    }
    view.strides = *std::move(strides);
  } else {
    view.strides = DenseStrides(*sizes);
  }
  view.sizes = *std::move(sizes);
  return absl::OkStatus();
}

absl::Status ViewTranspose(const BoundCall& call, ViewGeometry& view) {
  int64_t rank = static_cast<int64_t>(view.sizes.size());
  absl::StatusOr<int64_t> dim0 = call.Int("dim0");
  if (!dim0.ok()) return dim0.status();
  absl::StatusOr<int64_t> dim1 = call.Int("dim1");
  if (!dim1.ok()) return dim1.status();
  dim0 = WrapDimFor(call, *dim0, rank);
  if (!dim0.ok()) return dim0.status();
  dim1 = WrapDimFor(call, *dim1, rank);
  if (!dim1.ok()) return dim1.status();
  if (rank == 0) return absl::OkStatus();
  std::swap(view.sizes[*dim0], view.sizes[*dim1]);
  std::swap(view.strides[*dim0], view.strides[*dim1]);
  return absl::OkStatus();
}

absl::Status ViewPermute(const BoundCall& call, ViewGeometry& view) {
  int64_t rank = static_cast<int64_t>(view.sizes.size());
  absl::StatusOr<std::optional<std::vector<int64_t>>> dims =
      call.IntList("dims");
  if (!dims.ok()) return dims.status();
  if (!dims->has_value() || static_cast<int64_t>((*dims)->size()) != rank) {
    return call.Error(
        absl::StrCat("dims ", dims->has_value() ? ShapeText(**dims) : "None",
                     " are not a permutation of the ", rank, " dims of self"));
  }
  std::vector<bool> seen(rank, false);
  ViewGeometry permuted = view;
  for (int64_t i = 0; i < rank; ++i) {
    absl::StatusOr<int64_t> dim = WrapDimFor(call, (**dims)[i], rank);
    if (!dim.ok()) return dim.status();
    if (seen[*dim]) {
      return call.Error(
          absl::StrCat("dim ", (**dims)[i], " appears more than once in dims"));
    }
    seen[*dim] = true;
    permuted.sizes[i] = view.sizes[*dim];
    permuted.strides[i] = view.strides[*dim];
  }
  view = std::move(permuted);
  return absl::OkStatus();
}

absl::Status ViewT(const BoundCall& call, ViewGeometry& view) {
  if (view.sizes.size() > 2) {
    return call.Error(absl::StrCat("self must be at most 2-D, not ",
                                   view.sizes.size(), "-D"));
  }
  if (view.sizes.size() == 2) {
    std::swap(view.sizes[0], view.sizes[1]);
    std::swap(view.strides[0], view.strides[1]);
  }
  return absl::OkStatus();
}

absl::Status ViewExpand(const BoundCall& call, ViewGeometry& view) {
  absl::StatusOr<std::optional<std::vector<int64_t>>> target =
      call.IntList("size");
  if (!target.ok()) return target.status();
  if (!target->has_value()) return call.Error("argument 'size' must be a list");
  const std::vector<int64_t>& sizes = **target;
  int64_t rank = static_cast<int64_t>(view.sizes.size());
  int64_t new_rank = static_cast<int64_t>(sizes.size());
  if (new_rank < rank) {
    return call.Error(
        absl::StrCat("size ", ShapeText(sizes), " has fewer dims than self"));
  }
  ViewGeometry expanded;
  expanded.sizes.assign(new_rank, 0);
  expanded.strides.assign(new_rank, 0);
  expanded.storage_offset = view.storage_offset;
  for (int64_t i = new_rank - 1; i >= 0; --i) {
    int64_t self_dim = i - (new_rank - rank);
    int64_t size = 1;
    int64_t stride = 1;
    if (self_dim >= 0) {
      size = view.sizes[self_dim];
      stride = view.strides[self_dim];
    } else if (i + 1 < new_rank) {
      // A new leading dim of size 1 is laid out as if just outside the next.
      stride = CheckedMul(expanded.sizes[i + 1], expanded.strides[i + 1])
                   .value_or(0);
    }
    int64_t wanted = sizes[i];
    if (wanted == -1) {
      if (self_dim < 0) {
        return call.Error(
            absl::StrCat("size -1 is not allowed in the new leading dim ", i));
      }
      wanted = size;
    }
    if (wanted < 0) {
      return call.Error(absl::StrCat("invalid size ", wanted, " in dim ", i));
    }
    if (wanted != size) {
      if (size != 1) {
        return call.Error(absl::StrCat("the expanded size ", wanted,
                                       " must match the existing size ", size,
                                       " at non-singleton dim ", i));
      }
      size = wanted;
      stride = 0;
    }
    expanded.sizes[i] = size;
    expanded.strides[i] = stride;
  }
  view = std::move(expanded);
  return absl::OkStatus();
}

absl::Status ViewSlice(const BoundCall& call, ViewGeometry& view) {
  int64_t rank = static_cast<int64_t>(view.sizes.size());
  if (rank == 0) return call.Error("cannot slice a 0-dim tensor");
  absl::StatusOr<int64_t> dim = call.Int("dim");
  if (!dim.ok()) return dim.status();
  dim = WrapDimFor(call, *dim, rank);
  if (!dim.ok()) return dim.status();
  absl::StatusOr<std::optional<int64_t>> start = call.OptionalInt("start");
  if (!start.ok()) return start.status();
  absl::StatusOr<std::optional<int64_t>> end = call.OptionalInt("end");
  if (!end.ok()) return end.status();
  absl::StatusOr<int64_t> step = call.Int("step");
  if (!step.ok()) return step.status();
  if (*step <= 0) {
    return call.Error(absl::StrCat("slice step must be positive, not ", *step));
  }
  int64_t size = view.sizes[*dim];
  int64_t first = start->value_or(0);
  int64_t last = end->value_or(std::numeric_limits<int64_t>::max());
  // Negative indices count from the end; then both clamp to [0, size].
  if (first < 0) first += size;
  if (last < 0) last += size;
  first = std::clamp<int64_t>(first, 0, size);
  last = std::clamp<int64_t>(last, first, size);
  int64_t length = last == first ? 0 : (last - first - 1) / *step + 1;
  std::optional<int64_t> skipped = CheckedMul(first, view.strides[*dim]);
  std::optional<int64_t> offset =
      skipped ? CheckedAdd(view.storage_offset, *skipped) : std::nullopt;
  std::optional<int64_t> stride = CheckedMul(view.strides[*dim], *step);
  if (!offset || !stride)
    return call.Error("the slice's offset overflows int64");
  view.storage_offset = *offset;
  view.sizes[*dim] = length;
  view.strides[*dim] = *stride;
  return absl::OkStatus();
}

absl::Status ViewSelect(const BoundCall& call, ViewGeometry& view) {
  int64_t rank = static_cast<int64_t>(view.sizes.size());
  if (rank == 0) return call.Error("cannot select from a 0-dim tensor");
  absl::StatusOr<int64_t> dim = call.Int("dim");
  if (!dim.ok()) return dim.status();
  dim = WrapDimFor(call, *dim, rank);
  if (!dim.ok()) return dim.status();
  absl::StatusOr<int64_t> index = call.Int("index");
  if (!index.ok()) return index.status();
  int64_t size = view.sizes[*dim];
  if (*index < -size || *index >= size) {
    return call.Error(absl::StrCat("index ", *index,
                                   " is out of range for dim ", *dim,
                                   " of size ", size));
  }
  int64_t position = *index < 0 ? *index + size : *index;
  std::optional<int64_t> skipped = CheckedMul(position, view.strides[*dim]);
  std::optional<int64_t> offset =
      skipped ? CheckedAdd(view.storage_offset, *skipped) : std::nullopt;
  if (!offset) return call.Error("the selection's offset overflows int64");
  view.storage_offset = *offset;
  view.sizes.erase(view.sizes.begin() + *dim);
  view.strides.erase(view.strides.begin() + *dim);
  return absl::OkStatus();
}

absl::Status ViewUnsqueeze(const BoundCall& call, ViewGeometry& view) {
  int64_t rank = static_cast<int64_t>(view.sizes.size());
  absl::StatusOr<int64_t> dim = call.Int("dim");
  if (!dim.ok()) return dim.status();
  dim = WrapDimFor(call, *dim, rank + 1);
  if (!dim.ok()) return dim.status();
  int64_t stride = 1;
  if (*dim < rank) {
    stride = CheckedMul(view.sizes[*dim], view.strides[*dim]).value_or(0);
  }
  view.sizes.insert(view.sizes.begin() + *dim, 1);
  view.strides.insert(view.strides.begin() + *dim, stride);
  return absl::OkStatus();
}

absl::Status ViewSqueeze(const BoundCall& call, ViewGeometry& view) {
  int64_t rank = static_cast<int64_t>(view.sizes.size());
  if (call.HasParameter("dim")) {
    absl::StatusOr<int64_t> dim = call.Int("dim");
    if (!dim.ok()) return dim.status();
    dim = WrapDimFor(call, *dim, rank);
    if (!dim.ok()) return dim.status();
    if (rank > 0 && view.sizes[*dim] == 1) {
      view.sizes.erase(view.sizes.begin() + *dim);
      view.strides.erase(view.strides.begin() + *dim);
    }
    return absl::OkStatus();
  }
  ViewGeometry squeezed;
  squeezed.storage_offset = view.storage_offset;
  for (int64_t d = 0; d < rank; ++d) {
    if (view.sizes[d] == 1) continue;
    squeezed.sizes.push_back(view.sizes[d]);
    squeezed.strides.push_back(view.strides[d]);
  }
  view = std::move(squeezed);
  return absl::OkStatus();
}

// _reshape_alias: the sizes and strides given, over self's storage (what
// ATen's reshape emits when a view is possible).
absl::Status ViewReshapeAlias(const BoundCall& call, ViewGeometry& view) {
  absl::StatusOr<std::vector<int64_t>> sizes = call.RequiredIntList("size");
  if (!sizes.ok()) return sizes.status();
  absl::StatusOr<std::vector<int64_t>> strides = call.RequiredIntList("stride");
  if (!strides.ok()) return strides.status();
  if (sizes->size() != strides->size()) {
    return call.Error(absl::StrCat("size ", ShapeText(*sizes), " and stride ",
                                   ShapeText(*strides),
                                   " have different lengths"));
  }
  for (size_t d = 0; d < sizes->size(); ++d) {
    if ((*sizes)[d] < 0 || (*strides)[d] < 0) {
      return call.Error(absl::StrCat("negative size or stride in dim ", d));
    }
  }
  std::optional<int64_t> numel = NumElementsOf(view.sizes);
  std::optional<int64_t> new_numel = NumElementsOf(*sizes);
  if (!numel || !new_numel || *numel != *new_numel) {
    return call.Error(absl::StrCat("size ", ShapeText(*sizes),
                                   " is invalid for ", ShapeText(view.sizes)));
  }
  view.sizes = *std::move(sizes);
  view.strides = *std::move(strides);
  return absl::OkStatus();
}

// A view geometry: rewrites `view` (self's) into the result's.
using Geometry = absl::Status (*)(const BoundCall& call, bool fresh_storage,
                                  ViewGeometry& view);

// view_copy copies when a view is impossible (it reshapes).
absl::Status Reshape(const BoundCall& call, bool fresh_storage,
                     ViewGeometry& view) {
  return ViewReshape(call, /*needs_strides=*/!fresh_storage, view);
}

template <absl::Status (*kGeometry)(const BoundCall&, ViewGeometry&)>
absl::Status Plain(const BoundCall& call, bool /*fresh_storage*/,
                   ViewGeometry& view) {
  return kGeometry(call, view);
}

// alias, detach: the same geometry.
absl::Status Same(const BoundCall& /*call*/, bool /*fresh_storage*/,
                  ViewGeometry& /*view*/) {
  return absl::OkStatus();
}

template <Geometry kGeometry, bool kFreshStorage>
Specs ViewRule(const BoundCall& call) {
  absl::StatusOr<const TensorSpec*> self = call.Tensor("self");
  if (!self.ok()) return self.status();
  ViewGeometry view;
  view.sizes = (*self)->sizes;
  view.strides = (*self)->Strides();
  view.storage_offset = (*self)->storage_offset;
  if (absl::Status status = kGeometry(call, kFreshStorage, view);
      !status.ok()) {
    return status;
  }
  TensorSpec result = FreshSpec((*self)->dtype, std::move(view.sizes));
  if (!kFreshStorage) {
    result.strides = std::move(view.strides);
    result.storage_offset = view.storage_offset;
  }
  return OneResult(std::move(result));
}

// The most pieces a split may make (each is a result of its own).
constexpr int64_t kMaxSplitPieces = 65536;

// split.Tensor: pieces of `split_size` along `dim` (the last one shorter),
// each a view of self; a dim of size 0 gives one empty piece.
Specs InferSplit(const BoundCall& call) {
  absl::StatusOr<const TensorSpec*> self = call.Tensor("self");
  if (!self.ok()) return self.status();
  const TensorSpec& in = **self;
  if (in.dim() == 0) return call.Error("cannot split a 0-dim tensor");
  absl::StatusOr<int64_t> split_size = call.Int("split_size");
  if (!split_size.ok()) return split_size.status();
  absl::StatusOr<int64_t> dim = call.Int("dim");
  if (!dim.ok()) return dim.status();
  dim = WrapDimFor(call, *dim, in.dim());
  if (!dim.ok()) return dim.status();
  const int64_t size = in.sizes[*dim];
  if (*split_size < 0 || (*split_size == 0 && size != 0)) {
    return call.Error(absl::StrCat("split_size ", *split_size,
                                   " cannot split dim ", *dim, " of size ",
                                   size));
  }
  int64_t pieces = *split_size == 0
                       ? 1
                       : std::max<int64_t>(
                             1, size / *split_size + (size % *split_size != 0));
  if (pieces > kMaxSplitPieces) {
    return call.Error(absl::StrCat("split into ", pieces, " pieces; at most ",
                                   kMaxSplitPieces, " are supported"));
  }
  const Dims strides = in.Strides();
  std::vector<TensorSpec> results;
  for (int64_t p = 0; p < pieces; ++p) {
    int64_t start = p * *split_size;  // <= size: cannot overflow
    TensorSpec piece = FreshSpec(in.dtype, in.sizes);
    piece.sizes[*dim] = std::min(*split_size, size - start);
    piece.strides = strides;
    std::optional<int64_t> skipped = CheckedMul(start, strides[*dim]);
    std::optional<int64_t> offset =
        skipped ? CheckedAdd(in.storage_offset, *skipped) : std::nullopt;
    if (!offset) return call.Error("a piece's offset overflows int64");
    piece.storage_offset = *offset;
    results.push_back(std::move(piece));
  }
  return results;
}

// --- cat

Specs InferCat(const BoundCall& call) {
  absl::StatusOr<std::vector<const TensorSpec*>> tensors =
      call.TensorList("tensors");
  if (!tensors.ok()) return tensors.status();
  if (tensors->empty()) return call.Error("expected at least one tensor");
  absl::StatusOr<int64_t> dim = call.Int("dim");
  if (!dim.ok()) return dim.status();

  DType dtype = DType::kInvalid;
  for (const TensorSpec* tensor : *tensors) {
    dtype = PromoteTypes(dtype, tensor->dtype);
  }
  // As ATen (for compatibility), 1-D empty tensors are skipped.
  auto skipped = [](const TensorSpec* t) {
    return t->sizes == std::vector<int64_t>{0};
  };
  const TensorSpec* reference = nullptr;
  for (const TensorSpec* tensor : *tensors) {
    if (!skipped(tensor)) {
      reference = tensor;
      break;
    }
  }
  if (reference == nullptr) return OneResult(FreshSpec(dtype, {0}));
  if (reference->dim() == 0) {
    return call.Error("zero-dimensional tensors cannot be concatenated");
  }
  absl::StatusOr<int64_t> cat_dim = WrapDimFor(call, *dim, reference->dim());
  if (!cat_dim.ok()) return cat_dim.status();
  Dims sizes = reference->sizes;
  sizes[*cat_dim] = 0;
  for (size_t i = 0; i < tensors->size(); ++i) {
    const TensorSpec& tensor = *(*tensors)[i];
    if (skipped(&tensor)) continue;
    if (tensor.dim() != reference->dim()) {
      return call.Error(absl::StrCat("tensor ", i, " has ", tensor.dim(),
                                     " dims, not ", reference->dim()));
    }
    for (int64_t d = 0; d < tensor.dim(); ++d) {
      if (d != *cat_dim && tensor.sizes[d] != reference->sizes[d]) {
        return call.Error(
            absl::StrCat("sizes ", ShapeText(tensor.sizes), " and ",
                         ShapeText(reference->sizes), " differ in dim ", d,
                         ", which is not the concatenated dim ", *cat_dim));
      }
    }
    std::optional<int64_t> total =
        CheckedAdd(sizes[*cat_dim], tensor.sizes[*cat_dim]);
    if (!total) return call.Error("the concatenated size overflows int64");
    sizes[*cat_dim] = *total;
  }
  return OneResult(FreshSpec(dtype, std::move(sizes)));
}

constexpr OpDef kOps[] = {
    // Views (the result shares `self`'s storage)
    {"aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)", ShapeRule::kView,
     &ViewRule<&Reshape, false>},
    {"aten::reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)",
     ShapeRule::kView, &ViewRule<&Reshape, false>},
    {"aten::_reshape_alias(Tensor(a) self, SymInt[] size, SymInt[] stride) "
     "-> Tensor(a)",
     ShapeRule::kSpecific, &ViewRule<&Plain<&ViewReshapeAlias>, false>},
    {"aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)",
     ShapeRule::kView, &ViewRule<&Plain<&ViewTranspose>, false>},
    {"aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)", ShapeRule::kView,
     &ViewRule<&Plain<&ViewPermute>, false>},
    {"aten::t(Tensor(a) self) -> Tensor(a)", ShapeRule::kView,
     &ViewRule<&Plain<&ViewT>, false>},
    {"aten::expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> "
     "Tensor(a)",
     ShapeRule::kView, &ViewRule<&Plain<&ViewExpand>, false>},
    {"aten::slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, "
     "SymInt? end=None, SymInt step=1) -> Tensor(a)",
     ShapeRule::kView, &ViewRule<&Plain<&ViewSlice>, false>},
    {"aten::select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)",
     ShapeRule::kView, &ViewRule<&Plain<&ViewSelect>, false>},
    {"aten::unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", ShapeRule::kView,
     &ViewRule<&Plain<&ViewUnsqueeze>, false>},
    {"aten::squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)",
     ShapeRule::kView, &ViewRule<&Plain<&ViewSqueeze>, false>},
    {"aten::squeeze(Tensor(a) self) -> Tensor(a)", ShapeRule::kView,
     &ViewRule<&Plain<&ViewSqueeze>, false>},
    {"aten::alias(Tensor(a) self) -> Tensor(a)", ShapeRule::kView,
     &ViewRule<&Same, false>},
    {"aten::detach(Tensor(a) self) -> Tensor(a)", ShapeRule::kView,
     &ViewRule<&Same, false>},
    {"aten::split.Tensor(Tensor(a -> *) self, int split_size, int dim=0) -> "
     "Tensor(a)[]",
     ShapeRule::kSpecific, &InferSplit},

    // Copy forms of the views (fresh, contiguous storage)
    {"aten::view_copy(Tensor self, SymInt[] size) -> Tensor", ShapeRule::kCopy,
     &ViewRule<&Reshape, true>},
    {"aten::_unsafe_view(Tensor self, SymInt[] size) -> Tensor",
     ShapeRule::kCopy, &ViewRule<&Reshape, true>},
    {"aten::permute_copy(Tensor self, int[] dims) -> Tensor", ShapeRule::kCopy,
     &ViewRule<&Plain<&ViewPermute>, true>},
    {"aten::transpose_copy.int(Tensor self, int dim0, int dim1) -> Tensor",
     ShapeRule::kCopy, &ViewRule<&Plain<&ViewTranspose>, true>},
    {"aten::t_copy(Tensor self) -> Tensor", ShapeRule::kCopy,
     &ViewRule<&Plain<&ViewT>, true>},
    {"aten::expand_copy(Tensor self, SymInt[] size, *, bool implicit=False) -> "
     "Tensor",
     ShapeRule::kCopy, &ViewRule<&Plain<&ViewExpand>, true>},
    {"aten::slice_copy.Tensor(Tensor self, int dim=0, SymInt? start=None, "
     "SymInt? end=None, SymInt step=1) -> Tensor",
     ShapeRule::kCopy, &ViewRule<&Plain<&ViewSlice>, true>},
    {"aten::select_copy.int(Tensor self, int dim, SymInt index) -> Tensor",
     ShapeRule::kCopy, &ViewRule<&Plain<&ViewSelect>, true>},
    {"aten::unsqueeze_copy(Tensor self, int dim) -> Tensor", ShapeRule::kCopy,
     &ViewRule<&Plain<&ViewUnsqueeze>, true>},
    {"aten::squeeze_copy.dim(Tensor self, int dim) -> Tensor", ShapeRule::kCopy,
     &ViewRule<&Plain<&ViewSqueeze>, true>},
    {"aten::alias_copy(Tensor self) -> Tensor", ShapeRule::kCopy,
     &ViewRule<&Same, true>},
    {"aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
     ShapeRule::kSameAsSelf, &InferSameAsSelf},

    // Concatenation
    {"aten::cat(Tensor[] tensors, int dim=0) -> Tensor", ShapeRule::kCat,
     &InferCat},
};

}  // namespace

constinit const OpFamily kViewsFamily = {
    "views",
    "Views (sharing self's storage, exact ATen strides and offsets), their "
    "copy forms, split and cat.",
    kOps,
};

}  // namespace ferry
