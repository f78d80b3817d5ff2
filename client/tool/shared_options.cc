#include "client/tool/shared_options.h"

#include <cstdio>

namespace ferry::tool {

Parsed ParseSharedOption(const Args& args, size_t* i, std::string_view command,
                         const std::string& usage, SharedOptions* options) {
  const std::string& arg = args[*i];
  const std::string name(command);
  std::string value, error;
  if (ParseFlag(arg, "--format", &value)) {
    options->format = value;
  } else if (ParseFlag(arg, "--report", &value)) {
    options->report = value;
  } else if (ParseRemoteFlag(args, i, &options->remote, &error) ||
             ApplyLoweringFlag(arg, &options->overrides, &error)) {
    if (!error.empty()) {
      std::fprintf(stderr, "ferry %s: %s\n", name.c_str(), error.c_str());
      return Parsed::kUsageError;
    }
  } else if (!arg.empty() && arg[0] == '-') {
    std::fprintf(stderr, "ferry %s: unknown option '%s'\n\n%s", name.c_str(),
                 arg.c_str(), usage.c_str());
    return Parsed::kUsageError;
  } else if (options->file.empty()) {
    options->file = arg;
  } else {
    std::fprintf(stderr, "ferry %s: one FILE only\n", name.c_str());
    return Parsed::kUsageError;
  }
  return Parsed::kTaken;
}

}  // namespace ferry::tool
