// SHA-256 (OpenSSL) for request digests.
#ifndef FERRY_SERVER_DIGEST_H_
#define FERRY_SERVER_DIGEST_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ferry {

// Lowercase hex SHA-256 of the concatenation of `parts`, each preceded by
// its length, so ("ab","c") and ("a","bc") differ.
std::string Sha256Hex(const std::vector<absl::string_view>& parts);

}  // namespace ferry

#endif  // FERRY_SERVER_DIGEST_H_
