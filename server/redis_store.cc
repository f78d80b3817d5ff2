#include "server/redis_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ferry {
namespace {

using Clock = std::chrono::steady_clock;

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

timeval ToTimeval(std::chrono::milliseconds duration) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(duration.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((duration.count() % 1000) * 1000);
  return tv;
}

struct HostPort {
  std::string host;
  int port = 0;
};

std::optional<HostPort> ParseHostPort(absl::string_view address) {
  size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return std::nullopt;
  HostPort result;
  result.host = std::string(address.substr(0, colon));
  if (!absl::SimpleAtoi(address.substr(colon + 1), &result.port) ||
      result.port < 1 || result.port > 65535) {
    return std::nullopt;
  }
  return result;
}

}  // namespace

absl::Status ValidateRedisAddress(absl::string_view address) {
  absl::string_view path = address;
  if (absl::ConsumePrefix(&path, "unix:")) {
    if (path.empty()) {
      return absl::InvalidArgumentError(
          "--cache-redis: 'unix:' needs a socket path");
    }
    return absl::OkStatus();
  }
  if (!ParseHostPort(address)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cache-redis: '", address, "' is not HOST:PORT or unix:PATH"));
  }
  return absl::OkStatus();
}

class RedisStore::Connection {
 public:
  explicit Connection(redisContext* context) : context_(context) {}
  ~Connection() {
    if (context_ != nullptr) redisFree(context_);
  }
  redisContext* get() { return context_; }

 private:
  redisContext* context_;
};

RedisStore::RedisStore(RedisOptions options, Logger& logger)
    : options_(std::move(options)), logger_(logger) {}

RedisStore::~RedisStore() = default;

bool RedisStore::up() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !down_;
}

absl::StatusOr<std::unique_ptr<RedisStore::Connection>> RedisStore::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (down_ && Clock::now() < retry_at_) {
      return absl::UnavailableError(
          absl::StrCat("redis ", options_.address, " is down"));
    }
    if (!idle_.empty()) {
      std::unique_ptr<Connection> connection = std::move(idle_.back());
      idle_.pop_back();
      return connection;
    }
  }
  const timeval tv = ToTimeval(options_.timeout);
  redisContext* context = nullptr;
  absl::string_view path = options_.address;
  if (absl::ConsumePrefix(&path, "unix:")) {
    context = redisConnectUnixWithTimeout(std::string(path).c_str(), tv);
  } else if (std::optional<HostPort> target = ParseHostPort(path)) {
    context = redisConnectWithTimeout(target->host.c_str(), target->port, tv);
  }
  if (context == nullptr) return Failed("connect", "cannot allocate a context");
  auto connection = std::make_unique<Connection>(context);
  if (context->err != 0) return Failed("connect", context->errstr);
  if (redisSetTimeout(context, tv) != REDIS_OK) {
    return Failed("connect", "cannot set the socket timeout");
  }
  return connection;
}

void RedisStore::Release(std::unique_ptr<Connection> connection) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (down_) {
    down_ = false;
    backoff_ = std::chrono::milliseconds(0);
    LogLine line = NewLogLine("redis");
    line.set_level("info");
    line.set_address(options_.address);
    line.set_state("up");
    logger_.Write(line);
  }
  if (static_cast<int>(idle_.size()) < options_.connections) {
    idle_.push_back(std::move(connection));
  }
}

absl::Status RedisStore::Failed(absl::string_view what, absl::string_view why) {
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.clear();  // the others are likely broken too
  backoff_ = backoff_.count() == 0
                 ? options_.min_backoff
                 : std::min(backoff_ * 2, options_.max_backoff);
  retry_at_ = Clock::now() + backoff_;
  if (!down_) {
    down_ = true;
    LogLine line = NewLogLine("redis");
    line.set_level("warning");
    line.set_address(options_.address);
    line.set_state("down");
    line.set_error(absl::StrCat(what, ": ", why));
    line.set_retry_ms(backoff_.count());
    logger_.Write(line);
  }
  return absl::UnavailableError(
      absl::StrCat("redis ", options_.address, ": ", what, ": ", why));
}

absl::StatusOr<std::optional<std::string>> RedisStore::Get(
    const std::string& key) {
  absl::StatusOr<std::unique_ptr<Connection>> connection = Acquire();
  if (!connection.ok()) return connection.status();
  const char* argv[] = {"GET", key.data()};
  const size_t lengths[] = {3, key.size()};
  Reply reply(static_cast<redisReply*>(
      redisCommandArgv((*connection)->get(), 2, argv, lengths)));
  if (reply == nullptr) return Failed("GET", (*connection)->get()->errstr);
  std::optional<std::string> value;
  if (reply->type == REDIS_REPLY_STRING) {
    value.emplace(reply->str, reply->len);
  } else if (reply->type != REDIS_REPLY_NIL) {
    return Failed("GET", reply->type == REDIS_REPLY_ERROR
                             ? absl::string_view(reply->str, reply->len)
                             : "unexpected reply");
  }
  Release(*std::move(connection));
  return value;
}

absl::Status RedisStore::Set(const std::string& key, absl::string_view value,
                             std::chrono::seconds ttl) {
  absl::StatusOr<std::unique_ptr<Connection>> connection = Acquire();
  if (!connection.ok()) return connection.status();
  const std::string seconds = absl::StrCat(std::max<int64_t>(ttl.count(), 1));
  const char* argv[] = {"SET", key.data(), value.data(), "EX", seconds.data()};
  const size_t lengths[] = {3, key.size(), value.size(), 2, seconds.size()};
  Reply reply(static_cast<redisReply*>(
      redisCommandArgv((*connection)->get(), 5, argv, lengths)));
  if (reply == nullptr) return Failed("SET", (*connection)->get()->errstr);
  if (reply->type == REDIS_REPLY_ERROR) {
    // A refusal (e.g. OOM under maxmemory) is Redis answering: the
    // connection stays up, the value is not stored.
    absl::Status refused = absl::ResourceExhaustedError(
        absl::StrCat("redis SET: ", absl::string_view(reply->str, reply->len)));
    Release(*std::move(connection));
    return refused;
  }
  Release(*std::move(connection));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<bool>> RedisStore::Refresh(
    const std::vector<std::string>& keys, std::chrono::seconds ttl) {
  absl::StatusOr<std::unique_ptr<Connection>> connection = Acquire();
  if (!connection.ok()) return connection.status();
  redisContext* context = (*connection)->get();
  const std::string seconds = absl::StrCat(std::max<int64_t>(ttl.count(), 1));
  for (const std::string& key : keys) {
    const char* argv[] = {"EXPIRE", key.data(), seconds.data()};
    const size_t lengths[] = {6, key.size(), seconds.size()};
    if (redisAppendCommandArgv(context, 3, argv, lengths) != REDIS_OK) {
      return Failed("EXPIRE", context->errstr);
    }
  }
  std::vector<bool> found;
  found.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context, &raw) != REDIS_OK) {
      return Failed("EXPIRE", context->errstr);
    }
    Reply reply(static_cast<redisReply*>(raw));
    if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER) {
      return Failed("EXPIRE", "unexpected reply");
    }
    found.push_back(reply->integer == 1);
  }
  Release(*std::move(connection));
  return found;
}

}  // namespace ferry
