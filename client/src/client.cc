#include "ferry/client.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ferry/digest.h"
#include "ferry/file.h"
#include "ferry/v1/compiler.grpc.pb.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "service_config_json.h"

namespace ferry {
namespace {

using SystemClock = std::chrono::system_clock;

// "h1:p1,h2:p2,...": a gRPC target of every address ("ipv4:a:p,b:p" or
// "ipv6:[a]:p,..."), host names resolved now. One family per list (gRPC's
// static resolvers take one).
absl::StatusOr<std::string> AddressListTarget(absl::string_view list) {
  std::vector<std::string> v4, v6;
  for (absl::string_view entry : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    entry = absl::StripAsciiWhitespace(entry);
    size_t colon = entry.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos ||
        !absl::SimpleAtoi(entry.substr(colon + 1), &port) || port < 1 ||
        port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("ClientOptions.target: '", entry, "' is not HOST:PORT"));
    }
    std::string host(entry.substr(0, colon));
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 ||
        found == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("ClientOptions.target: cannot resolve '", host, "'"));
    }
    char text[INET6_ADDRSTRLEN] = {};
    if (found->ai_family == AF_INET) {
      inet_ntop(AF_INET,
                &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr, text,
                sizeof(text));
      v4.push_back(absl::StrCat(text, ":", port));
    } else {
      inet_ntop(AF_INET6,
                &reinterpret_cast<sockaddr_in6*>(found->ai_addr)->sin6_addr,
                text, sizeof(text));
      v6.push_back(absl::StrCat("[", text, "]:", port));
    }
    freeaddrinfo(found);
  }
  if (!v4.empty() && !v6.empty()) {
    return absl::InvalidArgumentError(
        "ClientOptions.target: mix of IPv4 and IPv6 addresses");
  }
  if (v4.empty() && v6.empty()) {
    return absl::InvalidArgumentError("ClientOptions.target: no address");
  }
  return v4.empty() ? absl::StrCat("ipv6:", absl::StrJoin(v6, ","))
                    : absl::StrCat("ipv4:", absl::StrJoin(v4, ","));
}

// "1.5s": a duration of the service config.
std::string DurationJson(std::chrono::milliseconds ms) {
  return absl::StrFormat("%d.%03ds", ms.count() / 1000, ms.count() % 1000);
}

// The default service config with the fields `retry` sets replaced; without
// a retry policy when max_attempts is 1 (gRPC wants at least 2 in one).
absl::StatusOr<std::string> ServiceConfigJson(const RetryOptions& retry) {
  google::protobuf::Struct config;
  if (auto parsed = google::protobuf::util::JsonStringToMessage(
          kDefaultServiceConfigJson, &config);
      !parsed.ok()) {
    return absl::InternalError(
        absl::StrCat("the compiled-in service_config.json: ",
                     std::string(parsed.message())));
  }
  auto& methods = *(*config.mutable_fields())["methodConfig"]
                       .mutable_list_value()
                       ->mutable_values();
  for (google::protobuf::Value& method : methods) {
    auto& fields = *method.mutable_struct_value()->mutable_fields();
    if (retry.max_attempts == 1) {
      fields.erase("retryPolicy");
      continue;
    }
    auto& policy =
        *fields["retryPolicy"].mutable_struct_value()->mutable_fields();
    if (retry.max_attempts)
      policy["maxAttempts"].set_number_value(*retry.max_attempts);
    if (retry.initial_backoff)
      policy["initialBackoff"].set_string_value(
          DurationJson(*retry.initial_backoff));
    if (retry.max_backoff)
      policy["maxBackoff"].set_string_value(DurationJson(*retry.max_backoff));
    if (retry.multiplier)
      policy["backoffMultiplier"].set_number_value(*retry.multiplier);
  }
  std::string json;
  if (auto printed = google::protobuf::util::MessageToJsonString(config, &json);
      !printed.ok()) {
    return absl::InternalError(
        absl::StrCat("service config: ", std::string(printed.message())));
  }
  return json;
}

