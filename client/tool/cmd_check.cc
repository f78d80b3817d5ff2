// ferry check FILE: validate a program and print its diagnostics.
#include <cstdio>

#include "client/tool/command_flags.h"
#include "client/tool/tool_common.h"
#include "passes/options.h"
#include "passes/report_io.h"
#include "passes/validate.h"

namespace ferry::tool {
namespace {

constexpr char kCheckUsage[] =
    "usage: ferry check [--format=text|binary|json] [--report=text|json] "
    "FILE\n"
    "Validates FILE (a Program or LowerRequest). --report=json prints\n"
    "{ok, diagnostics} (a ferry.v1.CheckReport) on one line;\n"
    "--diagnostics-format is a deprecated spelling of --report.\n"
    "Exit 0 when clean or warnings only, 1 on errors, 2 on usage or\n"
    "unreadable input.\n";

}  // namespace

int RunCheck(const Args& args) {
  std::string file, format, report = "text";
  CommandFlags flags("check", kCheckUsage);
  flags.AddFile(file);
  flags.app().add_option("--format", format);
  // --diagnostics-format is the deprecated spelling of --report.
  flags.app().add_option("--report,--diagnostics-format", report);
  if (std::optional<int> exit = flags.Parse(args)) return *exit;
  if (file.empty() || (report != "text" && report != "json")) {
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
  AttachNodeSources(request.program(), diagnostics);
  if (report == "json") {
    v1::CheckReport check;
    check.set_ok(!diagnostics.HasErrors());
    DiagnosticsToProto(diagnostics, check.mutable_diagnostics());
    std::printf("%s\n", ReportJson(check).c_str());
  } else {
    std::fputs(FormatDiagnosticsText(diagnostics, file).c_str(), stdout);
    if (diagnostics.empty()) std::printf("%s: ok\n", file.c_str());
  }
  return diagnostics.HasErrors() ? kExitErrors : kExitOk;
}

}  // namespace ferry::tool
