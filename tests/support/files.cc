#include "tests/support/files.h"

#include <fstream>
#include <sstream>

namespace ferry::testing_util {

// TODO(integration): forward to the product's one ReadFile once it lands
// (issue 10, "one ReadFile"); tests keep calling this one.
std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

bool WriteFile(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  return static_cast<bool>(out);
}

}  // namespace ferry::testing_util