absl::Status ToAbsl(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status converted(static_cast<absl::StatusCode>(status.error_code()),
                         status.error_message());
  if (!status.error_details().empty()) {
    converted.SetPayload(kErrorDetailsPayload,
                         absl::Cord(status.error_details()));
  }
  return converted;
}

// Everything a call needs. The Client owns it and, before it goes, cancels
// the asynchronous calls still pending and waits until each has finished
// (PendingCalls): the last reference to a grpc::Channel must not be dropped
// on one of gRPC's callback threads, since its destructor stops and joins
// those threads (gRPC 1.51 then uses a freed completion queue and aborts).
struct Channel {
  ClientOptions options;
  Metadata metadata;  // options.metadata + authorization
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Compiler::Stub> stub;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;
  std::atomic<int64_t> calls{0};  // started, for attempts()

  // The asynchronous calls started and not yet finished.
  class PendingCalls {
   public:
    void Add(const std::shared_ptr<AsyncCall>& call) {
      std::lock_guard<std::mutex> lock(mutex_);
      calls_.emplace(call.get(), call);
    }
    // The call's last use of the Channel.
    void Finished(const AsyncCall* call) {
      std::lock_guard<std::mutex> lock(mutex_);
      calls_.erase(call);
      if (calls_.empty()) drained_.notify_all();
    }
    void CancelAllAndWait() {
      std::vector<std::shared_ptr<AsyncCall>> live;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& [raw, weak] : calls_)
          if (std::shared_ptr<AsyncCall> call = weak.lock())
            live.push_back(std::move(call));
      }
      for (const std::shared_ptr<AsyncCall>& call : live) call->Cancel();
      live.clear();
      std::unique_lock<std::mutex> lock(mutex_);
      drained_.wait(lock, [this] { return calls_.empty(); });
    }

   private:
    std::mutex mutex_;
    std::condition_variable drained_;
    std::map<const AsyncCall*, std::weak_ptr<AsyncCall>> calls_;
  };
  PendingCalls pending;

  void Prepare(grpc::ClientContext& context, const CallOptions& call,
               SystemClock::time_point deadline) const {
    context.set_deadline(deadline);
    for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
    for (const auto& [key, value] : call.metadata) {
      context.AddMetadata(key, value);
    }
    if (!call.request_id.empty()) {
      context.AddMetadata("x-request-id", call.request_id);
    }
    if (call.bypass_cache) context.AddMetadata("ferry-cache", "bypass");
  }

  SystemClock::time_point Deadline(const CallOptions& call) const {
    return SystemClock::now() +
           call.deadline.value_or(options.default_deadline);
  }
};

template <typename Request, typename Response>
using SyncMethod = std::function<grpc::Status(
    v1::Compiler::Stub&, grpc::ClientContext*, const Request&, Response*)>;

template <typename Request, typename Response>
using AsyncMethod = std::function<void(
    v1::Compiler::Stub&, grpc::ClientContext*, const Request*, Response*,
    std::function<void(grpc::Status)>)>;

// One call; gRPC retries it as the channel's service config says.
template <typename Request, typename Response>
absl::StatusOr<Response> Call(Channel& channel,
                              const SyncMethod<Request, Response>& method,
                              const Request& request, const CallOptions& call) {
  grpc::ClientContext context;
  channel.Prepare(context, call, channel.Deadline(call));
  Response response;
  ++channel.calls;
  grpc::Status status = method(*channel.stub, &context, request, &response);
  if (!status.ok()) return ToAbsl(status);
  return response;
}

// Reads a LowerStream or VerifyStream to its end: progress to `progress`,
// the result into `response`.
template <typename Event, typename Response>
grpc::Status ReadStream(std::unique_ptr<grpc::ClientReader<Event>> reader,
                        const ProgressCallback& progress, Response* response) {
  Event event;
  bool answered = false;
  while (reader->Read(&event)) {
    if (event.has_result()) {
      response->Swap(event.mutable_result());
      answered = true;
    } else if (event.has_progress() && progress) {
      progress(event.progress());
    }
  }
  grpc::Status status = reader->Finish();
  if (status.ok() && !answered) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "the stream ended without a result");
  }
  return status;
}

