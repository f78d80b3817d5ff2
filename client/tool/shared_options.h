// The options `ferry lower` and `ferry verify` share: FILE, --format,
// --report, the remote flags (--server, --tls-*, --token-file), the
// lowering flags and --allow-op/--deny-op OP (repeatable; the request's
// partitioner.allow_operators / deny_operators).
#ifndef FERRY_CLIENT_TOOL_SHARED_OPTIONS_H_
#define FERRY_CLIENT_TOOL_SHARED_OPTIONS_H_

#include <string>
#include <string_view>

#include "client/tool/remote.h"
#include "ferry/v1/program.pb.h"

namespace ferry::tool {

struct SharedOptions {
  std::string file;
  std::string format;
  std::string report = "text";
  v1::LowerOptions overrides;
  RemoteOptions remote;
};

enum class Parsed { kTaken, kUsageError };

// Takes args[*i] (and the value after it, advancing *i) as a shared option
// or as FILE. An unknown option, a second FILE or a malformed flag prints
// "ferry COMMAND: ..." (with `usage` for an unknown option) and returns
// kUsageError. Call it after the command's own options.
Parsed ParseSharedOption(const Args& args, size_t* i, std::string_view command,
                         const std::string& usage, SharedOptions* options);

}  // namespace ferry::tool

#endif  // FERRY_CLIENT_TOOL_SHARED_OPTIONS_H_
