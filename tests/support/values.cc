#include "tests/support/values.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "runtime/verify.h"

namespace ferry::testing_util {

void ExpectAllClose(const std::vector<double>& actual,
                    const std::vector<double>& expected, DType dtype,
                    std::string_view device, std::string_view what) {
  ASSERT_EQ(actual.size(), expected.size()) << what << ": element count";
  const Tolerance tolerance = ToleranceFor(dtype, device);
  int64_t bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (WithinTolerance(actual[i], expected[i], tolerance)) continue;
    if (bad++ < 3)
      ADD_FAILURE() << what << " " << DTypeName(dtype) << " [" << i
                    << "]: expected " << expected[i] << ", got " << actual[i]
                    << " (atol " << tolerance.atol << ", rtol "
                    << tolerance.rtol << " on " << device << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << actual.size()
                    << " elements differ";
}

}  // namespace ferry::testing_util
