// libferry_client: a thin C++ client of the Ferry compilation service
// (ferry.v1.Compiler, docs/service.md).
//
//   ferry::ClientOptions options;
//   options.target = "localhost:50051";
//   absl::StatusOr<std::unique_ptr<ferry::Client>> client =
//       ferry::Client::Create(options);
//   if (!client.ok()) return client.status();
//   absl::StatusOr<ferry::v1::LowerResponse> lowered =
//       (*client)->Lower(request);
//
// Nothing here throws. Every call returns a status: the gRPC status code as
// an absl::StatusCode (the numbering is the same), with the server's
// google.rpc.Status details available through ErrorDetails(). A program
// that is malformed or fails to compile is not an error status: it is an OK
// response with ok() (Verify: lowered()) false and every diagnostic in the
// body.
//
// Calls carry a deadline (ClientOptions::default_deadline unless the call
// sets one). Every call is idempotent, so gRPC retries one that fails with
// UNAVAILABLE (server unreachable, restarting or draining) or with a
// RESOURCE_EXHAUSTED the server says to retry, within its deadline
// (RetryOptions); no other status is retried. A Client is
// thread-safe; async callbacks run on gRPC threads and must not block.
//
// The synchronous Lower asks before it sends a large program to a server
// that caches (ClientOptions::lookup_first): it computes the request's
// digest (ferry/digest.h) and calls Lookup; only a miss sends the program.
// Lower and Verify send constants of at least
// ClientOptions::blob_threshold_bytes by digest when the server keeps blobs
// (GetCapabilities().blob_store): Verify uploads the ones the server lacks
// first (FindMissingBlobs, UploadBlob), so a model whose weights exceed the
// message limit verifies; Lower uploads only what a pass turns out to need, and
// the lowered program it returns has the bytes back inline. The async forms
// send the request as given.
#ifndef FERRY_CLIENT_CLIENT_H_
#define FERRY_CLIENT_CLIENT_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/v1/compiler.pb.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace ferry {

using Metadata = std::vector<std::pair<std::string, std::string>>;

struct TlsOptions {
  // Use TLS. With no root_ca_file the system's roots are trusted.
  bool enabled = false;
  // PEM file of the CAs that sign the server's certificate.
  std::string root_ca_file;
  // PEM files of the client's certificate chain and key (mTLS).
  std::string cert_file;
  std::string key_file;
  // Name to expect in the server certificate instead of the target's host
  // (tests, IP targets).
  std::string server_name_override;
};

// gRPC's retry policy (the channel's service config), applied by gRPC to
// every ferry.v1.Compiler call that fails with UNAVAILABLE or
// RESOURCE_EXHAUSTED, after a random pause of up to the current backoff
// (gRFC A6), or after the server's grpc-retry-pushback-ms (ferryd sends its
// RetryInfo delay there, and -1, "do not retry", with RESOURCE_EXHAUSTED that
// waiting does not cure). The defaults are share/ferry/service_config.json
// (compiled in from client/service_config.json); a field set here replaces
// its value.
struct RetryOptions {
  // Attempts in all, the first one included; 1 disables retries. At most 5
  // (gRPC's limit).
  std::optional<int> max_attempts;
  std::optional<std::chrono::milliseconds> initial_backoff;
  std::optional<std::chrono::milliseconds> max_backoff;
  std::optional<double> multiplier;
};

struct ClientOptions {
  // "host:port", "dns:///name:port" (with round_robin for a headless
  // Kubernetes Service), "unix:/path", or several "host:port" separated by
  // commas: every replica, round_robin between them (host names resolved
  // once, by Create), so a call that fails with UNAVAILABLE on one replica
  // is retried on another.
  std::string target;
  TlsOptions tls;
  // Sent as "authorization: Bearer <token>" on every call. token_file (read
  // once, by Create; surrounding whitespace dropped) is an alternative.
  std::string bearer_token;
  std::string token_file;
  // Deadline of calls that do not set one.
  std::chrono::milliseconds default_deadline{std::chrono::seconds(60)};
  RetryOptions retry;
  // Sent on every call.
  Metadata metadata;
  // "round_robin" spreads calls over every address the target resolves to;
  // empty: gRPC's default (pick_first).
  std::string load_balancing_policy;
  // Largest message sent or received.
  int max_message_bytes = 256 << 20;
  // Lower: Lookup by digest before sending a program of at least
  // lookup_min_request_bytes (below, sending costs about what asking does).
  bool lookup_first = true;
  int64_t lookup_min_request_bytes = 64 << 10;
  // Lower and Verify: constants with at least this many bytes of data go by
  // digest where the server keeps blobs; 0: always inline.
  int64_t blob_threshold_bytes = int64_t{1} << 20;
  // Bytes per UploadBlob message.
  int upload_chunk_bytes = 1 << 20;
};

struct CallOptions {
  // Overrides ClientOptions::default_deadline for this call (all attempts).
  std::optional<std::chrono::milliseconds> deadline;
  // Added to ClientOptions::metadata.
  Metadata metadata;
  // Sent as x-request-id; the server echoes it in the response and its log.
  std::string request_id;
  // Ask the server to skip its result cache ("ferry-cache: bypass").
  bool bypass_cache = false;
};

