// Deterministic data: the generator's sequence, ranges per dtype, and
// independence from the storage layout.
#include "runtime/data_gen.h"

#include <set>

#include "gtest/gtest.h"
#include "passes/resource_limits.h"
#include "runtime/element.h"
#include "runtime/verify.h"
#include "tests/runtime/test_util.h"

namespace ferry::testing {
namespace {

TEST(DataGenTest, SplitMix64MatchesTheReferenceSequence) {
  // splitmix64 seeded with 0 (Vigna's reference implementation).
  EXPECT_EQ(SplitMix64At(0, 0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(SplitMix64At(0, 1), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(SplitMix64At(0, 2), 0x06c45d188009454full);
}

TEST(DataGenTest, ValuesStayInTheirRangeAndAreExact) {
  for (DType dtype : AllDTypes()) {
    TensorSpec spec;
    spec.dtype = dtype;
    spec.sizes = {256};
    std::vector<std::byte> bytes(256 * ElementSize(dtype));
    GenerateTensorData(spec, 5, bytes.data());
    std::set<double> distinct;
    for (int i = 0; i < 256; ++i) {
      double v =
          element::LoadAsDouble(dtype, bytes.data() + i * ElementSize(dtype));
      distinct.insert(v);
      if (IsFloatingPoint(dtype)) {
        EXPECT_GE(v, -1) << DTypeName(dtype);
        EXPECT_LT(v, 1) << DTypeName(dtype);
      } else if (dtype == DType::kU8) {
        EXPECT_GE(v, 0);
        EXPECT_LT(v, 16);
      } else if (dtype == DType::kBool) {
        EXPECT_TRUE(v == 0 || v == 1);
      } else {
        EXPECT_GE(v, -8) << DTypeName(dtype);
        EXPECT_LT(v, 8) << DTypeName(dtype);
      }
    }
    EXPECT_GT(distinct.size(), 1u) << DTypeName(dtype);
  }
}

TEST(DataGenTest, LayoutDoesNotChangeTheLogicalValues) {
  TensorSpec dense;
  dense.dtype = DType::kF32;
  dense.sizes = {3, 4};
  TensorSpec strided = dense;
  strided.strides = {1, 5};
  strided.storage_offset = 2;
  std::vector<std::byte> a(*dense.StorageBytes()), b(*strided.StorageBytes());
  GenerateTensorData(dense, 9, a.data());
  GenerateTensorData(strided, 9, b.data());
  EXPECT_EQ(Values(MakeView(a.data(), dense)),
            Values(MakeView(b.data(), strided)));
}

TEST(DataGenTest, ConstantSeedsUnderAVerificationSeed) {
  EXPECT_EQ(ConstantDataSeed(0, 42), 42u);
  EXPECT_NE(ConstantDataSeed(1, 42), 42u);
  EXPECT_NE(ConstantDataSeed(1, 42), ConstantDataSeed(2, 42));
}

TEST(DataGenTest, UserInputSeedsDiffer) {
  EXPECT_NE(UserInputSeed(0, "forward", 0), UserInputSeed(0, "forward", 1));
  EXPECT_NE(UserInputSeed(0, "forward", 0), UserInputSeed(0, "backward", 0));
  EXPECT_NE(UserInputSeed(0, "forward", 0), UserInputSeed(1, "forward", 0));
  EXPECT_EQ(UserInputSeed(3, "forward", 2), UserInputSeed(3, "forward", 2));
}

// Generated inputs are counted before they are generated: the first of
// these took 17 s and then aborted on std::bad_alloc, the second zero-filled
// 16 GiB, the third was attempted.
TEST(DataGenTest, GeneratedInputsOverTheLimitsAreRefusedBeforeAllocation) {
  for (const char* spec : {"dtype: F32 sizes: 20000 sizes: 20000",
                           "dtype: F32 sizes: 4 storage_offset: 4294967296",
                           "dtype: F32 sizes: 100000 sizes: 100000"}) {
    Program program = ParseProgram(
        std::string("methods { name: \"forward\" nodes { name: \"x\" input { "
                    "kind: USER_INPUT } tensor { ") +
        spec +
        " } } nodes { name: \"output\" output { values { value: \"x\" } } } "
        "}");
    VerifyOptions options;
    options.device = VerifyDevice::kSim;
    absl::StatusOr<VerifyReport> report =
        VerifyPrograms(program, program, options);
    ASSERT_EQ(report.status().code(), absl::StatusCode::kResourceExhausted)
        << spec;
    std::optional<ResourceViolation> violation =
        GetResourceViolation(report.status());
    ASSERT_TRUE(violation.has_value()) << spec;
    EXPECT_EQ(violation->limit, "max_tensor_bytes");
    EXPECT_EQ(violation->subject, "program.methods['forward'].nodes['x']");
  }
}

TEST(DataGenTest, EverythingVerificationAllocatesIsCountedTogether) {
  Program program = ParseProgram(
      "methods { name: \"forward\" nodes { name: \"x\" input { kind: "
      "USER_INPUT } tensor { dtype: F32 sizes: 256 sizes: 256 } } nodes { "
      "name: \"output\" output { values { value: \"x\" } } } }");
  // 256 KiB generated, stored by each run, returned by each run: 5 copies.
  absl::StatusOr<int64_t> bytes =
      VerifyBytes(program, program, 0, ResourceLimits{});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, 5 * 256 * 256 * 4);
  VerifyOptions options;
  options.device = VerifyDevice::kSim;
  options.limits.max_verify_bytes = *bytes - 1;
  absl::StatusOr<VerifyReport> report =
      VerifyPrograms(program, program, options);
  std::optional<ResourceViolation> violation =
      GetResourceViolation(report.status());
  ASSERT_TRUE(violation.has_value()) << report.status();
  EXPECT_EQ(violation->limit, "max_verify_bytes");
  options.limits.max_verify_bytes = *bytes;
  report = VerifyPrograms(program, program, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok);
}

}  // namespace
}  // namespace ferry::testing
