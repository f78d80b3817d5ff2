// Cooperative cancellation of long runtime work.
//
// A CancelToken says whether work started for a caller should stop, and
// why: the caller cancelled, its deadline passed, or the process is
// draining. The service owns one token per call (with the call's deadline,
// cancelled by the client's cancel, and a parent token the drain cancels);
// the ferry tool and tests may own one too.
//
// Work reaches its token through the calling thread: a CancelScope installs
// a token for the scope's lifetime, and StopRequested() (cheap: a
// thread-local load, two atomic loads and, when a deadline is set, a clock
// read) asks the innermost one. Without a scope nothing ever stops.
//
// Who checks, and how often:
//  - the executor before and after every node, inside delegates too;
//  - host kernels (host_kernels*.cc) every kStopPollUnits elements (or
//    multiply-adds) of work, and between the blocks of a large BLAS matrix
//    product, so a kernel gives up within milliseconds; the executor then
//    discards its result;
//  - the CUDA backend before every launch and while it waits for its stream
//    (copies, synchronize); host fallbacks inside it as host kernels.
// Stopped work returns absl::CancelledError naming where it stopped; the
// caller tells the reason from the token (Reason()).
#ifndef FERRY_RUNTIME_CANCEL_H_
#define FERRY_RUNTIME_CANCEL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace ferry {

enum class StopReason : int {
  kNone = 0,
  kCancelled = 1,         // the caller gave up
  kDeadlineExceeded = 2,  // the deadline passed
  kDraining = 3,          // the process is shutting down
};
std::string_view StopReasonName(StopReason reason);

class CancelToken {
 public:
  using Clock = std::chrono::steady_clock;

  // A token that also stops when `parent` does (the parent must outlive it).
  explicit CancelToken(const CancelToken* parent = nullptr) : parent_(parent) {}
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  // Stops work once `deadline` has passed. Thread-safe.
  void SetDeadline(Clock::time_point deadline);
  // Asks work to stop. The first reason given is kept. Thread-safe.
  void Cancel(StopReason reason);

  // Why work should stop; kNone while it may go on. Its own cancel first,
  // then its deadline, then the parent's reason.
  StopReason Reason() const;
  bool StopRequested() const { return Reason() != StopReason::kNone; }

 private:
  const CancelToken* parent_;
  std::atomic<int> reason_{0};
  std::atomic<int64_t> deadline_ns_{INT64_MAX};  // since Clock's epoch
};

// Installs `token` (may be null: nothing stops) as the calling thread's
// current token until the scope ends; scopes nest.
class CancelScope {
 public:
  explicit CancelScope(const CancelToken* token);
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  const CancelToken* previous_;
};

// The calling thread's current token, or null.
const CancelToken* CurrentCancelToken();
// Whether the current token asks work to stop.
bool StopRequested();
// OK, or CancelledError("<where>stopped (<reason>)") when the current
// token asks work to stop (`where` ends in ": ").
absl::Status CheckStop(std::string_view where);

// Amortized polling for loops (host kernels): StopTick(n) after n units of
// work (elements, multiply-adds). The calling thread's work is counted
// across loops, nested ones too, and the current token polled once every
// kStopPollUnits units; once it has said stop, every later tick in the same
// scope says stop at once, so nested loops unwind quickly.
inline constexpr int64_t kStopPollUnits = int64_t{1} << 16;

namespace cancel_internal {
inline thread_local int64_t budget = kStopPollUnits;
inline thread_local bool stopped = false;
bool Poll();  // resets the budget; sets `stopped` when the token says stop
}  // namespace cancel_internal

inline bool StopTick(int64_t work = 1) {
  if (cancel_internal::stopped) return true;
  cancel_internal::budget -= work;
  if (cancel_internal::budget > 0) return false;
  return cancel_internal::Poll();
}

}  // namespace ferry

#endif  // FERRY_RUNTIME_CANCEL_H_
