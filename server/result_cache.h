// The result cache: responses keyed by request digest, bounded in bytes of
// memory the entries take (the caller charges SpaceUsedLong, not the
// serialized size, which is ~12x smaller), least recently used evicted
// first. Thread-safe.
//
// With a MemoryBudget, every entry is also charged to it: an entry that the
// budget cannot take (even after evicting older entries) is not stored, and
// Shed() gives memory back to running requests.
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
#include "server/memory_budget.h"

namespace ferry {

class ResultCache {
 public:
  // The response; where a `wire` is stored with it, the wire is the whole
  // response and the value may hold every field but the program (a lowered
  // program is written to the wire straight from the IR, never as a
  // message).
  using Value = std::shared_ptr<const v1::LowerResponse>;
  // The response serialized (without request_id, cached false), so that a
  // hit answered in wire form is sent without copying or serializing a
  // message; may be null.
  using Wire = std::shared_ptr<const std::string>;

  // capacity_bytes == 0 disables the cache (nothing is stored). `budget`
  // (may be null) must outlive the cache.
  explicit ResultCache(int64_t capacity_bytes, MemoryBudget* budget = nullptr);
  ~ResultCache();

  // The entry for `key` (and marks it most recently used), or null; its
  // serialized form in `*wire` when `wire` is given.
  Value Lookup(const std::string& key, Wire* wire = nullptr);
  // Stores `value` (and its serialized form `wire`, may be null), charged
  // `bytes` plus the size of `wire`, evicting least recently used entries
  // until it fits. A value larger than the capacity is not stored.
  void Insert(const std::string& key, Value value, int64_t bytes,
              Wire wire = nullptr);
  // Evicts least recently used entries until at least `bytes` are freed or
  // the cache is empty; returns the bytes freed.
  int64_t Shed(int64_t bytes);

  int64_t capacity_bytes() const { return capacity_bytes_; }
  int64_t bytes() const;
  int64_t entries() const;
  int64_t evictions() const;

 private:
  struct Entry {
    std::string key;
    Value value;
    Wire wire;
    int64_t bytes = 0;
  };

  // Drops the least recently used entry (mutex_ held).
  void EvictOldest();

  const int64_t capacity_bytes_;
  MemoryBudget* const budget_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  int64_t bytes_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace ferry

#endif  // FERRY_SERVER_RESULT_CACHE_H_
