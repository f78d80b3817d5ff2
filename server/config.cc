#include "server/config.h"

#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/redis_store.h"

namespace ferry {
namespace {

using Setter = std::function<absl::Status(absl::string_view, ServerConfig&)>;

struct Key {
  const char* name;
  const char* value_name;
  const char* help;
  Setter set;
};

absl::Status BadValue(absl::string_view key, absl::string_view value,
                      absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", key, ": '", value, "' is not ", why));
}

Setter StringKey(std::string ServerConfig::*field) {
  return [field](absl::string_view value, ServerConfig& config) {
    config.*field = std::string(value);
    return absl::OkStatus();
  };
}

Setter BytesKey(const char* key, int64_t ServerConfig::*field, int64_t min) {
  return [=](absl::string_view value, ServerConfig& config) -> absl::Status {
    absl::StatusOr<int64_t> bytes = ParseByteSize(value);
    if (!bytes.ok() || *bytes < min) {
      return BadValue(key, value, absl::StrCat("a byte size >= ", min));
    }
    config.*field = *bytes;
    return absl::OkStatus();
  };
}

Setter CountKey(const char* key, int ServerConfig::*field, int min) {
  return [=](absl::string_view value, ServerConfig& config) -> absl::Status {
    int count = 0;
    if (!absl::SimpleAtoi(value, &count) || count < min) {
      return BadValue(key, value, absl::StrCat("an integer >= ", min));
    }
    config.*field = count;
    return absl::OkStatus();
  };
}

Setter DurationKey(const char* key,
                   std::chrono::milliseconds ServerConfig::*field) {
  return [=](absl::string_view value, ServerConfig& config) -> absl::Status {
    absl::StatusOr<std::chrono::milliseconds> duration = ParseDuration(value);
    if (!duration.ok() || duration->count() <= 0) {
      return BadValue(key, value, "a positive duration (e.g. 30s, 500ms)");
    }
    config.*field = *duration;
    return absl::OkStatus();
  };
}

const std::vector<Key>& Keys() {
  static const std::vector<Key> keys = {
      {"listen", "HOST:PORT",
       "gRPC address; port 0 picks a free port, printed on stdout's first line",
       StringKey(&ServerConfig::listen)},
      {"metrics-listen", "HOST:PORT",
       "Prometheus /metrics address (HTTP); empty: no metrics endpoint",
       StringKey(&ServerConfig::metrics_listen)},
      {"max-message-bytes", "BYTES", "largest request accepted (64MiB)",
       BytesKey("max-message-bytes", &ServerConfig::max_message_bytes, 1024)},
      {"max-nodes", "N", "most nodes in one program (1000000)",
       [](absl::string_view value, ServerConfig& config) -> absl::Status {
         int64_t nodes = 0;
         if (!absl::SimpleAtoi(value, &nodes) || nodes < 1) {
           return BadValue("max-nodes", value, "an integer >= 1");
         }
         config.max_nodes = nodes;
         return absl::OkStatus();
       }},
      {"workers", "N", "jobs that run at once (2)",
       CountKey("workers", &ServerConfig::workers, 1)},
      {"queue-depth", "N", "jobs that may wait for a worker (64)",
       CountKey("queue-depth", &ServerConfig::queue_depth, 0)},
      {"default-deadline", "DURATION", "deadline of calls that set none (60s)",
       DurationKey("default-deadline", &ServerConfig::default_deadline)},
      {"max-deadline", "DURATION", "longer deadlines are shortened (600s)",
       DurationKey("max-deadline", &ServerConfig::max_deadline)},
      {"tls-cert", "FILE", "server certificate chain (PEM); enables TLS",
       StringKey(&ServerConfig::tls_cert)},
      {"tls-key", "FILE", "server private key (PEM)",
       StringKey(&ServerConfig::tls_key)},
      {"tls-client-ca", "FILE",
       "CA bundle (PEM); clients must present a certificate it signed (mTLS)",
       StringKey(&ServerConfig::tls_client_ca)},
      {"token-file", "FILE",
       "accepted bearer tokens, one per line; calls must send "
       "'authorization: Bearer TOKEN'",
       StringKey(&ServerConfig::token_file)},
      {"cache-bytes", "BYTES", "result cache capacity; 0 disables it (256MiB)",
       BytesKey("cache-bytes", &ServerConfig::cache_bytes, 0)},
      {"max-tensor-bytes", "BYTES",
       "largest storage of any one tensor a request declares (1GiB)",
       BytesKey("max-tensor-bytes", &ServerConfig::max_tensor_bytes, 1)},
      {"max-verify-bytes", "BYTES",
       "most memory one verification may allocate, both runs together (2GiB)",
       BytesKey("max-verify-bytes", &ServerConfig::max_verify_bytes, 1)},
      {"max-expansion", "N",
       "bytes a lowering may produce per request byte, requests under 1MiB "
       "counted as 1MiB (16)",
       [](absl::string_view value, ServerConfig& config) -> absl::Status {
         int64_t factor = 0;
         if (!absl::SimpleAtoi(value, &factor) || factor < 1) {
           return BadValue("max-expansion", value, "an integer >= 1");
         }
         config.max_expansion = factor;
         return absl::OkStatus();
       }},
      {"max-memory-bytes", "BYTES",
       "memory budget for running requests and the cache; beyond it calls "
       "are refused with RetryInfo; 0: none (3GiB)",
       BytesKey("max-memory-bytes", &ServerConfig::max_memory_bytes, 0)},
      {"memory-wait", "DURATION",
       "how long a job waits for the memory budget before RESOURCE_EXHAUSTED "
       "(10s)",
       DurationKey("memory-wait", &ServerConfig::memory_wait)},
      {"cache-redis", "ADDR",
       "shared cache tier and blob store: Redis at HOST:PORT or unix:PATH; "
       "served without it while it is down",
       [](absl::string_view value, ServerConfig& config) -> absl::Status {
         if (!value.empty()) {
           if (absl::Status address = ValidateRedisAddress(value);
               !address.ok()) {
             return address;
           }
         }
         config.cache_redis = std::string(value);
         return absl::OkStatus();
       }},
      {"cache-redis-timeout", "DURATION",
       "bound of each Redis connect, send and receive (200ms)",
       DurationKey("cache-redis-timeout", &ServerConfig::cache_redis_timeout)},
      {"cache-redis-ttl", "DURATION",
       "lifetime of a result in the shared tier (24h)",
       DurationKey("cache-redis-ttl", &ServerConfig::cache_redis_ttl)},
      {"cache-redis-max-entry-bytes", "BYTES",
       "larger responses are not put in the shared tier (64MiB)",
       BytesKey("cache-redis-max-entry-bytes",
                &ServerConfig::cache_redis_max_entry_bytes, 1)},
      {"blob-dir", "DIR",
       "blob store without --cache-redis: a local directory; empty: none",
       StringKey(&ServerConfig::blob_dir)},
      {"blob-dir-bytes", "BYTES",
       "most bytes --blob-dir holds; least recently used blobs go (10GiB)",
       BytesKey("blob-dir-bytes", &ServerConfig::blob_dir_bytes, 1)},
      {"blob-ttl", "DURATION",
       "lifetime of a blob in Redis, renewed by use (24h)",
       DurationKey("blob-ttl", &ServerConfig::blob_ttl)},
      {"max-blob-bytes", "BYTES",
       "largest blob UploadBlob accepts; 0: no blobs (256MiB)",
       BytesKey("max-blob-bytes", &ServerConfig::max_blob_bytes, 0)},
      {"max-connection-age", "DURATION",
       "ask clients to reconnect after this long, so they spread to new "
       "replicas; 0: never (0)",
       [](absl::string_view value, ServerConfig& config) -> absl::Status {
         absl::StatusOr<std::chrono::milliseconds> age = ParseDuration(value);
         if (!age.ok()) {
           return BadValue("max-connection-age", value,
                           "a duration (e.g. 5m; 0: never)");
         }
         config.max_connection_age = *age;
         return absl::OkStatus();
       }},
      {"max-connection-age-grace", "DURATION",
       "time calls on an aged connection get to finish (30s)",
       DurationKey("max-connection-age-grace",
                   &ServerConfig::max_connection_age_grace)},
      {"drain-grace", "DURATION",
       "time in-flight work gets to finish after SIGTERM (20s)",
       DurationKey("drain-grace", &ServerConfig::drain_grace)},
  };
  return keys;
}

const Key* FindKey(absl::string_view name) {
  for (const Key& key : Keys()) {
    if (name == key.name) return &key;
  }
  return nullptr;
}

absl::Status ApplyKey(absl::string_view name, absl::string_view value,
                      absl::string_view origin, ServerConfig& config) {
  const Key* key = FindKey(name);
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": unknown key '", name, "'"));
  }
  return key->set(value, config);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<std::chrono::milliseconds> ParseDuration(
    absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  struct Unit {
    const char* suffix;
    double millis;
  };
  // Longest suffixes first so "ms" is not read as "s".
  static constexpr Unit kUnits[] = {
      {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}};
  double scale = 1000;
  for (const Unit& unit : kUnits) {
    if (absl::ConsumeSuffix(&text, unit.suffix)) {
      scale = unit.millis;
      break;
    }
  }
  double value = 0;
  if (text.empty() || !absl::SimpleAtod(text, &value) || value < 0 ||
      value * scale > 1e15) {
    return absl::InvalidArgumentError("not a duration");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(value * scale));
}

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  struct Unit {
    const char* suffix;
    int64_t bytes;
  };
  static constexpr Unit kUnits[] = {{"KiB", int64_t{1} << 10},
                                    {"MiB", int64_t{1} << 20},
                                    {"GiB", int64_t{1} << 30},
                                    {"kB", 1'000},
                                    {"KB", 1'000},
                                    {"MB", 1'000'000},
                                    {"GB", 1'000'000'000},
                                    {"B", 1}};
  int64_t scale = 1;
  for (const Unit& unit : kUnits) {
    if (absl::ConsumeSuffix(&text, unit.suffix)) {
      scale = unit.bytes;
      break;
    }
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 0 ||
      value > std::numeric_limits<int64_t>::max() / scale) {
    return absl::InvalidArgumentError("not a byte size");
  }
  return value * scale;
}

absl::Status ApplyConfigText(absl::string_view text, absl::string_view origin,
                             ServerConfig& config) {
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) {
      line = line.substr(0, hash);
    }
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    size_t equals = line.find('=');
    std::string where = absl::StrCat(origin, ":", line_number);
    if (equals == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected 'key = value'"));
    }
    absl::string_view name = absl::StripAsciiWhitespace(line.substr(0, equals));
    absl::string_view value =
        absl::StripAsciiWhitespace(line.substr(equals + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (absl::Status status = ApplyKey(name, value, where, config);
        !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CommandLine> ParseCommandLine(
    const std::vector<std::string>& args) {
  CommandLine command_line;
  std::vector<std::pair<std::string, std::string>> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      command_line.help = true;
      continue;
    }
    if (arg == "--version") {
      command_line.version = true;
      continue;
    }
    if (!absl::ConsumePrefix(&arg, "--")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", arg, "'"));
    }
    std::string name;
    std::string value;
    if (size_t equals = arg.find('='); equals != absl::string_view::npos) {
      name = std::string(arg.substr(0, equals));
      value = std::string(arg.substr(equals + 1));
    } else {
      name = std::string(arg);
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    }
    flags.emplace_back(std::move(name), std::move(value));
  }

  // The config file first, wherever --config appears; flags override it.
  for (const auto& [name, value] : flags) {
    if (name != "config") continue;
    absl::StatusOr<std::string> text = ReadFile(value);
    if (!text.ok()) return text.status();
    if (absl::Status status =
            ApplyConfigText(*text, value, command_line.config);
        !status.ok()) {
      return status;
    }
    command_line.config.config_path = value;
  }
  for (const auto& [name, value] : flags) {
    if (name == "config") continue;
    if (name == "probe") {
      command_line.probe_address = value;
      continue;
    }
    if (name == "probe-service") {
      command_line.probe_service = value;
      continue;
    }
    if (name == "probe-tls-ca") {
      command_line.probe_tls_ca = value;
      continue;
    }
    if (name == "probe-server-name") {
      command_line.probe_server_name = value;
      continue;
    }
    if (absl::Status status =
            ApplyKey(name, value, "command line", command_line.config);
        !status.ok()) {
      if (FindKey(name) == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown flag --", name, " (see --help)"));
      }
      return status;
    }
  }
  return command_line;
}

absl::Status ValidateConfig(const ServerConfig& config) {
  if (config.listen.empty()) {
    return absl::InvalidArgumentError("--listen must not be empty");
  }
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key must be given together");
  }
  if (!config.tls_client_ca.empty() && config.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca (mTLS) needs --tls-cert and --tls-key");
  }
  if (config.max_deadline < config.default_deadline) {
    return absl::InvalidArgumentError(
        "--max-deadline must not be shorter than --default-deadline");
  }
  if (config.max_memory_bytes > 0 &&
      config.cache_bytes >= config.max_memory_bytes) {
    return absl::InvalidArgumentError(
        "--cache-bytes must be below --max-memory-bytes (the budget covers "
        "the cache and running requests)");
  }
  if (config.max_memory_bytes > 0 &&
      config.max_verify_bytes > config.max_memory_bytes) {
    return absl::InvalidArgumentError(
        "--max-verify-bytes must not exceed --max-memory-bytes");
  }
  if (!config.cache_redis.empty()) {
    if (absl::Status address = ValidateRedisAddress(config.cache_redis);
        !address.ok()) {
      return address;
    }
  }
  if (config.max_blob_bytes > (int64_t{512} << 20)) {
    return absl::InvalidArgumentError(
        "--max-blob-bytes must not exceed 512MiB (Redis' largest value)");
  }
  if (config.max_message_bytes > std::numeric_limits<int32_t>::max() / 2) {
    return absl::InvalidArgumentError(
        "--max-message-bytes must be below 1GiB (protobuf's 2GiB ceiling)");
  }
  return absl::OkStatus();
}

std::string Usage() {
  std::string usage =
      "usage: ferryd [--config FILE] [--KEY VALUE | --KEY=VALUE]...\n"
      "       ferryd --probe HOST:PORT [--probe-service NAME]\n"
      "              [--probe-tls-ca FILE [--probe-server-name NAME]]\n\n"
      "The Ferry compilation service (gRPC ferry.v1.Compiler).\n"
      "A config file holds the same keys, one 'key = value' per line.\n\n";
  for (const Key& key : Keys()) {
    std::string left = absl::StrCat("  --", key.name, " ", key.value_name);
    if (left.size() < 32) left.resize(32, ' ');
    absl::StrAppend(&usage, left, " ", key.help, "\n");
  }
  absl::StrAppend(&usage,
                  "  --config FILE                   read keys from FILE\n"
                  "  --probe HOST:PORT               check a server's health "
                  "and exit 0 when SERVING\n"
                  "  --probe-service NAME            the health name to check "
                  "(default \"\": the process)\n"
                  "  --probe-tls-ca FILE             probe over TLS, trusting "
                  "FILE's CAs\n"
                  "  --probe-server-name NAME        the name the server "
                  "certificate must carry\n"
                  "  --version, --help\n");
  return usage;
}

}  // namespace ferry
