// The Prometheus endpoint: a small HTTP server (cpp-httplib) on its own
// port, serving GET /metrics. Kept apart from the gRPC port so scraping
// needs no gRPC, TLS client certificates or tokens.
#ifndef FERRY_SERVER_METRICS_HTTP_H_
#define FERRY_SERVER_METRICS_HTTP_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace httplib {
class Server;
}

namespace ferry {

class MetricsHttpServer {
 public:
  // Binds `host_port` (port 0: any free port) and serves `render()` at
  // /metrics on a thread of its own.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      absl::string_view host_port, std::function<std::string()> render);
  ~MetricsHttpServer();

  // HOST:PORT actually bound.
  const std::string& address() const { return address_; }
  void Stop();

 private:
  MetricsHttpServer();
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string address_;
};

// Splits "host:port" / "[v6]:port". False when malformed.
bool SplitHostPort(absl::string_view host_port, std::string* host, int* port);

}  // namespace ferry

#endif  // FERRY_SERVER_METRICS_HTTP_H_
