// Host kernels against known values: every built-in operator of the
// registry, each dtype it allows, strided inputs, broadcasting, empty and
// 0-dim tensors. View and metadata operators (no data to compute) are
// exercised through the executor in executor_test.cc.
#include "runtime/host_kernels.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "passes/schema.h"
#include "tests/runtime/test_util.h"
#include "tests/support/values.h"

namespace ferry::testing {
namespace {

// Values are compared with the exact values rounded to the output dtype,
// within the tolerances verification uses on the simulated device.
void ExpectValues(const TensorView& out, const std::vector<double>& exact,
                  std::string_view what = "") {
  testing_util::ExpectAllClose(Values(out), Rounded(out.dtype, exact),
                               out.dtype, "sim", what);
}

const std::vector<double> kUnaryInput = {-2, -0.5, 0, 0.5, 1, 2};

std::vector<double> Map(const std::vector<double>& in, double (*f)(double)) {
  std::vector<double> out;
  for (double x : in) out.push_back(f(x));
  return out;
}

// --- Coverage
// -------------------------------------------------------------------

// Operators tested in this file or, for views, metadata and copies, in
// executor_test.cc. A new registry row fails this test until it is tested.
const std::set<std::string>& TestedOps() {
  static const std::set<std::string> ops = {
      // here
      "aten::add.Tensor", "aten::add.Scalar", "aten::sub.Tensor",
      "aten::sub.Scalar", "aten::mul.Tensor", "aten::mul.Scalar",
      "aten::div.Tensor", "aten::div.Scalar", "aten::relu", "aten::sin",
      "aten::cos", "aten::exp", "aten::neg", "aten::tanh", "aten::sigmoid",
      "aten::gelu", "aten::relu_", "aten::add_.Tensor", "aten::add_.Scalar",
      "aten::mul_.Tensor", "aten::mul_.Scalar", "aten::copy_",
      "aten::fill_.Scalar", "aten::view_copy", "aten::permute_copy",
      "aten::transpose_copy.int", "aten::t_copy", "aten::expand_copy",
      "aten::slice_copy.Tensor", "aten::select_copy.int",
      "aten::unsqueeze_copy", "aten::squeeze_copy.dim", "aten::alias_copy",
      "aten::clone", "aten::mm", "aten::addmm", "aten::bmm", "aten::linear",
      "aten::sum.dim_IntList", "aten::mean.dim", "aten::amax", "aten::_softmax",
      "aten::native_layer_norm", "aten::cat",
      // op_cases_test.cc (against PyTorch, data/op_cases.txt)
      "aten::convolution", "aten::native_batch_norm",
      "aten::max_pool2d_with_indices", "aten::hardtanh", "aten::embedding",
      "aten::_log_softmax", "aten::arange", "aten::arange.start",
      "aten::arange.start_step", "aten::ones", "aten::zeros",
      "aten::empty.memory_format", "aten::triu", "aten::masked_fill.Scalar",
      "aten::_unsafe_view", "aten::_native_multi_head_attention",
      // op_views_test.cc
      "aten::_reshape_alias", "aten::detach", "aten::split.Tensor",
      "aten::hardtanh_",
      // executor_test.cc
      "aten::view", "aten::reshape", "aten::transpose.int", "aten::permute",
      "aten::t", "aten::expand", "aten::slice.Tensor", "aten::select.int",
      "aten::unsqueeze", "aten::squeeze.dim", "aten::squeeze", "aten::alias",
      "aten::sym_size.int", "aten::sym_numel", "aten::sym_stride.int",
      "et_copy::_h2d_copy", "et_copy::_d2h_copy"};
  return ops;
}

TEST(HostKernelsTest, EveryRegisteredOperatorHasAKernelAndATest) {
  for (const std::string& op : RegisteredOps()) {
    const OpInfo* info = LookupOp(op);
    ASSERT_NE(info, nullptr) << op;
    const bool copy = op == kH2DCopyOp || op == kD2HCopyOp;
    if (!info->metadata_only && !copy) {
      EXPECT_NE(FindHostKernel(op), nullptr) << "no host kernel for " << op;
    }
    EXPECT_TRUE(TestedOps().count(op)) << op << " has no known-value test";
  }
}

TEST(HostKernelsTest, LooksUpDefaultOverloadNames) {
  EXPECT_EQ(FindHostKernel("aten::relu"), FindHostKernel("aten::relu.default"));
  EXPECT_EQ(FindHostKernel("aten::no_such_op"), nullptr);
  absl::Status status = RunKernel("aten::no_such_op", {}, {});
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
}

// --- Unary
// ------------------------------------------------------------------------

struct UnaryCase {
  const char* op;
  double (*exact)(double);
};

TEST(HostKernelsTest, UnaryFloatOpsEveryFloatDType) {
  const UnaryCase cases[] = {
      {"aten::relu", [](double x) { return x > 0 ? x : 0.0; }},
      {"aten::sin", [](double x) { return std::sin(x); }},
      {"aten::cos", [](double x) { return std::cos(x); }},
      {"aten::exp", [](double x) { return std::exp(x); }},
      {"aten::neg", [](double x) { return -x; }},
      {"aten::tanh", [](double x) { return std::tanh(x); }},
      {"aten::sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
  };
  for (const UnaryCase& c : cases) {
    for (DType dtype : FloatDTypes()) {
      OwnedTensor in = MakeTensor(dtype, {2, 3}, kUnaryInput);
      OwnedTensor out = MakeOutput(dtype, {2, 3});
      ASSERT_TRUE(RunKernel(c.op, {TensorArg(in)}, {&out}).ok()) << c.op;
      ExpectValues(out.view, Map(kUnaryInput, c.exact), c.op);
    }
  }
}

TEST(HostKernelsTest, UnaryKnownValues) {
  OwnedTensor in = MakeTensor(DType::kF64, {3}, {0, 0.5, 1});
  OwnedTensor out = MakeOutput(DType::kF64, {3});
  ASSERT_TRUE(RunKernel("aten::sin", {TensorArg(in)}, {&out}).ok());
  ExpectValues(out.view, {0, 0.479425538604203, 0.8414709848078965});
  ASSERT_TRUE(RunKernel("aten::sigmoid", {TensorArg(in)}, {&out}).ok());
  ExpectValues(out.view, {0.5, 0.6224593312018546, 0.7310585786300049});
  ASSERT_TRUE(
      RunKernel("aten::gelu", {TensorArg(in), StringArg("none")}, {&out}).ok());
  ExpectValues(out.view, {0, 0.34573123063700656, 0.8413447460685429});
  ASSERT_TRUE(
      RunKernel("aten::gelu", {TensorArg(in), StringArg("tanh")}, {&out}).ok());
  ExpectValues(out.view, {0, 0.34571400982514394, 0.8411919906082768});
  EXPECT_FALSE(
      RunKernel("aten::gelu", {TensorArg(in), StringArg("erf")}, {&out}).ok());
}

TEST(HostKernelsTest, GeluEveryFloatDType) {
  for (DType dtype : FloatDTypes()) {
    OwnedTensor in = MakeTensor(dtype, {6}, kUnaryInput);
    OwnedTensor out = MakeOutput(dtype, {6});
    ASSERT_TRUE(
        RunKernel("aten::gelu", {TensorArg(in), StringArg("none")}, {&out})
            .ok());
    ExpectValues(out.view, Map(kUnaryInput, [](double x) {
                   return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
                 }));
  }
}

TEST(HostKernelsTest, UnaryIntegerDTypes) {
  for (DType dtype : {DType::kI8, DType::kI16, DType::kI32, DType::kI64}) {
    OwnedTensor in = MakeTensor(dtype, {5}, {-2, -1, 0, 1, 3});
    OwnedTensor out = MakeOutput(dtype, {5});
    ASSERT_TRUE(RunKernel("aten::relu", {TensorArg(in)}, {&out}).ok());
    ExpectValues(out.view, {0, 0, 0, 1, 3}, "relu");
    ASSERT_TRUE(RunKernel("aten::neg", {TensorArg(in)}, {&out}).ok());
    ExpectValues(out.view, {2, 1, 0, -1, -3}, "neg");
  }
  // uint8 wraps, as in ATen.
  OwnedTensor u = MakeTensor(DType::kU8, {3}, {0, 1, 2});
  OwnedTensor uo = MakeOutput(DType::kU8, {3});
  ASSERT_TRUE(RunKernel("aten::neg", {TensorArg(u)}, {&uo}).ok());
  ExpectValues(uo.view, {0, 255, 254});
  ASSERT_TRUE(RunKernel("aten::relu", {TensorArg(u)}, {&uo}).ok());
  ExpectValues(uo.view, {0, 1, 2});
}

TEST(HostKernelsTest, TranscendentalOfIntegersIsFloating) {
  // sin/exp/... of an integer tensor give f32, as the shape rule says.
  for (DType dtype : {DType::kI32, DType::kI64, DType::kU8, DType::kBool}) {
    OwnedTensor in = MakeTensor(dtype, {2}, {0, 1});
    OwnedTensor out = MakeOutput(DType::kF32, {2});
    ASSERT_TRUE(RunKernel("aten::exp", {TensorArg(in)}, {&out}).ok());
    ExpectValues(out.view, {1, std::exp(1.0)});
  }
}

TEST(HostKernelsTest, UnaryStridedZeroDimAndEmpty) {
  // A transposed view: logical [[-2, 0.5], [-0.5, 1], [0, 2]].
  OwnedTensor in =
      MakeStrided(DType::kF32, {3, 2}, {1, 3}, 0, {-2, 0.5, -0.5, 1, 0, 2});
  OwnedTensor out = MakeOutput(DType::kF32, {3, 2});
  ASSERT_TRUE(RunKernel("aten::relu", {TensorArg(in)}, {&out}).ok());
  ExpectValues(out.view, {0, 0.5, 0, 1, 0, 2});
  // Writing a strided output.
  OwnedTensor dense = MakeTensor(DType::kF32, {2, 2}, {-1, 2, 3, -4});
  OwnedTensor strided_out =
      MakeStrided(DType::kF32, {2, 2}, {1, 2}, 1, {0, 0, 0, 0});
  ASSERT_TRUE(RunKernel("aten::neg", {TensorArg(dense)}, {&strided_out}).ok());
  ExpectValues(strided_out.view, {1, -2, -3, 4});
  // 0-dim.
  OwnedTensor scalar = MakeTensor(DType::kF64, {}, {-3});
  OwnedTensor scalar_out = MakeOutput(DType::kF64, {});
  ASSERT_TRUE(RunKernel("aten::neg", {TensorArg(scalar)}, {&scalar_out}).ok());
  ExpectValues(scalar_out.view, {3});
  // Empty.
  OwnedTensor empty = MakeTensor(DType::kF32, {0, 3}, {});
  OwnedTensor empty_out = MakeOutput(DType::kF32, {0, 3});
  EXPECT_TRUE(RunKernel("aten::sin", {TensorArg(empty)}, {&empty_out}).ok());
}

// --- Binary
// -------------------------------------------------------------------------

TEST(HostKernelsTest, AddSubMulEveryDType) {
  for (DType dtype : AllDTypes()) {
    if (dtype == DType::kBool) continue;
    OwnedTensor a = MakeTensor(dtype, {2, 2}, {1, 2, 3, 4});
    OwnedTensor b = MakeTensor(dtype, {2, 2}, {10, 20, 30, 4});
    OwnedTensor out = MakeOutput(dtype, {2, 2});
    ASSERT_TRUE(RunKernel("aten::add.Tensor",
                          {TensorArg(a), TensorArg(b), IntArg(2)}, {&out})
                    .ok());
    ExpectValues(out.view, {21, 42, 63, 12}, "add alpha=2");
    ASSERT_TRUE(RunKernel("aten::sub.Tensor",
                          {TensorArg(b), TensorArg(a), IntArg(1)}, {&out})
                    .ok());
    ExpectValues(out.view, {9, 18, 27, 0}, "sub");
    ASSERT_TRUE(
        RunKernel("aten::mul.Tensor", {TensorArg(a), TensorArg(b)}, {&out})
            .ok());
    ExpectValues(out.view, {10, 40, 90, 16}, "mul");
    ASSERT_TRUE(RunKernel("aten::add.Scalar",
                          {TensorArg(a), IntArg(3), IntArg(2)}, {&out})
                    .ok());
    ExpectValues(out.view, {7, 8, 9, 10}, "add.Scalar");
    ASSERT_TRUE(RunKernel("aten::sub.Scalar",
                          {TensorArg(b), IntArg(1), IntArg(1)}, {&out})
                    .ok());
    ExpectValues(out.view, {9, 19, 29, 3}, "sub.Scalar");
    ASSERT_TRUE(
        RunKernel("aten::mul.Scalar", {TensorArg(a), IntArg(3)}, {&out}).ok());
    ExpectValues(out.view, {3, 6, 9, 12}, "mul.Scalar");
  }
}

TEST(HostKernelsTest, FloatScalarsAndFloatAlpha) {
  for (DType dtype : FloatDTypes()) {
    OwnedTensor a = MakeTensor(dtype, {3}, {1, 2, 3});
    OwnedTensor out = MakeOutput(dtype, {3});
    ASSERT_TRUE(RunKernel("aten::add.Scalar",
                          {TensorArg(a), FloatArg(0.5), FloatArg(0.5)}, {&out})
                    .ok());
    ExpectValues(out.view, {1.25, 2.25, 3.25});
    ASSERT_TRUE(
        RunKernel("aten::mul.Scalar", {TensorArg(a), FloatArg(-0.25)}, {&out})
            .ok());
    ExpectValues(out.view, {-0.25, -0.5, -0.75});
  }
  // An int tensor with a float scalar promotes (the spec gives f32).
  OwnedTensor i = MakeTensor(DType::kI32, {2}, {1, 2});
  OwnedTensor f = MakeOutput(DType::kF32, {2});
  ASSERT_TRUE(RunKernel("aten::add.Scalar",
                        {TensorArg(i), FloatArg(0.5), IntArg(1)}, {&f})
                  .ok());
  ExpectValues(f.view, {1.5, 2.5});
}

TEST(HostKernelsTest, BoolArithmetic) {
  OwnedTensor a = MakeTensor(DType::kBool, {4}, {1, 1, 0, 0});
  OwnedTensor b = MakeTensor(DType::kBool, {4}, {1, 0, 1, 0});
  OwnedTensor out = MakeOutput(DType::kBool, {4});
  ASSERT_TRUE(RunKernel("aten::add.Tensor",
                        {TensorArg(a), TensorArg(b), IntArg(1)}, {&out})
                  .ok());
  ExpectValues(out.view, {1, 1, 1, 0}, "bool add is or");
  ASSERT_TRUE(
      RunKernel("aten::mul.Tensor", {TensorArg(a), TensorArg(b)}, {&out}).ok());
  ExpectValues(out.view, {1, 0, 0, 0}, "bool mul is and");
  EXPECT_FALSE(RunKernel("aten::sub.Tensor",
                         {TensorArg(a), TensorArg(b), IntArg(1)}, {&out})
                   .ok());
}

TEST(HostKernelsTest, IntegerArithmeticWraps) {
  OwnedTensor a = MakeTensor(DType::kI8, {2}, {100, -100});
  OwnedTensor out = MakeOutput(DType::kI8, {2});
  ASSERT_TRUE(RunKernel("aten::add.Tensor",
                        {TensorArg(a), TensorArg(a), IntArg(1)}, {&out})
                  .ok());
  ExpectValues(out.view, {-56, 56});
  OwnedTensor big = MakeTensor(DType::kI64, {1}, {0});
  reinterpret_cast<int64_t*>(big.view.data)[0] =
      std::numeric_limits<int64_t>::max();
  OwnedTensor big_out = MakeOutput(DType::kI64, {1});
  ASSERT_TRUE(RunKernel("aten::add.Scalar",
                        {TensorArg(big), IntArg(1), IntArg(1)}, {&big_out})
                  .ok());
  EXPECT_EQ(reinterpret_cast<int64_t*>(big_out.view.data)[0],
            std::numeric_limits<int64_t>::min());
}

TEST(HostKernelsTest, DivIsTrueDivision) {
  for (DType dtype : FloatDTypes()) {
    OwnedTensor a = MakeTensor(dtype, {4}, {1, -3, 0, 2});
    OwnedTensor b = MakeTensor(dtype, {4}, {2, 4, 0, 0});
    OwnedTensor out = MakeOutput(dtype, {4});
    ASSERT_TRUE(
        RunKernel("aten::div.Tensor", {TensorArg(a), TensorArg(b)}, {&out})
            .ok());
    ExpectValues(out.view, {0.5, -0.75, std::nan(""), INFINITY});
    ASSERT_TRUE(
        RunKernel("aten::div.Scalar", {TensorArg(a), FloatArg(-0.5)}, {&out})
            .ok());
    ExpectValues(out.view, {-2, 6, 0, -4});
  }
  // Integer operands divide truly into a floating output.
  OwnedTensor a = MakeTensor(DType::kI32, {3}, {1, 7, -7});
  OwnedTensor b = MakeTensor(DType::kI64, {3}, {2, 2, 2});
  OwnedTensor out = MakeOutput(DType::kF32, {3});
  ASSERT_TRUE(
      RunKernel("aten::div.Tensor", {TensorArg(a), TensorArg(b)}, {&out}).ok());
  ExpectValues(out.view, {0.5, 3.5, -3.5});
  OwnedTensor int_out = MakeOutput(DType::kI32, {3});
  EXPECT_FALSE(
      RunKernel("aten::div.Tensor", {TensorArg(a), TensorArg(b)}, {&int_out})
          .ok());
}

TEST(HostKernelsTest, FloorDivisionByIntegerZeroIsAnError) {
  OwnedTensor a = MakeTensor(DType::kI32, {2}, {7, -7});
  OwnedTensor b = MakeTensor(DType::kI32, {2}, {2, 0});
  OwnedTensor out = MakeOutput(DType::kI32, {2});
  absl::Status status =
      RunKernel("aten::div.Tensor_mode",
                {TensorArg(a), TensorArg(b), StringArg("floor")}, {&out});
  EXPECT_EQ(status.message(),
            "aten::div.Tensor_mode: integer division by zero");
  OwnedTensor c = MakeTensor(DType::kI32, {2}, {2, -2});
  ASSERT_TRUE(RunKernel("aten::div.Tensor_mode",
                        {TensorArg(a), TensorArg(c), StringArg("floor")},
                        {&out})
                  .ok());
  ExpectValues(out.view, {3, 3});
}

TEST(HostKernelsTest, BinaryBroadcastingAsATen) {
  // [2,1] + [3] -> [2,3]
  OwnedTensor col = MakeTensor(DType::kF32, {2, 1}, {10, 20});
  OwnedTensor row = MakeTensor(DType::kF32, {3}, {1, 2, 3});
  OwnedTensor out = MakeOutput(DType::kF32, {2, 3});
  ASSERT_TRUE(RunKernel("aten::add.Tensor",
                        {TensorArg(col), TensorArg(row), IntArg(1)}, {&out})
                  .ok());
  ExpectValues(out.view, {11, 12, 13, 21, 22, 23});
  // A 0-dim tensor operand, with mixed dtypes: f32 * f64 0-dim -> f32.
  OwnedTensor scalar = MakeTensor(DType::kF64, {}, {0.5});
  ASSERT_TRUE(
      RunKernel("aten::mul.Tensor", {TensorArg(out), TensorArg(scalar)}, {&out})
          .ok());
  ExpectValues(out.view, {5.5, 6, 6.5, 10.5, 11, 11.5});
  // A stride-0 (expanded) operand and a non-contiguous one.
  OwnedTensor expanded =
      MakeStrided(DType::kF32, {2, 3}, {0, 1}, 0, {1, 2, 3, 1, 2, 3});
  OwnedTensor transposed =
      MakeStrided(DType::kF32, {2, 3}, {1, 2}, 0, {1, 1, 1, 2, 2, 2});
  ASSERT_TRUE(RunKernel("aten::mul.Tensor",
                        {TensorArg(expanded), TensorArg(transposed)}, {&out})
                  .ok());
  ExpectValues(out.view, {1, 2, 3, 2, 4, 6});
  // Not broadcastable: an error, not a read out of bounds.
  OwnedTensor wrong = MakeTensor(DType::kF32, {4}, {1, 2, 3, 4});
  absl::Status status =
      RunKernel("aten::add.Tensor",
                {TensorArg(wrong), TensorArg(row), IntArg(1)}, {&out});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("does not broadcast"), std::string::npos)
      << status;
  // Empty.
  OwnedTensor empty = MakeTensor(DType::kF32, {0, 3}, {});
  OwnedTensor empty_out = MakeOutput(DType::kF32, {0, 3});
  EXPECT_TRUE(RunKernel("aten::add.Tensor",
                        {TensorArg(empty), TensorArg(row), IntArg(1)},
                        {&empty_out})
                  .ok());
}

// --- In place
// ---------------------------------------------------------------------

TEST(HostKernelsTest, InPlaceOperatorsWriteSelf) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kI32}) {
    OwnedTensor x = MakeTensor(dtype, {4}, {-1, 2, -3, 4});
    ASSERT_TRUE(RunKernel("aten::relu_", {TensorArg(x)}, {&x}).ok());
    ExpectValues(x.view, {0, 2, 0, 4}, "relu_");
    OwnedTensor y = MakeTensor(dtype, {4}, {1, 1, 1, 1});
    ASSERT_TRUE(RunKernel("aten::add_.Tensor",
                          {TensorArg(x), TensorArg(y), IntArg(2)}, {&x})
                    .ok());
    ExpectValues(x.view, {2, 4, 2, 6}, "add_.Tensor");
    ASSERT_TRUE(RunKernel("aten::add_.Scalar",
                          {TensorArg(x), IntArg(1), IntArg(1)}, {&x})
                    .ok());
    ExpectValues(x.view, {3, 5, 3, 7}, "add_.Scalar");
    ASSERT_TRUE(
        RunKernel("aten::mul_.Tensor", {TensorArg(x), TensorArg(x)}, {&x})
            .ok());
    ExpectValues(x.view, {9, 25, 9, 49}, "mul_.Tensor");
    ASSERT_TRUE(
        RunKernel("aten::mul_.Scalar", {TensorArg(x), IntArg(-1)}, {&x}).ok());
    ExpectValues(x.view, {-9, -25, -9, -49}, "mul_.Scalar");
  }
}

