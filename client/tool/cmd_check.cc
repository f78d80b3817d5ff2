// ferry check FILE: validate a program and print its diagnostics.
#include <cstdio>

#include "client/tool/command_flags.h"
#include "client/tool/tool_common.h"
#include "passes/options.h"
#include "passes/validate.h"

namespace ferry::tool {
namespace {

constexpr char kCheckUsage[] =
    "usage: ferry check [--format=text|binary|json] "
    "[--diagnostics-format=text|json] FILE\n"
    "Validates FILE (a Program or LowerRequest). Exit 0 when clean or\n"
    "warnings only, 1 on errors, 2 on usage or unreadable input.\n";

}  // namespace

int RunCheck(const Args& args) {
  std::string file, format, diagnostics_format = "text";
  CommandFlags flags("check", kCheckUsage);
  flags.AddFile(file);
  flags.app().add_option("--format", format);
  flags.app().add_option("--diagnostics-format", diagnostics_format);
  if (std::optional<int> exit = flags.Parse(args)) return *exit;
  if (file.empty() ||
      (diagnostics_format != "text" && diagnostics_format != "json")) {
    std::fputs(kCheckUsage, stderr);
    return kExitUsage;
  }
  v1::LowerRequest request;
  bool bare = false;
  if (!LoadRequest(file, format, &request, &bare)) return kExitUsage;
  Diagnostics diagnostics;
  Program program = ImportProgram(request.program(), diagnostics);
  if (!diagnostics.HasErrors()) {
    ResolveOptions(request.options(), program, diagnostics);
    ValidateProgram(program, diagnostics);
  }
  if (diagnostics_format == "json") {
    std::printf("%s\n", FormatDiagnosticsJson(diagnostics).c_str());
  } else {
    std::fputs(FormatDiagnosticsText(diagnostics, file).c_str(), stdout);
    if (diagnostics.empty()) std::printf("%s: ok\n", file.c_str());
  }
  return diagnostics.HasErrors() ? kExitErrors : kExitOk;
}

}  // namespace ferry::tool
