// Helpers shared by the `ferry` subcommands: reading the input files and
// writing the output.
#ifndef FERRY_CLIENT_TOOL_TOOL_COMMON_H_
#define FERRY_CLIENT_TOOL_TOOL_COMMON_H_

#include <string>

#include "client/tool/commands.h"
#include "ferry/v1/program.pb.h"
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

}  // namespace ferry::tool

#endif  // FERRY_CLIENT_TOOL_TOOL_COMMON_H_
