// Deterministic data: the generator's sequence, ranges per dtype, and
// independence from the storage layout.
#include "runtime/data_gen.h"

#include <set>

#include "gtest/gtest.h"
#include "runtime/element.h"
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
      double v = element::LoadAsDouble(static_cast<int>(dtype),
                                       bytes.data() + i * ElementSize(dtype));
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

}  // namespace
}  // namespace ferry::testing