TEST(HostKernelsTest, InPlaceWithOverlappingDifferentLayoutReadsOldValues) {
  // add_(x, x.t()): every element reads the old transpose, as ATen computes.
  OwnedTensor x = MakeTensor(DType::kF32, {2, 2}, {1, 2, 3, 4});
  TensorView xt = x.view;
  std::swap(xt.strides[0], xt.strides[1]);
  KernelArg xt_arg;
  xt_arg.kind = KernelArg::Kind::kTensor;
  xt_arg.tensor = xt;
  ASSERT_TRUE(
      RunKernel("aten::add_.Tensor", {TensorArg(x), xt_arg, IntArg(1)}, {&x})
          .ok());
  ExpectValues(x.view, {2, 5, 5, 8});
}

TEST(HostKernelsTest, InPlaceThroughAStridedView) {
  // relu_ of column 1 of a [2,3] tensor.
  OwnedTensor base = MakeTensor(DType::kF32, {2, 3}, {-1, -2, -3, -4, 5, -6});
  OwnedTensor column;
  column.view = base.view;
  column.view.data = base.view.bytes() + 4;
  column.view.sizes = {2};
  column.view.strides = {3};
  ASSERT_TRUE(RunKernel("aten::relu_", {TensorArg(column)}, {&column}).ok());
  ExpectValues(base.view, {-1, 0, -3, -4, 5, -6});
}

