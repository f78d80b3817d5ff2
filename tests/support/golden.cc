#include "tests/support/golden.h"

#include <cstdlib>

#include "gtest/gtest.h"
#include "tests/support/files.h"

namespace ferry::testing_util {

bool UpdatingGoldens() {
  const char* env = std::getenv("FERRY_UPDATE_GOLDENS");
  return env != nullptr && std::string(env) == "1";
}

void ExpectMatchesGolden(const std::filesystem::path& golden,
                         const std::string& actual) {
  if (UpdatingGoldens()) {
    EXPECT_TRUE(WriteFile(golden, actual)) << "cannot write " << golden;
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(golden))
      << "missing " << golden << " (FERRY_UPDATE_GOLDENS=1 writes it)";
  // gtest prints a line diff of two multi-line strings.
  EXPECT_EQ(ReadFile(golden), actual)
      << golden.string()
      << " differs (\"-\" expected, \"+\" actual); if the change is intended, "
         "rerun with FERRY_UPDATE_GOLDENS=1 and review the diff";
}

}  // namespace ferry::testing_util
