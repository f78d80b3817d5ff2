// Cancellation inside long runtime work (runtime/cancel.h): the token's
// reasons, host kernels giving up part-way, the executor and verification
// stopping with CANCELLED, and the f16/bf16 matrix products that go through
// OpenBLAS.
#include "runtime/cancel.h"

#include <gtest/gtest.h>

#include <chrono>

#include "runtime/data_gen.h"
#include "runtime/executor.h"
#include "runtime/verify.h"
#include "tests/runtime/test_util.h"

namespace ferry::testing {
namespace {

using Clock = std::chrono::steady_clock;

TEST(CancelTokenTest, ReasonsAndTheirOrder) {
  CancelToken drain;
  CancelToken call(&drain);
  EXPECT_EQ(call.Reason(), StopReason::kNone);
  call.SetDeadline(Clock::now() + std::chrono::hours(1));
  EXPECT_FALSE(call.StopRequested());
  drain.Cancel(StopReason::kDraining);
  EXPECT_EQ(call.Reason(), StopReason::kDraining);  // from the parent
  call.SetDeadline(Clock::now() - std::chrono::milliseconds(1));
  EXPECT_EQ(call.Reason(), StopReason::kDeadlineExceeded);
  call.Cancel(StopReason::kCancelled);
  call.Cancel(StopReason::kDraining);  // the first reason is kept
  EXPECT_EQ(call.Reason(), StopReason::kCancelled);
  EXPECT_EQ(drain.Reason(), StopReason::kDraining);
}

TEST(CancelTokenTest, ScopesNestAndCheckStopNamesTheReason) {
  EXPECT_EQ(CurrentCancelToken(), nullptr);
  EXPECT_TRUE(CheckStop("x: ").ok());
  CancelToken outer;
  CancelToken inner;
  inner.Cancel(StopReason::kCancelled);
  {
    CancelScope a(&outer);
    EXPECT_FALSE(StopRequested());
    {
      CancelScope b(&inner);
      EXPECT_TRUE(StopRequested());
      absl::Status stop = CheckStop("node 'z': ");
      EXPECT_EQ(stop.code(), absl::StatusCode::kCancelled);
      EXPECT_EQ(stop.message(), "node 'z': stopped (cancelled)");
    }
    EXPECT_EQ(CurrentCancelToken(), &outer);
    EXPECT_FALSE(StopRequested());
  }
  EXPECT_EQ(CurrentCancelToken(), nullptr);
}

std::vector<double> Ones(int64_t n) { return std::vector<double>(n, 1.0); }

// With a token that says stop, a kernel gives up before it has written its
// whole output (it would take seconds to finish: an integer product
// accumulates without BLAS).
TEST(KernelCancelTest, IntegerMatmulGivesUpPartWay) {
  constexpr int64_t n = 512;
  OwnedTensor a = MakeTensor(DType::kI64, {n, n}, Ones(n * n));
  OwnedTensor b = MakeTensor(DType::kI64, {n, n}, Ones(n * n));
  OwnedTensor out = MakeOutput(DType::kI64, {n, n});
  CancelToken token;
  token.Cancel(StopReason::kDeadlineExceeded);
  {
    CancelScope scope(&token);
    (void)RunKernel("aten::mm", {TensorArg(a), TensorArg(b)}, {&out});
  }
  std::vector<double> values = Values(out.view);
  EXPECT_EQ(values.back(), 0) << "the last row was computed";
  // Without a token the same kernel computes everything.
  OwnedTensor small_a = MakeTensor(DType::kI64, {8, 8}, Ones(64));
  OwnedTensor small_out = MakeOutput(DType::kI64, {8, 8});
  ASSERT_TRUE(RunKernel("aten::mm", {TensorArg(small_a), TensorArg(small_a)},
                        {&small_out})
                  .ok());
  EXPECT_EQ(Values(small_out.view).back(), 8);
}

TEST(KernelCancelTest, ElementwiseLoopsGiveUpPartWay) {
  constexpr int64_t n = int64_t{1} << 20;
  OwnedTensor a = MakeTensor(DType::kF32, {n}, Ones(n));
  OwnedTensor out = MakeOutput(DType::kF32, {n});
  CancelToken token;
  token.Cancel(StopReason::kCancelled);
  {
    CancelScope scope(&token);
    (void)RunKernel("aten::add.Tensor", {TensorArg(a), TensorArg(a), IntArg(1)},
                    {&out});
  }
  EXPECT_EQ(Values(out.view).back(), 0) << "the whole loop ran";
}

// The im2col + BLAS convolution checks the token between im2col rows and
// BLAS products: a cancelled batch stops before its last item is computed,
// and the same call without a token computes every item (each output is
// 2 * 3 * 3 = 18, the sum of a 3x3 window over two channels of ones).
TEST(KernelCancelTest, ConvolutionGivesUpBetweenBlasProducts) {
  constexpr int64_t n = 6, c = 2, hw = 64;
  OwnedTensor in =
      MakeTensor(DType::kF32, {n, c, hw, hw}, Ones(n * c * hw * hw));
  OwnedTensor w = MakeTensor(DType::kF32, {4, c, 3, 3}, Ones(4 * c * 9));
  auto convolve = [&](OwnedTensor& out) {
    return RunKernel("aten::convolution",
                     {TensorArg(in), TensorArg(w), NoneArg(), IntsArg({1, 1}),
                      IntsArg({0, 0}), IntsArg({1, 1}), BoolArg(false),
                      IntsArg({0, 0}), IntArg(1)},
                     {&out});
  };
  OwnedTensor stopped = MakeOutput(DType::kF32, {n, 4, hw - 2, hw - 2});
  CancelToken token;
  token.Cancel(StopReason::kCancelled);
  {
    CancelScope scope(&token);
    (void)convolve(stopped);
  }
  EXPECT_EQ(Values(stopped.view).back(), 0) << "the last item was computed";
  OwnedTensor full = MakeOutput(DType::kF32, {n, 4, hw - 2, hw - 2});
  ASSERT_TRUE(convolve(full).ok());
  EXPECT_EQ(Values(full.view).front(), 18);
  EXPECT_EQ(Values(full.view).back(), 18);
}

// Generated data (inputs, constants without data) stops with the token: a
// fuzzed program with a 16 MiB input held verification past its deadline.
TEST(KernelCancelTest, DataGenerationGivesUpPartWay) {
  TensorSpec spec;
  spec.dtype = DType::kI64;
  spec.sizes = {int64_t{1} << 20};
  std::vector<int64_t> data(spec.sizes[0], 0);
  auto* bytes = reinterpret_cast<std::byte*>(data.data());
  CancelToken token;
  token.Cancel(StopReason::kDeadlineExceeded);
  {
    CancelScope scope(&token);
    EXPECT_FALSE(GenerateTensorData(spec, 3, bytes));
  }
  EXPECT_EQ(data.back(), 0) << "the whole tensor was generated";
  EXPECT_TRUE(GenerateTensorData(spec, 3, bytes));  // no token: all of it
  int64_t nonzero = 0;
  for (int64_t v : data) nonzero += v != 0;
  EXPECT_GT(nonzero, spec.sizes[0] / 2);
}

Program MatmulProgram(const std::string& dtype, int64_t n) {
  std::string spec = "tensor { dtype: " + dtype + " sizes: [ " +
                     std::to_string(n) + ", " + std::to_string(n) + " ] }";
  return ParseProgram(
      "methods { name: \"forward\" "
      "nodes { name: \"x\" input { kind: USER_INPUT } " +
      spec +
      " } "
      "nodes { name: \"y\" input { kind: USER_INPUT } " +
      spec +
      " } "
      "nodes { name: \"z\" call { op: \"aten::mm\" args { value: \"x\" } "
      "args { value: \"y\" } } " +
      spec +
      " } "
      "nodes { name: \"output\" output { values { value: \"z\" } } } }");
}

TEST(ExecutorCancelTest, RunStopsWithCancelledInsideAStep) {
  Program program = MatmulProgram("I64", 512);
  absl::StatusOr<std::unique_ptr<Executor>> executor =
      Executor::Load(program, ExecutionMode::kEager);
  ASSERT_TRUE(executor.ok()) << executor.status();
  std::vector<HostTensor> inputs =
      GenerateUserInputs(program.methods[0], /*seed=*/1);
  // The deadline passes while the product runs: no check between nodes
  // happens until it is done, so only the kernel's own checks can stop it.
  CancelToken token;
  token.SetDeadline(Clock::now() + std::chrono::milliseconds(20));
  CancelScope scope(&token);
  absl::StatusOr<std::vector<HostTensor>> outputs =
      (*executor)->Run("forward", inputs);
  EXPECT_EQ(outputs.status().code(), absl::StatusCode::kCancelled)
      << outputs.status();
  EXPECT_EQ(token.Reason(), StopReason::kDeadlineExceeded);
}

TEST(VerifyCancelTest, VerificationStopsWithCancelled) {
  Program program = MatmulProgram("I64", 512);
  CancelToken token;
  token.SetDeadline(Clock::now() + std::chrono::milliseconds(20));
  VerifyOptions options;
  options.device = VerifyDevice::kSim;
  options.cancel = &token;
  absl::StatusOr<VerifyReport> report =
      VerifyPrograms(program, program, options);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kCancelled)
      << (report.ok() ? report->Summary() : report.status().ToString());
}

// f16 and bf16 products go through cblas_sgemm; small integers keep every
// product and sum exact, so the result is exactly the integer product.
TEST(HalfMatmulTest, ThroughSingleGemmIsExactOnSmallIntegers) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    constexpr int64_t m = 33, k = 17, n = 9;
    std::vector<double> av(m * k), bv(k * n);
    for (int64_t i = 0; i < m * k; ++i) av[i] = (i % 3) - 1;
    for (int64_t i = 0; i < k * n; ++i) bv[i] = (i % 5) % 3 - 1;
    // b stored column-major: BLAS reads it transposed.
    OwnedTensor a = MakeTensor(dtype, {m, k}, av);
    OwnedTensor b = MakeStrided(dtype, {k, n}, {1, k}, 0, bv);
    OwnedTensor out = MakeOutput(dtype, {m, n});
    ASSERT_TRUE(
        RunKernel("aten::mm", {TensorArg(a), TensorArg(b)}, {&out}).ok());
    std::vector<double> got = Values(out.view);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double expected = 0;
        for (int64_t p = 0; p < k; ++p)
          expected += av[i * k + p] * bv[p * n + j];
        ASSERT_EQ(got[i * n + j], expected)
            << DTypeName(dtype) << " [" << i << "," << j << "]";
      }
    }
    // addmm with beta and alpha on the same path.
    OwnedTensor bias = MakeTensor(dtype, {n}, Ones(n));
    OwnedTensor out2 = MakeOutput(dtype, {m, n});
    ASSERT_TRUE(RunKernel("aten::addmm",
                          {TensorArg(bias), TensorArg(a), TensorArg(b),
                           IntArg(2), IntArg(3)},
                          {&out2})
                    .ok());
    std::vector<double> got2 = Values(out2.view);
    for (int64_t i = 0; i < m * n; ++i) {
      ASSERT_EQ(got2[i], 2 + 3 * got[i]) << DTypeName(dtype) << " " << i;
    }
  }
}

}  // namespace
}  // namespace ferry::testing
