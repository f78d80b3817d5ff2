#include "server/rpc_errors.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace ferry {
namespace {

// Builds the google.rpc.Status and packs it into a grpc::Status.
class RichStatus {
 public:
  RichStatus(grpc::StatusCode code, std::string message,
             absl::string_view reason) {
    status_.set_code(code);
    status_.set_message(TruncateUtf8(message, kMaxStatusMessageBytes));
    google::rpc::ErrorInfo info;
    info.set_domain(kErrorDomain);
    info.set_reason(std::string(reason));
    Add(info);
  }
  RichStatus& Add(const google::protobuf::Message& detail) {
    status_.add_details()->PackFrom(detail);
    return *this;
  }
  grpc::Status Build() const {
    google::rpc::Status status = status_;
    // The last resort of the bound: the ErrorInfo (always first) alone.
    if (status.ByteSizeLong() > kMaxStatusDetailsBytes) {
      status.mutable_details()->DeleteSubrange(1, status.details_size() - 1);
    }
    return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                        status.message(), status.SerializeAsString());
  }

 private:
  google::rpc::Status status_;
};

std::string Text(absl::string_view text) {
  return TruncateUtf8(text, kMaxDetailTextBytes);
}

google::rpc::RetryInfo RetryAfter(std::chrono::milliseconds delay) {
  google::rpc::RetryInfo retry;
  retry.mutable_retry_delay()->set_seconds(delay.count() / 1000);
  retry.mutable_retry_delay()->set_nanos(
      static_cast<int32_t>((delay.count() % 1000) * 1'000'000));
  return retry;
}

}  // namespace

std::string TruncateUtf8(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  constexpr absl::string_view kEllipsis = "...";
  if (max_bytes < kEllipsis.size())
    return std::string(kEllipsis.substr(0, max_bytes));
  size_t end = max_bytes - kEllipsis.size();
  // Back up to the start of a character: never split a UTF-8 sequence.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return absl::StrCat(text.substr(0, end), kEllipsis);
}

grpc::Status InvalidFieldError(absl::string_view field,
                               absl::string_view description,
                               absl::string_view reason) {
  google::rpc::BadRequest bad_request;
  google::rpc::BadRequest::FieldViolation* violation =
      bad_request.add_field_violations();
  violation->set_field(Text(field));
  violation->set_description(Text(description));
  violation->set_reason(std::string(reason));
  return RichStatus(grpc::StatusCode::INVALID_ARGUMENT,
                    absl::StrCat(field, ": ", description), reason)
      .Add(bad_request)
      .Build();
}

grpc::Status OverLimitError(absl::string_view subject, int64_t value,
                            int64_t limit, absl::string_view reason) {
  google::rpc::QuotaFailure quota;
  google::rpc::QuotaFailure::Violation* violation = quota.add_violations();
  violation->set_subject(Text(subject));
  std::string description =
      absl::StrCat(subject, " is ", value, ", over the limit of ", limit,
                   " (see GetCapabilities.limits)");
  violation->set_description(Text(description));
  return RichStatus(grpc::StatusCode::RESOURCE_EXHAUSTED,
                    absl::StrCat("request too large: ", description), reason)
      .Add(quota)
      .Build();
}

grpc::Status ResourceLimitRpcError(const ResourceViolation& violation) {
  google::rpc::QuotaFailure quota;
  google::rpc::QuotaFailure::Violation* detail = quota.add_violations();
  detail->set_subject(Text(violation.subject));
  detail->set_description(Text(violation.QuotaDescription()));
  absl::string_view reason =
      violation.limit == "max_verify_bytes" ? "VERIFY_TOO_LARGE"
      : violation.limit == "max_expansion"  ? "EXPANSION_TOO_LARGE"
                                            : "TENSOR_TOO_LARGE";
  return RichStatus(grpc::StatusCode::RESOURCE_EXHAUSTED,
                    violation.RefusalMessage(), reason)
      .Add(quota)
      .Build();
}

grpc::Status MemoryBudgetError(int64_t needed, int64_t used, int64_t limit,
                               std::chrono::milliseconds retry_after) {
  google::rpc::QuotaFailure quota;
  google::rpc::QuotaFailure::Violation* violation = quota.add_violations();
  violation->set_subject("memory");
  std::string description =
      absl::StrCat("the call needs an estimated ", needed, " bytes; ", used,
                   " of the ", limit, "-byte memory budget are in use");
  violation->set_description(description);
  return RichStatus(grpc::StatusCode::RESOURCE_EXHAUSTED,
                    absl::StrCat("server memory budget full: ", description,
                                 "; retry after ", retry_after.count(), "ms"),
                    "MEMORY_BUDGET")
      .Add(quota)
      .Add(RetryAfter(retry_after))
      .Build();
}

