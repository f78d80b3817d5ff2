// Debian's Abseil is built with its own absl::string_view
// (ABSL_OPTION_USE_STD_STRING_VIEW 0), which std::string_view does not
// convert to implicitly. AsAbsl bridges the two for StrCat and friends.
#ifndef FERRY_RUNTIME_ABSL_COMPAT_H_
#define FERRY_RUNTIME_ABSL_COMPAT_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace ferry {

inline absl::string_view AsAbsl(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}

}  // namespace ferry

#endif  // FERRY_RUNTIME_ABSL_COMPAT_H_
