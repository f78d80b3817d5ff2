#include "server/result_cache.h"

#include <utility>

namespace ferry {

// Bookkeeping per entry (key, list node, hash node), so that many tiny
// entries still count against the capacity.
constexpr int64_t kEntryOverheadBytes = 128;

ResultCache::ResultCache(int64_t capacity_bytes, MemoryBudget* budget)
    : capacity_bytes_(capacity_bytes), budget_(budget) {}

ResultCache::~ResultCache() {
  if (budget_ != nullptr) budget_->Release(bytes_);
}

void ResultCache::EvictOldest() {
  Entry& oldest = lru_.back();
  bytes_ -= oldest.bytes;
  if (budget_ != nullptr) budget_->Release(oldest.bytes);
  index_.erase(oldest.key);
  lru_.pop_back();
  ++evictions_;
}

ResultCache::Value ResultCache::Lookup(const std::string& key, Wire* wire) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = index_.find(key);
  if (found == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, found->second);
  if (wire != nullptr) *wire = found->second->wire;
  return found->second->value;
}

void ResultCache::Insert(const std::string& key, Value value, int64_t bytes,
                         Wire wire) {
  int64_t charged = bytes + static_cast<int64_t>(key.size()) +
                    (wire != nullptr ? static_cast<int64_t>(wire->size()) : 0) +
                    kEntryOverheadBytes;
  if (charged > capacity_bytes_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto found = index_.find(key); found != index_.end()) {
    bytes_ -= found->second->bytes;
    if (budget_ != nullptr) budget_->Release(found->second->bytes);
    lru_.erase(found->second);
    index_.erase(found);
  }
  while (bytes_ + charged > capacity_bytes_ && !lru_.empty()) EvictOldest();
  if (budget_ != nullptr) {
    while (!budget_->TryCharge(charged)) {
      if (lru_.empty()) return;  // running requests hold the budget
      EvictOldest();
    }
  }
  lru_.push_front(Entry{key, std::move(value), std::move(wire), charged});
  index_.emplace(key, lru_.begin());
  bytes_ += charged;
}

int64_t ResultCache::Shed(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t freed = 0;
  while (freed < bytes && !lru_.empty()) {
    freed += lru_.back().bytes;
    EvictOldest();
  }
  return freed;
}

int64_t ResultCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

int64_t ResultCache::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(lru_.size());
}

int64_t ResultCache::evictions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return evictions_;
}

}  // namespace ferry
