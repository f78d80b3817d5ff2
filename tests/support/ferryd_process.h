// A real ferryd for the tests of the binaries: started as a child process
// on loopback, its addresses read from the lines it prints once it
// listens, stopped by its own PID.
#ifndef FERRY_TESTS_SUPPORT_FERRYD_PROCESS_H_
#define FERRY_TESTS_SUPPORT_FERRYD_PROCESS_H_

#include <chrono>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace ferry::testing_util {

class FerrydProcess {
 public:
  // Whether ferryd also serves /metrics (on another port 0 of 127.0.0.1).
  enum class Metrics { kOff, kOn };

  // Runs `ferryd` with `flags` and then --listen=127.0.0.1:0 (and
  // --metrics-listen=127.0.0.1:0), its stderr written to `log_path`.
  // Returns once it has printed its addresses or exited.
  FerrydProcess(const std::string& ferryd, std::vector<std::string> flags,
                std::string log_path, Metrics metrics = Metrics::kOff);
  // Stop(): a ferryd the test left running drains and exits.
  ~FerrydProcess();
  FerrydProcess(const FerrydProcess&) = delete;
  FerrydProcess& operator=(const FerrydProcess&) = delete;

  // Whether it printed loopback addresses, i.e. it listens.
  bool listening() const;
  const std::string& address() const { return address_; }
  // HOST:PORT of /metrics; "" with Metrics::kOff.
  const std::string& metrics_address() const { return metrics_address_; }
  // What it has written to stderr (its JSON log lines) so far.
  std::string log() const;
  int pid() const { return process_.pid(); }
  Process& process() { return process_; }

  // SIGTERM, then its exit status within `timeout` (0 after a clean drain,
  // -1 when it did not exit). Once it has exited, later calls return the
  // same status and signal nothing.
  int Stop(std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  std::string log_path_;
  Process process_;
  std::string address_;
  std::string metrics_address_;
  bool metrics_ = false;
};

}  // namespace ferry::testing_util

#endif  // FERRY_TESTS_SUPPORT_FERRYD_PROCESS_H_
