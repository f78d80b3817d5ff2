// ferry fmt FILE: the canonical text form of a Program or LowerRequest.
#include <cstdio>

#include "client/tool/tool_common.h"

namespace ferry::tool {

int RunFmt(const Args& args) {
  static constexpr char kUsage[] =
      "usage: ferry fmt [--format=text|binary|json] FILE\n"
      "Prints FILE's canonical text form on stdout.\n";
  std::string file, format;
  for (const std::string& arg : args) {
    std::string value;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return kExitOk;
    } else if (ParseFlag(arg, "--format", &value)) {
      format = value;
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "ferry fmt: unknown option '%s'\n%s", arg.c_str(),
                   kUsage);
      return kExitUsage;
    } else if (file.empty()) {
      file = arg;
    } else {
      std::fputs(kUsage, stderr);
      return kExitUsage;
    }
  }
  if (file.empty()) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  v1::LowerRequest request;
  bool bare = false;
  if (!LoadRequest(file, format, &request, &bare)) return kExitUsage;
  std::string text = bare ? ToText(request.program()) : ToText(request);
  return WriteOutput("-", text) ? kExitOk : kExitUsage;
}

}  // namespace ferry::tool
