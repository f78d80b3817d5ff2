// The shared tier of the result cache (--cache-redis): successful Lower
// responses in Redis under "ferry:result:DIGEST", so that a request lowered
// by one replica is a hit on every other. It sits behind the in-process
// ResultCache; in-flight de-duplication stays per process.
//
// A value is "FRY1", the lowercase hex SHA-256 of the payload, then the
// serialized LowerResponse. It is used only when the hash matches, the
// payload parses and it answers the digest asked for with this compiler:
// anything else (a truncated or corrupted value, another writer's key) is
// a miss, counted as "corrupt", and never a wrong answer. Entries carry a
// TTL and responses over max_entry_bytes are not stored.
#ifndef FERRY_SERVER_SHARED_CACHE_H_
#define FERRY_SERVER_SHARED_CACHE_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "ferry/v1/compiler.pb.h"
#include "server/redis_store.h"

namespace ferry {

class SharedResultCache {
 public:
  enum class Outcome { kHit, kMiss, kCorrupt, kUnavailable };
  struct Found {
    Outcome outcome = Outcome::kMiss;
    std::optional<v1::LowerResponse> response;  // set on kHit
  };
  enum class Stored { kStored, kTooLarge, kFailed };

  SharedResultCache(RedisStore& redis, std::chrono::seconds ttl,
                    int64_t max_entry_bytes);

  Found Get(const std::string& digest);
  // `wire` is a serialized LowerResponse, computed for `digest` (no per-call
  // field, request id or cached, set).
  Stored Put(const std::string& digest, const std::string& wire);

  // The stored form of `response` (for tests that corrupt it).
  static std::string Encode(const v1::LowerResponse& response);
  // The stored form of a serialized response.
  static std::string EncodeWire(absl::string_view wire);
  static std::string KeyOf(absl::string_view digest);
  static absl::string_view OutcomeName(Outcome outcome);

 private:
  RedisStore& redis_;
  const std::chrono::seconds ttl_;
  const int64_t max_entry_bytes_;
};

}  // namespace ferry

#endif  // FERRY_SERVER_SHARED_CACHE_H_
