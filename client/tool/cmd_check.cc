// ferry check FILE: validate a program and print its diagnostics.
#include <cstdio>

#include "client/tool/tool_common.h"
#include "passes/pipeline.h"
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
  for (const std::string& arg : args) {
    std::string value;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kCheckUsage, stdout);
      return kExitOk;
    } else if (ParseFlag(arg, "--format", &value)) {
      format = value;
    } else if (ParseFlag(arg, "--report", &value) ||
               ParseFlag(arg, "--diagnostics-format", &value)) {
      report = value;
    } else if (!arg.empty() && arg[0] == '-' && arg != "-") {
      std::fprintf(stderr, "ferry check: unknown option '%s'\n%s", arg.c_str(),
                   kCheckUsage);
      return kExitUsage;
    } else if (file.empty()) {
      file = arg;
    } else {
      std::fprintf(stderr, "ferry check: one FILE only\n%s", kCheckUsage);
      return kExitUsage;
    }
  }
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