TEST(HostKernelsTest, CopyAndFill) {
  // copy_ broadcasts and converts.
  OwnedTensor self = MakeTensor(DType::kF32, {2, 3}, {0, 0, 0, 0, 0, 0});
  OwnedTensor src = MakeTensor(DType::kI32, {3}, {1, -2, 3});
  ASSERT_TRUE(RunKernel("aten::copy_",
                        {TensorArg(self), TensorArg(src), BoolArg(false)},
                        {&self})
                  .ok());
  ExpectValues(self.view, {1, -2, 3, 1, -2, 3});
  // Into a strided destination.
  OwnedTensor strided =
      MakeStrided(DType::kI64, {2, 2}, {1, 2}, 0, {0, 0, 0, 0});
  OwnedTensor values = MakeTensor(DType::kF64, {2, 2}, {1.9, -2.9, 3, 4});
  ASSERT_TRUE(RunKernel("aten::copy_",
                        {TensorArg(strided), TensorArg(values), BoolArg(false)},
                        {&strided})
                  .ok());
  ExpectValues(strided.view, {1, -2, 3, 4});
  // fill_ with a float value into every dtype (truncated for integers).
  for (DType dtype : AllDTypes()) {
    OwnedTensor t = MakeOutput(dtype, {3});
    ASSERT_TRUE(
        RunKernel("aten::fill_.Scalar", {TensorArg(t), FloatArg(2.5)}, {&t})
            .ok());
    ExpectValues(t.view, {2.5, 2.5, 2.5}, "fill_");
  }
  OwnedTensor empty = MakeOutput(DType::kF32, {0});
  EXPECT_TRUE(
      RunKernel("aten::fill_.Scalar", {TensorArg(empty), IntArg(1)}, {&empty})
          .ok());
}

