#include "client/tool/command_flags.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "ferry/cli_args.h"
#include "passes/diagnostics.h"

namespace ferry::tool {

CommandFlags::CommandFlags(std::string command, std::string usage)
    : command_(std::move(command)), usage_(std::move(usage)) {
  // A repeated option: the last one counts (lists say otherwise).
  app_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  // Help and leftovers are printed in the tool's words, below.
  app_.set_help_flag();
  app_.allow_extras();
  app_.add_flag("-h,--help", help_);
}

void CommandFlags::AddFile(std::string& file) {
  app_.add_option("FILE", file);
  has_file_ = true;
}

std::vector<std::string> CommandFlags::OptionNames() {
  std::vector<std::string> names;
  for (const CLI::Option* option : app_.get_options()) {
    for (const std::string& name : option->get_lnames())
      names.push_back("--" + name);
    for (const std::string& name : option->get_snames())
      names.push_back("-" + name);
  }
  return names;
}

std::string WithDidYouMean(std::string message, std::string_view value,
                           std::span<const std::string> known) {
  std::string hint = DidYouMean(value, known);
  return hint.empty() ? message : message + "; " + hint;
}

std::optional<int> CommandFlags::Parse(const Args& args) {
  try {
    app_.parse(ArgsForCli11(app_, args));
  } catch (const CLI::Error& error) {
    std::fprintf(stderr, "ferry %s: %s\n", command_.c_str(), error.what());
    return kExitUsage;
  }
  if (help_) {
    std::fputs(usage_.c_str(), stdout);
    return kExitOk;
  }
  // What CLI11 did not take: an option no one declared, or a second FILE.
  const std::vector<std::string> rest = app_.remaining();
  if (rest.empty()) return std::nullopt;
  const std::string& first = rest.front();
  if (first.size() > 1 && first[0] == '-') {
    // "--name=value": the name is what may be misspelt.
    const std::string name = first.substr(0, first.find('='));
    std::string hint = DidYouMean(name, OptionNames());
    std::fprintf(stderr, "ferry %s: unknown option '%s'%s%s\n\n%s",
                 command_.c_str(), first.c_str(), hint.empty() ? "" : "; ",
                 hint.c_str(), usage_.c_str());
  } else if (has_file_) {
    std::fprintf(stderr, "ferry %s: one FILE only\n", command_.c_str());
  } else {
    std::fprintf(stderr, "ferry %s: unexpected argument '%s'\n\n%s",
                 command_.c_str(), first.c_str(), usage_.c_str());
  }
  return kExitUsage;
}

}  // namespace ferry::tool
