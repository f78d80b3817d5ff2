// The `ferry` tool's subcommands. Each takes the arguments after the
// subcommand name and returns the process exit code, one a build farm can
// act on (README.md, "Exit codes"; status_report.h maps statuses to them).
#ifndef FERRY_CLIENT_TOOL_COMMANDS_H_
#define FERRY_CLIENT_TOOL_COMMANDS_H_

#include <string>
#include <vector>

namespace ferry::tool {

// Success (warnings allowed).
inline constexpr int kExitOk = 0;
// The program has errors, its outputs differ, or the request is over a
// fixed limit: the same request fails again.
inline constexpr int kExitErrors = 1;
// Usage error, unreadable input, bad credentials.
inline constexpr int kExitUsage = 2;
// The requested device is not available.
inline constexpr int kExitNoDevice = 3;
// Retry later: the server is unreachable, draining, busy (full queue,
// memory budget) or the deadline passed; the same request may succeed.
inline constexpr int kExitRetry = 4;
// Internal error (of the server or the tool): a bug to report.
inline constexpr int kExitInternal = 5;

using Args = std::vector<std::string>;

int RunCheck(const Args& args);
int RunFmt(const Args& args);
int RunLower(const Args& args);
int RunVerify(const Args& args);
int RunCaps(const Args& args);
int RunShow(const Args& args);

}  // namespace ferry::tool

#endif  // FERRY_CLIENT_TOOL_COMMANDS_H_
