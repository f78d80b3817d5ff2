#include "ferry/file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

std::string Failure(const std::string& path, absl::string_view what,
                    int error) {
  return absl::StrCat("cannot read ", what, what.empty() ? "" : " ", "'", path,
                      "': ", std::strerror(error));
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     absl::string_view what) {
  std::unique_ptr<std::FILE, decltype(&std::fclose)> file(
      std::fopen(path.c_str(), "rb"), &std::fclose);
  if (file == nullptr) return absl::NotFoundError(Failure(path, what, errno));
  std::string bytes;
  char buffer[1 << 16];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) {
    bytes.append(buffer, got);
  }
  if (std::ferror(file.get())) {
    return absl::DataLossError(Failure(path, what, errno));
  }
  return bytes;
}

}  // namespace ferry