// --- Copy forms of the views
// -----------------------------------------------------------

TEST(HostKernelsTest, CopyFormsOfViews) {
  for (DType dtype : AllDTypes()) {
    // x = [[0,1,2],[3,4,5]] (values mod 2 for bool)
    std::vector<double> v = {0, 1, 2, 3, 4, 5};
    if (dtype == DType::kBool) v = {0, 1, 0, 1, 1, 0};
    auto at = [&](int i) { return v[i]; };
    OwnedTensor x = MakeTensor(dtype, {2, 3}, v);
    OwnedTensor out32 = MakeOutput(dtype, {3, 2});
    ASSERT_TRUE(
        RunKernel("aten::view_copy", {TensorArg(x), IntsArg({3, 2})}, {&out32})
            .ok());
    ExpectValues(out32.view, v, "view_copy");
    ASSERT_TRUE(RunKernel("aten::permute_copy", {TensorArg(x), IntsArg({1, 0})},
                          {&out32})
                    .ok());
    ExpectValues(out32.view, {at(0), at(3), at(1), at(4), at(2), at(5)},
                 "permute_copy");
    ASSERT_TRUE(RunKernel("aten::transpose_copy.int",
                          {TensorArg(x), IntArg(-1), IntArg(0)}, {&out32})
                    .ok());
    ExpectValues(out32.view, {at(0), at(3), at(1), at(4), at(2), at(5)},
                 "transpose_copy");
    ASSERT_TRUE(RunKernel("aten::t_copy", {TensorArg(x)}, {&out32}).ok());
    ExpectValues(out32.view, {at(0), at(3), at(1), at(4), at(2), at(5)},
                 "t_copy");
    OwnedTensor row = MakeTensor(dtype, {3}, {at(0), at(1), at(2)});
    OwnedTensor out23 = MakeOutput(dtype, {2, 3});
    ASSERT_TRUE(RunKernel("aten::expand_copy",
                          {TensorArg(row), IntsArg({2, -1}), BoolArg(false)},
                          {&out23})
                    .ok());
    ExpectValues(out23.view, {at(0), at(1), at(2), at(0), at(1), at(2)},
                 "expand_copy");
    OwnedTensor out22 = MakeOutput(dtype, {2, 2});
    ASSERT_TRUE(
        RunKernel("aten::slice_copy.Tensor",
                  {TensorArg(x), IntArg(1), IntArg(-3), NoneArg(), IntArg(2)},
                  {&out22})
            .ok());
    ExpectValues(out22.view, {at(0), at(2), at(3), at(5)}, "slice_copy");
    OwnedTensor out3 = MakeOutput(dtype, {3});
    ASSERT_TRUE(RunKernel("aten::select_copy.int",
                          {TensorArg(x), IntArg(0), IntArg(-1)}, {&out3})
                    .ok());
    ExpectValues(out3.view, {at(3), at(4), at(5)}, "select_copy");
    OwnedTensor out123 = MakeOutput(dtype, {1, 2, 3});
    ASSERT_TRUE(
        RunKernel("aten::unsqueeze_copy", {TensorArg(x), IntArg(0)}, {&out123})
            .ok());
    ExpectValues(out123.view, v, "unsqueeze_copy");
    ASSERT_TRUE(RunKernel("aten::squeeze_copy.dim",
                          {TensorArg(out123), IntArg(0)}, {&out23})
                    .ok());
    ExpectValues(out23.view, v, "squeeze_copy.dim");
    ASSERT_TRUE(RunKernel("aten::alias_copy", {TensorArg(x)}, {&out23}).ok());
    ExpectValues(out23.view, v, "alias_copy");
    ASSERT_TRUE(
        RunKernel("aten::clone", {TensorArg(x), NoneArg()}, {&out23}).ok());
    ExpectValues(out23.view, v, "clone");
  }
}

