// ferryd: the Ferry compilation service.
//
// Prints the bound gRPC address (HOST:PORT) as the first line of stdout and,
// when --metrics-listen is set, the metrics address as the second; logs go
// to stderr, one JSON object per line. SIGTERM or SIGINT drains (readiness
// NOT_SERVING, liveness still SERVING, new work refused, in-flight work
// finishes within --drain-grace or is stopped) and exits 0, at the latest
// --drain-grace + kDrainExitMargin after the signal.
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ferry/version.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "server/config.h"
#include "server/ferry_server.h"
#include "server/request_log.h"
#include "server/rpc_errors.h"

namespace {

// `ferryd --probe ADDR`: exit 0 when the server's health is SERVING. The
// container image's HEALTHCHECK runs this (the image has no other client).
// One grpc.health.v1 Check, no retries.
int Probe(const ferry::CommandLine& command_line) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      ferry::ProbeChannel(command_line.probe_address, command_line.probe_tls_ca,
                          command_line.probe_server_name);
  if (!channel.ok()) {
    std::cerr << "ferryd --probe: " << channel.status() << "\n";
    return 2;
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(3));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(command_line.probe_service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = grpc::health::v1::Health::NewStub(*channel)->Check(
      &context, request, &response);
  if (!status.ok()) {
    std::cerr << "ferryd --probe: "
              << ferry::StatusCodeName(status.error_code()) << ": "
              << status.error_message() << "\n";
    return 1;
  }
  bool serving =
      response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  std::cout << (serving ? "SERVING" : "NOT_SERVING") << "\n";
  return serving ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<ferry::CommandLine> command_line =
      ferry::ParseCommandLine(args);
  if (!command_line.ok()) {
    std::cerr << "ferryd: " << command_line.status().message() << "\n";
    return 2;
  }
  if (command_line->help) {
    std::cout << ferry::Usage();
    return 0;
  }
  if (command_line->version) {
    std::cout << "ferryd " << ferry::kCompilerVersion << " (API "
              << ferry::kApiVersion << ")\n";
    return 0;
  }
  if (!command_line->probe_address.empty()) return Probe(*command_line);

  // Block the shutdown signals before any thread starts, so every thread
  // inherits the mask and only sigwait below receives them.
  sigset_t shutdown_signals;
  sigemptyset(&shutdown_signals);
  sigaddset(&shutdown_signals, SIGTERM);
  sigaddset(&shutdown_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &shutdown_signals, nullptr);

  absl::StatusOr<std::unique_ptr<ferry::FerryServer>> server =
      ferry::FerryServer::Start(command_line->config);
  if (!server.ok()) {
    std::cerr << "ferryd: " << server.status().message() << "\n";
    return 1;
  }
  std::cout << (*server)->address() << "\n";
  if (!(*server)->metrics_address().empty()) {
    std::cout << (*server)->metrics_address() << "\n";
  }
  std::cout.flush();

  int signal_number = 0;
  sigwait(&shutdown_signals, &signal_number);
  // The grace is a hard bound: whatever happens in the drain, the process
  // is gone kDrainExitMargin after it.
  const std::chrono::milliseconds grace = command_line->config.drain_grace;
  std::thread([grace] {
    std::this_thread::sleep_for(grace + ferry::kDrainExitMargin);
    ferry::LogLine line = ferry::NewLogLine("drain_timeout");
    line.set_grace_ms(grace.count());
    ferry::Logger().Write(line);
    std::_Exit(0);
  }).detach();
  if (!(*server)->Drain(grace)) {
    // Work that did not stop still holds a worker; waiting for it would
    // outlast the grace.
    std::_Exit(0);
  }
  server->reset();
  return 0;
}
