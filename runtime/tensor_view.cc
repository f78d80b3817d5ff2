#include "runtime/tensor_view.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/absl_compat.h"
#include "runtime/element.h"

namespace ferry {

bool TensorView::IsContiguous() const {
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (sizes[d] == 0) return true;
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

std::pair<int64_t, int64_t> TensorView::ByteExtent() const {
  int64_t last = 0;
  for (int64_t d = 0; d < dim(); ++d) {
    if (sizes[d] == 0) return {0, 0};
    last += (sizes[d] - 1) * strides[d];
  }
  return {0, (last + 1) * element_size()};
}

std::string TensorView::DebugString() const {
  return absl::StrCat(AsAbsl(DTypeName(dtype)), "[", absl::StrJoin(sizes, ","),
                      "] strides [", absl::StrJoin(strides, ","), "]");
}

bool Overlaps(const TensorView& a, const TensorView& b) {
  auto [a_first, a_last] = a.ByteExtent();
  auto [b_first, b_last] = b.ByteExtent();
  if (a_first == a_last || b_first == b_last) return false;
  const std::byte* a0 = a.bytes() + a_first;
  const std::byte* a1 = a.bytes() + a_last;
  const std::byte* b0 = b.bytes() + b_first;
  const std::byte* b1 = b.bytes() + b_last;
  return a0 < b1 && b0 < a1;
}

bool SameView(const TensorView& a, const TensorView& b) {
  return a.data == b.data && a.dtype == b.dtype && a.sizes == b.sizes &&
         a.strides == b.strides;
}

bool OutputsOverlapInputs(const KernelCall& call, bool elementwise) {
  auto conflicts = [&](const TensorView& out, const TensorView& in) {
    return Overlaps(out, in) && !(elementwise && SameView(out, in));
  };
  for (const TensorView& out : call.outputs) {
    for (const KernelArg& arg : call.args) {
      if (arg.kind == KernelArg::Kind::kTensor && conflicts(out, arg.tensor))
        return true;
      if (arg.kind == KernelArg::Kind::kTensorList) {
        for (const TensorView& t : arg.tensors)
          if (conflicts(out, t)) return true;
      }
    }
  }
  return false;
}

TensorView MakeView(void* storage, const TensorSpec& spec) {
  TensorView view;
  view.dtype = spec.dtype;
  view.sizes.assign(spec.sizes.begin(), spec.sizes.end());
  std::vector<int64_t> strides = spec.Strides();
  view.strides.assign(strides.begin(), strides.end());
  view.data = static_cast<std::byte*>(storage) +
              spec.storage_offset * ElementSize(spec.dtype);
  return view;
}

TensorView ContiguousView(void* data, DType dtype,
                          std::span<const int64_t> sizes) {
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  view.sizes.assign(sizes.begin(), sizes.end());
  const std::vector<int64_t> strides = ContiguousStrides(sizes);
  view.strides.assign(strides.begin(), strides.end());
  return view;
}

double KernelArg::AsDouble() const {
  switch (kind) {
    case Kind::kInt:
      return static_cast<double>(int_value);
    case Kind::kFloat:
      return float_value;
    case Kind::kBool:
      return bool_value ? 1.0 : 0.0;
    default:
      return 0;
  }
}

int64_t KernelArg::AsInt() const {
  switch (kind) {
    case Kind::kInt:
      return int_value;
    case Kind::kFloat:
      return element::SaturatingToInt64(float_value);
    case Kind::kBool:
      return bool_value ? 1 : 0;
    default:
      return 0;
  }
}

}  // namespace ferry
