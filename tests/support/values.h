// Computed values against expected ones, with the tolerances verification
// uses (runtime/verify.h: ToleranceFor, WithinTolerance), so that a test is
// never stricter or looser than `ferry verify` for the same dtype and device.
#ifndef FERRY_TESTS_SUPPORT_VALUES_H_
#define FERRY_TESTS_SUPPORT_VALUES_H_

#include <string_view>
#include <vector>

#include "passes/ir.h"

namespace ferry::testing_util {

// Fails the current test for each element of `actual` not within the
// tolerances of `dtype` on `device` ("sim" or "cuda") of `expected` (the
// first few are named), and when the counts differ.
void ExpectAllClose(const std::vector<double>& actual,
                    const std::vector<double>& expected, DType dtype,
                    std::string_view device, std::string_view what = "");

}  // namespace ferry::testing_util

#endif  // FERRY_TESTS_SUPPORT_VALUES_H_
