// The result cache: responses keyed by request digest, bounded in bytes,
// least recently used evicted first. Thread-safe.
//
// Only responses that are a pure function of the key belong here: the
// service stores successful lowerings, never errors, cancellations or
// verification runs (docs/service.md, "Caching").
#ifndef FERRY_SERVER_RESULT_CACHE_H_
#define FERRY_SERVER_RESULT_CACHE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "ferry/v1/compiler.pb.h"

namespace ferry {

class ResultCache {
 public:
  using Value = std::shared_ptr<const v1::LowerResponse>;

  // capacity_bytes == 0 disables the cache (nothing is stored).
  explicit ResultCache(int64_t capacity_bytes);

  // The entry for `key` (and marks it most recently used), or null.
  Value Lookup(const std::string& key);
  // Stores `value`, charged `bytes`, evicting least recently used entries
  // until it fits. A value larger than the capacity is not stored.
  void Insert(const std::string& key, Value value, int64_t bytes);

  int64_t capacity_bytes() const { return capacity_bytes_; }
  int64_t bytes() const;
  int64_t entries() const;
  int64_t evictions() const;

 private:
  struct Entry {
    std::string key;
    Value value;
    int64_t bytes = 0;
  };

  const int64_t capacity_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  int64_t bytes_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace ferry

#endif  // FERRY_SERVER_RESULT_CACHE_H_
