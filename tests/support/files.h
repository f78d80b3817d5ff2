// Whole files for tests: inputs, goldens, logs of child processes.
#ifndef FERRY_TESTS_SUPPORT_FILES_H_
#define FERRY_TESTS_SUPPORT_FILES_H_

#include <filesystem>
#include <string>

namespace ferry::testing_util {

// The bytes of `path`; empty when it cannot be read (a log a child process
// never wrote reads as empty: callers assert on the contents).
std::string ReadFile(const std::filesystem::path& path);
// Replaces `path` with `bytes`; false when it cannot be written.
bool WriteFile(const std::filesystem::path& path, const std::string& bytes);

}  // namespace ferry::testing_util

#endif  // FERRY_TESTS_SUPPORT_FILES_H_
