#include "tests/runtime/test_util.h"

#include <cstring>

#include "gtest/gtest.h"
#include "runtime/element.h"
#include "runtime/host_kernels.h"
#include "tests/support/files.h"

namespace ferry::testing {
namespace {

OwnedTensor Allocate(DType dtype, std::vector<int64_t> sizes,
                     std::vector<int64_t> strides, int64_t offset) {
  OwnedTensor t;
  int64_t last = offset;
  bool empty = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) empty = true;
    if (sizes[d] > 0) last += (sizes[d] - 1) * strides[d];
  }
  const int64_t bytes = empty ? 8 : (last + 1) * ElementSize(dtype);
  t.storage.assign((bytes + 7) / 8 + 1, 0);
  t.view.dtype = dtype;
  t.view.sizes.assign(sizes.begin(), sizes.end());
  t.view.strides.assign(strides.begin(), strides.end());
  t.view.data = reinterpret_cast<std::byte*>(t.storage.data()) +
                offset * ElementSize(dtype);
  return t;
}

void Fill(OwnedTensor& t, const std::vector<double>& values) {
  const TensorView& v = t.view;
  DimVector index(v.dim(), 0);
  const int64_t n = v.numel();
  EXPECT_EQ(static_cast<int64_t>(values.size()), n) << "value count";
  for (int64_t i = 0; i < n && i < static_cast<int64_t>(values.size()); ++i) {
    int64_t offset = 0;
    for (int64_t d = 0; d < v.dim(); ++d) offset += index[d] * v.strides[d];
    element::StoreDouble(v.dtype, v.bytes() + offset * v.element_size(),
                         values[i]);
    for (int64_t d = v.dim() - 1; d >= 0; --d) {
      if (++index[d] < v.sizes[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

OwnedTensor MakeTensor(DType dtype, std::vector<int64_t> sizes,
                       const std::vector<double>& values) {
  return MakeStrided(dtype, sizes, ContiguousStrides(sizes), 0, values);
}

OwnedTensor MakeStrided(DType dtype, std::vector<int64_t> sizes,
                        std::vector<int64_t> strides, int64_t offset,
                        const std::vector<double>& values) {
  OwnedTensor t = Allocate(dtype, sizes, strides, offset);
  Fill(t, values);
  return t;
}

OwnedTensor MakeOutput(DType dtype, std::vector<int64_t> sizes) {
  return Allocate(dtype, sizes, ContiguousStrides(sizes), 0);
}

HostTensor Dense(DType dtype, std::vector<int64_t> sizes,
                 const std::vector<double>& values) {
  OwnedTensor t = MakeTensor(dtype, sizes, values);
  HostTensor h;
  h.dtype = dtype;
  h.sizes = sizes;
  h.data.resize(t.view.numel() * ElementSize(dtype));
  if (!h.data.empty()) std::memcpy(h.data.data(), t.view.data, h.data.size());
  return h;
}

std::vector<double> Values(const TensorView& view) {
  std::vector<std::byte> dense = GatherContiguous(view);
  std::vector<double> values;
  const int64_t es = view.element_size();
  for (int64_t i = 0; i < view.numel(); ++i)
    values.push_back(element::LoadAsDouble(view.dtype, dense.data() + i * es));
  return values;
}

std::vector<double> Values(const HostTensor& tensor) {
  return Values(tensor.view());
}

std::vector<double> Rounded(DType dtype, const std::vector<double>& values) {
  std::vector<double> rounded;
  for (double v : values) {
    std::byte bytes[8];
    element::StoreDouble(dtype, bytes, v);
    rounded.push_back(element::LoadAsDouble(dtype, bytes));
  }
  return rounded;
}

KernelArg TensorArg(const OwnedTensor& tensor) {
  KernelArg arg;
  arg.kind = KernelArg::Kind::kTensor;
  arg.tensor = tensor.view;
  return arg;
}
KernelArg ListArg(const std::vector<const OwnedTensor*>& tensors) {
  KernelArg arg;
  arg.kind = KernelArg::Kind::kTensorList;
  for (const OwnedTensor* t : tensors) arg.tensors.push_back(t->view);
  return arg;
}
KernelArg IntArg(int64_t value) {
  KernelArg arg;
  arg.kind = KernelArg::Kind::kInt;
  arg.int_value = value;
  return arg;
}
KernelArg FloatArg(double value) {
  KernelArg arg;
  arg.kind = KernelArg::Kind::kFloat;
  arg.float_value = value;
  return arg;
}
KernelArg BoolArg(bool value) {
  KernelArg arg;
  arg.kind = KernelArg::Kind::kBool;
  arg.bool_value = value;
  return arg;
}
KernelArg IntsArg(std::vector<int64_t> values) {
  KernelArg arg;
  arg.kind = KernelArg::Kind::kInts;
  arg.ints = std::move(values);
  return arg;
}
KernelArg StringArg(std::string value) {
  KernelArg arg;
  arg.kind = KernelArg::Kind::kString;
  arg.string_value = std::move(value);
  return arg;
}
KernelArg NoneArg() { return KernelArg(); }

absl::Status RunKernel(std::string_view op, const std::vector<KernelArg>& args,
                       const std::vector<const OwnedTensor*>& outputs) {
  std::vector<TensorView> views;
  for (const OwnedTensor* t : outputs) views.push_back(t->view);
  return RunHostKernel(KernelCall{op, args, views});
}

Program LoadProgramFile(std::string_view name) {
  const std::string text = testing_util::ReadFile(
      std::string(FERRY_RUNTIME_TEST_PROGRAMS) + "/" + std::string(name));
  EXPECT_FALSE(text.empty()) << "cannot read " << name;
  return ParseProgram(text);
}

std::vector<DType> FloatDTypes() {
  return {DType::kF32, DType::kF16, DType::kBF16, DType::kF64};
}

std::vector<DType> AllDTypes() {
  return {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI8,
          DType::kU8,  DType::kI16, DType::kI32,  DType::kI64, DType::kBool};
}

}  // namespace ferry::testing
