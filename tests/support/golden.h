// Golden files: expected outputs checked in next to a test's inputs.
// FERRY_UPDATE_GOLDENS=1 makes every golden test rewrite its files from the
// current output instead of comparing (then review the diff with git).
#ifndef FERRY_TESTS_SUPPORT_GOLDEN_H_
#define FERRY_TESTS_SUPPORT_GOLDEN_H_

#include <filesystem>
#include <string>

namespace ferry::testing_util {

// Whether FERRY_UPDATE_GOLDENS=1 is set.
bool UpdatingGoldens();

// Compares `actual` with the file at `golden`; a difference fails the test
// with a line diff. When updating, writes `actual` there instead.
void ExpectMatchesGolden(const std::filesystem::path& golden,
                         const std::string& actual);

}  // namespace ferry::testing_util

#endif  // FERRY_TESTS_SUPPORT_GOLDEN_H_
