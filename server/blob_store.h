// Blobs by digest (UploadBlob, FindMissingBlobs, Constant.data_digest):
// bytes stored once under their SHA-256, in the shared Redis tier when
// ferryd has one (--cache-redis) or else in a local directory (--blob-dir).
//
// A blob is checked against its digest when it is stored and again when it
// is read: a value that no longer hashes to its name (a truncated file, a
// corrupted Redis value) is reported missing and counted, never returned.
#ifndef FERRY_SERVER_BLOB_STORE_H_
#define FERRY_SERVER_BLOB_STORE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/v1/program.pb.h"
#include "server/redis_store.h"

namespace ferry {

class BlobStore {
 public:
  virtual ~BlobStore() = default;
  // "redis" or "disk".
  virtual const char* kind() const = 0;
  // Whether each blob is held (and, where the store has lifetimes, keeps
  // it for another lifetime).
  virtual absl::StatusOr<std::vector<bool>> Contains(
      const std::vector<v1::Digest>& digests) = 0;
  // Stores `bytes`, which the caller has checked hash to `digest`.
  virtual absl::Status Put(const v1::Digest& digest, std::string bytes) = 0;
  // The blob's bytes, checked against `digest`; nullopt when it is not held
  // (or what is held does not match: then counted in corrupt()).
  virtual absl::StatusOr<std::optional<std::string>> Get(
      const v1::Digest& digest) = 0;

  int64_t corrupt() const { return corrupt_.load(); }

 protected:
  // Whether `bytes` are the blob `digest` names; counts a mismatch.
  bool Matches(const v1::Digest& digest, const std::string& bytes);

 private:
  std::atomic<int64_t> corrupt_{0};
};

// Files named by hash in `directory` (created if missing), written to a
// temporary name and renamed into place. At most `capacity_bytes` in all:
// storing beyond evicts the least recently used blobs (by modification
// time, which Contains and Get refresh).
std::unique_ptr<BlobStore> MakeDiskBlobStore(std::string directory,
                                             int64_t capacity_bytes);
absl::Status CheckBlobDirectory(const std::string& directory);

// Keys "ferry:blob:HASH" in Redis with a TTL that Contains and Get renew.
// Errors of Redis are UNAVAILABLE (retry later).
std::unique_ptr<BlobStore> MakeRedisBlobStore(RedisStore& redis,
                                              std::chrono::seconds ttl);

}  // namespace ferry

#endif  // FERRY_SERVER_BLOB_STORE_H_
