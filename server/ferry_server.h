// ferryd assembled: the gRPC server (Compiler service, health, reflection),
// the bounded executor, the result cache, metrics and their HTTP endpoint.
// ferryd's main() and the end-to-end tests both start it through here.
#ifndef FERRY_SERVER_FERRY_SERVER_H_
#define FERRY_SERVER_FERRY_SERVER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/config.h"

namespace grpc {
class Channel;
class Server;
}  // namespace grpc

namespace ferry {

class BoundedExecutor;
class CompilerService;
class Logger;
class MetricsHttpServer;
class ServiceMetrics;

// Health service names (grpc.health.v1). "" is the process (liveness).
inline constexpr char kHealthCompiler[] = "ferry.v1.Compiler";
// SERVING only where a usable GPU is visible: readiness of the GPU
// verification endpoint.
inline constexpr char kHealthGpu[] = "ferry.v1.Compiler/gpu";

// ferryd exits at the latest this long after the drain grace ends (the
// abort wait and transport close fit well within it). Manifests budget
// preStop + --drain-grace + this within terminationGracePeriodSeconds.
inline constexpr std::chrono::milliseconds kDrainExitMargin{3000};

struct ServerHooks {
  // Receives each log line; empty: stderr.
  std::function<void(absl::string_view)> log_sink;
  // Runs at the start of every job on the worker (tests use it to hold
  // workers busy).
  std::function<void(absl::string_view method)> before_job;
  // Overrides what the runtime reports (tests of the GPU paths on machines
  // without one are not possible; this lets tests pin "no GPU").
  bool force_no_cuda = false;
};

class FerryServer {
 public:
  // Reads the TLS and token files, binds the ports and starts serving.
  static absl::StatusOr<std::unique_ptr<FerryServer>> Start(
      const ServerConfig& config, ServerHooks hooks = {});
  // Drains with no grace if Drain was not called.
  ~FerryServer();

  // HOST:PORT the gRPC server is bound to (the real port when 0 was asked).
  const std::string& address() const { return address_; }
  // HOST:PORT of /metrics; empty when disabled.
  std::string metrics_address() const;

  // The SIGTERM sequence: readiness (kHealthCompiler, kHealthGpu)
  // NOT_SERVING while liveness ("") stays SERVING, new calls refused
  // (UNAVAILABLE), in-flight work given `grace` to finish, what is left
  // told to stop (its CancelToken: it stops inside long steps and answers
  // UNAVAILABLE) and given kAbortWait, then the transport closed (at most
  // kTransportCloseWait). Returns false when some work did not stop within
  // kAbortWait: then the transport is left open (closing it would wait for
  // that work) and the caller should exit. Idempotent.
  static constexpr std::chrono::milliseconds kAbortWait{1000};
  static constexpr std::chrono::milliseconds kTransportCloseWait{500};
  bool Drain(std::chrono::milliseconds grace);

  CompilerService& service() { return *service_; }
  ServiceMetrics& metrics() { return *metrics_; }
  std::string RenderMetrics() const;

 private:
  FerryServer();

  ServerConfig config_;
  std::unique_ptr<Logger> logger_;
  std::unique_ptr<ServiceMetrics> metrics_;
  // The service is declared before the executor so that it outlives the
  // executor's workers (members are destroyed in reverse order).
  std::unique_ptr<CompilerService> service_;
  std::unique_ptr<BoundedExecutor> executor_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;
  std::string address_;
  bool drained_ = false;
  bool drain_clean_ = true;
};

// The channel `ferryd --probe` checks a server's health on: plaintext, or
// TLS trusting the CA certificate in the file `tls_ca` when that is set,
// then expecting `server_name` (when set) in the server's certificate.
// NOT_FOUND when the CA file cannot be read.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ProbeChannel(
    const std::string& address, const std::string& tls_ca,
    const std::string& server_name);

}  // namespace ferry

#endif  // FERRY_SERVER_FERRY_SERVER_H_