// One asynchronous call (gRPC retries it as the service config says). Keeps
// itself alive (through the callbacks it hands to gRPC) until `done` has run;
// `channel` outlives it until Finish (Channel::PendingCalls).
template <typename Request, typename Response>
class AsyncCallState final
    : public AsyncCall,
      public std::enable_shared_from_this<AsyncCallState<Request, Response>> {
 public:
  AsyncCallState(Channel* channel, AsyncMethod<Request, Response> method,
                 Request request, Callback<Response> done, CallOptions call)
      : channel_(channel),
        method_(std::move(method)),
        request_(std::move(request)),
        done_(std::move(done)),
        call_(std::move(call)),
        deadline_(channel_->Deadline(call_)) {}

  void Start() {
    std::unique_lock<std::mutex> lock(mutex_);
    context_ = std::make_unique<grpc::ClientContext>();
    channel_->Prepare(*context_, call_, deadline_);
    response_.Clear();
    ++channel_->calls;
    auto self = this->shared_from_this();
    grpc::ClientContext* context = context_.get();
    lock.unlock();
    method_(*channel_->stub, context, &request_, &response_,
            [self](grpc::Status status) { self->Done(status); });
  }

  void Cancel() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelled_) return;
    cancelled_ = true;
    if (context_) context_->TryCancel();
  }

 private:
  void Done(const grpc::Status& status) {
    if (status.ok()) {
      Complete(std::move(response_));
    } else {
      Complete(ToAbsl(status));
    }
  }

  // Runs `done`, then releases the call's context (it holds a
  // reference to the grpc::Channel) and tells the Channel the call is
  // finished: the last use of channel_.
  void Complete(absl::StatusOr<Response> result) {
    Callback<Response> done;
    std::unique_ptr<grpc::ClientContext> context;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_) return;
      finished_ = true;
      done.swap(done_);
      context.swap(context_);
    }
    if (done) done(std::move(result));
    context.reset();
    channel_->pending.Finished(this);
  }

  Channel* const channel_;
  const AsyncMethod<Request, Response> method_;
  const Request request_;
  Callback<Response> done_;
  const CallOptions call_;
  const SystemClock::time_point deadline_;

  std::mutex mutex_;
  std::unique_ptr<grpc::ClientContext> context_;
  Response response_;
  bool cancelled_ = false;
  bool finished_ = false;
};

// Constants of `program` sent by digest instead of inline: their bytes by
// digest hash, to upload or to put back.
using BlobBytes = absl::flat_hash_map<std::string, std::string>;

BlobBytes OffloadConstants(v1::Program& program, int64_t threshold) {
  BlobBytes blobs;
  if (threshold <= 0) return blobs;
  for (v1::Constant& constant : *program.mutable_constants()) {
    if (!constant.has_data() ||
        static_cast<int64_t>(constant.data().size()) < threshold) {
      continue;
    }
    v1::Digest digest = BlobDigestOf(constant.data());
    blobs.emplace(digest.hash(), std::move(*constant.mutable_data()));
    constant.clear_data();
    *constant.mutable_data_digest() = std::move(digest);
  }
  return blobs;
}

// Puts the bytes of `blobs` back into the constants of `program` that refer
// to them.
template <typename Response>
void RestoreConstants(Response& response, const BlobBytes& blobs) {
  // mutable_program() would create an (empty) program where none was sent.
  if (blobs.empty() || !response.has_program()) return;
  for (v1::Constant& constant :
       *response.mutable_program()->mutable_constants()) {
    if (!constant.has_data_digest()) continue;
    auto found = blobs.find(constant.data_digest().hash());
    if (found == blobs.end()) continue;
    constant.clear_data_digest();
    constant.set_data(found->second);
  }
}

