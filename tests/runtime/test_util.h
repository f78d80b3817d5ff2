// Helpers for the runtime tests: owned tensors with any layout, kernel
// arguments, and programs read from text.
#ifndef FERRY_TESTS_RUNTIME_TEST_UTIL_H_
#define FERRY_TESTS_RUNTIME_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/diagnostics.h"
#include "passes/ir.h"
#include "runtime/executor.h"
#include "runtime/tensor_view.h"
#include "tests/support/programs.h"

namespace ferry::testing {

// A tensor that owns its storage. Element [0..0] sits at `offset` elements
// into the storage, the others where `strides` put them.
struct OwnedTensor {
  std::vector<uint64_t> storage;  // 8-byte aligned
  TensorView view;
};

// `values` in logical row-major order, stored contiguously.
OwnedTensor MakeTensor(DType dtype, std::vector<int64_t> sizes,
                       const std::vector<double>& values);
// The same logical values, stored with `strides` (elements) and `offset`.
OwnedTensor MakeStrided(DType dtype, std::vector<int64_t> sizes,
                        std::vector<int64_t> strides, int64_t offset,
                        const std::vector<double>& values);
// A zero-filled contiguous tensor (an output).
OwnedTensor MakeOutput(DType dtype, std::vector<int64_t> sizes);
// `values` as a dense HostTensor (an executor input).
HostTensor Dense(DType dtype, std::vector<int64_t> sizes,
                 const std::vector<double>& values);

// The logical values of `view`, row-major.
std::vector<double> Values(const TensorView& view);
std::vector<double> Values(const HostTensor& tensor);
// `values` rounded as storing them in `dtype` does.
std::vector<double> Rounded(DType dtype, const std::vector<double>& values);

KernelArg TensorArg(const OwnedTensor& tensor);
KernelArg ListArg(const std::vector<const OwnedTensor*>& tensors);
KernelArg IntArg(int64_t value);
KernelArg FloatArg(double value);
KernelArg BoolArg(bool value);
KernelArg IntsArg(std::vector<int64_t> values);
KernelArg StringArg(std::string value);
KernelArg NoneArg();

// Runs the host kernel of `op` writing `outputs`.
absl::Status RunKernel(std::string_view op, const std::vector<KernelArg>& args,
                       const std::vector<const OwnedTensor*>& outputs);

// Programs from text (tests/support/programs.h).
using testing_util::ParseProgram;
using testing_util::ParseProgramUnvalidated;
Program LoadProgramFile(std::string_view name);  // from tests/runtime/programs

// Every float dtype, and every dtype.
std::vector<DType> FloatDTypes();
std::vector<DType> AllDTypes();

}  // namespace ferry::testing

#endif  // FERRY_TESTS_RUNTIME_TEST_UTIL_H_
