#include "server/ferry_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ferry/file.h"
#include "ferry/version.h"
#include "runtime/verify.h"
#include "server/compiler_service.h"
#include "server/executor.h"
#include "server/gpu_metrics.h"
#include "server/metrics.h"
#include "server/metrics_http.h"
#include "server/process_metrics.h"
#include "server/request_log.h"

namespace ferry {
namespace {

absl::StatusOr<std::vector<std::string>> ReadTokens(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path, "--token-file");
  if (!text.ok()) return text.status();
  std::vector<std::string> tokens;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty() && line.front() != '#') tokens.emplace_back(line);
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--token-file ", path, " holds no token"));
  }
  return tokens;
}

// The PEM texts of --tls-cert and --tls-key parse, and the key is the
// certificate's (gRPC would only say that it cannot listen).
absl::Status CheckKeyMatchesCertificate(const ServerConfig& config,
                                        const std::string& cert_pem,
                                        const std::string& key_pem) {
  auto bio_of = [](const std::string& text) {
    return std::unique_ptr<BIO, decltype(&BIO_free)>(
        BIO_new_mem_buf(text.data(), static_cast<int>(text.size())), &BIO_free);
  };
  auto cert_bio = bio_of(cert_pem);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr), &X509_free);
  if (cert == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-cert ", config.tls_cert, " holds no PEM certificate"));
  }
  auto key_bio = bio_of(key_pem);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr),
      &EVP_PKEY_free);
  if (key == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key ", config.tls_key,
                     " holds no PEM private key (or it is encrypted)"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key ", config.tls_key,
        " does not match the certificate in --tls-cert ", config.tls_cert));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(
    const ServerConfig& config) {
  if (config.tls_cert.empty()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = ReadFile(config.tls_cert, "--tls-cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile(config.tls_key, "--tls-key");
  if (!key.ok()) return key.status();
  if (absl::Status s = CheckKeyMatchesCertificate(config, *cert, *key);
      !s.ok()) {
    return s;
  }
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!config.tls_client_ca.empty()) {
    absl::StatusOr<std::string> ca =
        ReadFile(config.tls_client_ca, "--tls-client-ca");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

// gRPC's own receive limit sits above --max-message-bytes so that a request
// just over the limit reaches the service and gets a QuotaFailure naming
// the limit; far larger ones are cut off by gRPC itself.
int TransportReceiveLimit(int64_t max_message_bytes) {
  int64_t limit = 2 * max_message_bytes + (int64_t{1} << 16);
  return static_cast<int>(
      std::min<int64_t>(limit, std::numeric_limits<int32_t>::max()));
}

// Responses (lowered programs) may be larger than the request that asked.
int64_t ResponseLimit(int64_t max_message_bytes) {
  return std::min<int64_t>(4 * max_message_bytes,
                           std::numeric_limits<int32_t>::max());
}

static_assert(FerryServer::kAbortWait + FerryServer::kTransportCloseWait <
                  kDrainExitMargin,
              "the drain's steps after the grace fit in ferryd's exit margin");

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> ProbeChannel(
    const std::string& address, const std::string& tls_ca,
    const std::string& server_name) {
  if (tls_ca.empty()) {
    return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  }
  absl::StatusOr<std::string> roots = ReadFile(tls_ca, "--probe-tls-ca");
  if (!roots.ok()) return roots.status();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = *std::move(roots);
  grpc::ChannelArguments arguments;
  if (!server_name.empty()) arguments.SetSslTargetNameOverride(server_name);
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl),
                                   arguments);
}

FerryServer::FerryServer() = default;

// When Drain returns false, destroying the server waits for the work that
// did not stop (ferryd exits instead).
FerryServer::~FerryServer() { Drain(std::chrono::milliseconds(0)); }

absl::StatusOr<std::unique_ptr<FerryServer>> FerryServer::Start(
    const ServerConfig& config, ServerHooks hooks) {
  if (absl::Status status = ValidateConfig(config); !status.ok()) {
    return status;
  }
  std::unique_ptr<FerryServer> server(new FerryServer());
  server->config_ = config;
  server->logger_ = std::make_unique<Logger>(hooks.log_sink);
  server->metrics_ = std::make_unique<ServiceMetrics>();

  ServiceOptions options;
  options.max_request_bytes = config.max_message_bytes;
  options.max_response_bytes = ResponseLimit(config.max_message_bytes);
  options.max_nodes = config.max_nodes;
  options.default_deadline = config.default_deadline;
  options.max_deadline = config.max_deadline;
  options.cache_bytes = config.cache_bytes;
  options.limits.max_tensor_bytes = config.max_tensor_bytes;
  options.limits.max_verify_bytes = config.max_verify_bytes;
  options.limits.max_expansion = config.max_expansion;
  options.max_memory_bytes = config.max_memory_bytes;
  options.memory_wait = config.memory_wait;
  options.keep_freed_bytes =
      config.max_memory_bytes > 0
          ? std::min(config.keep_freed_bytes, config.max_memory_bytes)
          : config.keep_freed_bytes;
  options.redis.address = config.cache_redis;
  options.redis.timeout = config.cache_redis_timeout;
  options.result_ttl =
      std::chrono::duration_cast<std::chrono::seconds>(config.cache_redis_ttl);
  options.max_shared_entry_bytes = config.cache_redis_max_entry_bytes;
  options.blob_dir = config.blob_dir;
  options.blob_dir_bytes = config.blob_dir_bytes;
  options.blob_ttl =
      std::chrono::duration_cast<std::chrono::seconds>(config.blob_ttl);
  options.max_blob_bytes = config.max_blob_bytes;
  if (config.cache_redis.empty() && !config.blob_dir.empty()) {
    if (absl::Status usable = CheckBlobDirectory(config.blob_dir);
        !usable.ok()) {
      return usable;
    }
  }
  if (!config.token_file.empty()) {
    absl::StatusOr<std::vector<std::string>> tokens =
        ReadTokens(config.token_file);
    if (!tokens.ok()) return tokens.status();
    options.tokens = *std::move(tokens);
  }
  options.cuda_available = !hooks.force_no_cuda && CudaAvailable();
  options.visible_devices = VisibleDevices();
  if (hooks.force_no_cuda) {
    std::erase_if(options.visible_devices, [](const std::string& device) {
      return device.rfind("cuda", 0) == 0;
    });
  }
  options.before_job_for_testing = hooks.before_job;
  bool cuda_available = options.cuda_available;
  server->metrics_->AddCollectable(std::make_shared<ProcessCollector>());
  if (cuda_available) {
    server->metrics_->AddCollectable(
        std::make_shared<GpuCollector>([] { return ReadGpuUsage(); }));
  }
  std::string devices = absl::StrJoin(options.visible_devices, ",");

  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      Credentials(config);
  if (!credentials.ok()) return credentials.status();

  server->executor_ =
      std::make_unique<BoundedExecutor>(config.workers, config.queue_depth);
  server->service_ =
      std::make_unique<CompilerService>(std::move(options), *server->executor_,
                                        *server->metrics_, *server->logger_);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen, *credentials, &port);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(
      TransportReceiveLimit(config.max_message_bytes));
  builder.SetMaxSendMessageSize(
      static_cast<int>(ResponseLimit(config.max_message_bytes)));
  if (config.max_connection_age.count() > 0) {
    // GOAWAY after the age (gRPC adds +-10% jitter), so clients reconnect
    // and their load balancer sees replicas added since.
    builder.AddChannelArgument(
        GRPC_ARG_MAX_CONNECTION_AGE_MS,
        static_cast<int>(std::min<int64_t>(config.max_connection_age.count(),
                                           std::numeric_limits<int>::max())));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               static_cast<int>(std::min<int64_t>(
                                   config.max_connection_age_grace.count(),
                                   std::numeric_limits<int>::max())));
  }
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on --listen ", config.listen));
  }
  std::string host;
  int requested_port = 0;
  if (!SplitHostPort(config.listen, &host, &requested_port)) {
    host = config.listen.substr(0, config.listen.rfind(':'));
  }
  bool v6 = host.find(':') != std::string::npos;
  server->address_ =
      v6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);

  grpc::HealthCheckServiceInterface* health =
      server->server_->GetHealthCheckService();
  health->SetServingStatus("", true);
  health->SetServingStatus(kHealthCompiler, true);
  health->SetServingStatus(kHealthGpu, cuda_available);

  if (!config.metrics_listen.empty()) {
    FerryServer* self = server.get();
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> metrics_http =
        MetricsHttpServer::Start(config.metrics_listen,
                                 [self] { return self->RenderMetrics(); });
    if (!metrics_http.ok()) return metrics_http.status();
    server->metrics_http_ = *std::move(metrics_http);
  }

  LogLine line = NewLogLine("start");
  line.set_version(kCompilerVersion);
  line.set_listen(server->address_);
  line.set_metrics(server->metrics_address());
  line.set_tls(!config.tls_cert.empty());
  line.set_mtls(!config.tls_client_ca.empty());
  line.set_token(!config.token_file.empty());
  line.set_workers(config.workers);
  line.set_queue_depth(config.queue_depth);
  line.set_max_message_bytes(config.max_message_bytes);
  line.set_shared_cache(config.cache_redis);
  line.set_blob_store(!config.cache_redis.empty() ? "redis"
                      : !config.blob_dir.empty()  ? "disk"
                                                  : "");
  line.set_max_connection_age_ms(config.max_connection_age.count());
  line.set_cache_bytes(config.cache_bytes);
  line.set_devices(devices);
  line.set_gpu(cuda_available);
  server->logger_->Write(line);
  return server;
}