// A pending asynchronous call.
class AsyncCall {
 public:
  virtual ~AsyncCall() = default;
  // Cancels the call; its callback then runs with CANCELLED (unless it has
  // already completed). No further retries are made.
  virtual void Cancel() = 0;
};

template <typename Response>
using Callback = std::function<void(absl::StatusOr<Response>)>;

// Hears where a streamed call stands: each ferry.v1.ProgressUpdate the
// server sends (a snapshot: the stage running now and every stage finished
// so far), on the calling thread, between reads. An attempt that is retried
// starts over from an empty snapshot.
using ProgressCallback = std::function<void(const v1::ProgressUpdate&)>;

class Client {
 public:
  // Validates `options` and reads the TLS and token files. Does not
  // connect: the channel connects on the first call.
  static absl::StatusOr<std::unique_ptr<Client>> Create(ClientOptions options);
  virtual ~Client() = default;

  virtual absl::StatusOr<v1::LowerResponse> Lower(
      const v1::LowerRequest& request, const CallOptions& call = {}) = 0;
  virtual absl::StatusOr<v1::VerifyResponse> Verify(
      const v1::VerifyRequest& request, const CallOptions& call = {}) = 0;
  virtual absl::StatusOr<v1::GetCapabilitiesResponse> GetCapabilities(
      const CallOptions& call = {}) = 0;

  // Lower and Verify through the streaming RPCs (LowerStream,
  // VerifyStream): the same lookup, blobs, retries and result, with
  // `progress` called for every update. A Lower answered by Lookup hears
  // none.
  virtual absl::StatusOr<v1::LowerResponse> LowerStream(
      const v1::LowerRequest& request, const ProgressCallback& progress,
      const CallOptions& call = {}) = 0;
  virtual absl::StatusOr<v1::VerifyResponse> VerifyStream(
      const v1::VerifyRequest& request, const ProgressCallback& progress,
      const CallOptions& call = {}) = 0;

  // Asynchronous forms: `done` runs exactly once, on a gRPC thread. The
  // request is copied. The returned handle may be dropped. Destroying the
  // Client cancels the calls still pending and waits until their `done` has
  // returned (so it must not be destroyed from inside a `done`).
  virtual std::shared_ptr<AsyncCall> LowerAsync(
      v1::LowerRequest request, Callback<v1::LowerResponse> done,
      const CallOptions& call = {}) = 0;
  virtual std::shared_ptr<AsyncCall> VerifyAsync(
      v1::VerifyRequest request, Callback<v1::VerifyResponse> done,
      const CallOptions& call = {}) = 0;
  virtual std::shared_ptr<AsyncCall> GetCapabilitiesAsync(
      Callback<v1::GetCapabilitiesResponse> done,
      const CallOptions& call = {}) = 0;

  // The cached response of a Lower request by its digest (see
  // RequestDigest); NOT_FOUND when the server does not hold it.
  virtual absl::StatusOr<v1::LowerResponse> Lookup(
      const std::string& request_digest, const CallOptions& call = {}) = 0;
  // The digest the server keys `request`'s result by (its compiler version
  // from GetCapabilities, asked once per Client).
  virtual absl::StatusOr<std::string> RequestDigest(
      const v1::LowerRequest& request, const CallOptions& call = {}) = 0;
  virtual absl::StatusOr<std::vector<v1::Digest>> FindMissingBlobs(
      const std::vector<v1::Digest>& digests, const CallOptions& call = {}) = 0;
  // Uploads `bytes` in chunks; their digest.
  virtual absl::StatusOr<v1::Digest> UploadBlob(
      const std::string& bytes, const CallOptions& call = {}) = 0;

  // grpc.health.v1 Check of `service` ("" for the whole server): true when
  // SERVING. No retries.
  virtual absl::StatusOr<bool> CheckHealth(const std::string& service,
                                           const CallOptions& call = {}) = 0;

  // Calls this client has started so far. gRPC's retries inside a call are
  // not counted here (the server sees each, the retries with
  // grpc-previous-rpc-attempts).
  virtual int64_t attempts() const = 0;
  // Lower calls answered by Lookup, without sending the program.
  virtual int64_t lookup_hits() const = 0;
};

// The server's google.rpc.Status attached to an error, if any.
std::optional<google::rpc::Status> ErrorDetails(const absl::Status& status);
// The first detail of type T in the error's google.rpc.Status, if any
// (google::rpc::BadRequest, RetryInfo, QuotaFailure, PreconditionFailure,
// ErrorInfo).
template <typename T>
std::optional<T> ErrorDetail(const absl::Status& status) {
  std::optional<google::rpc::Status> details = ErrorDetails(status);
  if (!details) return std::nullopt;
  for (const auto& any : details->details()) {
    T detail;
    if (any.UnpackTo(&detail)) return detail;
  }
  return std::nullopt;
}

// The absl::Status payload key under which the serialized google.rpc.Status
// travels.
inline constexpr char kErrorDetailsPayload[] =
    "type.googleapis.com/google.rpc.Status";

}  // namespace ferry

#endif  // FERRY_CLIENT_CLIENT_H_
