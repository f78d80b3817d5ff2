#include "tests/support/files.h"

#include <fstream>

#include "ferry/file.h"

namespace ferry::testing_util {

// The product's ReadFile (proto/ferry/file.h), with a test's policy for
// failure: empty bytes, which the caller's assertion reports.
std::string ReadFile(const std::filesystem::path& path) {
  return ferry::ReadFile(path.string()).value_or("");
}

bool WriteFile(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  return static_cast<bool>(out);
}

}  // namespace ferry::testing_util
