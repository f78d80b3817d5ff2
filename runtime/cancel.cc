#include "runtime/cancel.h"

#include <string>

namespace ferry {
namespace {

thread_local const CancelToken* current_token = nullptr;

int64_t Nanos(CancelToken::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

}  // namespace

std::string_view StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kNone:
      return "none";
    case StopReason::kCancelled:
      return "cancelled";
    case StopReason::kDeadlineExceeded:
      return "deadline exceeded";
    case StopReason::kDraining:
      return "server draining";
  }
  return "unknown";
}

void CancelToken::SetDeadline(Clock::time_point deadline) {
  deadline_ns_.store(Nanos(deadline), std::memory_order_relaxed);
}

void CancelToken::Cancel(StopReason reason) {
  if (reason == StopReason::kNone) return;
  int expected = 0;
  reason_.compare_exchange_strong(expected, static_cast<int>(reason),
                                  std::memory_order_acq_rel);
}

StopReason CancelToken::Reason() const {
  if (int own = reason_.load(std::memory_order_acquire); own != 0) {
    return static_cast<StopReason>(own);
  }
  int64_t deadline = deadline_ns_.load(std::memory_order_relaxed);
  if (deadline != INT64_MAX && Nanos(Clock::now()) >= deadline) {
    return StopReason::kDeadlineExceeded;
  }
  return parent_ != nullptr ? parent_->Reason() : StopReason::kNone;
}

CancelScope::CancelScope(const CancelToken* token) : previous_(current_token) {
  current_token = token;
  cancel_internal::stopped = false;
  cancel_internal::budget = kStopPollUnits;
}

CancelScope::~CancelScope() {
  current_token = previous_;
  cancel_internal::stopped = false;
  cancel_internal::budget = kStopPollUnits;
}

namespace cancel_internal {

bool Poll() {
  budget = kStopPollUnits;
  stopped = current_token != nullptr && current_token->StopRequested();
  return stopped;
}

}  // namespace cancel_internal

const CancelToken* CurrentCancelToken() { return current_token; }

bool StopRequested() {
  return current_token != nullptr && current_token->StopRequested();
}

absl::Status CheckStop(std::string_view where) {
  if (current_token == nullptr) return absl::OkStatus();
  StopReason reason = current_token->Reason();
  if (reason == StopReason::kNone) return absl::OkStatus();
  std::string message(where);
  message += "stopped (";
  message += StopReasonName(reason);
  message += ")";
  return absl::CancelledError(message);
}

}  // namespace ferry