// The digests a MISSING_BLOBS error names ("blobs/HASH/SIZE" subjects).
std::vector<std::string> MissingBlobHashes(const absl::Status& status) {
  std::vector<std::string> hashes;
  std::optional<google::rpc::PreconditionFailure> failure =
      ErrorDetail<google::rpc::PreconditionFailure>(status);
  if (!failure) return hashes;
  for (const auto& violation : failure->violations()) {
    if (violation.type() != "MISSING") continue;
    std::vector<std::string> parts = absl::StrSplit(violation.subject(), '/');
    if (parts.size() == 3 && parts[0] == "blobs") hashes.push_back(parts[1]);
  }
  return hashes;
}

class ClientImpl final : public Client {
 public:
  explicit ClientImpl(std::unique_ptr<Channel> channel)
      : channel_(std::move(channel)) {}
  ~ClientImpl() override { channel_->pending.CancelAllAndWait(); }

  absl::StatusOr<v1::LowerResponse> Lower(const v1::LowerRequest& request,
                                          const CallOptions& call) override {
    return LowerWith(request, call, nullptr);
  }
  absl::StatusOr<v1::LowerResponse> LowerStream(
      const v1::LowerRequest& request, const ProgressCallback& progress,
      const CallOptions& call) override {
    return LowerWith(request, call, &progress);
  }

 private:
  // Lower, through LowerStream when `progress` is set.
  absl::StatusOr<v1::LowerResponse> LowerWith(
      const v1::LowerRequest& request, const CallOptions& call,
      const ProgressCallback* progress) {
    const ClientOptions& options = channel_->options;
    const bool large = static_cast<int64_t>(request.ByteSizeLong()) >=
                       options.lookup_min_request_bytes;
    const bool lookup = options.lookup_first && large && !call.bypass_cache;
    const bool offload =
        options.blob_threshold_bytes > 0 &&
        HasLargeConstant(request.program(), options.blob_threshold_bytes);
    std::optional<v1::GetCapabilitiesResponse> caps;
    if (lookup || offload) caps = Capabilities(call);
    const v1::LowerRequest* sent = &request;
    v1::LowerRequest by_digest;
    BlobBytes blobs;
    if (caps && offload && !caps->blob_store().empty()) {
      by_digest = request;
      blobs = OffloadConstants(*by_digest.mutable_program(),
                               options.blob_threshold_bytes);
      sent = &by_digest;
    }
    // A server that caches nothing cannot answer a Lookup.
    if (caps && lookup && !lookup_unimplemented_.load() &&
        (caps->cache_bytes() > 0 || !caps->shared_cache().empty())) {
      absl::StatusOr<v1::LowerResponse> found =
          Lookup(LowerRequestDigest(*sent, caps->compiler_version()), call);
      if (found.ok()) {
        ++lookup_hits_;
        RestoreConstants(*found, blobs);
        return found;
      }
      if (found.status().code() == absl::StatusCode::kUnimplemented) {
        lookup_unimplemented_.store(true);  // an older server
      }
    }
    absl::StatusOr<v1::LowerResponse> lowered =
        PlainLower(*sent, call, progress);
    if (!lowered.ok() && !blobs.empty() &&
        !MissingBlobHashes(lowered.status()).empty()) {
      // A pass needs the bytes of some constants (a re-layout): upload
      // those, then ask again.
      if (absl::Status uploaded =
              UploadNamed(MissingBlobHashes(lowered.status()), blobs, call);
          !uploaded.ok()) {
        return uploaded;
      }
      lowered = PlainLower(*sent, call, progress);
    }
    if (lowered.ok()) RestoreConstants(*lowered, blobs);
    return lowered;
  }

 public:
  absl::StatusOr<v1::LowerResponse> Lookup(const std::string& request_digest,
                                           const CallOptions& call) override {
    v1::LookupRequest request;
    request.set_request_digest(request_digest);
    return Call<v1::LookupRequest, v1::LowerResponse>(
        *channel_,
        [](v1::Compiler::Stub& stub, grpc::ClientContext* context,
           const v1::LookupRequest& request, v1::LowerResponse* response) {
          return stub.Lookup(context, request, response);
        },
        request, call);
  }

