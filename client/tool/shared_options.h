// The options `ferry lower` and `ferry verify` share: FILE, --format,
// --report, the remote flags (--server, --tls-*, --token-file), the
// lowering flags and --allow-op/--deny-op OP (repeatable; the request's
// partitioner.allow_operators / deny_operators).
#ifndef FERRY_CLIENT_TOOL_SHARED_OPTIONS_H_
#define FERRY_CLIENT_TOOL_SHARED_OPTIONS_H_

#include <string>

#include "client/tool/command_flags.h"
#include "client/tool/remote.h"
#include "ferry/v1/program.pb.h"

namespace ferry::tool {

struct SharedOptions {
  std::string file;
  std::string format;
  std::string report = "text";
  // The lowering flags, merged over the request's options.
  v1::LowerOptions overrides;
  RemoteOptions remote;
};

// Declares the shared options on `flags`, to be read into `options`.
void AddSharedOptions(CommandFlags& flags, SharedOptions& options);

// One line per lowering flag (and --allow-op/--deny-op), for usage texts.
std::string LoweringFlagsHelp();

}  // namespace ferry::tool

#endif  // FERRY_CLIENT_TOOL_SHARED_OPTIONS_H_
