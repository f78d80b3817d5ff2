#include "server/config.h"

#include <functional>
#include <limits>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "ferry/cli_args.h"
#include "ferry/file.h"
#include "passes/resource_limits.h"
#include "server/redis_store.h"

namespace ferry {
namespace {

// Parses one value into the config; throws CLI::ValidationError (which CLI11
// reports as "--KEY: ...") when the value is malformed.
using Setter =
    std::function<void(const std::string& key, const std::string& value)>;

[[noreturn]] void BadValue(const std::string& key, const std::string& value,
                           absl::string_view why) {
  throw CLI::ValidationError(key, absl::StrCat("'", value, "' is not ", why));
}

Setter Text(std::string& field) {
  return
      [&field](const std::string&, const std::string& value) { field = value; };
}

Setter ByteSize(int64_t& field, int64_t min) {
  return [&field, min](const std::string& key, const std::string& value) {
    absl::StatusOr<int64_t> bytes = ParseByteSize(value);
    if (!bytes.ok() || *bytes < min) {
      BadValue(key, value, absl::StrCat("a byte size >= ", min));
    }
    field = *bytes;
  };
}

template <typename Int>
Setter Integer(Int& field, Int min) {
  return [&field, min](const std::string& key, const std::string& value) {
    Int number = 0;
    if (!absl::SimpleAtoi(value, &number) || number < min) {
      BadValue(key, value, absl::StrCat("an integer >= ", min));
    }
    field = number;
  };
}

Setter Duration(std::chrono::milliseconds& field) {
  return [&field](const std::string& key, const std::string& value) {
    absl::StatusOr<std::chrono::milliseconds> duration = ParseDuration(value);
    if (!duration.ok() || duration->count() <= 0) {
      BadValue(key, value, "a positive duration (e.g. 30s, 500ms)");
    }
    field = *duration;
  };
}

void Key(CLI::App& app, const char* name, const char* value_name,
         const char* help, Setter set) {
  const std::string flag = absl::StrCat("--", name);
  app.add_option_function<std::string>(
         flag,
         [flag, set = std::move(set)](const std::string& value) {
           set(flag, value);
         },
         help)
      ->type_name(value_name);
}

// Every key of the config file, declared as the flag `--KEY` on `app`; the
// file is read through the same options, so both accept the same values.
// The order is --help's.
void AddConfigKeys(CLI::App& app, ServerConfig& config) {
  Key(app, "listen", "HOST:PORT",
      "gRPC address; port 0 picks a free port, printed on stdout's first line",
      Text(config.listen));
  Key(app, "metrics-listen", "HOST:PORT",
      "Prometheus /metrics address (HTTP); empty: no metrics endpoint",
      Text(config.metrics_listen));
  Key(app, "max-message-bytes", "BYTES", "largest request accepted (64MiB)",
      ByteSize(config.max_message_bytes, 1024));
  Key(app, "max-nodes", "N", "most nodes in one program (1000000)",
      Integer<int64_t>(config.max_nodes, 1));
  Key(app, "workers", "N", "jobs that run at once (2)",
      Integer(config.workers, 1));
  Key(app, "queue-depth", "N", "jobs that may wait for a worker (64)",
      Integer(config.queue_depth, 0));
  Key(app, "default-deadline", "DURATION",
      "deadline of calls that set none (60s)",
      Duration(config.default_deadline));
  Key(app, "max-deadline", "DURATION", "longer deadlines are shortened (600s)",
      Duration(config.max_deadline));
  Key(app, "tls-cert", "FILE", "server certificate chain (PEM); enables TLS",
      Text(config.tls_cert));
  Key(app, "tls-key", "FILE", "server private key (PEM)", Text(config.tls_key));
  Key(app, "tls-client-ca", "FILE",
      "CA bundle (PEM); clients must present a certificate it signed (mTLS)",
      Text(config.tls_client_ca));
  Key(app, "token-file", "FILE",
      "accepted bearer tokens, one per line; calls must send "
      "'authorization: Bearer TOKEN'",
      Text(config.token_file));
  Key(app, "cache-bytes", "BYTES",
      "result cache capacity; 0 disables it (256MiB)",
      ByteSize(config.cache_bytes, 0));
  Key(app, "max-tensor-bytes", "BYTES",
      "largest storage of any one tensor a request declares (1GiB)",
      ByteSize(config.max_tensor_bytes, 1));
  Key(app, "max-verify-bytes", "BYTES",
      "most memory one verification may allocate, both runs together (2GiB)",
      ByteSize(config.max_verify_bytes, 1));
  Key(app, "max-expansion", "N",
      "bytes a lowering may produce per request byte, requests under 1MiB "
      "counted as 1MiB (16)",
      Integer<int64_t>(config.max_expansion, 1));
  Key(app, "max-memory-bytes", "BYTES",
      "memory budget for running requests and the cache; beyond it calls "
      "are refused with RetryInfo; 0: none (3GiB)",
      ByteSize(config.max_memory_bytes, 0));
  Key(app, "keep-freed-bytes", "BYTES",
      "freed memory kept for the next jobs instead of being given back to "
      "the system and faulted in again, at most --max-memory-bytes; 0: give "
      "it back (512MiB)",
      ByteSize(config.keep_freed_bytes, 0));
  Key(app, "memory-wait", "DURATION",
      "how long a job waits for the memory budget before RESOURCE_EXHAUSTED "
      "(10s)",
      Duration(config.memory_wait));
  Key(app, "cache-redis", "ADDR",
      "shared cache tier and blob store: Redis at HOST:PORT or unix:PATH; "
      "served without it while it is down",
      [&config](const std::string&, const std::string& value) {
        if (!value.empty()) {
          if (absl::Status address = ValidateRedisAddress(value);
              !address.ok()) {
            throw CLI::ValidationError(std::string(address.message()));
          }
        }
        config.cache_redis = value;
      });
  Key(app, "cache-redis-timeout", "DURATION",
      "bound of each Redis connect, send and receive (200ms)",
      Duration(config.cache_redis_timeout));
  Key(app, "cache-redis-ttl", "DURATION",
      "lifetime of a result in the shared tier (24h)",
      Duration(config.cache_redis_ttl));
  Key(app, "cache-redis-max-entry-bytes", "BYTES",
      "larger responses are not put in the shared tier (64MiB)",
      ByteSize(config.cache_redis_max_entry_bytes, 1));
  Key(app, "blob-dir", "DIR",
      "blob store without --cache-redis: a local directory; empty: none",
      Text(config.blob_dir));
  Key(app, "blob-dir-bytes", "BYTES",
      "most bytes --blob-dir holds; least recently used blobs go (10GiB)",
      ByteSize(config.blob_dir_bytes, 1));
  Key(app, "blob-ttl", "DURATION",
      "lifetime of a blob in Redis, renewed by use (24h)",
      Duration(config.blob_ttl));
  Key(app, "max-blob-bytes", "BYTES",
      "largest blob UploadBlob accepts; 0: no blobs (256MiB)",
      ByteSize(config.max_blob_bytes, 0));
  Key(app, "max-connection-age", "DURATION",
      "ask clients to reconnect after this long, so they spread to new "
      "replicas; 0: never (0)",
      [&config](const std::string& key, const std::string& value) {
        absl::StatusOr<std::chrono::milliseconds> age = ParseDuration(value);
        if (!age.ok()) BadValue(key, value, "a duration (e.g. 5m; 0: never)");
        config.max_connection_age = *age;
      });
  Key(app, "max-connection-age-grace", "DURATION",
      "time calls on an aged connection get to finish (30s)",
      Duration(config.max_connection_age_grace));
  Key(app, "drain-grace", "DURATION",
      "time in-flight work gets to finish after SIGTERM (20s)",
      Duration(config.drain_grace));
}

// CLI11 leaves what it does not know in `remaining`; the first is the error.
absl::Status UnexpectedArgument(const std::string& arg) {
  if (arg.rfind("--", 0) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown flag ", arg.substr(0, arg.find('=')), " (see --help)"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unexpected argument '", arg, "'"));
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

absl::Status ApplyConfigText(absl::string_view text, absl::string_view origin,
                             ServerConfig& config) {
  CLI::App keys;
  AddConfigKeys(keys, config);
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
    CLI::Option* key = keys.get_option_no_throw(absl::StrCat("--", name));
    if (key == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown key '", name, "'"));
    }
    // The key's own option parses the value, as for the flag.
    try {
      key->add_result(std::string(value));
      key->run_callback();
      key->clear();
    } catch (const CLI::Error& error) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", error.what()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CommandLine> ParseCommandLine(
    const std::vector<std::string>& args) {
  CommandLine command_line;
  CLI::App app("ferryd");
  // A repeated flag: the last one counts.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_help_flag();  // --help is reported, not acted on, here
  app.allow_extras();   // reported below in today's words
  // The config file first, wherever --config appears: its callback runs
  // before those of the keys (CLI11 runs them in declaration order), so
  // flags override the file. A failure's status (NotFound for a missing
  // file) is kept, CLI11 only carries a message.
  absl::Status config_file;
  app.add_option_function<std::vector<std::string>>(
         "--config",
         [&](const std::vector<std::string>& paths) {
           for (const std::string& path : paths) {
             absl::StatusOr<std::string> text = ReadFile(path);
             config_file =
                 text.ok() ? ApplyConfigText(*text, path, command_line.config)
                           : text.status();
             if (!config_file.ok()) {
               throw CLI::ValidationError(std::string(config_file.message()));
             }
             command_line.config.config_path = path;
           }
         })
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_flag("-h,--help", command_line.help);
  app.add_flag("--version", command_line.version);
  app.add_option("--probe", command_line.probe_address);
  app.add_option("--probe-service", command_line.probe_service);
  app.add_option("--probe-tls-ca", command_line.probe_tls_ca);
  app.add_option("--probe-server-name", command_line.probe_server_name);
  AddConfigKeys(app, command_line.config);
  try {
    app.parse(ArgsForCli11(app, args));
  } catch (const CLI::Error& error) {
    if (!config_file.ok()) return config_file;
    return absl::InvalidArgumentError(error.what());
  }
  if (std::vector<std::string> rest = app.remaining(); !rest.empty()) {
    return UnexpectedArgument(rest.front());
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
  ServerConfig unused;
  CLI::App keys;
  keys.set_help_flag();
  AddConfigKeys(keys, unused);
  for (const CLI::Option* key : keys.get_options()) {
    std::string left =
        absl::StrCat("  ", key->get_name(), " ", key->get_type_name());
    if (left.size() < 32) left.resize(32, ' ');
    absl::StrAppend(&usage, left, " ", key->get_description(), "\n");
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
