#include "server/metrics_http.h"

#include <httplib.h>

#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

// Connections served at once, and how long an open connection may wait for
// a request (or the rest of one) before it is closed.
constexpr size_t kMetricsHttpThreads = 64;
constexpr std::chrono::seconds kMetricsHttpIdleTimeout{1};

}  // namespace

bool SplitHostPort(absl::string_view host_port, std::string* host, int* port) {
  size_t colon = host_port.rfind(':');
  if (colon == absl::string_view::npos) return false;
  absl::string_view host_part = host_port.substr(0, colon);
  if (host_part.size() >= 2 && host_part.front() == '[' &&
      host_part.back() == ']') {
    host_part = host_part.substr(1, host_part.size() - 2);
  }
  int parsed = 0;
  if (host_part.empty() ||
      !absl::SimpleAtoi(host_port.substr(colon + 1), &parsed) || parsed < 0 ||
      parsed > 65535) {
    return false;
  }
  *host = std::string(host_part);
  *port = parsed;
  return true;
}

MetricsHttpServer::MetricsHttpServer()
    : server_(std::make_unique<httplib::Server>()) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    absl::string_view host_port, std::function<std::string()> render) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(host_port, &host, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen: '", host_port, "' is not HOST:PORT"));
  }
  std::unique_ptr<MetricsHttpServer> metrics(new MetricsHttpServer());
  // cpp-httplib gives each connection a pool thread for as long as it is
  // open, idle ones included (by default 8 threads, 5 s to wait for a
  // request): a few idle connections would hold every scrape for seconds.
  // More threads and short waits keep a scrape prompt while up to
  // kMetricsHttpThreads connections idle, and bounded (about
  // kMetricsHttpIdleTimeout per kMetricsHttpThreads idlers) beyond.
  metrics->server_->new_task_queue = [] {
    return new httplib::ThreadPool(kMetricsHttpThreads);
  };
  metrics->server_->set_keep_alive_timeout(kMetricsHttpIdleTimeout.count());
  metrics->server_->set_read_timeout(kMetricsHttpIdleTimeout);
  metrics->server_->set_write_timeout(std::chrono::seconds(5));
  metrics->server_->Get(
      "/metrics", [render](const httplib::Request&, httplib::Response& res) {
        res.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
      });
  if (port == 0) {
    port = metrics->server_->bind_to_any_port(host);
    if (port < 0) port = 0;
  } else if (!metrics->server_->bind_to_port(host, port)) {
    port = 0;
  }
  if (port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", host_port, " for metrics"));
  }
  bool v6 = host.find(':') != std::string::npos;
  metrics->address_ =
      v6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
  httplib::Server* server = metrics->server_.get();
  metrics->thread_ = std::thread([server] { server->listen_after_bind(); });
  // stop() only reaches a server that is already listening; wait for that so
  // a quick Stop() cannot leave the thread running.
  for (int i = 0; i < 2000 && !server->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return metrics;
}

void MetricsHttpServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace ferry
