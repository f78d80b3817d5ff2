// A subcommand's command line, parsed by CLI11. Each command declares its
// options on app() in one place, then calls Parse:
//
//   CommandFlags flags("fmt", kUsage);
//   flags.AddFile(file);
//   flags.app().add_option("--format", format);
//   if (std::optional<int> exit = flags.Parse(args)) return *exit;
//
// `--name value` and `--name=value` both work; a value option's `--name=`
// is the empty value. A flag a command declares with a callback reports a
// malformed value by throwing CLI::ValidationError(message).
#ifndef FERRY_CLIENT_TOOL_COMMAND_FLAGS_H_
#define FERRY_CLIENT_TOOL_COMMAND_FLAGS_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "client/tool/commands.h"

namespace ferry::tool {

// `message` with "; did you mean 'X'?" when a name of `known` is close to
// `value` (DidYouMean, passes/diagnostics.h): for an option's bad value.
std::string WithDidYouMean(std::string message, std::string_view value,
                           std::span<const std::string> known);

class CommandFlags {
 public:
  // `usage` is the command's --help text.
  CommandFlags(std::string command, std::string usage);

  CLI::App& app() { return app_; }
  // FILE, the command's one positional argument.
  void AddFile(std::string& file);

  // Reads `args`. Returns the exit code when the command must stop:
  // kExitOk after --help (the usage on stdout), kExitUsage after a usage
  // error, printed as "ferry COMMAND: ..." on stderr (with the usage for an
  // unknown option).
  std::optional<int> Parse(const Args& args);

 private:
  // "--name" (and "-n") of every option declared, for "did you mean".
  std::vector<std::string> OptionNames();

  std::string command_;
  std::string usage_;
  CLI::App app_;
  bool help_ = false;
  bool has_file_ = false;
};

}  // namespace ferry::tool

#endif  // FERRY_CLIENT_TOOL_COMMAND_FLAGS_H_
