// A Redis server as a shared store (--cache-redis): string values by key
// with a TTL, through hiredis' blocking API on a small pool of connections.
//
// Nothing here may fail a request. Every command is bounded by `timeout`
// (connect, send and receive); an error or timeout drops the connection and
// marks the store down, and while it is down every call returns UNAVAILABLE
// at once, without touching the network, until the next reconnection
// attempt (backoff doubling from min_backoff to max_backoff). The first
// failure and the recovery are each one log line ("event":"redis"), and
// up() feeds the ferry_shared_cache_up gauge. Thread-safe.
#ifndef FERRY_SERVER_REDIS_STORE_H_
#define FERRY_SERVER_REDIS_STORE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/request_log.h"

struct redisContext;

namespace ferry {

struct RedisOptions {
  // "HOST:PORT", or "unix:/path/to/redis.sock".
  std::string address;
  // Bound of each connect, send and receive.
  std::chrono::milliseconds timeout{200};
  // Idle connections kept open at most (a call finding none idle opens one).
  int connections = 8;
  std::chrono::milliseconds min_backoff{100};
  std::chrono::milliseconds max_backoff{5000};
};

// InvalidArgument unless `address` is HOST:PORT or unix:PATH.
absl::Status ValidateRedisAddress(absl::string_view address);

class RedisStore {
 public:
  // Does not connect: the first call does (so ferryd starts with Redis
  // down, and serves).
  RedisStore(RedisOptions options, Logger& logger);
  ~RedisStore();
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  // The value of `key`, nullopt when there is none; UNAVAILABLE when Redis
  // cannot answer now.
  absl::StatusOr<std::optional<std::string>> Get(const std::string& key);
  // SET key value EX ttl.
  absl::Status Set(const std::string& key, absl::string_view value,
                   std::chrono::seconds ttl);
  // Renews the TTL of each key that exists (EXPIRE, pipelined); whether it
  // existed.
  absl::StatusOr<std::vector<bool>> Refresh(
      const std::vector<std::string>& keys, std::chrono::seconds ttl);

  bool up() const;
  const std::string& address() const { return options_.address; }

 private:
  class Connection;
  // A connection from the pool or a new one; UNAVAILABLE while down.
  absl::StatusOr<std::unique_ptr<Connection>> Acquire();
  void Release(std::unique_ptr<Connection> connection);
  // Records a failure: the connection is dropped and the store goes down.
  absl::Status Failed(absl::string_view what, absl::string_view why);

  const RedisOptions options_;
  Logger& logger_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Connection>> idle_;
  bool down_ = false;
  std::chrono::steady_clock::time_point retry_at_{};
  std::chrono::milliseconds backoff_{0};
};

}  // namespace ferry

#endif  // FERRY_SERVER_REDIS_STORE_H_
