// Creation, masking and the view/copy forms the frontend traces:
// empty.memory_format, zeros, ones, arange (end; start, end; start, end, step),
// triu, masked_fill (Scalar and 0-dim Tensor value), _unsafe_view (a copy:
// its schema has no alias annotation, so the result has storage of its own),
// and the views _reshape_alias and split.Tensor (nothing to compute).
//
// empty.memory_format's result is zero-filled: ATen leaves it uninitialised,
// so any value is right, and zeros make runs reproducible. arange computes
// start + i * step in double for floating results (ATen's CPU accumulate
// type) and in int64 for integer ones.
#include <cmath>

#include "runtime/absl_compat.h"
#include "runtime/ops/family.h"

namespace ferry::host {
namespace {

void Fill(const TensorView& out, double value) {
  const DType code = out.dtype;
  alignas(8) std::byte bytes[8] = {};
  element::StoreDouble(code, bytes, value);
  const int64_t es = out.element_size();
  StridedLoop<1>(out.sizes, {out.bytes()}, {OwnByteStrides(out)},
                 [&](const std::array<std::byte*, 1>& p) {
                   std::memcpy(p[0], bytes, es);
                 });
}

absl::Status EmptyKernel(const KernelCall& call) {
  Fill(call.outputs[0], 0);
  return absl::OkStatus();
}

absl::Status OnesKernel(const KernelCall& call) {
  Fill(call.outputs[0], 1);
  return absl::OkStatus();
}

// arange(end) / arange.start(start, end) / arange.start_step(start, end,
// step): the output's length is its spec's.
absl::Status ArangeKernel(const KernelCall& call) {
  const TensorView& out = call.outputs[0];
  if (out.dim() != 1) return KernelError(call, "the result must be 1-D");
  const bool has_start = call.args.size() > 1 && call.args[1].is_number();
  const KernelArg* start = has_start ? &call.args[0] : nullptr;
  const KernelArg& end = has_start ? call.args[1] : call.args[0];
  const KernelArg* step =
      has_start && call.args.size() > 2 && call.args[2].is_number()
          ? &call.args[2]
          : nullptr;
  if (!end.is_number()) return KernelError(call, "end must be a number");
  const double s = start ? start->AsDouble() : 0, e = end.AsDouble(),
               d = step ? step->AsDouble() : 1;
  if (d == 0) return KernelError(call, "step must be nonzero");
  if ((d > 0 && s > e) || (d < 0 && s < e))
    return KernelError(call,
                       "upper bound and larger bound inconsistent "
                       "with step sign");
  const int64_t expected = static_cast<int64_t>(std::ceil((e - s) / d));
  if (out.sizes[0] != expected)
    return KernelError(call,
                       absl::StrCat("the result has ", out.sizes[0],
                                    " elements; arange gives ", expected));
  const DType code = out.dtype;
  const int64_t stride = out.strides[0] * out.element_size();
  if (element::IsFloat(code)) {
    for (int64_t i = 0; i < out.sizes[0]; ++i)
      element::StoreDouble(code, out.bytes() + i * stride,
                           s + d * static_cast<double>(i));
  } else {
    const int64_t si = start ? start->AsInt() : 0;
    const int64_t di = step ? step->AsInt() : 1;
    for (int64_t i = 0; i < out.sizes[0]; ++i)
      element::StoreInt64(code, out.bytes() + i * stride, si + di * i);
  }
  return absl::OkStatus();
}

// triu(self, diagonal=0): keeps self[..., i, j] where j - i >= diagonal.
absl::Status TriuKernel(const KernelCall& call) {
  const TensorView& in = call.args[0].tensor;
  const TensorView& out = call.outputs[0];
  if (in.dim() < 2) return KernelError(call, "expects at least 2 dims");
  if (out.sizes != in.sizes) return KernelError(call, "output sizes differ");
  const int64_t diagonal = call.args.size() > 1 && call.args[1].is_number()
                               ? call.args[1].AsInt()
                               : 0;
  const int64_t rows = in.sizes[in.dim() - 2], cols = in.sizes[in.dim() - 1];
  const DType ic = in.dtype, oc = out.dtype;
  const int64_t es = out.element_size();
  int64_t index = 0;
  StridedLoop<2>(out.sizes, {out.bytes(), in.bytes()},
                 {OwnByteStrides(out), OwnByteStrides(in)},
                 [&](const std::array<std::byte*, 2>& p) {
                   const int64_t j = index % cols, i = (index / cols) % rows;
                   ++index;
                   if (j - i >= diagonal) {
                     if (ic == oc) {
                       std::memcpy(p[0], p[1], es);
                     } else {
                       ConvertElement(oc, p[0], ic, p[1]);
                     }
                   } else {
                     std::memset(p[0], 0, es);
                   }
                 });
  return absl::OkStatus();
}

// masked_fill.Scalar(self, mask, Scalar value) / masked_fill.Tensor(self,
// mask, Tensor value): value where mask, else self; mask (bool) broadcasts
// to self; the Tensor value must be 0-dim.
absl::Status MaskedFillKernel(const KernelCall& call) {
  const TensorView& self = call.args[0].tensor;
  const TensorView& mask = call.args[1].tensor;
  const TensorView& out = call.outputs[0];
  if (mask.dtype != DType::kBool)
    return KernelError(call, "mask must be a bool tensor");
  if (out.sizes != self.sizes) return KernelError(call, "output sizes differ");
  if (absl::Status s = CheckBroadcast(call, mask, out); !s.ok()) return s;
  if (call.args[2].is_tensor() && call.args[2].tensor.dim() != 0)
    return KernelError(call, "value must be a 0-dim tensor");
  ScalarSlot slot;
  const TensorView value = TensorOrScalar(call, 2, slot);
  const DType vc = value.dtype, sc = self.dtype, oc = out.dtype;
  alignas(8) std::byte fill[8] = {};
  ConvertElement(oc, fill, vc, value.bytes());
  const int64_t es = out.element_size();
  StridedLoop<3>(out.sizes, {out.bytes(), self.bytes(), mask.bytes()},
                 {OwnByteStrides(out), BroadcastByteStrides(self, out.sizes),
                  BroadcastByteStrides(mask, out.sizes)},
                 [&](const std::array<std::byte*, 3>& p) {
                   if (*reinterpret_cast<const bool*>(p[2])) {
                     std::memcpy(p[0], fill, es);
                   } else if (sc == oc) {
                     std::memmove(p[0], p[1], es);
                   } else {
                     ConvertElement(oc, p[0], sc, p[1]);
                   }
                 });
  return absl::OkStatus();
}

const FamilyKernel kCreation[] = {
    {"aten::empty.memory_format", &EmptyKernel},
    {"aten::zeros", &EmptyKernel},
    {"aten::ones", &OnesKernel},
    {"aten::arange", &ArangeKernel},
    {"aten::arange.start", &ArangeKernel},
    {"aten::arange.start_step", &ArangeKernel},
    {"aten::triu", &Guard<TriuKernel, true>},
    {"aten::masked_fill.Scalar", &Guard<MaskedFillKernel, true>},
    {"aten::masked_fill.Tensor", &Guard<MaskedFillKernel, true>},
    // _unsafe_view(Tensor self, SymInt[] size) -> Tensor: fresh storage.
    {"aten::_unsafe_view", &Guard<FlatCopyKernel, false>},
    // Views.
    {"aten::_reshape_alias", &NoData},
    {"aten::split.Tensor", &NoData},
};

}  // namespace

std::span<const FamilyKernel> CreationKernels() { return kCreation; }

}  // namespace ferry::host
