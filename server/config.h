// ferryd's configuration: command-line flags and a config file with the same
// keys. Flag names are part of the interface (scripts and the Kubernetes
// manifests rely on them); see docs/service.md.
//
// Config file: one `key = value` per line, keys spelled as the flags without
// the leading dashes, `#` starts a comment. Flags override the file.
#ifndef FERRY_SERVER_CONFIG_H_
#define FERRY_SERVER_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

struct ServerConfig {
  // HOST:PORT of the gRPC endpoint; port 0 picks a free port.
  std::string listen = "127.0.0.1:50051";
  // HOST:PORT of the Prometheus endpoint (/metrics); empty: none.
  std::string metrics_listen;
  // Path of the config file that was read, if any.
  std::string config_path;
  // Largest serialized request accepted (and response sent).
  int64_t max_message_bytes = int64_t{64} << 20;
  // Most nodes in one program (methods and lowered-module graphs together).
  int64_t max_nodes = 1'000'000;
  // Worker threads: jobs that run at once.
  int workers = 2;
  // Jobs that may wait for a worker.
  int queue_depth = 64;
  std::chrono::milliseconds default_deadline{std::chrono::seconds(60)};
  std::chrono::milliseconds max_deadline{std::chrono::seconds(600)};
  // PEM files. cert+key enable TLS; client_ca additionally requires and
  // verifies client certificates (mTLS).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // File of accepted bearer tokens, one per line; empty: no token needed.
  std::string token_file;
  // Capacity of the result cache in bytes of memory its entries take (not
  // their serialized size); 0 disables it.
  int64_t cache_bytes = int64_t{256} << 20;
  // Per-request resource limits (passes/resource_limits.h): any one
  // tensor's storage, everything a verification allocates, and the bytes a
  // lowering produces per request byte.
  int64_t max_tensor_bytes = int64_t{1} << 30;
  int64_t max_verify_bytes = int64_t{2} << 30;
  int64_t max_expansion = 16;
  // Memory budget of the whole process: running requests (an estimate each,
  // charged before they start) and the result cache; 0: no budget.
  int64_t max_memory_bytes = int64_t{3} << 30;
  // How long a job whose memory estimate does not fit waits for running
  // jobs before RESOURCE_EXHAUSTED.
  std::chrono::milliseconds memory_wait{std::chrono::seconds(10)};
  // Freed memory kept resident for the next jobs rather than given back to
  // the system (ServiceOptions::keep_freed_bytes); 0: give it back.
  int64_t keep_freed_bytes = int64_t{512} << 20;
  // How long in-flight work may take to finish after SIGTERM.
  std::chrono::milliseconds drain_grace{std::chrono::seconds(20)};
  // The shared cache tier and blob store: Redis at HOST:PORT or unix:PATH;
  // empty: none (results stay in this process, blobs go to blob_dir).
  std::string cache_redis;
  std::chrono::milliseconds cache_redis_timeout{200};
  std::chrono::milliseconds cache_redis_ttl{std::chrono::hours(24)};
  int64_t cache_redis_max_entry_bytes = int64_t{64} << 20;
  // Blobs without Redis: a local directory (empty: no blob store), at most
  // blob_dir_bytes in all.
  std::string blob_dir;
  int64_t blob_dir_bytes = int64_t{10} << 30;
  std::chrono::milliseconds blob_ttl{std::chrono::hours(24)};
  int64_t max_blob_bytes = int64_t{256} << 20;
  // Connections older than this are asked to reconnect (GOAWAY), so that
  // clients spread to replicas added later; 0: never. In-flight calls get
  // the grace to finish.
  std::chrono::milliseconds max_connection_age{0};
  std::chrono::milliseconds max_connection_age_grace{std::chrono::seconds(30)};
};

// What the command line asked for besides serving.
struct CommandLine {
  ServerConfig config;
  bool help = false;
  bool version = false;
  // `--probe ADDR`: check the health of a running server and exit (used as
  // the container's health check); `--probe-service` names the service.
  std::string probe_address;
  std::string probe_service;
  // `--probe-tls-ca FILE`: probe over TLS, trusting FILE's CAs;
  // `--probe-server-name NAME`: the name to expect in the certificate.
  std::string probe_tls_ca;
  std::string probe_server_name;
};

// Parses `--key=value` / `--key value` flags (with CLI11; a repeated flag:
// the last counts). `--config FILE` is read first wherever it appears; flags
// then override its values. InvalidArgument for an unknown key or a
// malformed value, naming the key; NotFound for a missing config file.
absl::StatusOr<CommandLine> ParseCommandLine(
    const std::vector<std::string>& args);

// Reads `key = value` lines into `config`, each value parsed by its flag's
// option, so that the file and the command line accept the same values.
absl::Status ApplyConfigText(absl::string_view text, absl::string_view origin,
                             ServerConfig& config);

// Cross-field checks (tls key without cert, max < default deadline, ...).
absl::Status ValidateConfig(const ServerConfig& config);

// The --help text.
std::string Usage();

// "30s", "500ms", "2m", "1h"; a bare number is seconds.
absl::StatusOr<std::chrono::milliseconds> ParseDuration(absl::string_view text);
// ParseByteSize (byte sizes, "64MiB"): passes/resource_limits.h.

}  // namespace ferry

#endif  // FERRY_SERVER_CONFIG_H_