TEST(HostKernelsTest, CopyFormsOfStridedInputs) {
  // A transposed input [3,2] over [[0,1,2],[3,4,5]].
  OwnedTensor xt =
      MakeStrided(DType::kF32, {3, 2}, {1, 3}, 0, {0, 3, 1, 4, 2, 5});
  OwnedTensor flat = MakeOutput(DType::kF32, {6});
  ASSERT_TRUE(
      RunKernel("aten::view_copy", {TensorArg(xt), IntsArg({6})}, {&flat})
          .ok());
  ExpectValues(flat.view, {0, 3, 1, 4, 2, 5});
  // clone into a channels-last-like strided output keeps the values.
  OwnedTensor out =
      MakeStrided(DType::kF32, {3, 2}, {1, 3}, 0, {0, 0, 0, 0, 0, 0});
  ASSERT_TRUE(
      RunKernel("aten::clone", {TensorArg(xt), NoneArg()}, {&out}).ok());
  ExpectValues(out.view, {0, 3, 1, 4, 2, 5});
  // Out-of-range indices are errors.
  OwnedTensor out3 = MakeOutput(DType::kF32, {2});
  EXPECT_FALSE(RunKernel("aten::select_copy.int",
                         {TensorArg(xt), IntArg(0), IntArg(3)}, {&out3})
                   .ok());
  EXPECT_FALSE(
      RunKernel("aten::permute_copy", {TensorArg(xt), IntsArg({0, 0})}, {&out})
          .ok());
  // Empty slices.
  OwnedTensor empty = MakeOutput(DType::kF32, {0, 2});
  EXPECT_TRUE(
      RunKernel("aten::slice_copy.Tensor",
                {TensorArg(xt), IntArg(0), IntArg(5), IntArg(9), IntArg(1)},
                {&empty})
          .ok());
}

// --- Matrix products
// ----------------------------------------------------------------------

// a = [[1,2,3],[4,5,6]], b = [[1,0],[0,1],[1,1]]: a @ b = [[4,5],[10,11]]
const std::vector<double> kA = {1, 2, 3, 4, 5, 6};
const std::vector<double> kB = {1, 0, 0, 1, 1, 1};
const std::vector<double> kAB = {4, 5, 10, 11};

TEST(HostKernelsTest, MmEveryDType) {
  for (DType dtype : AllDTypes()) {
    if (dtype == DType::kBool) continue;
    OwnedTensor a = MakeTensor(dtype, {2, 3}, kA);
    OwnedTensor b = MakeTensor(dtype, {3, 2}, kB);
    OwnedTensor out = MakeOutput(dtype, {2, 2});
    ASSERT_TRUE(
        RunKernel("aten::mm", {TensorArg(a), TensorArg(b)}, {&out}).ok())
        << DTypeName(dtype);
    ExpectValues(out.view, kAB, "mm");
  }
}

