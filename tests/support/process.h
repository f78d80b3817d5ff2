// Running a command as a user would, for tests of the binaries.
#ifndef FERRY_TESTS_SUPPORT_PROCESS_H_
#define FERRY_TESTS_SUPPORT_PROCESS_H_

#include <string>

namespace ferry::testing_util {

struct CommandResult {
  // The exit status; 128 + the signal when a signal ended it; -1 when it
  // could not be started.
  int exit_code = -1;
  std::string out;  // stdout (`command` may redirect stderr into it)
};

// Runs `command` with /bin/sh and waits for it.
CommandResult RunCommand(const std::string& command);

}  // namespace ferry::testing_util

#endif  // FERRY_TESTS_SUPPORT_PROCESS_H_