std::string FerryServer::metrics_address() const {
  return metrics_http_ ? metrics_http_->address() : "";
}

std::string FerryServer::RenderMetrics() const {
  return metrics_->Render(service_->Gauges());
}

bool FerryServer::Drain(std::chrono::milliseconds grace) {
  if (drained_ || server_ == nullptr) return drain_clean_;
  drained_ = true;
  auto start = std::chrono::steady_clock::now();
  LogLine drain = NewLogLine("drain");
  drain.set_grace_ms(grace.count());
  drain.set_in_flight(executor_->queued() + executor_->running());
  logger_->Write(drain);
  // 1. Readiness fails, so endpoints stop sending new work. Liveness ("")
  // stays SERVING: a draining pod is healthy and must not be restarted.
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus(kHealthCompiler, false);
  health->SetServingStatus(kHealthGpu, false);
  // 2. New calls are refused; accepted work continues.
  service_->StartDraining();
  executor_->Close();
  // 3. In-flight work gets the grace period; what is left is told to stop,
  // which it does within moments (runtime/cancel.h).
  bool finished = executor_->WaitIdle(start + grace);
  bool stopped = finished;
  if (!finished) {
    service_->AbortInFlight();
    stopped =
        executor_->WaitIdle(std::chrono::steady_clock::now() + kAbortWait);
  }
  // 4. Every call has been answered; close the transport. (Closing waits
  // for every call to finish, so not while work is still running.)
  if (stopped) {
    health->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + kTransportCloseWait);
    server_->Wait();
  }
  if (metrics_http_) metrics_http_->Stop();
  double elapsed_ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  LogLine stopped_line = NewLogLine("stopped");
  stopped_line.set_in_flight_finished(finished);
  stopped_line.set_in_flight_stopped(stopped);
  stopped_line.set_drain_ms(elapsed_ms);
  logger_->Write(stopped_line);
  drain_clean_ = stopped;
  return stopped;
}

}  // namespace ferry
