#include "server/memory_budget.h"

#include <limits>

namespace ferry {

int64_t RequestMemoryEstimate(int64_t wire_bytes) {
  int64_t scaled = 0, total = 0;
  if (wire_bytes < 0 ||
      __builtin_mul_overflow(wire_bytes, kRequestMemoryFactor, &scaled) ||
      __builtin_add_overflow(scaled, kRequestMemoryBaseBytes, &total))
    return std::numeric_limits<int64_t>::max();
  return total;
}

int64_t JobMemoryEstimate(int64_t nodes) {
  int64_t total = 0;
  if (nodes < 0 ||
      __builtin_mul_overflow(nodes, kJobMemoryPerNodeBytes, &total))
    return std::numeric_limits<int64_t>::max();
  return total;
}

bool MemoryBudget::TryCharge(int64_t bytes) {
  if (bytes < 0) return false;
  int64_t used = used_.load();
  while (true) {
    int64_t next = 0;
    if (__builtin_add_overflow(used, bytes, &next)) return false;
    if (limit_ > 0 && next > limit_) return false;
    if (used_.compare_exchange_weak(used, next)) return true;
  }
}

void MemoryBudget::Release(int64_t bytes) {
  used_.fetch_sub(bytes);
  std::lock_guard<std::mutex> lock(released_mutex_);
  released_.notify_all();
}

std::optional<MemoryBudget::Charge> MemoryBudget::ReserveWithin(
    int64_t bytes, std::chrono::steady_clock::time_point deadline,
    const std::function<bool()>& give_up) {
  constexpr auto kPoll = std::chrono::milliseconds(50);
  while (true) {
    {
      // Under the lock, so a Release between the attempt and the wait is
      // not missed.
      std::unique_lock<std::mutex> lock(released_mutex_);
      if (TryCharge(bytes)) return Charge(this, bytes);
      auto now = std::chrono::steady_clock::now();
      if (now >= deadline || (limit_ > 0 && bytes > limit_))
        return std::nullopt;
      released_.wait_until(lock, std::min(deadline, now + kPoll));
    }
    if (give_up && give_up()) return std::nullopt;
  }
}

std::optional<MemoryBudget::Charge> MemoryBudget::TryReserve(int64_t bytes) {
  if (!TryCharge(bytes)) return std::nullopt;
  return Charge(this, bytes);
}

}  // namespace ferry
