// Host kernels that move data without arithmetic: copies (clone, copy_,
// _to_copy), fills, the copy forms of the views (view_copy, permute_copy,
// slice_copy, ...), cat/stack and gathers (embedding, index_select).
//
// The copy forms build the view their operator describes over the input
// (sizes, strides and a moved data pointer; nothing is copied) and then copy
// that view into the output with CopyStridedHost, which converts dtypes and
// broadcasts where the operator allows it (expand_copy).
#include <algorithm>
#include <limits>

#include "runtime/host_kernels_internal.h"

namespace ferry::host {
namespace {

const TensorView& Out(const KernelCall& call) { return call.outputs[0]; }

absl::Status CopyInto(const KernelCall& call, const TensorView& dst,
                      const TensorView& src) {
  absl::Status status = CopyStridedHost(dst, src);
  if (!status.ok()) return KernelError(call, status.message());
  return status;
}

int64_t IntArg(const KernelCall& call, size_t i, int64_t fallback) {
  if (i < call.args.size() && call.args[i].is_number())
    return call.args[i].AsInt();
  return fallback;
}

// The view `t` with dims `d0` and `d1` swapped.
TensorView Transposed(TensorView t, int64_t d0, int64_t d1) {
  std::swap(t.sizes[d0], t.sizes[d1]);
  std::swap(t.strides[d0], t.strides[d1]);
  return t;
}

// ATen's slice: start/end wrap once when negative, clamp to [0, size];
// an empty range when end < start.
absl::StatusOr<TensorView> SliceView(const KernelCall& call, TensorView t,
                                     int64_t dim, const KernelArg* start_arg,
                                     const KernelArg* end_arg, int64_t step) {
  absl::StatusOr<int64_t> d = NormalizeDim(call, dim, t.dim());
  if (!d.ok()) return d.status();
  if (t.dim() == 0) return KernelError(call, "cannot slice a 0-dim tensor");
  if (step <= 0) return KernelError(call, "slice step must be positive");
  const int64_t size = t.sizes[*d];
  int64_t start = start_arg && start_arg->is_number() ? start_arg->AsInt() : 0;
  int64_t end = end_arg && end_arg->is_number()
                    ? end_arg->AsInt()
                    : std::numeric_limits<int64_t>::max();
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, 0, size);
  if (end < start) end = start;
  const int64_t length = (end - start + step - 1) / step;
  t.data = t.bytes() + start * t.strides[*d] * t.element_size();
  t.sizes[*d] = length;
  t.strides[*d] *= step;
  return t;
}

absl::StatusOr<TensorView> SelectView(const KernelCall& call, TensorView t,
                                      int64_t dim, int64_t index) {
  if (t.dim() == 0)
    return KernelError(call, "cannot select from a 0-dim tensor");
  absl::StatusOr<int64_t> d = NormalizeDim(call, dim, t.dim());
  if (!d.ok()) return d.status();
  const int64_t size = t.sizes[*d];
  if (index < -size || index >= size) {
    return KernelError(call, absl::StrCat("index ", index,
                                          " is out of range for size ", size));
  }
  if (index < 0) index += size;
  t.data = t.bytes() + index * t.strides[*d] * t.element_size();
  t.sizes.erase(t.sizes.begin() + *d);
  t.strides.erase(t.strides.begin() + *d);
  return t;
}

}  // namespace

absl::Status CloneKernel(const KernelCall& call) {
  return CopyInto(call, Out(call), call.args[0].tensor);
}

// copy_(self, src, non_blocking): src broadcasts to self.
absl::Status CopyKernel(const KernelCall& call) {
  return CopyInto(call, Out(call), call.args[1].tensor);
}

absl::Status FillScalarKernel(const KernelCall& call) {
  ScalarSlot slot;
  TensorView value = TensorOrScalar(call, 1, slot);
  if (value.dim() != 0)
    return KernelError(call,
                       "the fill value must be a scalar or a 0-dim tensor");
  return CopyInto(call, Out(call), value);
}

absl::Status ZeroKernel(const KernelCall& call) {
  ScalarSlot slot;
  KernelArg zero;
  zero.kind = KernelArg::Kind::kInt;
  return CopyInto(call, Out(call), ScalarAsTensor(zero, slot));
}