  absl::StatusOr<std::string> RequestDigest(const v1::LowerRequest& request,
                                            const CallOptions& call) override {
    std::optional<v1::GetCapabilitiesResponse> caps = Capabilities(call);
    if (!caps) {
      return absl::UnavailableError(
          "cannot ask the server for its compiler version");
    }
    return LowerRequestDigest(request, caps->compiler_version());
  }

  absl::StatusOr<std::vector<v1::Digest>> FindMissingBlobs(
      const std::vector<v1::Digest>& digests,
      const CallOptions& call) override {
    v1::FindMissingBlobsRequest request;
    for (const v1::Digest& digest : digests)
      *request.add_blob_digests() = digest;
    absl::StatusOr<v1::FindMissingBlobsResponse> response =
        Call<v1::FindMissingBlobsRequest, v1::FindMissingBlobsResponse>(
            *channel_,
            [](v1::Compiler::Stub& stub, grpc::ClientContext* context,
               const v1::FindMissingBlobsRequest& request,
               v1::FindMissingBlobsResponse* response) {
              return stub.FindMissingBlobs(context, request, response);
            },
            request, call);
    if (!response.ok()) return response.status();
    return std::vector<v1::Digest>(response->missing_blob_digests().begin(),
                                   response->missing_blob_digests().end());
  }

  absl::StatusOr<v1::Digest> UploadBlob(const std::string& bytes,
                                        const CallOptions& call) override {
    const v1::Digest digest = BlobDigestOf(bytes);
    const size_t chunk =
        static_cast<size_t>(std::max(1, channel_->options.upload_chunk_bytes));
    grpc::ClientContext context;
    channel_->Prepare(context, call, channel_->Deadline(call));
    v1::UploadBlobResponse response;
    ++channel_->calls;
    std::unique_ptr<grpc::ClientWriter<v1::UploadBlobRequest>> writer =
        channel_->stub->UploadBlob(&context, &response);
    size_t offset = 0;
    bool first = true;
    do {
      v1::UploadBlobRequest message;
      if (first) *message.mutable_digest() = digest;
      first = false;
      message.set_data(bytes.substr(offset, chunk));
      offset += chunk;
      if (!writer->Write(message)) break;  // the server ended the stream
    } while (offset < bytes.size());
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (!status.ok()) return ToAbsl(status);
    return digest;
  }

  int64_t lookup_hits() const override { return lookup_hits_.load(); }

 private:
  static bool HasLargeConstant(const v1::Program& program, int64_t threshold) {
    for (const v1::Constant& constant : program.constants()) {
      if (constant.has_data() &&
          static_cast<int64_t>(constant.data().size()) >= threshold) {
        return true;
      }
    }
    return false;
  }

  // GetCapabilities, asked once per Client (a failure is not remembered).
  std::optional<v1::GetCapabilitiesResponse> Capabilities(
      const CallOptions& call) {
    {
      std::lock_guard<std::mutex> lock(caps_mutex_);
      if (caps_) return caps_;
    }
    absl::StatusOr<v1::GetCapabilitiesResponse> caps = GetCapabilities(call);
    if (!caps.ok()) return std::nullopt;
    std::lock_guard<std::mutex> lock(caps_mutex_);
    caps_ = *std::move(caps);
    return caps_;
  }

