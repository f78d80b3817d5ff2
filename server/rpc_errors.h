// Request-level failures as gRPC statuses carrying google.rpc details
// (google.rpc.Status serialized into grpc::Status::error_details(), which
// travels as the `grpc-status-details-bin` trailer).
//
// Every error also carries an ErrorInfo {domain "ferry.v1", reason} so that
// clients can branch on a stable reason instead of parsing messages.
//
// Bounded: trailers must fit gRPC's 8 KiB metadata limit, or the caller sees
// only "received initial metadata size exceeds limit". So the message is cut
// to kMaxStatusMessageBytes, every string in a detail to kMaxDetailTextBytes
// (whole UTF-8 characters, then "..."), a BadRequest lists at most
// kMaxFieldViolations plus a count, and a google.rpc.Status still over
// kMaxStatusDetailsBytes keeps only its ErrorInfo. Everything wrong *with a
// program* goes in the response body instead (docs/service.md).
#ifndef FERRY_SERVER_RPC_ERRORS_H_
#define FERRY_SERVER_RPC_ERRORS_H_

#include <grpcpp/support/status.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "passes/diagnostics.h"
#include "passes/resource_limits.h"

namespace ferry {

inline constexpr char kErrorDomain[] = "ferry.v1";
inline constexpr size_t kMaxStatusMessageBytes = 512;
inline constexpr size_t kMaxDetailTextBytes = 200;
inline constexpr int kMaxFieldViolations = 5;
inline constexpr size_t kMaxStatusDetailsBytes = 3072;

// `text` cut to at most `max_bytes` (whole UTF-8 characters, "..." last).
std::string TruncateUtf8(absl::string_view text, size_t max_bytes);

// INVALID_ARGUMENT + BadRequest for one field.
grpc::Status InvalidFieldError(absl::string_view field,
                               absl::string_view description,
                               absl::string_view reason);

// RESOURCE_EXHAUSTED + QuotaFailure: the request is over a limit.
grpc::Status OverLimitError(absl::string_view subject, int64_t value,
                            int64_t limit, absl::string_view reason);

// RESOURCE_EXHAUSTED + QuotaFailure{subject: the node or constant}: the
// program is over a per-request resource limit (reason TENSOR_TOO_LARGE,
// VERIFY_TOO_LARGE or EXPANSION_TOO_LARGE).
grpc::Status ResourceLimitRpcError(const ResourceViolation& violation);

// RESOURCE_EXHAUSTED + QuotaFailure{subject "memory"} + RetryInfo: the
// process-wide memory budget cannot take `needed` bytes now
// (MEMORY_BUDGET).
grpc::Status MemoryBudgetError(int64_t needed, int64_t used, int64_t limit,
                               std::chrono::milliseconds retry_after);

// RESOURCE_EXHAUSTED + RetryInfo: an allocation failed while `where`
// (OUT_OF_MEMORY).
grpc::Status OutOfMemoryError(absl::string_view where,
                              std::chrono::milliseconds retry_after);

// RESOURCE_EXHAUSTED + RetryInfo: the work queue is full.
grpc::Status QueueFullError(int queue_depth,
                            std::chrono::milliseconds retry_after);

// FAILED_PRECONDITION + PreconditionFailure{type "DEVICE"}.
grpc::Status DeviceUnavailableError(absl::string_view device,
                                    absl::string_view why);

// UNAVAILABLE: the server is draining (clients retry elsewhere).
// FAILED_PRECONDITION + PreconditionFailure with one MISSING violation per
// blob (subject "blobs/HASH/SIZE", as REAPI), at most kMaxFieldViolations
// of them and a count: the blobs a request refers to that the server does
// not hold (upload them, then retry).
grpc::Status MissingBlobsError(const std::vector<std::string>& subjects,
                               absl::string_view why);
grpc::Status DrainingError();

// The `grpc-retry-pushback-ms` trailer to send with `status`, which gRPC's
// client retry honours (gRFC A6): for RESOURCE_EXHAUSTED, the RetryInfo
// delay in milliseconds where the status carries one, else "-1" (do not
// retry: a limit, which waiting does not cure); nothing for other codes.
std::optional<std::string> RetryPushbackMs(const grpc::Status& status);
inline constexpr char kRetryPushbackTrailer[] = "grpc-retry-pushback-ms";

// UNAUTHENTICATED: no or a wrong bearer token.
grpc::Status UnauthenticatedError(absl::string_view why);

// DEADLINE_EXCEEDED / CANCELLED while `where` (queued, a pass, verifying).
grpc::Status CallDeadlineExceededError(absl::string_view where);
grpc::Status CallCancelledError(absl::string_view where);

// INTERNAL, for a pipeline or runtime failure that is not the caller's.
grpc::Status InternalRpcError(absl::string_view message);

// "OK", "INVALID_ARGUMENT", ... (metrics labels and logs).
absl::string_view StatusCodeName(grpc::StatusCode code);

}  // namespace ferry

#endif  // FERRY_SERVER_RPC_ERRORS_H_