// view_copy, reshape, unsqueeze_copy, squeeze_copy: the same elements in
// row-major order, with the output's sizes.
absl::Status FlatCopyKernel(const KernelCall& call) {
  const TensorView& in = call.args[0].tensor;
  const TensorView& out = Out(call);
  if (in.numel() != out.numel()) {
    return KernelError(call, absl::StrCat("cannot reshape ", in.DebugString(),
                                          " into ", out.DebugString()));
  }
  std::vector<std::byte> dense = GatherContiguous(in);
  TensorView reshaped = ContiguousView(dense.data(), in.dtype, out.sizes);
  return CopyInto(call, out, reshaped);
}

absl::Status PermuteCopyKernel(const KernelCall& call) {
  const TensorView& in = call.args[0].tensor;
  const std::vector<int64_t>& dims = call.args[1].ints;
  if (static_cast<int64_t>(dims.size()) != in.dim())
    return KernelError(call, "permutation length differs from the rank");
  TensorView permuted = in;
  std::vector<bool> seen(in.dim(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    absl::StatusOr<int64_t> d = NormalizeDim(call, dims[i], in.dim());
    if (!d.ok()) return d.status();
    if (seen[*d]) return KernelError(call, "repeated dim in permutation");
    seen[*d] = true;
    permuted.sizes[i] = in.sizes[*d];
    permuted.strides[i] = in.strides[*d];
  }
  return CopyInto(call, Out(call), permuted);
}

absl::Status TransposeCopyKernel(const KernelCall& call) {
  const TensorView& in = call.args[0].tensor;
  if (in.dim() == 0) return CopyInto(call, Out(call), in);
  absl::StatusOr<int64_t> d0 = NormalizeDim(call, IntArg(call, 1, 0), in.dim());
  if (!d0.ok()) return d0.status();
  absl::StatusOr<int64_t> d1 = NormalizeDim(call, IntArg(call, 2, 1), in.dim());
  if (!d1.ok()) return d1.status();
  return CopyInto(call, Out(call), Transposed(in, *d0, *d1));
}

absl::Status TCopyKernel(const KernelCall& call) {
  const TensorView& in = call.args[0].tensor;
  if (in.dim() > 2) return KernelError(call, "t expects a tensor of <= 2 dims");
  if (in.dim() < 2) return CopyInto(call, Out(call), in);
  return CopyInto(call, Out(call), Transposed(in, 0, 1));
}

// slice_copy.Tensor(self, dim=0, start=None, end=None, step=1)
absl::Status SliceCopyKernel(const KernelCall& call) {
  absl::StatusOr<TensorView> view = SliceView(
      call, call.args[0].tensor, IntArg(call, 1, 0),
      call.args.size() > 2 ? &call.args[2] : nullptr,
      call.args.size() > 3 ? &call.args[3] : nullptr, IntArg(call, 4, 1));
  if (!view.ok()) return view.status();
  return CopyInto(call, Out(call), *view);
}

// select_copy.int(self, dim, index)
absl::Status SelectCopyKernel(const KernelCall& call) {
  absl::StatusOr<TensorView> view = SelectView(
      call, call.args[0].tensor, IntArg(call, 1, 0), IntArg(call, 2, 0));
  if (!view.ok()) return view.status();
  return CopyInto(call, Out(call), *view);
}

// cat(tensors, dim=0). As ATen, 1-D empty inputs ([0]) are skipped whatever
// the output's rank.
absl::Status CatKernel(const KernelCall& call) {
  const TensorView& out = Out(call);
  const std::vector<TensorView>& inputs = call.args[0].tensors;
  absl::StatusOr<int64_t> dim =
      NormalizeDim(call, IntArg(call, 1, 0), out.dim());
  if (!dim.ok()) return dim.status();
  if (out.dim() == 0)
    return KernelError(call, "cannot concatenate 0-dim tensors");
  int64_t offset = 0;
  for (const TensorView& in : inputs) {
    if (in.dim() == 1 && in.sizes[0] == 0) continue;
    if (in.dim() != out.dim())
      return KernelError(call, "inputs must have the output's rank");
    for (int64_t d = 0; d < out.dim(); ++d) {
      if (d != *dim && in.sizes[d] != out.sizes[d])
        return KernelError(
            call, absl::StrCat("input ", in.DebugString(),
                               " does not fit output ", out.DebugString()));
    }
    if (offset + in.sizes[*dim] > out.sizes[*dim])
      return KernelError(call, "inputs are longer than the output");
    TensorView slot = out;
    slot.data = out.bytes() + offset * out.strides[*dim] * out.element_size();
    slot.sizes[*dim] = in.sizes[*dim];
    if (absl::Status s = CopyInto(call, slot, in); !s.ok()) return s;
    offset += in.sizes[*dim];
  }
  if (offset != out.sizes[*dim])
    return KernelError(call, "inputs do not fill the output");
  return absl::OkStatus();
}

// stack(tensors, dim=0): out.select(dim, i) = tensors[i].
absl::Status StackKernel(const KernelCall& call) {
  const TensorView& out = Out(call);
  const std::vector<TensorView>& inputs = call.args[0].tensors;
  absl::StatusOr<int64_t> dim =
      NormalizeDim(call, IntArg(call, 1, 0), out.dim());
  if (!dim.ok()) return dim.status();
  if (static_cast<int64_t>(inputs.size()) != out.sizes[*dim])
    return KernelError(call, "the output's stacked dim differs from the count");
  for (size_t i = 0; i < inputs.size(); ++i) {
    absl::StatusOr<TensorView> slot =
        SelectView(call, out, *dim, static_cast<int64_t>(i));
    if (!slot.ok()) return slot.status();
    if (inputs[i].sizes != slot->sizes)
      return KernelError(call, "stacked tensors must have equal sizes");
    if (absl::Status s = CopyInto(call, *slot, inputs[i]); !s.ok()) return s;
  }
  return absl::OkStatus();
}

namespace {

// Copies rows `source.select(dim, index[k])` into `out.select(dim, k)` for
// every element k of the 1-D `index` (or, for embedding, any-rank index
// flattened into out's leading dims).
absl::Status GatherRows(const KernelCall& call, const TensorView& source,
                        int64_t dim, const TensorView& index,
                        const TensorView& out_rows) {
  if (IsFloatingPoint(index.dtype) || index.dtype == DType::kBool)
    return KernelError(call, "indices must be an integer tensor");
  std::vector<std::byte> dense_index = GatherContiguous(index);
  const int64_t count = index.numel();
  const DType ic = index.dtype;
  const int64_t limit = source.sizes[dim];
  for (int64_t k = 0; k < count; ++k) {
    if (StopTick()) return absl::OkStatus();  // the executor discards it
    int64_t i =
        element::LoadAsInt64(ic, dense_index.data() + k * index.element_size());
    if (i < -limit || i >= limit) {
      return KernelError(
          call, absl::StrCat("index ", i, " is out of range for size ", limit));
    }
    absl::StatusOr<TensorView> row = SelectView(call, source, dim, i);
    if (!row.ok()) return row.status();
    absl::StatusOr<TensorView> slot = SelectView(call, out_rows, dim, k);
    if (!slot.ok()) return slot.status();
    if (absl::Status s = CopyInto(call, *slot, *row); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

// embedding(weight, indices, padding_idx=-1, scale_grad_by_freq, sparse)
absl::Status EmbeddingKernel(const KernelCall& call) {
  const TensorView& weight = call.args[0].tensor;
  const TensorView& indices = call.args[1].tensor;
  const TensorView& out = Out(call);
  if (weight.dim() != 2) return KernelError(call, "weight must be 2-D");
  // View the output as [numel(indices), embedding_dim].
  if (!out.IsContiguous() && out.numel() > 0) {
    Scratch dense = MakeScratch(out.dtype, out.sizes);
    KernelCall redirected{call.op, call.args,
                          std::span<const TensorView>(&dense.view, 1)};
    if (absl::Status s = EmbeddingKernel(redirected); !s.ok()) return s;
    ScatterContiguous(out, dense.bytes.data());
    return absl::OkStatus();
  }
  const int64_t rows = indices.numel();
  const int64_t width = weight.sizes[1];
  if (out.numel() != rows * width)
    return KernelError(call, "output size does not match indices x embedding");
  std::array<int64_t, 2> flat_sizes{rows, width};
  TensorView flat_out = ContiguousView(out.data, out.dtype, flat_sizes);
  return GatherRows(call, weight, 0, indices, flat_out);
}

// index_select(self, dim, index)
absl::Status IndexSelectKernel(const KernelCall& call) {
  const TensorView& self = call.args[0].tensor;
  const TensorView& index = call.args[2].tensor;
  if (self.dim() == 0) return CopyInto(call, Out(call), self);
  absl::StatusOr<int64_t> dim =
      NormalizeDim(call, IntArg(call, 1, 0), self.dim());
  if (!dim.ok()) return dim.status();
  if (index.dim() > 1) return KernelError(call, "index must be 0-D or 1-D");
  return GatherRows(call, self, *dim, index, Out(call));
}

}  // namespace ferry::host