TEST(HostKernelsTest, MmStridedOperandsAndOutputs) {
  for (DType dtype : {DType::kF32, DType::kF64, DType::kF16}) {
    // a stored transposed (BLAS "T"), b with a row gap, out transposed.
    OwnedTensor a = MakeStrided(dtype, {2, 3}, {1, 2}, 0, kA);
    OwnedTensor b = MakeStrided(dtype, {3, 2}, {4, 1}, 1, kB);
    OwnedTensor out = MakeStrided(dtype, {2, 2}, {1, 2}, 0, {0, 0, 0, 0});
    ASSERT_TRUE(
        RunKernel("aten::mm", {TensorArg(a), TensorArg(b)}, {&out}).ok());
    ExpectValues(out.view, kAB, "strided mm");
    // A broadcast (stride 0) operand is not BLAS-compatible: copied first.
    OwnedTensor ones =
        MakeStrided(dtype, {3, 2}, {0, 0}, 0, {1, 1, 1, 1, 1, 1});
    ASSERT_TRUE(
        RunKernel("aten::mm", {TensorArg(a), TensorArg(ones)}, {&out}).ok());
    ExpectValues(out.view, {6, 6, 15, 15}, "broadcast mm");
  }
}

TEST(HostKernelsTest, MmEmptyShapes) {
  OwnedTensor a = MakeTensor(DType::kF32, {2, 0}, {});
  OwnedTensor b = MakeTensor(DType::kF32, {0, 3}, {});
  OwnedTensor out = MakeTensor(DType::kF32, {2, 3}, {9, 9, 9, 9, 9, 9});
  ASSERT_TRUE(RunKernel("aten::mm", {TensorArg(a), TensorArg(b)}, {&out}).ok());
  ExpectValues(out.view, {0, 0, 0, 0, 0, 0}, "K = 0 gives zeros");
  OwnedTensor none = MakeOutput(DType::kF32, {0, 3});
  OwnedTensor a0 = MakeTensor(DType::kF32, {0, 2}, {});
  OwnedTensor b23 = MakeTensor(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(
      RunKernel("aten::mm", {TensorArg(a0), TensorArg(b23)}, {&none}).ok());
  OwnedTensor bad = MakeOutput(DType::kF32, {3, 3});
  EXPECT_FALSE(
      RunKernel("aten::mm", {TensorArg(b23), TensorArg(b23)}, {&bad}).ok());
}

TEST(HostKernelsTest, AddmmBmmLinear) {
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kI32}) {
    OwnedTensor a = MakeTensor(dtype, {2, 3}, kA);
    OwnedTensor b = MakeTensor(dtype, {3, 2}, kB);
    OwnedTensor bias = MakeTensor(dtype, {2}, {1, -1});
    OwnedTensor out = MakeOutput(dtype, {2, 2});
    // 2 * bias + 3 * (a @ b), bias broadcast over rows.
    ASSERT_TRUE(RunKernel("aten::addmm",
                          {TensorArg(bias), TensorArg(a), TensorArg(b),
                           IntArg(2), IntArg(3)},
                          {&out})
                    .ok());
    ExpectValues(out.view, {14, 13, 32, 31}, "addmm");
    // bmm: two batches, the second doubled.
    OwnedTensor ba =
        MakeTensor(dtype, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 2, 4, 6, 8, 10, 12});
    OwnedTensor bb =
        MakeTensor(dtype, {2, 3, 2}, {1, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1});
    OwnedTensor bout = MakeOutput(dtype, {2, 2, 2});
    ASSERT_TRUE(
        RunKernel("aten::bmm", {TensorArg(ba), TensorArg(bb)}, {&bout}).ok());
    ExpectValues(bout.view, {4, 5, 10, 11, 8, 10, 20, 22}, "bmm");
    // linear: x [1,2,3] @ w^T with w [2,3] = b^T, plus bias.
    OwnedTensor x = MakeTensor(dtype, {1, 2, 3}, kA);
    OwnedTensor w = MakeTensor(dtype, {2, 3}, {1, 0, 1, 0, 1, 1});
    OwnedTensor lout = MakeOutput(dtype, {1, 2, 2});
    ASSERT_TRUE(RunKernel("aten::linear",
                          {TensorArg(x), TensorArg(w), TensorArg(bias)},
                          {&lout})
                    .ok());
    ExpectValues(lout.view, {5, 4, 11, 10}, "linear");
    ASSERT_TRUE(RunKernel("aten::linear",
                          {TensorArg(x), TensorArg(w), NoneArg()}, {&lout})
                    .ok());
    ExpectValues(lout.view, kAB, "linear without bias");
  }
}

// Products of more than kBlockMultiplyAdds (2^26) multiply-adds go to BLAS in
// blocks, of columns when A is the smaller operand and of rows otherwise
// (host_kernels_linalg.cc, GemmBlas), with operands read as they are or
// transposed. Small integers keep every sum exact in f32, so the result is
// compared with the plain sum, computed here in int64.
TEST(HostKernelsTest, MmInBlocksOfColumnsAndOfRows) {
  struct Shape {
    int64_t m, n, k;
    bool a_transposed, b_transposed;
  };
  // 8 x 4096 x 2100 and 4096 x 8 x 2100: 68.8M multiply-adds, two blocks.
  for (const Shape& s :
       {Shape{8, 4096, 2100, false, true}, Shape{8, 4096, 2100, true, false},
        Shape{4096, 8, 2100, true, false}, Shape{4096, 8, 2100, false, true}}) {
    auto a_at = [](int64_t i, int64_t k) { return (i + 2 * k) % 3 - 1; };
    auto b_at = [](int64_t k, int64_t j) { return (k * j + k) % 5 - 2; };
    std::vector<double> a(s.m * s.k), b(s.k * s.n), expected(s.m * s.n, 0);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t k = 0; k < s.k; ++k) a[i * s.k + k] = a_at(i, k);
    for (int64_t k = 0; k < s.k; ++k)
      for (int64_t j = 0; j < s.n; ++j) b[k * s.n + j] = b_at(k, j);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        int64_t sum = 0;
        for (int64_t k = 0; k < s.k; ++k) sum += a_at(i, k) * b_at(k, j);
        expected[i * s.n + j] = static_cast<double>(sum);
      }
    // Transposed: stored column by column (BLAS "T").
    OwnedTensor at = s.a_transposed
                         ? MakeStrided(DType::kF32, {s.m, s.k}, {1, s.m}, 0, a)
                         : MakeTensor(DType::kF32, {s.m, s.k}, a);
    OwnedTensor bt = s.b_transposed
                         ? MakeStrided(DType::kF32, {s.k, s.n}, {1, s.k}, 0, b)
                         : MakeTensor(DType::kF32, {s.k, s.n}, b);
    OwnedTensor out = MakeOutput(DType::kF32, {s.m, s.n});
    ASSERT_TRUE(
        RunKernel("aten::mm", {TensorArg(at), TensorArg(bt)}, {&out}).ok());
    EXPECT_EQ(Values(out.view), expected)
        << s.m << "x" << s.n << "x" << s.k << (s.a_transposed ? " A^T" : "")
        << (s.b_transposed ? " B^T" : "");
  }
}

