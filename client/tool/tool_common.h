// Helpers shared by the `ferry` subcommands: reading the input files and
// writing the output.
#ifndef FERRY_CLIENT_TOOL_TOOL_COMMON_H_
#define FERRY_CLIENT_TOOL_TOOL_COMMON_H_

#include <string>

#include "client/tool/commands.h"
#include "ferry/v1/program.pb.h"
#include "ferry/v1/report.pb.h"
#include "passes/proto_io.h"

namespace ferry::tool {

// Reads FILE as a LowerRequest or bare Program. On failure prints the error
// ("ferry: FILE: ...") to stderr and returns false.
bool LoadRequest(const std::string& path, const std::string& format_name,
                 v1::LowerRequest* request, bool* was_bare_program);

// Reads a ferry.v1.InputSet (format by extension). Prints the error and
// returns false on failure.
bool LoadInputSet(const std::string& path, v1::InputSet* inputs);

// Writes `bytes` to `path` ("-" = stdout). Prints an error and returns false
// on failure.
bool WriteOutput(const std::string& path, const std::string& bytes);

// Prints a lowering's report as `ferry lower` does, in-process or remote:
// `format` "json" on stdout (the LowerReport on one line), "text" on stderr.
// The pass timings (stats.passes) are printed only with `timings`
// (--timings): they are the one part that differs from run to run and
// between an in-process and a remote run, and without them both print the
// same bytes.
void PrintLowerReport(v1::LowerReport report, const std::string& file,
                      const std::string& format, bool timings);

}  // namespace ferry::tool

#endif  // FERRY_CLIENT_TOOL_TOOL_COMMON_H_
