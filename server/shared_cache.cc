#include "server/shared_cache.h"

#include "absl/strings/str_cat.h"
#include "ferry/digest.h"
#include "ferry/version.h"

namespace ferry {
namespace {

constexpr absl::string_view kMagic = "FRY1";
constexpr size_t kHashLength = 64;

}  // namespace

SharedResultCache::SharedResultCache(RedisStore& redis,
                                     std::chrono::seconds ttl,
                                     int64_t max_entry_bytes)
    : redis_(redis), ttl_(ttl), max_entry_bytes_(max_entry_bytes) {}

std::string SharedResultCache::KeyOf(absl::string_view digest) {
  return absl::StrCat("ferry:result:", digest);
}

absl::string_view SharedResultCache::OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kHit:
      return "hit";
    case Outcome::kMiss:
      return "miss";
    case Outcome::kCorrupt:
      return "corrupt";
    case Outcome::kUnavailable:
      return "unavailable";
  }
  return "miss";
}

std::string SharedResultCache::Encode(const v1::LowerResponse& response) {
  return EncodeWire(response.SerializeAsString());
}

std::string SharedResultCache::EncodeWire(absl::string_view wire) {
  return absl::StrCat(kMagic, Sha256HexOf(wire), wire);
}

SharedResultCache::Found SharedResultCache::Get(const std::string& digest) {
  Found found;
  absl::StatusOr<std::optional<std::string>> value = redis_.Get(KeyOf(digest));
  if (!value.ok()) {
    found.outcome = Outcome::kUnavailable;
    return found;
  }
  if (!value->has_value()) return found;  // kMiss
  absl::string_view stored = **value;
  found.outcome = Outcome::kCorrupt;
  if (stored.size() < kMagic.size() + kHashLength ||
      stored.substr(0, kMagic.size()) != kMagic) {
    return found;
  }
  absl::string_view hash = stored.substr(kMagic.size(), kHashLength);
  absl::string_view payload = stored.substr(kMagic.size() + kHashLength);
  if (Sha256HexOf(payload) != hash) return found;
  v1::LowerResponse response;
  if (!response.ParseFromArray(payload.data(),
                               static_cast<int>(payload.size())) ||
      response.request_digest() != digest ||
      response.compiler_version() != kCompilerVersion || !response.ok()) {
    return found;
  }
  found.outcome = Outcome::kHit;
  found.response = std::move(response);
  return found;
}

SharedResultCache::Stored SharedResultCache::Put(const std::string& digest,
                                                 const std::string& wire) {
  if (static_cast<int64_t>(wire.size()) > max_entry_bytes_) {
    return Stored::kTooLarge;
  }
  if (!redis_.Set(KeyOf(digest), EncodeWire(wire), ttl_).ok()) {
    return Stored::kFailed;
  }
  return Stored::kStored;
}

}  // namespace ferry
