// The command lines of ferryd and the ferry tool are parsed by CLI11
// (Debian's libcli11-dev, header-only); this is what both need around it.
#ifndef FERRY_CLI_ARGS_H_
#define FERRY_CLI_ARGS_H_

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace ferry {

// `args` as CLI::App::parse takes them: in reverse order, and with every
// `--NAME=` of an option that takes a value split into `--NAME` and "".
// CLI11 reads `--NAME=` as `--NAME` and takes the next argument as the value;
// Ferry's flags have always meant the empty value (`--metrics-listen=`
// turns off what a config file set, `--deny-op=` is a missing operator).
inline std::vector<std::string> ArgsForCli11(
    const CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> reversed;
  for (auto arg = args.rbegin(); arg != args.rend(); ++arg) {
    const CLI::Option* option =
        arg->size() > 3 && arg->rfind("--", 0) == 0 && arg->back() == '='
            ? app.get_option_no_throw(arg->substr(0, arg->size() - 1))
            : nullptr;
    if (option != nullptr && option->get_expected_max() > 0) {
      reversed.emplace_back();
      reversed.push_back(arg->substr(0, arg->size() - 1));
    } else {
      reversed.push_back(*arg);
    }
  }
  return reversed;
}

}  // namespace ferry

#endif  // FERRY_CLI_ARGS_H_
