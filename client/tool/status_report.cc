#include "client/tool/status_report.h"

#include <cstdio>
#include <vector>

#include "client/tool/commands.h"
#include "ferry/client.h"
#include "passes/resource_limits.h"

namespace ferry::tool {

int ExitCodeForStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kFailedPrecondition:
      return kExitNoDevice;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return kExitRetry;
    case absl::StatusCode::kResourceExhausted:
      // RetryInfo is the server's word that waiting helps; without it the
      // request is over a fixed limit and fails again.
      return ErrorDetail<google::rpc::RetryInfo>(status) ? kExitRetry
                                                         : kExitErrors;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return kExitErrors;
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      return kExitUsage;
    default:
      // INTERNAL, UNKNOWN, DATA_LOSS, and codes the tool never expects
      // (UNIMPLEMENTED, NOT_FOUND, ALREADY_EXISTS).
      return kExitInternal;
  }
}

int ReportStatus(const std::string& command, const std::string& file,
                 const absl::Status& status) {
  std::string message(status.message());
  std::vector<std::string> limits;
  if (auto quota = ErrorDetail<google::rpc::QuotaFailure>(status)) {
    for (const auto& violation : quota->violations()) {
      limits.push_back(violation.description());
    }
  } else if (auto violation = GetResourceViolation(status)) {
    // In-process: worded as ferryd words its QuotaFailure.
    message = violation->RefusalMessage();
    limits.push_back(violation->QuotaDescription());
  }
  std::fprintf(stderr, "ferry %s: %s: %s\n", command.c_str(),
               std::string(absl::StatusCodeToString(status.code())).c_str(),
               message.c_str());
  if (auto bad_request = ErrorDetail<google::rpc::BadRequest>(status)) {
    for (const auto& violation : bad_request->field_violations()) {
      std::fprintf(stderr, "%s: %s: %s\n", file.c_str(),
                   violation.field().c_str(), violation.description().c_str());
    }
  }
  for (const std::string& limit : limits) {
    std::fprintf(stderr, "  limit: %s\n", limit.c_str());
  }
  if (auto retry = ErrorDetail<google::rpc::RetryInfo>(status)) {
    std::fprintf(stderr, "  retry after %lld.%03ds\n",
                 static_cast<long long>(retry->retry_delay().seconds()),
                 retry->retry_delay().nanos() / 1'000'000);
  }
  if (auto precondition =
          ErrorDetail<google::rpc::PreconditionFailure>(status)) {
    for (const auto& violation : precondition->violations()) {
      std::fprintf(stderr, "  %s %s: %s\n", violation.type().c_str(),
                   violation.subject().c_str(),
                   violation.description().c_str());
    }
  }
  return ExitCodeForStatus(status);
}

}  // namespace ferry::tool