TEST(HostKernelsTest, AddmmWithBetaZeroIgnoresSelf) {
  OwnedTensor self = MakeTensor(DType::kF32, {2, 2}, {NAN, NAN, NAN, NAN});
  OwnedTensor a = MakeTensor(DType::kF32, {2, 3}, kA);
  OwnedTensor b = MakeTensor(DType::kF32, {3, 2}, kB);
  OwnedTensor out = MakeOutput(DType::kF32, {2, 2});
  ASSERT_TRUE(RunKernel("aten::addmm",
                        {TensorArg(self), TensorArg(a), TensorArg(b), IntArg(0),
                         FloatArg(0.5)},
                        {&out})
                  .ok());
  ExpectValues(out.view, {2, 2.5, 5, 5.5});
}

// --- Reductions and normalizations
// ----------------------------------------------------------

TEST(HostKernelsTest, SumMeanAmax) {
  for (DType dtype : FloatDTypes()) {
    OwnedTensor x = MakeTensor(dtype, {2, 3}, {1, 2, 3, 4, 5, 6});
    OwnedTensor rows = MakeOutput(dtype, {2});
    ASSERT_TRUE(
        RunKernel("aten::sum.dim_IntList",
                  {TensorArg(x), IntsArg({1}), BoolArg(false), NoneArg()},
                  {&rows})
            .ok());
    ExpectValues(rows.view, {6, 15}, "sum dim 1");
    OwnedTensor cols = MakeOutput(dtype, {1, 3});
    ASSERT_TRUE(
        RunKernel("aten::sum.dim_IntList",
                  {TensorArg(x), IntsArg({-2}), BoolArg(true), NoneArg()},
                  {&cols})
            .ok());
    ExpectValues(cols.view, {5, 7, 9}, "sum dim -2 keepdim");
    OwnedTensor all = MakeOutput(dtype, {});
    ASSERT_TRUE(RunKernel("aten::sum.dim_IntList",
                          {TensorArg(x), NoneArg(), BoolArg(false), NoneArg()},
                          {&all})
                    .ok());
    ExpectValues(all.view, {21}, "sum all");
    ASSERT_TRUE(
        RunKernel("aten::mean.dim",
                  {TensorArg(x), IntsArg({1}), BoolArg(false), NoneArg()},
                  {&rows})
            .ok());
    ExpectValues(rows.view, {2, 5}, "mean");
    ASSERT_TRUE(RunKernel("aten::amax",
                          {TensorArg(x), IntsArg({0}), BoolArg(true)}, {&cols})
                    .ok());
    ExpectValues(cols.view, {4, 5, 6}, "amax dim 0");
    ASSERT_TRUE(RunKernel("aten::amax",
                          {TensorArg(x), IntsArg({}), BoolArg(false)}, {&all})
                    .ok());
    ExpectValues(all.view, {6}, "amax all");
  }
}

TEST(HostKernelsTest, ReductionsOfIntegersBoolsStridedAndEmpty) {
  // sum of ints and bools accumulates in int64.
  OwnedTensor i = MakeTensor(DType::kI8, {4}, {100, 100, 100, -3});
  OwnedTensor s = MakeOutput(DType::kI64, {});
  ASSERT_TRUE(RunKernel("aten::sum.dim_IntList",
                        {TensorArg(i), NoneArg(), BoolArg(false), NoneArg()},
                        {&s})
                  .ok());
  ExpectValues(s.view, {297});
  OwnedTensor b = MakeTensor(DType::kBool, {3}, {1, 0, 1});
  ASSERT_TRUE(RunKernel("aten::sum.dim_IntList",
                        {TensorArg(b), IntsArg({0}), BoolArg(false), NoneArg()},
                        {&s})
                  .ok());
  ExpectValues(s.view, {2});
  OwnedTensor imax = MakeOutput(DType::kI8, {});
  ASSERT_TRUE(RunKernel("aten::amax",
                        {TensorArg(i), IntsArg({0}), BoolArg(false)}, {&imax})
                  .ok());
  ExpectValues(imax.view, {100});
  // mean of ints with a floating dtype output.
  OwnedTensor m = MakeOutput(DType::kF32, {});
  ASSERT_TRUE(RunKernel("aten::mean.dim",
                        {TensorArg(i), IntsArg({0}), BoolArg(false), NoneArg()},
                        {&m})
                  .ok());
  ExpectValues(m.view, {74.25});
  // A transposed input.
  OwnedTensor xt =
      MakeStrided(DType::kF32, {3, 2}, {1, 3}, 0, {1, 4, 2, 5, 3, 6});
  OwnedTensor r = MakeOutput(DType::kF32, {3});
  ASSERT_TRUE(
      RunKernel("aten::sum.dim_IntList",
                {TensorArg(xt), IntsArg({1}), BoolArg(false), NoneArg()}, {&r})
          .ok());
  ExpectValues(r.view, {5, 7, 9});
  // Empty reductions: sum is 0, mean NaN, amax an error.
  OwnedTensor e = MakeTensor(DType::kF32, {2, 0}, {});
  OwnedTensor e2 = MakeOutput(DType::kF32, {2});
  ASSERT_TRUE(RunKernel("aten::sum.dim_IntList",
                        {TensorArg(e), IntsArg({1}), BoolArg(false), NoneArg()},
                        {&e2})
                  .ok());
  ExpectValues(e2.view, {0, 0});
  ASSERT_TRUE(RunKernel("aten::mean.dim",
                        {TensorArg(e), IntsArg({1}), BoolArg(false), NoneArg()},
                        {&e2})
                  .ok());
  ExpectValues(e2.view, {NAN, NAN});
  EXPECT_FALSE(RunKernel("aten::amax",
                         {TensorArg(e), IntsArg({1}), BoolArg(false)}, {&e2})
                   .ok());
  // amax propagates NaN.
  OwnedTensor n = MakeTensor(DType::kF32, {3}, {1, NAN, 2});
  OwnedTensor nm = MakeOutput(DType::kF32, {});
  ASSERT_TRUE(RunKernel("aten::amax",
                        {TensorArg(n), IntsArg({0}), BoolArg(false)}, {&nm})
                  .ok());
  ExpectValues(nm.view, {NAN});
}

