// The process-wide memory budget (--max-memory-bytes): running requests and
// the result cache together, in bytes of real memory.
//
// Model. A request is charged an estimate before it starts: its parsed
// form, the program's IR and the response together take about
// kRequestMemoryFactor times the request's wire size (measured: a parsed
// request alone takes 13-15x), plus kRequestMemoryBaseBytes; a Verify is
// charged in addition what verification may allocate
// (passes/resource_limits.h, VerifyBytes) once its program has lowered. The
// result cache charges each entry the memory the message takes
// (SpaceUsedLong), not its serialized size. A charge that does not fit is
// refused (the service answers RESOURCE_EXHAUSTED with RetryInfo) after the
// cache has given up entries for it: running work comes before cached
// results.
#ifndef FERRY_SERVER_MEMORY_BUDGET_H_
#define FERRY_SERVER_MEMORY_BUDGET_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>

namespace ferry {

inline constexpr int64_t kRequestMemoryFactor = 20;
inline constexpr int64_t kRequestMemoryBaseBytes = int64_t{1} << 20;

// The estimate charged to a request of `wire_bytes` when it arrives (its
// parsed form).
int64_t RequestMemoryEstimate(int64_t wire_bytes);

// What a job's pipeline adds at its peak per node of the program (the IR,
// its copies between passes and the exported response), charged on the
// worker before the job starts; a job that does not fit waits for running
// ones. Measured with bench/memory_per_node (docs/performance.md, "Memory
// admission"): ferryd's peak grew 5.5-7.2 KB per node of a synthetic Lower
// (10k-200k nodes, ~58 wire bytes per node); this plus the arrival charge
// (20 x 58 B) is 7.3 KB per node, above every measurement.
inline constexpr int64_t kJobMemoryPerNodeBytes = 6 << 10;
int64_t JobMemoryEstimate(int64_t nodes);

class MemoryBudget {
 public:
  // limit_bytes == 0: no limit (everything is still counted).
  explicit MemoryBudget(int64_t limit_bytes) : limit_(limit_bytes) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Adds `bytes` when they fit under the limit; false (and nothing charged)
  // otherwise. Thread-safe.
  bool TryCharge(int64_t bytes);
  void Release(int64_t bytes);

  int64_t limit() const { return limit_; }
  int64_t used() const { return used_.load(); }

  // A charge released when it goes out of scope.
  class Charge {
   public:
    Charge() = default;
    Charge(MemoryBudget* budget, int64_t bytes)
        : budget_(budget), bytes_(bytes) {}
    Charge(Charge&& other) noexcept { *this = std::move(other); }
    Charge& operator=(Charge&& other) noexcept {
      if (this != &other) {
        Reset();
        budget_ = other.budget_;
        bytes_ = other.bytes_;
        other.budget_ = nullptr;
        other.bytes_ = 0;
      }
      return *this;
    }
    ~Charge() { Reset(); }
    int64_t bytes() const { return bytes_; }
    void Reset() {
      if (budget_ != nullptr) budget_->Release(bytes_);
      budget_ = nullptr;
      bytes_ = 0;
    }

   private:
    MemoryBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
  };
  std::optional<Charge> TryReserve(int64_t bytes);
  // TryReserve, retried whenever memory is released, until `deadline` or
  // until `give_up` returns true (asked at least every 50 ms). Blocks the
  // calling thread: for workers, never gRPC's threads.
  std::optional<Charge> ReserveWithin(
      int64_t bytes, std::chrono::steady_clock::time_point deadline,
      const std::function<bool()>& give_up);

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
  std::mutex released_mutex_;
  std::condition_variable released_;
};

}  // namespace ferry

#endif  // FERRY_SERVER_MEMORY_BUDGET_H_
