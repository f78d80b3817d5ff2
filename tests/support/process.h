// Running a command as a user would, for tests of the binaries: to the
// end (RunCommand), or in the background (Process: a server stopped by
// its PID).
#ifndef FERRY_TESTS_SUPPORT_PROCESS_H_
#define FERRY_TESTS_SUPPORT_PROCESS_H_

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace ferry::testing_util {

struct CommandResult {
  // The exit status; 128 + the signal when a signal ended it; -1 when it
  // could not be started.
  int exit_code = -1;
  std::string out;  // stdout (`command` may redirect stderr into it)
};

// Runs `command` with /bin/sh and waits for it.
CommandResult RunCommand(const std::string& command);

// A child process with its stdout on a pipe and its stderr in a file;
// killed on destruction if still running.
class Process {
 public:
  Process(std::vector<std::string> args, const std::string& stderr_path);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // The next line of its stdout, without the newline; "" at the end.
  std::string ReadLine();
  // All of its remaining stdout.
  std::string ReadAll();
  // Signals it while it has not been reaped.
  void Signal(int signal_number);
  // The exit status, or -1 when it did not exit within `timeout`; the same
  // status again once it has exited.
  int WaitForExit(std::chrono::milliseconds timeout);
  int pid() const { return pid_; }

 private:
  int pid_ = -1;
  bool exited_ = false;
  int exit_status_ = -1;
  FILE* stdout_ = nullptr;
};

}  // namespace ferry::testing_util

#endif  // FERRY_TESTS_SUPPORT_PROCESS_H_