grpc::Status OutOfMemoryError(absl::string_view where,
                              std::chrono::milliseconds retry_after) {
  return RichStatus(grpc::StatusCode::RESOURCE_EXHAUSTED,
                    absl::StrCat("out of memory ", where), "OUT_OF_MEMORY")
      .Add(RetryAfter(retry_after))
      .Build();
}

grpc::Status QueueFullError(int queue_depth,
                            std::chrono::milliseconds retry_after) {
  google::rpc::RetryInfo retry = RetryAfter(retry_after);
  return RichStatus(
             grpc::StatusCode::RESOURCE_EXHAUSTED,
             absl::StrCat("work queue full (", queue_depth,
                          " waiting); retry after ", retry_after.count(), "ms"),
             "QUEUE_FULL")
      .Add(retry)
      .Build();
}

grpc::Status DeviceUnavailableError(absl::string_view device,
                                    absl::string_view why) {
  google::rpc::PreconditionFailure failure;
  google::rpc::PreconditionFailure::Violation* violation =
      failure.add_violations();
  violation->set_type("DEVICE");
  violation->set_subject(Text(device));
  violation->set_description(Text(why));
  return RichStatus(grpc::StatusCode::FAILED_PRECONDITION,
                    absl::StrCat("verification device ", device,
                                 " is not available: ", why),
                    "DEVICE_UNAVAILABLE")
      .Add(failure)
      .Build();
}

grpc::Status MissingBlobsError(const std::vector<std::string>& subjects,
                               absl::string_view why) {
  google::rpc::PreconditionFailure failure;
  for (size_t i = 0; i < subjects.size() && i < kMaxFieldViolations; ++i) {
    google::rpc::PreconditionFailure::Violation* violation =
        failure.add_violations();
    violation->set_type("MISSING");
    violation->set_subject(Text(subjects[i]));
    violation->set_description(Text(why));
  }
  std::string message =
      absl::StrCat(subjects.size(), " blob(s) missing: ", why);
  if (!subjects.empty())
    absl::StrAppend(&message, " (first: ", subjects[0], ")");
  return RichStatus(grpc::StatusCode::FAILED_PRECONDITION, message,
                    "MISSING_BLOBS")
      .Add(failure)
      .Build();
}

grpc::Status DrainingError() {
  return RichStatus(grpc::StatusCode::UNAVAILABLE,
                    "server is shutting down; retry on another replica",
                    "DRAINING")
      .Build();
}

grpc::Status UnauthenticatedError(absl::string_view why) {
  return RichStatus(grpc::StatusCode::UNAUTHENTICATED, std::string(why),
                    "BAD_TOKEN")
      .Build();
}

grpc::Status CallDeadlineExceededError(absl::string_view where) {
  return RichStatus(grpc::StatusCode::DEADLINE_EXCEEDED,
                    absl::StrCat("deadline exceeded ", where),
                    "DEADLINE_EXCEEDED")
      .Build();
}

grpc::Status CallCancelledError(absl::string_view where) {
  return RichStatus(grpc::StatusCode::CANCELLED,
                    absl::StrCat("call cancelled ", where), "CANCELLED")
      .Build();
}

grpc::Status InternalRpcError(absl::string_view message) {
  return RichStatus(grpc::StatusCode::INTERNAL, std::string(message),
                    "INTERNAL")
      .Build();
}

absl::string_view StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    default:
      return "UNKNOWN";
  }
}

}  // namespace ferry

namespace ferry {

std::optional<std::string> RetryPushbackMs(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) {
    return std::nullopt;
  }
  google::rpc::Status details;
  if (details.ParseFromString(status.error_details())) {
    for (const google::protobuf::Any& any : details.details()) {
      google::rpc::RetryInfo retry;
      if (!any.UnpackTo(&retry)) continue;
      return absl::StrCat(retry.retry_delay().seconds() * 1000 +
                          retry.retry_delay().nanos() / 1'000'000);
    }
  }
  return "-1";
}

}  // namespace ferry
