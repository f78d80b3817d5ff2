// `--graph=OUT` and `--graph-summary` of `ferry lower` and `ferry show`:
// the placement picture (graph_dot.h) written as DOT text (OUT.dot, OUT.gv)
// or drawn by Graphviz's `dot` (OUT.svg, OUT.png, OUT.pdf), run as a child
// process found on PATH and killed after kDotTimeoutSeconds.
#ifndef FERRY_CLIENT_TOOL_GRAPH_OUTPUT_H_
#define FERRY_CLIENT_TOOL_GRAPH_OUTPUT_H_

#include <string>

#include "client/tool/graph_dot.h"

namespace CLI {
class App;
}  // namespace CLI

namespace ferry::v1 {
class Program;
}  // namespace ferry::v1

namespace ferry::tool {

inline constexpr int kDotTimeoutSeconds = 120;

struct GraphFlags {
  std::string path;  // empty: no picture
  GraphOptions options;
  bool enabled() const { return !path.empty(); }
};

// Declares --graph=OUT (its extension is checked while parsing) and
// --graph-summary on `app`.
void AddGraphFlags(CLI::App& app, GraphFlags& flags);
// The lines for usage texts.
std::string GraphFlagsHelp();

// Writes the picture of `lowered` to flags.path. Returns kExitOk, or prints
// "ferry COMMAND: ..." and returns kExitUsage when `dot` is missing, fails
// or runs out of time, or the file cannot be written.
int WriteGraph(const std::string& command, const GraphFlags& flags,
               const Program& lowered);
// Same for a lowered program on the wire (from a server or a file); a
// program that does not import prints its diagnostics and returns
// kExitErrors.
int WriteGraph(const std::string& command, const GraphFlags& flags,
               const v1::Program& lowered);

}  // namespace ferry::tool

#endif  // FERRY_CLIENT_TOOL_GRAPH_OUTPUT_H_
