// ferry show FILE: what a lowered program does where: methods, nodes per
// device, delegates, copies and their bytes, the memory plan; with --graph,
// the placement picture.
#include <cstdio>

#include "client/tool/command_flags.h"
#include "client/tool/graph_output.h"
#include "client/tool/tool_common.h"
#include "passes/diagnostics.h"

namespace ferry::tool {

int RunShow(const Args& args) {
  const std::string usage =
      "usage: ferry show [--format=text|binary|json] [--graph=OUT] "
      "[--graph-summary] FILE\n"
      "Prints a summary of FILE, a lowered Program (`ferry lower -o`), or a\n"
      "LowerRequest holding one: per method the nodes per device, the\n"
      "delegates, the copies per call with their bytes, the fresh copies host\n"
      "writes forced, and the memory plan per device.\n"
      "Exit 0, 1 when the program does not import, 2 on usage, unreadable\n"
      "input or a picture that cannot be drawn.\n\n" +
      GraphFlagsHelp();
  std::string file, format;
  GraphFlags graph;
  CommandFlags flags("show", usage);
  flags.AddFile(file);
  flags.app().add_option("--format", format);
  AddGraphFlags(flags.app(), graph);
  if (std::optional<int> exit = flags.Parse(args)) return *exit;
  if (file.empty()) {
    std::fputs(usage.c_str(), stderr);
    return kExitUsage;
  }
  v1::LowerRequest request;
  bool bare = false;
  if (!LoadRequest(file, format, &request, &bare)) return kExitUsage;
  Diagnostics diagnostics;
  const Program program = ImportProgram(request.program(), diagnostics);
  if (diagnostics.HasErrors()) {
    std::fputs(FormatDiagnosticsText(diagnostics, file).c_str(), stderr);
    return kExitErrors;
  }
  std::printf("%s: %s", file.c_str(), PlacementSummary(program).c_str());
  std::fflush(stdout);
  return graph.enabled() ? WriteGraph("show", graph, program) : kExitOk;
}

}  // namespace ferry::tool
