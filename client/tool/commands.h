// The `ferry` tool's subcommands. Each takes the arguments after the
// subcommand name and returns the process exit code:
//   0 success (warnings allowed), 1 the program has errors / outputs differ,
//   2 usage error or unreadable input, 3 requested device not available.
#ifndef FERRY_CLIENT_TOOL_COMMANDS_H_
#define FERRY_CLIENT_TOOL_COMMANDS_H_

#include <string>
#include <string_view>
#include <vector>

namespace ferry {
namespace v1 {
class LowerOptions;
}  // namespace v1

namespace tool {

inline constexpr int kExitOk = 0;
inline constexpr int kExitErrors = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNoDevice = 3;

using Args = std::vector<std::string>;

int RunCheck(const Args& args);
int RunFmt(const Args& args);
int RunLower(const Args& args);
int RunVerify(const Args& args);
int RunCaps(const Args& args);

// Applies one lowering flag to `options` (the request's options, so flags
// override the file). Returns false when `arg` is not a lowering flag;
// sets `*error` when it is one but malformed. Flags:
//   --skip-h2d-inputs[=METHOD]   --skip-d2h-outputs[=METHOD]
//   --error-on-per-call-copies   --constant-staging=at-load|per-call
//   --no-device-memory-planning  --no-alloc-graph-input  --no-alloc-graph-output
//   --partitioner=tag|capability|none   --target-device=DEV
//   --tag-target=TAG=DEV         --backend=ID
bool ApplyLoweringFlag(std::string_view arg, v1::LowerOptions* options,
                       std::string* error);
// One line per lowering flag, for usage texts.
std::string LoweringFlagsHelp();

// Splits "--name=value" into name and value (value empty when absent).
bool ParseFlag(std::string_view arg, std::string_view name,
               std::string* value);

}  // namespace tool
}  // namespace ferry

#endif  // FERRY_CLIENT_TOOL_COMMANDS_H_
