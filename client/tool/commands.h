// The `ferry` tool's subcommands. Each takes the arguments after the
// subcommand name and returns the process exit code:
//   0 success (warnings allowed), 1 the program has errors / outputs differ,
//   2 usage error or unreadable input, 3 requested device not available.
#ifndef FERRY_CLIENT_TOOL_COMMANDS_H_
#define FERRY_CLIENT_TOOL_COMMANDS_H_

#include <string>
#include <vector>

namespace ferry::tool {

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
int RunShow(const Args& args);

}  // namespace ferry::tool

#endif  // FERRY_CLIENT_TOOL_COMMANDS_H_