  // Uploads the blobs named by `hashes` from `blobs`.
  absl::Status UploadNamed(const std::vector<std::string>& hashes,
                           const BlobBytes& blobs, const CallOptions& call) {
    for (const std::string& hash : hashes) {
      auto found = blobs.find(hash);
      if (found == blobs.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat("the server is missing blob ", hash,
                         ", which this call did not "
                         "send"));
      }
      absl::StatusOr<v1::Digest> uploaded = UploadBlob(found->second, call);
      if (!uploaded.ok()) return uploaded.status();
    }
    return absl::OkStatus();
  }

  // Uploads whichever of `blobs` the server lacks.
  absl::Status UploadMissing(const BlobBytes& blobs, const CallOptions& call) {
    std::vector<v1::Digest> digests;
    for (const auto& [hash, bytes] : blobs) {
      v1::Digest digest;
      digest.set_hash(hash);
      digest.set_size_bytes(static_cast<int64_t>(bytes.size()));
      digests.push_back(std::move(digest));
    }
    absl::StatusOr<std::vector<v1::Digest>> missing =
        FindMissingBlobs(digests, call);
    if (!missing.ok()) return missing.status();
    std::vector<std::string> hashes;
    for (const v1::Digest& digest : *missing) hashes.push_back(digest.hash());
    return UploadNamed(hashes, blobs, call);
  }

  absl::StatusOr<v1::LowerResponse> PlainLower(
      const v1::LowerRequest& request, const CallOptions& call,
      const ProgressCallback* progress) {
    if (progress != nullptr) {
      return Call<v1::LowerRequest, v1::LowerResponse>(
          *channel_,
          [progress](v1::Compiler::Stub& stub, grpc::ClientContext* context,
                     const v1::LowerRequest& request,
                     v1::LowerResponse* response) {
            return ReadStream(stub.LowerStream(context, request), *progress,
                              response);
          },
          request, call);
    }
    return Call<v1::LowerRequest, v1::LowerResponse>(
        *channel_,
        [](v1::Compiler::Stub& stub, grpc::ClientContext* context,
           const v1::LowerRequest& request, v1::LowerResponse* response) {
          return stub.Lower(context, request, response);
        },
        request, call);
  }

  absl::StatusOr<v1::VerifyResponse> Verify(const v1::VerifyRequest& request,
                                            const CallOptions& call) override {
    return VerifyWith(request, call, nullptr);
  }
  absl::StatusOr<v1::VerifyResponse> VerifyStream(
      const v1::VerifyRequest& request, const ProgressCallback& progress,
      const CallOptions& call) override {
    return VerifyWith(request, call, &progress);
  }

 private:
  // Verify, through VerifyStream when `progress` is set.
  absl::StatusOr<v1::VerifyResponse> VerifyWith(
      const v1::VerifyRequest& request, const CallOptions& call,
      const ProgressCallback* progress) {
    const int64_t threshold = channel_->options.blob_threshold_bytes;
    if (threshold <= 0 ||
        !HasLargeConstant(request.request().program(), threshold)) {
      return PlainVerify(request, call, progress);
    }
    std::optional<v1::GetCapabilitiesResponse> caps = Capabilities(call);
    if (!caps || caps->blob_store().empty())
      return PlainVerify(request, call, progress);
    v1::VerifyRequest by_digest = request;
    BlobBytes blobs = OffloadConstants(
        *by_digest.mutable_request()->mutable_program(), threshold);
    if (absl::Status uploaded = UploadMissing(blobs, call); !uploaded.ok()) {
      return uploaded;
    }
    absl::StatusOr<v1::VerifyResponse> verified =
        PlainVerify(by_digest, call, progress);
    // A blob evicted between the upload and the call: once more.
    if (!verified.ok() && !MissingBlobHashes(verified.status()).empty()) {
      if (absl::Status uploaded = UploadMissing(blobs, call); !uploaded.ok()) {
        return uploaded;
      }
      verified = PlainVerify(by_digest, call, progress);
    }
    if (verified.ok()) RestoreConstants(*verified, blobs);
    return verified;
  }

 private:
  absl::StatusOr<v1::VerifyResponse> PlainVerify(
      const v1::VerifyRequest& request, const CallOptions& call,
      const ProgressCallback* progress) {
    if (progress != nullptr) {
      return Call<v1::VerifyRequest, v1::VerifyResponse>(
          *channel_,
          [progress](v1::Compiler::Stub& stub, grpc::ClientContext* context,
                     const v1::VerifyRequest& request,
                     v1::VerifyResponse* response) {
            return ReadStream(stub.VerifyStream(context, request), *progress,
                              response);
          },
          request, call);
    }
    return Call<v1::VerifyRequest, v1::VerifyResponse>(
        *channel_,
        [](v1::Compiler::Stub& stub, grpc::ClientContext* context,
           const v1::VerifyRequest& request, v1::VerifyResponse* response) {
          return stub.Verify(context, request, response);
        },
        request, call);
  }

 public:
  absl::StatusOr<v1::GetCapabilitiesResponse> GetCapabilities(
      const CallOptions& call) override {
    return Call<v1::GetCapabilitiesRequest, v1::GetCapabilitiesResponse>(
        *channel_,
        [](v1::Compiler::Stub& stub, grpc::ClientContext* context,
           const v1::GetCapabilitiesRequest& request,
           v1::GetCapabilitiesResponse* response) {
          return stub.GetCapabilities(context, request, response);
        },
        v1::GetCapabilitiesRequest(), call);
  }

  std::shared_ptr<AsyncCall> LowerAsync(v1::LowerRequest request,
                                        Callback<v1::LowerResponse> done,
                                        const CallOptions& call) override {
    return StartAsync<v1::LowerRequest, v1::LowerResponse>(
        [](v1::Compiler::Stub& stub, grpc::ClientContext* context,
           const v1::LowerRequest* request, v1::LowerResponse* response,
           std::function<void(grpc::Status)> on_done) {
          stub.async()->Lower(context, request, response, std::move(on_done));
        },
        std::move(request), std::move(done), call);
  }

  std::shared_ptr<AsyncCall> VerifyAsync(v1::VerifyRequest request,
                                         Callback<v1::VerifyResponse> done,
                                         const CallOptions& call) override {
    return StartAsync<v1::VerifyRequest, v1::VerifyResponse>(
        [](v1::Compiler::Stub& stub, grpc::ClientContext* context,
           const v1::VerifyRequest* request, v1::VerifyResponse* response,
           std::function<void(grpc::Status)> on_done) {
          stub.async()->Verify(context, request, response, std::move(on_done));
        },
        std::move(request), std::move(done), call);
  }

  std::shared_ptr<AsyncCall> GetCapabilitiesAsync(
      Callback<v1::GetCapabilitiesResponse> done,
      const CallOptions& call) override {
    return StartAsync<v1::GetCapabilitiesRequest, v1::GetCapabilitiesResponse>(
        [](v1::Compiler::Stub& stub, grpc::ClientContext* context,
           const v1::GetCapabilitiesRequest* request,
           v1::GetCapabilitiesResponse* response,
           std::function<void(grpc::Status)> on_done) {
          stub.async()->GetCapabilities(context, request, response,
                                        std::move(on_done));
        },
        v1::GetCapabilitiesRequest(), std::move(done), call);
  }

  absl::StatusOr<bool> CheckHealth(const std::string& service,
                                   const CallOptions& call) override {
    grpc::ClientContext context;
    channel_->Prepare(context, call, channel_->Deadline(call));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    ++channel_->calls;
    grpc::Status status = channel_->health->Check(&context, request, &response);
    if (!status.ok()) return ToAbsl(status);
    return response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  }

  int64_t attempts() const override { return channel_->calls.load(); }

 private:
  template <typename Request, typename Response>
  std::shared_ptr<AsyncCall> StartAsync(AsyncMethod<Request, Response> method,
                                        Request request,
                                        Callback<Response> done,
                                        const CallOptions& call) {
    auto state = std::make_shared<AsyncCallState<Request, Response>>(
        channel_.get(), std::move(method), std::move(request), std::move(done),
        call);
    channel_->pending.Add(state);
    state->Start();
    return state;
  }

  std::unique_ptr<Channel> channel_;
  std::mutex caps_mutex_;
  std::optional<v1::GetCapabilitiesResponse> caps_;
  std::atomic<bool> lookup_unimplemented_{false};
  std::atomic<int64_t> lookup_hits_{0};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (options.target.empty()) {
    return absl::InvalidArgumentError("ClientOptions.target is empty");
  }
  const RetryOptions& retry = options.retry;
  if ((retry.max_attempts &&
       (*retry.max_attempts < 1 || *retry.max_attempts > 5)) ||
      (retry.multiplier && *retry.multiplier < 1.0) ||
      (retry.initial_backoff && retry.initial_backoff->count() <= 0) ||
      (retry.max_backoff && retry.max_backoff->count() <= 0)) {
    return absl::InvalidArgumentError(
        "ClientOptions.retry: max_attempts from 1 to 5 (gRPC's limit), "
        "multiplier >= 1 and positive backoffs are required");
  }
  absl::StatusOr<std::string> service_config = ServiceConfigJson(retry);
  if (!service_config.ok()) return service_config.status();
  if (options.default_deadline.count() <= 0) {
    return absl::InvalidArgumentError(
        "ClientOptions.default_deadline must be positive");
  }
  const TlsOptions& tls = options.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "TlsOptions: cert_file and key_file go together");
  }
  bool tls_files = !tls.root_ca_file.empty() || !tls.cert_file.empty();
  if (tls_files && !tls.enabled) {
    return absl::InvalidArgumentError(
        "TlsOptions: certificate files given but TLS is not enabled");
  }

  auto channel = std::make_unique<Channel>();
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (tls.enabled) {
    grpc::SslCredentialsOptions ssl;
    if (!tls.root_ca_file.empty()) {
      absl::StatusOr<std::string> roots = ReadFile(tls.root_ca_file, "CA file");
      if (!roots.ok()) return roots.status();
      ssl.pem_root_certs = *roots;
    }
    if (!tls.cert_file.empty()) {
      absl::StatusOr<std::string> cert =
          ReadFile(tls.cert_file, "certificate file");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadFile(tls.key_file, "key file");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }

  std::string token = options.bearer_token;
  if (!options.token_file.empty()) {
    absl::StatusOr<std::string> text =
        ReadFile(options.token_file, "token file");
    if (!text.ok()) return text.status();
    token = std::string(absl::StripAsciiWhitespace(*text));
    if (token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file '", options.token_file, "' is empty"));
    }
  }

  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(options.max_message_bytes);
  arguments.SetMaxSendMessageSize(options.max_message_bytes);
  arguments.SetServiceConfigJSON(*service_config);
  if (!tls.server_name_override.empty()) {
    arguments.SetSslTargetNameOverride(tls.server_name_override);
  }
  std::string target = options.target;
  std::string policy = options.load_balancing_policy;
  if (target.find(',') != std::string::npos) {
    absl::StatusOr<std::string> list = AddressListTarget(target);
    if (!list.ok()) return list.status();
    target = *std::move(list);
    if (policy.empty()) policy = "round_robin";
  }
  if (!policy.empty()) arguments.SetLoadBalancingPolicyName(policy);
  channel->metadata = options.metadata;
  if (!token.empty()) {
    channel->metadata.emplace_back("authorization",
                                   absl::StrCat("Bearer ", token));
  }
  channel->channel = grpc::CreateCustomChannel(target, credentials, arguments);
  channel->stub = v1::Compiler::NewStub(channel->channel);
  channel->health = grpc::health::v1::Health::NewStub(channel->channel);
  channel->options = std::move(options);
  return std::unique_ptr<Client>(new ClientImpl(std::move(channel)));
}

std::optional<google::rpc::Status> ErrorDetails(const absl::Status& status) {
  auto payload = status.GetPayload(kErrorDetailsPayload);
  if (!payload) return std::nullopt;
  google::rpc::Status details;
  if (!details.ParseFromString(std::string(*payload))) return std::nullopt;
  return details;
}

}  // namespace ferry
