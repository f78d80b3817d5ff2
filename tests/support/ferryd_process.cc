#include "tests/support/ferryd_process.h"

#include <signal.h>

#include <utility>

#include "tests/support/files.h"

namespace ferry::testing_util {

namespace {

std::vector<std::string> FerrydArgs(const std::string& ferryd,
                                    std::vector<std::string> flags,
                                    FerrydProcess::Metrics metrics) {
  std::vector<std::string> args = {ferryd};
  for (std::string& flag : flags) args.push_back(std::move(flag));
  // Last, so that a --config among `flags` cannot move it off loopback.
  args.push_back("--listen=127.0.0.1:0");
  if (metrics == FerrydProcess::Metrics::kOn)
    args.push_back("--metrics-listen=127.0.0.1:0");
  return args;
}

bool OnLoopback(const std::string& address) {
  return address.rfind("127.0.0.1:", 0) == 0;
}

}  // namespace

FerrydProcess::FerrydProcess(const std::string& ferryd,
                             std::vector<std::string> flags,
                             std::string log_path, Metrics metrics)
    : log_path_(std::move(log_path)),
      process_(FerrydArgs(ferryd, std::move(flags), metrics), log_path_),
      metrics_(metrics == Metrics::kOn) {
  // ferryd prints its gRPC address, then its metrics address, once it
  // listens; "" when it exited first.
  address_ = process_.ReadLine();
  if (metrics_ && OnLoopback(address_)) metrics_address_ = process_.ReadLine();
}

FerrydProcess::~FerrydProcess() { Stop(); }

bool FerrydProcess::listening() const {
  return OnLoopback(address_) && (!metrics_ || OnLoopback(metrics_address_));
}

std::string FerrydProcess::log() const { return ReadFile(log_path_); }

int FerrydProcess::Stop(std::chrono::milliseconds timeout) {
  // Once it has exited, Process signals nothing and keeps its status.
  process_.Signal(SIGTERM);
  return process_.WaitForExit(timeout);
}

}  // namespace ferry::testing_util