TEST(HostKernelsTest, Softmax) {
  for (DType dtype : FloatDTypes()) {
    OwnedTensor x = MakeTensor(dtype, {2, 3}, {0, 0, 0, 1, 2, 3});
    OwnedTensor out = MakeOutput(dtype, {2, 3});
    ASSERT_TRUE(RunKernel("aten::_softmax",
                          {TensorArg(x), IntArg(1), BoolArg(false)}, {&out})
                    .ok());
    const double e = std::exp(1.0), s = 1 + e + e * e;
    ExpectValues(out.view, {1.0 / 3, 1.0 / 3, 1.0 / 3, 1 / s, e / s, e * e / s},
                 "softmax");
  }
  // Along dim 0 of a strided input; half_to_float writes an f32 output.
  OwnedTensor x = MakeStrided(DType::kF16, {2, 2}, {1, 2}, 0, {0, 0, 1, 1});
  OwnedTensor out = MakeOutput(DType::kF32, {2, 2});
  ASSERT_TRUE(RunKernel("aten::_softmax",
                        {TensorArg(x), IntArg(0), BoolArg(true)}, {&out})
                  .ok());
  const double p = 1 / (1 + std::exp(1.0));
  ExpectValues(out.view, {p, p, 1 - p, 1 - p});
}

TEST(HostKernelsTest, NativeLayerNorm) {
  for (DType dtype : FloatDTypes()) {
    OwnedTensor x = MakeTensor(dtype, {2, 2}, {1, 3, 2, 2});
    OwnedTensor w = MakeTensor(dtype, {2}, {2, 1});
    OwnedTensor b = MakeTensor(dtype, {2}, {0, 1});
    OwnedTensor out = MakeOutput(dtype, {2, 2});
    OwnedTensor mean = MakeOutput(dtype, {2, 1});
    OwnedTensor rstd = MakeOutput(dtype, {2, 1});
    ASSERT_TRUE(RunKernel("aten::native_layer_norm",
                          {TensorArg(x), IntsArg({2}), TensorArg(w),
                           TensorArg(b), FloatArg(0)},
                          {&out, &mean, &rstd})
                    .ok());
    // row 0: mean 2, var 1 -> normalized [-1, 1] -> [-2, 2]; row 1: var 0
    // with eps 0 -> rstd inf, 0 * inf = NaN.
    std::vector<double> got = Values(out.view);
    EXPECT_NEAR(got[0], -2, 1e-2);
    EXPECT_NEAR(got[1], 2, 1e-2);
    ExpectValues(mean.view, {2, 2});
    EXPECT_NEAR(Values(rstd.view)[0], 1, 1e-2);
  }
  OwnedTensor x = MakeTensor(DType::kF64, {1, 2, 2}, {1, 2, 3, 4});
  OwnedTensor out = MakeOutput(DType::kF64, {1, 2, 2});
  OwnedTensor mean = MakeOutput(DType::kF64, {1, 1, 1});
  OwnedTensor rstd = MakeOutput(DType::kF64, {1, 1, 1});
  ASSERT_TRUE(RunKernel("aten::native_layer_norm",
                        {TensorArg(x), IntsArg({2, 2}), NoneArg(), NoneArg(),
                         FloatArg(1e-5)},
                        {&out, &mean, &rstd})
                  .ok());
  const double r = 1 / std::sqrt(1.25 + 1e-5);
  ExpectValues(out.view, {-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r});
  ExpectValues(mean.view, {2.5});
  ExpectValues(rstd.view, {r});
}

TEST(HostKernelsTest, Cat) {
  for (DType dtype : AllDTypes()) {
    OwnedTensor a = MakeTensor(dtype, {1, 2}, {1, 0});
    OwnedTensor b = MakeTensor(dtype, {2, 2}, {0, 1, 1, 1});
    OwnedTensor out = MakeOutput(dtype, {3, 2});
    ASSERT_TRUE(
        RunKernel("aten::cat", {ListArg({&a, &b}), IntArg(0)}, {&out}).ok());
    ExpectValues(out.view, {1, 0, 0, 1, 1, 1}, "cat dim 0");
  }
  // Along the last dim, with a strided input, a legacy empty [0] input and a
  // dtype conversion (i32 into f32).
  OwnedTensor a = MakeStrided(DType::kF32, {2, 2}, {1, 2}, 0, {1, 2, 3, 4});
  OwnedTensor empty = MakeTensor(DType::kF32, {0}, {});
  OwnedTensor c = MakeTensor(DType::kI32, {2, 1}, {5, 6});
  OwnedTensor out = MakeOutput(DType::kF32, {2, 3});
  ASSERT_TRUE(
      RunKernel("aten::cat", {ListArg({&a, &empty, &c}), IntArg(-1)}, {&out})
          .ok());
  ExpectValues(out.view, {1, 2, 5, 3, 4, 6});
  OwnedTensor wrong = MakeOutput(DType::kF32, {2, 4});
  EXPECT_FALSE(
      RunKernel("aten::cat", {ListArg({&a, &c}), IntArg(1)}, {&wrong}).ok());
}

TEST(HostKernelsTest, CopyStridedHostBroadcastsAndRefusesMismatches) {
  OwnedTensor dst = MakeOutput(DType::kF16, {2, 2});
  OwnedTensor src = MakeTensor(DType::kF64, {2}, {0.5, 1.5});
  ASSERT_TRUE(CopyStridedHost(dst.view, src.view).ok());
  ExpectValues(dst.view, {0.5, 1.5, 0.5, 1.5});
  OwnedTensor bad = MakeTensor(DType::kF64, {3}, {1, 2, 3});
  EXPECT_FALSE(CopyStridedHost(dst.view, bad.view).ok());
}

}  // namespace
}  // namespace ferry::testing
