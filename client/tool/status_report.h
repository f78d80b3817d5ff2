// How the `ferry` tool reports a failed call, remote (a ferryd's gRPC
// status) or in-process (ferry::Lower's and VerifyPrograms' absl statuses,
// which use the same codes): one message and one exit code for both, so
// that `ferry lower --server` and `ferry lower` print the same bytes and
// exit with the same code.
#ifndef FERRY_CLIENT_TOOL_STATUS_REPORT_H_
#define FERRY_CLIENT_TOOL_STATUS_REPORT_H_

#include <string>

#include "absl/status/status.h"

namespace ferry::tool {

// The exit code for a failed call (commands.h):
//   FAILED_PRECONDITION                              3 device not available
//   UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED,
//   CANCELLED, RESOURCE_EXHAUSTED with RetryInfo     4 retry later
//   RESOURCE_EXHAUSTED without RetryInfo (a fixed
//   limit), INVALID_ARGUMENT, OUT_OF_RANGE           1 refused as sent
//   UNAUTHENTICATED, PERMISSION_DENIED               2 credentials
//   INTERNAL, UNKNOWN, DATA_LOSS and any other code  5 internal error
// The server attaches RetryInfo exactly when waiting helps (QUEUE_FULL,
// MEMORY_BUDGET, OUT_OF_MEMORY); a request over max_tensor_bytes or the
// whole memory budget is refused again however long one waits.
int ExitCodeForStatus(const absl::Status& status);

// Prints `status` to stderr ("ferry COMMAND: CODE: message", then one line
// per google.rpc detail it carries) and returns ExitCodeForStatus. `file`
// names the input in BadRequest lines.
int ReportStatus(const std::string& command, const std::string& file,
                 const absl::Status& status);

}  // namespace ferry::tool

#endif  // FERRY_CLIENT_TOOL_STATUS_REPORT_H_
