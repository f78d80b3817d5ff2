// ferry fmt FILE: the canonical text form of a Program or LowerRequest.
#include <cstdio>

#include "client/tool/command_flags.h"
#include "client/tool/tool_common.h"

namespace ferry::tool {

int RunFmt(const Args& args) {
  static constexpr char kUsage[] =
      "usage: ferry fmt [--format=text|binary|json] FILE\n"
      "Prints FILE's canonical text form on stdout.\n";
  std::string file, format;
  CommandFlags flags("fmt", kUsage);
  flags.AddFile(file);
  flags.app().add_option("--format", format);
  if (std::optional<int> exit = flags.Parse(args)) return *exit;
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
