// ferry lower FILE: run the lowering pipeline.
#include <cstdio>

#include "client/tool/graph_output.h"
#include "client/tool/progress.h"
#include "client/tool/remote.h"
#include "client/tool/shared_options.h"
#include "client/tool/status_report.h"
#include "client/tool/tool_common.h"
#include "passes/pipeline.h"
#include "passes/report_io.h"
#include "passes/wire_writer.h"
#include "runtime/ops/backend_ops.h"

namespace ferry::tool {
namespace {

std::string LowerUsage() {
  return "usage: ferry lower [-o OUT] [--report=text|json] [--timings] "
         "[--format=text|binary|json] [--graph=OUT.svg] [lowering options] "
         "FILE\n"
         "Lowers FILE (a LowerRequest, or a bare Program with default "
         "options).\n"
         "The lowered program goes to stdout (text) or to OUT (format by\n"
         "extension). --report=json prints {ok, diagnostics, stats} (a\n"
         "ferry.v1.LowerReport) on one line on stdout and writes the program "
         "only to\nOUT; the text report goes to stderr. --timings adds the "
         "time of every pass\n(stats.passes; without it the report is the "
         "same on every run, in-process\nor --server).\n"
         "Exit 0 when it lowers (warnings allowed), 1 on errors, 2 on usage "
         "or\nunreadable input; 'ferry --help' has every code.\n\n" +
         ProgressFlagHelp() + LoweringFlagsHelp() + "\n" + GraphFlagsHelp() +
         "\n" + RemoteFlagsHelp();
}

}  // namespace

int RunLower(const Args& args) {
  SharedOptions shared;
  std::string& file = shared.file;
  std::string& format = shared.format;
  std::string& report = shared.report;
  v1::LowerOptions& overrides = shared.overrides;
  RemoteOptions& remote = shared.remote;
  std::string out, progress_mode = "auto";
  GraphFlags graph;
  bool timings = false;
  CommandFlags flags("lower", LowerUsage());
  flags.app().add_option("-o,--output", out);
  flags.app().add_flag("--timings", timings);
  AddProgressFlag(flags.app(), progress_mode);
  AddSharedOptions(flags, shared);
  AddGraphFlags(flags.app(), graph);
  if (std::optional<int> exit = flags.Parse(args)) return *exit;
  if (file.empty() || (report != "text" && report != "json")) {
    std::fputs(LowerUsage().c_str(), stderr);
    return kExitUsage;
  }
  v1::LowerRequest request;
  bool bare = false;
  if (!LoadRequest(file, format, &request, &bare)) return kExitUsage;
  request.mutable_options()->MergeFrom(overrides);
  ProgressPrinter progress("lower", progress_mode);
  if (remote.enabled())
    return RemoteLower(remote, request, file, out, report, timings, graph,
                       progress);

  absl::StatusOr<LowerResult> result = Lower(
      request, {}, {}, DeclaredBackendOperators(), {}, {}, progress.Stages());
  if (!result.ok()) return ReportStatus("lower", file, result.status());
  if (result->ok && !out.empty() &&
      FormatFromPath(out) == FileFormat::kBinary) {
    // The binary form straight from the IR, as ferryd writes it.
    std::string bytes;
    if (absl::Status written = AppendProgramWire(result->program, bytes);
        !written.ok())
      return ReportStatus("lower", file, written);
    if (!WriteOutput(out, bytes)) return kExitUsage;
  } else if (result->ok) {
    v1::Program lowered;
    ExportProgram(result->program, &lowered);
    if (!out.empty()) {
      FileFormat f = FormatFromPath(out);
      if (!WriteOutput(out, SerializeProgram(lowered, f))) return kExitUsage;
    } else if (report == "text") {
      if (!WriteOutput("-", ToText(lowered))) return kExitUsage;
    }
  }
  PrintLowerReport(LowerReportToProto(*result), file, report, timings);
  if (!result->ok) return kExitErrors;
  return graph.enabled() ? WriteGraph("lower", graph, result->program)
                         : kExitOk;
}

}  // namespace ferry::tool
