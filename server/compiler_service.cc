#include "server/compiler_service.h"

#include <grpc/support/time.h>

#include <algorithm>
#include <exception>
#include <new>
#include <optional>
#include <random>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ferry/digest.h"
#include "ferry/v1/program.pb.h"
#include "ferry/version.h"
#include "passes/ir.h"
#include "passes/pipeline.h"
#include "passes/proto_io.h"
#include "passes/report_io.h"
#include "passes/wire_writer.h"
#include "runtime/ops/backend_ops.h"
#include "runtime/verify.h"
#include "runtime/verify_io.h"
#include "server/allocator.h"
#include "server/rpc_errors.h"

namespace ferry {

using Clock = std::chrono::steady_clock;

namespace {

// A job of at least this many nodes gives freed pages back to the system
// (GiveBackFreedMemory) each time it drops one form of the program: its
// forms are tens of MB then, and the call costs microseconds.
constexpr int64_t kReleaseMemoryFromNodes = 10'000;

// While freed memory is kept, how often a thread of its own looks at what
// is kept (a statistics refresh, ~20 us) and gives it back when it is over
// the bound: what calls free after their job (their request, the response
// once sent) is caught within this.
constexpr auto kTrimEvery = std::chrono::seconds(1);

double MillisBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

std::string Metadata(const grpc::CallbackServerContext& context,
                     absl::string_view key) {
  const auto& metadata = context.client_metadata();
  auto found = metadata.find(grpc::string_ref(key.data(), key.size()));
  if (found == metadata.end()) return "";
  return std::string(found->second.data(), found->second.size());
}

// A caller-chosen request id is kept when it is short and printable.
bool UsableRequestId(absl::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return absl::ascii_isgraph(static_cast<unsigned char>(c));
  });
}

std::string NewRequestId() {
  static const uint64_t process_tag = [] {
    std::random_device random;
    return (uint64_t{random()} << 32) ^ random();
  }();
  static std::atomic<uint64_t> counter{0};
  return absl::StrFormat("%08x-%06x", process_tag & 0xffffffff,
                         counter.fetch_add(1) + 1);
}

// Byte-wise comparison that does not stop at the first difference.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return difference == 0;
}

VerifyDevice DeviceFromProto(v1::VerifyDevice device) {
  switch (device) {
    case v1::VERIFY_DEVICE_SIM:
      return VerifyDevice::kSim;
    case v1::VERIFY_DEVICE_CUDA:
      return VerifyDevice::kCuda;
    default:
      return VerifyDevice::kAuto;
  }
}

// How errors name a blob, as REAPI does: "blobs/HASH/SIZE".
std::string BlobSubject(absl::string_view hash, int64_t size_bytes) {
  return absl::StrCat("blobs/", hash, "/", size_bytes);
}
std::string BlobSubject(const v1::Digest& digest) {
  return BlobSubject(digest.hash(), digest.size_bytes());
}

bool HasBlobRefs(const v1::Program& program) {
  for (const v1::Constant& constant : program.constants()) {
    if (constant.has_data_digest()) return true;
  }
  return false;
}

// Puts back the data_digest of every constant of `lowered` whose bytes are
// still the blob `original` named.
void RestoreBlobRefs(const v1::Program& original, v1::Program& lowered) {
  absl::flat_hash_map<std::string, const v1::Digest*> blobs;
  for (const v1::Constant& constant : original.constants()) {
    if (constant.has_data_digest()) {
      blobs.emplace(constant.name(), &constant.data_digest());
    }
  }
  for (v1::Constant& constant : *lowered.mutable_constants()) {
    auto blob = blobs.find(constant.name());
    if (blob == blobs.end() || !constant.has_data() ||
        static_cast<int64_t>(constant.data().size()) !=
            blob->second->size_bytes() ||
        Sha256HexOf(constant.data()) != blob->second->hash()) {
      continue;
    }
    constant.clear_data();
    *constant.mutable_data_digest() = *blob->second;
  }
}

// The log level of a call that finished with `code`: "info" when it
// succeeded, "warning" when the caller's request or limits ended it,
// "error" when the server could not do what it should.
absl::string_view LogLevel(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "info";
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DATA_LOSS:
    case grpc::StatusCode::UNIMPLEMENTED:
      return "error";
    default:
      return "warning";
  }
}

// The codes of `diagnostics`, each once, in order of first appearance (a
// large program can repeat one code on every node).
std::vector<std::string> DistinctCodes(
    const google::protobuf::RepeatedPtrField<v1::Diagnostic>& diagnostics) {
  std::vector<std::string> codes;
  for (const v1::Diagnostic& diagnostic : diagnostics) {
    if (std::find(codes.begin(), codes.end(), diagnostic.code()) ==
        codes.end()) {
      codes.push_back(diagnostic.code());
    }
  }
  return codes;
}

// The wire form of a response that lowered: `head` (every field but the
// program) with the program written straight from the IR as field 2, which
// frees the IR as it goes. The same bytes as the whole message serialized:
// the fields stay in number order around the program.
static_assert(v1::LowerResponse::kOkFieldNumber == 1 &&
                  v1::LowerResponse::kProgramFieldNumber == 2,
              "LoweredResponseWire writes `ok`, the program, then the other "
              "fields (numbered above both)");
absl::StatusOr<std::string> LoweredResponseWire(v1::LowerResponse& head,
                                                Program&& program) {
  std::string bytes;
  v1::LowerResponse ok_only;
  ok_only.set_ok(head.ok());
  ok_only.AppendToString(&bytes);
  head.clear_ok();
  const std::string rest = head.SerializeAsString();
  head.set_ok(ok_only.ok());
  absl::Status written = AppendProgramWire(
      std::move(program), bytes, v1::LowerResponse::kProgramFieldNumber, rest);
  if (!written.ok()) return written;
  return bytes;
}

}  // namespace

// Folds `event` into the snapshot a streamed call sends.
void ApplyStageEvent(const StageEvent& event, v1::ProgressUpdate& update) {
  update.set_stage(event.method.empty() ? v1::ProgressUpdate::STAGE_LOWERING
                                        : v1::ProgressUpdate::STAGE_VERIFYING);
  if (!event.finished) {
    v1::StageTiming* running = update.mutable_running();
    running->set_stage(std::string(event.stage));
    running->set_method(std::string(event.method));
    return;
  }
  update.clear_running();
  v1::StageTiming* finished = update.add_finished();
  finished->set_stage(std::string(event.stage));
  finished->set_method(std::string(event.method));
  finished->set_micros(event.micros);
}

v1::ProgressUpdate QueuedUpdate(int64_t position) {
  v1::ProgressUpdate update;
  update.set_stage(v1::ProgressUpdate::STAGE_QUEUED);
  update.set_queue_position(position);
  return update;
}

// ---------------------------------------------------------------------------
// One RPC's bookkeeping (deadline, cancellation, memory, the log line), the
// same for a unary call and a stream; the reactor that gRPC owns derives
// from it (UnaryCall, StreamCall below). gRPC owns it until OnDone, which
// follows Finish; after Finish nothing may touch it.

class CompilerService::Call {
 public:
  Call(CompilerService& service, grpc::CallbackServerContext* context,
       absl::string_view method)
      : service_(service),
        context_(context),
        method_(method),
        type_(absl::EndsWith(method, "Stream") ? RpcType::kServerStream
                                               : RpcType::kUnary),
        arrival_(Clock::now()),
        cancel_(&service.drain_token_) {
    std::string id = Metadata(*context, kRequestIdHeader);
    request_id_ = UsableRequestId(id) ? id : NewRequestId();
    deadline_ = arrival_ + EffectiveTimeout(context->raw_deadline());
    cancel_.SetDeadline(deadline_);
    // The handler runs with its request received (unary, or the one
    // request of a server stream).
    service.metrics_.RecordStarted(method_, type_);
    service.metrics_.RecordMessageReceived(method_, type_);
  }

  virtual ~Call() = default;

  // The reactor's OnCancel.
  void Cancelled() {
    cancelled_.store(true);
    cancel_.Cancel(StopReason::kCancelled);
    service_.metrics_.RecordCancellation();
  }
  // Where the job stands, for a call that streams it (StreamCall); a unary
  // call drops it. Called on the worker, never blocks.
  virtual void Progress(const v1::ProgressUpdate& /*update*/) {}

  // Whether anyone still wants this call's result.
  bool Wanted(Clock::time_point now) const {
    return !cancelled_.load() && now < deadline_ && !service_.aborting_.load();
  }
  // The status for a call that is no longer wanted, `where` it stopped.
  grpc::Status Unwanted(absl::string_view where) const {
    if (service_.aborting_.load()) return DrainingError();
    // gRPC cancels a call whose deadline passed too; a cancellation at (or
    // within moments of) the deadline is the deadline.
    constexpr auto kSlack = std::chrono::milliseconds(50);
    if (!cancelled_.load() || Clock::now() + kSlack >= deadline_) {
      return CallDeadlineExceededError(where);
    }
    return CallCancelledError(where);
  }

  void JobStarted() {
    job_start_ = Clock::now();
    service_.metrics_.RecordQueueWait(
        method_, MillisBetween(arrival_, job_start_) / 1000);
  }
  // The cache key of the request (hex), for the log line.
  void SetRequestDigest(absl::string_view digest) {
    request_digest_ = std::string(digest);
  }
  // A compile that failed: its diagnostics' codes go in the log line.
  void SetFailedDiagnostics(
      const google::protobuf::RepeatedPtrField<v1::Diagnostic>& diagnostics) {
    diagnostic_codes_ = DistinctCodes(diagnostics);
  }
  void SetOutcome(absl::string_view outcome) {
    outcome_ = std::string(outcome);
  }
  void SetNodes(int64_t nodes) { nodes_ = nodes; }

  // Finishes the call; never throws (a failure to log or count it is
  // dropped, the caller still gets `status`).
  void Complete(const grpc::Status& given) {
    grpc::Status status = given;
    if (status.ok() && serialize_response_) {
      try {
        status = serialize_response_();
      } catch (...) {
        status = InternalRpcError("cannot serialize the response");
      }
    }
    // What goes out is in wire_response_ now: the messages are not needed
    // until gRPC is done with the call, so they go before the bytes are
    // sent, not after.
    request_arena_.reset();
    owned_response_.reset();
    response_wire_.reset();
    try {
      Record(status);
      // A failure goes Trailers-Only (no initial metadata), which gRPC's
      // client retries need (gRFC A6): the request id travels in the
      // trailers then.
      if (status.ok()) {
        context_->AddInitialMetadata(kRequestIdHeader, request_id_);
      } else {
        context_->AddTrailingMetadata(kRequestIdHeader, request_id_);
      }
      if (auto pushback = RetryPushbackMs(status)) {
        context_->AddTrailingMetadata(kRetryPushbackTrailer, *pushback);
      }
    } catch (...) {
    }
    FinishRpc(status);
  }

  // For calls gRPC hands over as bytes: the call owns the parsed messages
  // (the request on `request_arena`) and serializes `response` into `wire`
  // when it finishes OK.
  template <typename Response>
  void OwnMessages(std::unique_ptr<google::protobuf::Arena> request_arena,
                   std::unique_ptr<Response> response, grpc::ByteBuffer* wire) {
    Response* out = response.get();
    request_arena_ = std::move(request_arena);
    owned_response_ = std::move(response);
    wire_response_ = wire;
    serialize_response_ = [this, out, wire] {
      if (response_wire_ != nullptr) return SendWire(*out, wire);
      bool own_buffer = false;
      return grpc::SerializationTraits<Response>::Serialize(*out, wire,
                                                            &own_buffer);
    };
  }

  // The parsed request is no longer needed (the job has imported it, or the
  // call joined another's computation): its memory goes now, not when the
  // call ends. Only a request the call owns (wire form); gRPC keeps its own.
  void ReleaseRequest() { request_arena_.reset(); }

  // Whether this call answers in wire form (UseResponseWire can be used).
  bool AnswersInWireForm() const { return wire_response_ != nullptr; }
  // The call answers with `bytes`, a serialized LowerResponse shared with
  // the result cache, followed by the fields of its own response message
  // that are set (request_id, cached): protobuf's parser merges the two, a
  // later scalar replacing an earlier one, so the caller reads the same
  // message as if the whole response had been serialized. The response
  // message itself must then carry only such scalar fields.
  void UseResponseWire(ResultCache::Wire bytes) {
    response_wire_ = std::move(bytes);
  }

  // Memory charged to this call (memory_budget.h), released when gRPC is
  // done with it.
  void HoldCharge(MemoryBudget::Charge charge) {
    charges_.push_back(std::move(charge));
  }

  const std::string& request_id() const { return request_id_; }
  grpc::CallbackServerContext& context() { return *context_; }

 protected:
  // The reactor's Finish (for a stream, after the result message).
  virtual void FinishRpc(const grpc::Status& status) = 0;

 private:
  // Metrics and the request log line.
  void Record(const grpc::Status& status) {
    Clock::time_point now = Clock::now();
    absl::string_view code = StatusCodeName(status.error_code());
    service_.metrics_.RecordRequest(method_, code,
                                    MillisBetween(arrival_, now) / 1000, type_);
    if (status.ok()) service_.metrics_.RecordMessageSent(method_, type_);
    LogLine line = NewLogLine("rpc");
    line.set_level(std::string(LogLevel(status.error_code())));
    line.set_request_id(request_id_);
    line.set_method(method_);
    line.set_code(std::string(code));
    line.set_outcome(outcome_.empty() ? absl::AsciiStrToLower(code) : outcome_);
    line.set_duration_ms(MillisBetween(arrival_, now));
    if (job_start_ != Clock::time_point()) {
      line.set_queue_ms(MillisBetween(arrival_, job_start_));
    }
    if (nodes_ >= 0) line.set_nodes(nodes_);
    if (!request_digest_.empty()) line.set_request_digest(request_digest_);
    for (const std::string& diagnostic_code : diagnostic_codes_) {
      line.add_diagnostic_codes(diagnostic_code);
    }
    if (!status.ok()) line.set_error(status.error_message());
    line.set_peer(context_->peer());
    if (std::string trace = Metadata(*context_, "traceparent");
        !trace.empty()) {
      line.set_traceparent(trace);
    }
    service_.logger_.Write(line);
  }

 public:
  // Stops work inside long steps: the deadline, the client's cancel, the
  // drain's abort.
  const CancelToken& cancel_token() const { return cancel_; }

 private:
  // The caller's deadline, bounded by --max-deadline; --default-deadline
  // when the caller set none.
  std::chrono::milliseconds EffectiveTimeout(gpr_timespec deadline) const {
    const ServiceOptions& options = service_.options_;
    if (deadline.tv_sec == gpr_inf_future(deadline.clock_type).tv_sec) {
      return options.default_deadline;
    }
    gpr_timespec remaining =
        gpr_time_sub(gpr_convert_clock_type(deadline, GPR_CLOCK_MONOTONIC),
                     gpr_now(GPR_CLOCK_MONOTONIC));
    int64_t millis = gpr_time_to_millis(remaining);
    return std::min(std::chrono::milliseconds(std::max<int64_t>(millis, 0)),
                    options.max_deadline);
  }

  CompilerService& service_;
  grpc::CallbackServerContext* context_;
  const std::string method_;
  const RpcType type_;  // a server stream's name ends in Stream
  const Clock::time_point arrival_;
  Clock::time_point deadline_;
  Clock::time_point job_start_;
  std::string request_id_;
  std::string outcome_;
  std::string request_digest_;
  std::vector<std::string> diagnostic_codes_;
  int64_t nodes_ = -1;
  std::atomic<bool> cancelled_{false};
  CancelToken cancel_;
  // Sends response_wire_ and then `per_call` serialized into `wire`.
  grpc::Status SendWire(const google::protobuf::Message& per_call,
                        grpc::ByteBuffer* wire) {
    // The slice holds a reference to the shared bytes until gRPC has sent
    // them.
    auto* owner = new ResultCache::Wire(response_wire_);
    grpc::Slice slices[2] = {
        grpc::Slice(
            const_cast<char*>((*owner)->data()), (*owner)->size(),
            [](void* held) { delete static_cast<ResultCache::Wire*>(held); },
            owner),
        grpc::Slice(per_call.SerializeAsString())};
    *wire = grpc::ByteBuffer(slices, 2);
    return grpc::Status::OK;
  }

  std::unique_ptr<google::protobuf::Arena> request_arena_;
  std::unique_ptr<google::protobuf::Message> owned_response_;
  grpc::ByteBuffer* wire_response_ = nullptr;  // set for wire-form calls
  ResultCache::Wire response_wire_;            // set by UseResponseWire
  std::function<grpc::Status()> serialize_response_;
  std::vector<MemoryBudget::Charge> charges_;
};

namespace {

class UnaryCall final : public grpc::ServerUnaryReactor,
                        public CompilerService::Call {
 public:
  using CompilerService::Call::Call;
  void OnCancel() override { Cancelled(); }
  void OnDone() override { delete this; }

 private:
  void FinishRpc(const grpc::Status& status) override { Finish(status); }
};

// A server-streaming call (LowerStream, VerifyStream): progress updates,
// then the result, exactly the unary call's Response, as the last message.
// One write is in flight at a time; an update that arrives meanwhile waits
// in the one pending slot, replacing the update waiting there (updates are
// snapshots), so a reader that does not read costs the server one update,
// not a queue.
template <typename Event, typename Response>
class StreamCall final : public grpc::ServerWriteReactor<Event>,
                         public CompilerService::Call {
 public:
  using CompilerService::Call::Call;

  // Where the job writes the result.
  Response* response() { return &response_; }

  void Progress(const v1::ProgressUpdate& update) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (final_ || broken_) return;
      if (writing_) {
        pending_ = update;
        return;
      }
      writing_ = true;
    }
    // The first write sends the initial metadata: the request id goes with
    // it (Complete adds it for a call that wrote nothing before its end).
    if (!wrote_) {
      wrote_ = true;
      context().AddInitialMetadata(kRequestIdHeader, request_id());
    }
    *out_.mutable_progress() = update;  // this thread holds the write now
    this->StartWrite(&out_);
  }

  // The latest pending update goes out before the result: the reader sees
  // every stage that finished.
  void OnWriteDone(bool ok) override {
    bool send_final = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (final_sent_) return;
      if (!ok) broken_ = true;  // the reader is gone; OnCancel follows
      if (pending_ && !broken_) {
        out_.mutable_progress()->Swap(&*pending_);
        pending_.reset();
      } else if (final_) {
        send_final = true;
      } else {
        pending_.reset();
        writing_ = false;
        return;
      }
    }
    if (send_final) {
      SendFinal();
    } else {
      this->StartWrite(&out_);
    }
  }

  void OnCancel() override { Cancelled(); }
  void OnDone() override { delete this; }

 private:
  void FinishRpc(const grpc::Status& status) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      final_ = status;
      if (!status.ok()) pending_.reset();  // an error ends the stream now
      if (writing_) return;                // OnWriteDone sends the result
      writing_ = true;
    }
    SendFinal();
  }

  // Called by whoever holds the write once final_ is set; nothing is
  // written after it.
  void SendFinal() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      final_sent_ = true;
    }
    if (final_->ok()) {
      out_.mutable_result()->Swap(&response_);
      this->StartWriteAndFinish(&out_, grpc::WriteOptions(), *final_);
    } else {
      this->Finish(*final_);
    }
  }

  Response response_;
  Event out_;  // the message being written
  std::mutex mutex_;
  bool writing_ = false;
  bool wrote_ = false;  // a progress write began (only the writer reads it)
  bool broken_ = false;
  bool final_sent_ = false;
  std::optional<v1::ProgressUpdate> pending_;
  std::optional<grpc::Status> final_;
};

using LowerStreamCall = StreamCall<v1::LowerProgress, v1::LowerResponse>;
using VerifyStreamCall = StreamCall<v1::VerifyProgress, v1::VerifyResponse>;

}  // namespace

// One computation of a Lower request and the calls waiting for it.
struct CompilerService::LowerFlight {
  struct Waiter {
    Call* call;
    v1::LowerResponse* response;
  };
  // Empty when the request bypasses the cache (then nobody can join).
  std::string key;
  // The result came from the shared tier, computed by another replica.
  bool shared_hit = false;
  // The first caller's request; it stays valid until that caller is
  // finished, which is always last. When the request came as bytes kept as
  // bytes (`from_wire`), it lacks its program, and `wire` holds the whole
  // request, valid as long as `request`.
  const v1::LowerRequest* request = nullptr;
  bool from_wire = false;
  std::string_view wire;
  int64_t nodes = 0;  // CountNodes of the request's program
  std::mutex mutex;
  std::vector<Waiter> waiters;  // [0] is the first caller
  // Where the computation stands, sent to every waiter that streams.
  v1::ProgressUpdate progress;
};

// ---------------------------------------------------------------------------

CompilerService::CompilerService(ServiceOptions options,
                                 BoundedExecutor& executor,
                                 ServiceMetrics& metrics, Logger& logger)
    : options_(std::move(options)),
      executor_(executor),
      metrics_(metrics),
      logger_(logger),
      memory_(options_.max_memory_bytes),
      cache_(options_.cache_bytes, &memory_),
      keeping_freed_(options_.keep_freed_bytes > 0 && KeepFreedMemory()) {
  if (keeping_freed_)
    trimmer_ = std::thread([this] { TrimFreedMemoryEverySecond(); });
  if (!options_.redis.address.empty()) {
    redis_ = std::make_unique<RedisStore>(options_.redis, logger_);
    shared_cache_ = std::make_unique<SharedResultCache>(
        *redis_, options_.result_ttl, options_.max_shared_entry_bytes);
  }
  if (options_.max_blob_bytes > 0) {
    if (redis_ != nullptr) {
      blobs_ = MakeRedisBlobStore(*redis_, options_.blob_ttl);
    } else if (!options_.blob_dir.empty()) {
      blobs_ = MakeDiskBlobStore(options_.blob_dir, options_.blob_dir_bytes);
    }
  }
}

CompilerService::~CompilerService() {
  if (trimmer_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(trim_mutex_);
      stopping_ = true;
    }
    trim_stop_.notify_all();
    trimmer_.join();
  }
}

void CompilerService::StartDraining() { draining_.store(true); }
void CompilerService::AbortInFlight() {
  aborting_.store(true);
  drain_token_.Cancel(StopReason::kDraining);
}

ServiceMetrics::Gauges CompilerService::Gauges() const {
  ServiceMetrics::Gauges gauges;
  gauges.queue_depth = executor_.queued();
  gauges.jobs_running = executor_.running();
  gauges.queue_capacity = executor_.queue_depth();
  gauges.workers = executor_.workers();
  gauges.cache_bytes = cache_.bytes();
  gauges.cache_entries = cache_.entries();
  gauges.cache_evictions = cache_.evictions();
  gauges.draining = draining_.load();
  gauges.shared_cache = redis_ != nullptr;
  gauges.shared_cache_up = redis_ != nullptr && redis_->up();
  gauges.memory_used_bytes = memory_.used();
  gauges.memory_limit_bytes = memory_.limit();
  gauges.blob_uploads_open = open_uploads_.load();
  return gauges;
}

bool CompilerService::Authorize(Call* call) {
  grpc::Status refused;
  if (AuthorizeContext(call->context(), &refused)) return true;
  call->Complete(refused);
  return false;
}

bool CompilerService::AuthorizeContext(grpc::CallbackServerContext& context,
                                       grpc::Status* refused) const {
  if (options_.tokens.empty()) return true;
  std::string header = Metadata(context, "authorization");
  // RFC 6750 section 2.1: "Bearer" 1*SP token, the scheme in any case
  // (RFC 7235 section 2.1).
  constexpr absl::string_view kBearer = "bearer";
  absl::string_view value(header);
  bool accepted = false;
  if (value.size() > kBearer.size() + 1 &&
      absl::EqualsIgnoreCase(value.substr(0, kBearer.size()), kBearer) &&
      value[kBearer.size()] == ' ') {
    absl::string_view token = value.substr(kBearer.size());
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    // Every candidate is compared, so timing does not tell which matched.
    for (const std::string& candidate : options_.tokens) {
      accepted |= ConstantTimeEquals(token, candidate);
    }
  }
  if (!accepted) {
    *refused = UnauthenticatedError(
        header.empty() ? "missing 'authorization: Bearer <token>' metadata"
                       : "bearer token not accepted");
  }
  return accepted;
}

bool CompilerService::Admit(Call* call, int64_t nodes, int64_t bytes) {
  if (!Authorize(call)) return false;
  if (draining_.load()) {
    call->Complete(DrainingError());
    return false;
  }
  if (bytes > options_.max_request_bytes) {
    call->Complete(OverLimitError("request_bytes", bytes,
                                  options_.max_request_bytes,
                                  "REQUEST_TOO_LARGE"));
    return false;
  }
  call->SetNodes(nodes);
  if (nodes > options_.max_nodes) {
    call->Complete(
        OverLimitError("nodes", nodes, options_.max_nodes, "TOO_MANY_NODES"));
    return false;
  }
  if (!ChargeMemory(call, RequestMemoryEstimate(bytes))) return false;
  if (!call->Wanted(Clock::now())) {
    call->Complete(call->Unwanted("before the call was queued"));
    return false;
  }
  return true;
}

bool CompilerService::Submit(Call* call, std::function<void()> job) {
  switch (executor_.TrySubmit(std::move(job))) {
    case BoundedExecutor::Admission::kAccepted:
      return true;
    case BoundedExecutor::Admission::kQueueFull:
      call->Complete(
          QueueFullError(executor_.queue_depth(), EstimatedRetryDelay()));
      return false;
    case BoundedExecutor::Admission::kClosed:
      call->Complete(DrainingError());
      return false;
  }
  return false;
}

void CompilerService::GiveBackFreedMemory() {
  if (!keeping_freed_ || FreedMemoryHeld() > options_.keep_freed_bytes)
    ReleaseFreedMemory();
}

void CompilerService::TrimFreedMemoryEverySecond() {
  std::unique_lock<std::mutex> lock(trim_mutex_);
  while (!trim_stop_.wait_for(lock, kTrimEvery, [this] { return stopping_; }))
    if (FreedMemoryHeld() > options_.keep_freed_bytes) ReleaseFreedMemory();
}

std::optional<MemoryBudget::Charge> CompilerService::ReserveShedding(
    int64_t bytes) {
  std::optional<MemoryBudget::Charge> charge = memory_.TryReserve(bytes);
  if (!charge) {
    // Running work comes before cached results.
    cache_.Shed(bytes);
    charge = memory_.TryReserve(bytes);
  }
  return charge;
}

bool CompilerService::ChargeMemory(Call* call, int64_t bytes) {
  std::optional<MemoryBudget::Charge> charge = ReserveShedding(bytes);
  if (!charge) {
    call->Complete(MemoryBudgetError(bytes, memory_.used(), memory_.limit(),
                                     EstimatedRetryDelay()));
    return false;
  }
  call->HoldCharge(*std::move(charge));
  return true;
}

grpc::Status CompilerService::JobError(const absl::Status& status,
                                       absl::string_view what) {
  if (std::optional<ResourceViolation> violation =
          GetResourceViolation(status)) {
    return ResourceLimitRpcError(*violation);
  }
  if (status.code() == absl::StatusCode::kFailedPrecondition) {
    // A blob a pass needs (normalize_layout) that the store lacks.
    return MissingBlobsError({std::string(status.message())},
                             "a lowering needs this blob's bytes; upload it "
                             "with UploadBlob, then retry");
  }
  if (status.code() == absl::StatusCode::kUnavailable) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat(what, ": ", status.message()));
  }
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    return OutOfMemoryError(absl::StrCat("while ", what),
                            EstimatedRetryDelay());
  }
  return InternalRpcError(absl::StrCat(what, " failed: ", status.message()));
}

std::chrono::milliseconds CompilerService::EstimatedRetryDelay() const {
  double per_job_ms = 0;
  {
    std::lock_guard<std::mutex> lock(job_time_mutex_);
    if (job_time_measured_) per_job_ms = mean_job_ms_;
    // A job running now takes at least as long as it has run so far (the
    // only measurement before the first job finishes).
    if (!running_job_starts_.empty()) {
      per_job_ms =
          std::max(per_job_ms,
                   MillisBetween(*running_job_starts_.begin(), Clock::now()));
    }
  }
  // Time for the jobs ahead of a retry to get through the workers: the
  // running ones and the queue (full when this is asked).
  double waves = 1.0 + static_cast<double>(executor_.queued()) /
                           std::max(1, executor_.workers());
  double delay_ms = std::clamp(per_job_ms * waves, 100.0, 30'000.0);
  return std::chrono::milliseconds(static_cast<int64_t>(delay_ms));
}

void CompilerService::RecordJobTime(Clock::duration elapsed) {
  double ms = std::chrono::duration<double, std::milli>(elapsed).count();
  std::lock_guard<std::mutex> lock(job_time_mutex_);
  mean_job_ms_ = job_time_measured_ ? 0.8 * mean_job_ms_ + 0.2 * ms : ms;
  job_time_measured_ = true;
}

class CompilerService::RunningJob {
 public:
  RunningJob(CompilerService& service, Clock::time_point start)
      : service_(service) {
    std::lock_guard<std::mutex> lock(service_.job_time_mutex_);
    entry_ = service_.running_job_starts_.insert(start);
  }
  ~RunningJob() {
    std::lock_guard<std::mutex> lock(service_.job_time_mutex_);
    service_.running_job_starts_.erase(entry_);
  }
  RunningJob(const RunningJob&) = delete;
  RunningJob& operator=(const RunningJob&) = delete;

 private:
  CompilerService& service_;
  std::multiset<Clock::time_point>::iterator entry_;
};

void CompilerService::RecordPasses(const v1::LowerStats& stats) {
  for (const v1::PassStats& pass : stats.passes()) {
    metrics_.RecordPass(pass.name(), static_cast<double>(pass.micros()) / 1e6);
  }
}

// ---------------------------------------------------------------------------
// Lower

template <typename Request, typename Response>
bool CompilerService::ParseWire(Call* call,
                                const grpc::ByteBuffer* wire_request,
                                grpc::ByteBuffer* wire_response,
                                Request** request, Response** response) {
  // On an arena the call owns: freed at once when the job has read it.
  auto arena = std::make_unique<google::protobuf::Arena>(
      RequestArenaOptions(wire_request->Length()));
  Request* parsed =
      google::protobuf::Arena::CreateMessage<Request>(arena.get());
  grpc::ByteBuffer bytes(*wire_request);  // shares the slices
  grpc::Status status =
      grpc::SerializationTraits<Request>::Deserialize(&bytes, parsed);
  if (!status.ok()) {
    call->Complete(InvalidFieldError(
        "request",
        absl::StrCat(
            "the request is not a valid ", Request::descriptor()->full_name(),
            " (protobuf parsing failed: ", status.error_message(), ")"),
        "UNPARSEABLE_REQUEST"));
    return false;
  }
  *request = parsed;
  auto out = std::make_unique<Response>();
  *response = out.get();
  call->OwnMessages(std::move(arena), std::move(out), wire_response);
  return true;
}

bool CompilerService::ParseLowerWire(Call* call,
                                     const grpc::ByteBuffer* wire_request,
                                     grpc::ByteBuffer* wire_response,
                                     v1::LowerRequest** request,
                                     v1::LowerResponse** response,
                                     std::optional<LowerWireRequest>* wire) {
  // The bytes in one piece (the received slice itself when there is one,
  // else a copy), held by an arena the call owns with the request: freed
  // together once the pipeline has read them.
  auto arena =
      std::make_unique<google::protobuf::Arena>(RequestArenaOptions(0));
  grpc::Slice piece;
  if (wire_request->DumpToSingleSlice(&piece).ok()) {
    auto* held = google::protobuf::Arena::Create<grpc::Slice>(arena.get(),
                                                              std::move(piece));
    const std::string_view bytes(reinterpret_cast<const char*>(held->begin()),
                                 held->size());
    auto* rest =
        google::protobuf::Arena::CreateMessage<v1::LowerRequest>(arena.get());
    if (std::optional<RequestWire> read = ReadRequestWire(bytes, rest)) {
      wire->emplace(LowerWireRequest{bytes, *read});
      *request = rest;
      auto out = std::make_unique<v1::LowerResponse>();
      *response = out.get();
      call->OwnMessages(std::move(arena), std::move(out), wire_response);
      return true;
    }
  }
  return ParseWire(call, wire_request, wire_response, request, response);
}

grpc::ServerUnaryReactor* CompilerService::Lower(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* wire_request,
    grpc::ByteBuffer* wire_response) {
  UnaryCall* call = new UnaryCall(*this, context, "Lower");
  v1::LowerRequest* request = nullptr;
  v1::LowerResponse* response = nullptr;
  std::optional<LowerWireRequest> wire;
  if (ParseLowerWire(call, wire_request, wire_response, &request, &response,
                     &wire)) {
    StartLower(call, request, response,
               static_cast<int64_t>(wire_request->Length()),
               wire ? &*wire : nullptr);
  }
  return call;
}

grpc::ServerUnaryReactor* CompilerService::Lower(
    grpc::CallbackServerContext* context, const v1::LowerRequest* request,
    v1::LowerResponse* response) {
  auto* call = new UnaryCall(*this, context, "Lower");
  StartLower(call, request, response,
             static_cast<int64_t>(request->ByteSizeLong()));
  return call;
}

grpc::ServerWriteReactor<v1::LowerProgress>* CompilerService::LowerStream(
    grpc::CallbackServerContext* context, const v1::LowerRequest* request) {
  auto* call = new LowerStreamCall(*this, context, "LowerStream");
  StartLower(call, request, call->response(),
             static_cast<int64_t>(request->ByteSizeLong()));
  return call;
}

void CompilerService::StartLower(Call* call, const v1::LowerRequest* request,
                                 v1::LowerResponse* response,
                                 int64_t request_bytes,
                                 const LowerWireRequest* wire) {
  grpc::CallbackServerContext* context = &call->context();
  const int64_t nodes =
      wire != nullptr ? wire->read.nodes : CountNodes(request->program());
  if (!Admit(call, nodes, request_bytes)) return;

  auto flight = std::make_shared<LowerFlight>();
  flight->request = request;
  flight->nodes = nodes;
  if (wire != nullptr) {
    flight->from_wire = true;
    flight->wire = wire->bytes;
  }
  flight->waiters.push_back({call, response});
  // Set before anyone can join (then under flight->mutex).
  flight->progress = QueuedUpdate(executor_.queued());
  bool bypass = Metadata(*context, kCacheControlHeader) == "bypass";
  if (options_.cache_bytes > 0 && !bypass) {
    std::string key =
        wire != nullptr
            ? LowerRequestDigest(*request, wire->read.program, kCompilerVersion)
            : LowerRequestDigest(*request, kCompilerVersion);
    call->SetRequestDigest(key);
    std::unique_lock<std::mutex> lock(flights_mutex_);
    ResultCache::Wire wire;
    if (ResultCache::Value hit = cache_.Lookup(key, &wire)) {
      lock.unlock();
      metrics_.RecordCacheLookup(true);
      CompleteFromCache(call, *hit, std::move(wire), response);
      return;
    }
    metrics_.RecordCacheLookup(false);
    if (auto running = flights_.find(key); running != flights_.end()) {
      std::lock_guard<std::mutex> flight_lock(running->second->mutex);
      running->second->waiters.push_back({call, response});
      call->ReleaseRequest();  // the first caller's request is the one used
      metrics_.RecordDeduplicated();
      // It joins where the computation stands.
      call->Progress(running->second->progress);
      return;
    }
    flight->key = key;
    flights_.emplace(key, flight);
  }
  call->Progress(QueuedUpdate(executor_.queued()));
  SubmitLowerFlight(std::move(flight));
}

void CompilerService::SubmitLowerFlight(std::shared_ptr<LowerFlight> flight) {
  // No exception leaves a job: it becomes the status of the flight's calls.
  auto job = [this, flight] {
    std::optional<grpc::Status> failed;
    try {
      RunLowerFlight(*flight);
    } catch (const std::bad_alloc&) {
      failed = OutOfMemoryError("while lowering", EstimatedRetryDelay());
    } catch (const std::exception& e) {
      failed = InternalRpcError(absl::StrCat("lowering failed: ", e.what()));
    } catch (...) {
      failed = InternalRpcError("lowering failed: unknown exception");
    }
    if (failed) FinishLowerFlight(*flight, *failed, nullptr, nullptr);
  };
  switch (executor_.TrySubmit(std::move(job))) {
    case BoundedExecutor::Admission::kAccepted:
      return;
    case BoundedExecutor::Admission::kQueueFull:
      FinishLowerFlight(
          *flight,
          QueueFullError(executor_.queue_depth(), EstimatedRetryDelay()),
          nullptr, nullptr);
      return;
    case BoundedExecutor::Admission::kClosed:
      FinishLowerFlight(*flight, DrainingError(), nullptr, nullptr);
      return;
  }
}

void CompilerService::RunLowerFlight(LowerFlight& flight) {
  Clock::time_point start = Clock::now();
  RunningJob running_job(*this, start);
  {
    std::lock_guard<std::mutex> lock(flight.mutex);
    flight.progress.set_stage(v1::ProgressUpdate::STAGE_STARTED);
    for (LowerFlight::Waiter& waiter : flight.waiters) {
      waiter.call->JobStarted();
      waiter.call->Progress(flight.progress);
    }
  }
  ProgressFn progress = [&flight](const StageEvent& event) {
    std::lock_guard<std::mutex> lock(flight.mutex);
    ApplyStageEvent(event, flight.progress);
    for (LowerFlight::Waiter& waiter : flight.waiters)
      waiter.call->Progress(flight.progress);
  };
  if (options_.before_job_for_testing) options_.before_job_for_testing("Lower");

  // The computation continues while any of its callers still wants it.
  ContinueFn keep_going = [&flight] {
    Clock::time_point now = Clock::now();
    std::lock_guard<std::mutex> lock(flight.mutex);
    for (const LowerFlight::Waiter& waiter : flight.waiters) {
      if (waiter.call->Wanted(now)) return true;
    }
    return false;
  };
  if (!keep_going()) {
    FinishLowerFlight(flight, CallCancelledError("while queued"), nullptr,
                      nullptr);
    return;
  }

  if (!flight.key.empty() && shared_cache_ != nullptr) {
    if (std::shared_ptr<const v1::LowerResponse> hit =
            SharedLookup(flight.key)) {
      flight.shared_hit = true;
      FinishLowerFlight(flight, grpc::Status::OK, std::move(hit), nullptr);
      return;
    }
  }
  Call* first = flight.waiters.front().call;  // finished last
  const int64_t nodes = flight.nodes;
  const bool large = nodes >= kReleaseMemoryFromNodes;
  if (std::optional<grpc::Status> refused =
          ChargeJobMemory(first, JobMemoryEstimate(nodes));
      refused) {
    FinishLowerFlight(flight, *refused, nullptr, nullptr);
    return;
  }

  // Each form of the program lives only as long as it must, so that the
  // job's peak holds as few of them at once as it can (docs/performance.md,
  // "Memory per node"): the parsed request until the pipeline has read it
  // (after validation), the IR until its wire form is written (each method,
  // constant and module freed once written; no response message holds the
  // program), the wire form until the callers have been sent it and the
  // cache lets it go.
  v1::LowerResponse built;  // every field but the program
  ResultCache::Wire wire;   // the whole response, when it lowered
  {
    // The request is freed as soon as the pipeline has read it.
    auto release_request = [this, &flight, first, large] {
      if (flight.request == nullptr) return;
      flight.request = nullptr;
      first->ReleaseRequest();
      if (large) GiveBackFreedMemory();
    };
    absl::StatusOr<LowerResult> result =
        flight.from_wire
            ? ferry::LowerWire(flight.wire, keep_going, options_.limits,
                               DeclaredBackendOperators(), Fetcher(), {},
                               progress, release_request)
            : ferry::Lower(*flight.request, keep_going, options_.limits,
                           DeclaredBackendOperators(), Fetcher(), {}, progress,
                           release_request);
    RecordJobTime(Clock::now() - start);
    release_request();                 // if the pipeline stopped before it
    if (large) GiveBackFreedMemory();  // and what the passes freed
    if (!result.ok()) {
      // From bytes, a request protobuf cannot parse is found by the job (the
      // only INVALID_ARGUMENT the pipeline gives), and refused as ParseWire
      // refuses one.
      grpc::Status status =
          result.status().code() == absl::StatusCode::kCancelled
              ? CallCancelledError("between passes")
          : flight.from_wire &&
                  result.status().code() == absl::StatusCode::kInvalidArgument
              ? InvalidFieldError(
                    "request",
                    absl::StrCat("the request is not a valid ",
                                 v1::LowerRequest::descriptor()->full_name(),
                                 " (protobuf parsing failed)"),
                    "UNPARSEABLE_REQUEST")
              : JobError(result.status(), "lowering");
      FinishLowerFlight(flight, status, nullptr, nullptr, nullptr);
      return;
    }
    // A malformed program (E01xx-E05xx) is an OK response like a compile
    // failure: its diagnostics, all of them, are in the body.
    built.set_ok(result->ok);
    DiagnosticsToProto(result->diagnostics, built.mutable_diagnostics());
    StatsToProto(result->stats, built.mutable_stats());
    built.set_compiler_version(kCompilerVersion);
    built.set_request_digest(flight.key);
    if (result->ok) {
      absl::StatusOr<std::string> bytes =
          LoweredResponseWire(built, std::move(result->program));
      if (!bytes.ok()) {
        FinishLowerFlight(flight, JobError(bytes.status(), "writing"), nullptr,
                          nullptr, nullptr);
        return;
      }
      wire = std::make_shared<const std::string>(*std::move(bytes));
    }
  }  // the IR goes here
  if (large) GiveBackFreedMemory();
  RecordPasses(built.stats());
  const int64_t response_bytes =
      wire != nullptr ? static_cast<int64_t>(wire->size())
                      : static_cast<int64_t>(built.ByteSizeLong());
  if (response_bytes > options_.max_response_bytes) {
    FinishLowerFlight(
        flight,
        OverLimitError("response_bytes", response_bytes,
                       options_.max_response_bytes, "RESPONSE_TOO_LARGE"),
        nullptr, nullptr, nullptr);
    return;
  }
  if (flight.key.empty()) {
    FinishLowerFlight(flight, grpc::Status::OK, nullptr, &built, wire);
    return;
  }
  auto shared = std::make_shared<const v1::LowerResponse>(std::move(built));
  FinishLowerFlight(flight, grpc::Status::OK, shared, nullptr, wire);
  // After the callers have their answer: the shared tier is for the next.
  if (shared_cache_ != nullptr && wire != nullptr)
    SharedStore(flight.key, *wire);
}

std::shared_ptr<const v1::LowerResponse> CompilerService::SharedLookup(
    const std::string& key) {
  SharedResultCache::Found found = shared_cache_->Get(key);
  metrics_.RecordSharedCache(SharedResultCache::OutcomeName(found.outcome));
  if (found.outcome == SharedResultCache::Outcome::kCorrupt) {
    LogLine line = NewLogLine("shared_cache");
    line.set_level("warning");
    line.set_request_digest(key);
    line.set_error("stored value does not verify; recomputing");
    logger_.Write(line);
  }
  if (found.outcome != SharedResultCache::Outcome::kHit) return nullptr;
  auto response =
      std::make_shared<const v1::LowerResponse>(*std::move(found.response));
  std::lock_guard<std::mutex> lock(flights_mutex_);
  cache_.Insert(key, response, static_cast<int64_t>(response->SpaceUsedLong()));
  return response;
}

void CompilerService::SharedStore(const std::string& key,
                                  const std::string& wire) {
  switch (shared_cache_->Put(key, wire)) {
    case SharedResultCache::Stored::kStored:
      metrics_.RecordSharedCache("stored");
      return;
    case SharedResultCache::Stored::kTooLarge:
      metrics_.RecordSharedCache("too_large");
      return;
    case SharedResultCache::Stored::kFailed:
      metrics_.RecordSharedCache("store_failed");
      return;
  }
}

std::optional<grpc::Status> CompilerService::ChargeJobMemory(Call* call,
                                                             int64_t bytes) {
  if (memory_.limit() > 0 && bytes > memory_.limit()) {
    // It would not fit in an idle server either: no use retrying.
    return OverLimitError("memory_estimate_bytes", bytes, memory_.limit(),
                          "OVER_MEMORY_BUDGET");
  }
  std::optional<MemoryBudget::Charge> charge = ReserveShedding(bytes);
  if (!charge) {
    Clock::time_point waited_from = Clock::now();
    charge =
        memory_.ReserveWithin(bytes, waited_from + options_.memory_wait,
                              [call] { return !call->Wanted(Clock::now()); });
    metrics_.RecordMemoryWait(MillisBetween(waited_from, Clock::now()) / 1000);
  }
  if (!charge) {
    if (!call->Wanted(Clock::now()))
      return call->Unwanted("waiting for memory");
    return MemoryBudgetError(bytes, memory_.used(), memory_.limit(),
                             EstimatedRetryDelay());
  }
  call->HoldCharge(*std::move(charge));
  return std::nullopt;
}

BlobFetcher CompilerService::Fetcher() {
  if (blobs_ == nullptr) return {};
  return [this](const BlobRef& ref) -> absl::StatusOr<std::string> {
    v1::Digest digest;
    digest.set_hash(ref.hash);
    digest.set_size_bytes(ref.size_bytes);
    absl::StatusOr<std::optional<std::string>> bytes = blobs_->Get(digest);
    if (!bytes.ok()) return bytes.status();
    if (!bytes->has_value()) {
      return absl::FailedPreconditionError(
          BlobSubject(ref.hash, ref.size_bytes));
    }
    return **std::move(bytes);
  };
}

std::optional<grpc::Status> CompilerService::ResolveBlobs(
    Call* call, v1::Program& program) {
  std::vector<v1::Constant*> referring;
  int64_t bytes = 0;
  for (v1::Constant& constant : *program.mutable_constants()) {
    if (!constant.has_data_digest() || constant.has_data()) continue;
    const int64_t size = constant.data_digest().size_bytes();
    // No stored blob is larger than --max-blob-bytes, so neither is a
    // reference that can resolve; and the sum cannot overflow.
    if (size < 0 || (blobs_ != nullptr && size > options_.max_blob_bytes) ||
        __builtin_add_overflow(bytes, size, &bytes)) {
      return OverLimitError("blob_bytes", size, options_.max_blob_bytes,
                            "BLOB_TOO_LARGE");
    }
    referring.push_back(&constant);
  }
  if (referring.empty()) return std::nullopt;
  if (blobs_ == nullptr) {
    return MissingBlobsError(
        {BlobSubject(referring[0]->data_digest())},
        "this server keeps no blobs (start it with --cache-redis or "
        "--blob-dir)");
  }
  if (std::optional<grpc::Status> refused = ChargeJobMemory(call, bytes)) {
    return refused;
  }
  std::vector<std::string> missing;
  for (v1::Constant* constant : referring) {
    absl::StatusOr<std::optional<std::string>> data =
        blobs_->Get(constant->data_digest());
    if (!data.ok()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("the blob store cannot be read now: ",
                                       data.status().message()));
    }
    if (!data->has_value()) {
      missing.push_back(BlobSubject(constant->data_digest()));
      continue;
    }
    constant->set_data(**std::move(data));
    constant->clear_data_digest();
  }
  if (!missing.empty()) {
    return MissingBlobsError(missing,
                             "upload them with UploadBlob, then retry");
  }
  return std::nullopt;
}

// Delivers `status` (and, when OK, the response: shared, or `owned` for a
// flight nobody could join) to every waiter; caches a successful lowering.
// `wire`, when given, is the whole response serialized (a lowered program
// written straight from the IR), and the message holds every field but the
// program: a caller that answers in wire form is sent the bytes, any other
// reads them back into its message.
void CompilerService::FinishLowerFlight(
    LowerFlight& flight, const grpc::Status& status,
    std::shared_ptr<const v1::LowerResponse> response, v1::LowerResponse* owned,
    ResultCache::Wire wire) {
  const v1::LowerResponse* result = owned != nullptr ? owned : response.get();
  const bool lowered = status.ok() && result->ok();
  // A result the job computed comes with its wire form (RunLowerFlight):
  // those bytes answer every waiter in wire form now and every later hit.
  const bool cacheable =
      !flight.key.empty() && lowered && !flight.shared_hit && wire != nullptr;
  if (!flight.key.empty()) {
    std::lock_guard<std::mutex> lock(flights_mutex_);
    if (cacheable) {
      // Charged the memory the message of the other fields takes, plus the
      // bytes.
      cache_.Insert(flight.key, response,
                    static_cast<int64_t>(response->SpaceUsedLong()), wire);
    }
    flights_.erase(flight.key);  // nobody joins after this point
  }
  std::vector<LowerFlight::Waiter> waiters;
  {
    std::lock_guard<std::mutex> lock(flight.mutex);
    waiters.swap(flight.waiters);
  }
  Clock::time_point now = Clock::now();
  // The first caller's request backs the computation: finish it last.
  for (size_t i = waiters.size(); i-- > 0;) {
    LowerFlight::Waiter& waiter = waiters[i];
    if (status.error_code() == grpc::StatusCode::CANCELLED) {
      // The computation stopped because its callers gave up; a caller that
      // joined in the meantime may retry.
      waiter.call->Complete(
          waiter.call->Wanted(now)
              ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                             "the shared computation was cancelled; retry")
              : waiter.call->Unwanted("between passes"));
      continue;
    }
    if (!status.ok()) {
      waiter.call->Complete(status);
      continue;
    }
    if (!waiter.call->Wanted(now)) {
      waiter.call->Complete(waiter.call->Unwanted("after lowering"));
      continue;
    }
    if (wire != nullptr && waiter.call->AnswersInWireForm()) {
      waiter.call->UseResponseWire(wire);  // the response carries the rest
      waiter.response->set_cached(i != 0 || flight.shared_hit);
    } else if (wire != nullptr) {
      if (std::optional<grpc::Status> unread =
              ReadWire(*wire, waiter.response, "the lowered result")) {
        waiter.call->Complete(*unread);
        continue;
      }
      waiter.response->set_cached(i != 0 || flight.shared_hit);
    } else if (owned != nullptr) {
      waiter.response->Swap(owned);
    } else {
      try {
        *waiter.response = *response;
      } catch (const std::bad_alloc&) {
        waiter.call->Complete(OutOfMemoryError("copying the shared result",
                                               EstimatedRetryDelay()));
        continue;
      }
      waiter.response->set_cached(i != 0 || flight.shared_hit);
    }
    waiter.response->set_request_id(waiter.call->request_id());
    if (!lowered) {
      // Never in wire form: a result that did not lower has no program.
      waiter.call->SetFailedDiagnostics(waiter.response->diagnostics());
    }
    waiter.call->SetOutcome(flight.shared_hit ? "shared_cache_hit"
                            : i != 0          ? "deduplicated"
                            : lowered         ? "lowered"
                                              : "compile_failed");
    waiter.call->Complete(grpc::Status::OK);
  }
}

// ---------------------------------------------------------------------------
// Verify

grpc::ServerUnaryReactor* CompilerService::Verify(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* wire_request,
    grpc::ByteBuffer* wire_response) {
  UnaryCall* call = new UnaryCall(*this, context, "Verify");
  v1::VerifyRequest* request = nullptr;
  v1::VerifyResponse* response = nullptr;
  if (ParseWire(call, wire_request, wire_response, &request, &response)) {
    StartVerify(call, request, response,
                static_cast<int64_t>(wire_request->Length()));
  }
  return call;
}

grpc::ServerUnaryReactor* CompilerService::Verify(
    grpc::CallbackServerContext* context, const v1::VerifyRequest* request,
    v1::VerifyResponse* response) {
  auto* call = new UnaryCall(*this, context, "Verify");
  StartVerify(call, request, response,
              static_cast<int64_t>(request->ByteSizeLong()));
  return call;
}

grpc::ServerWriteReactor<v1::VerifyProgress>* CompilerService::VerifyStream(
    grpc::CallbackServerContext* context, const v1::VerifyRequest* request) {
  auto* call = new VerifyStreamCall(*this, context, "VerifyStream");
  StartVerify(call, request, call->response(),
              static_cast<int64_t>(request->ByteSizeLong()));
  return call;
}

void CompilerService::StartVerify(Call* call, const v1::VerifyRequest* request,
                                  v1::VerifyResponse* response,
                                  int64_t request_bytes) {
  if (!Admit(call, CountNodes(request->request().program()), request_bytes))
    return;
  if (!v1::VerifyDevice_IsValid(request->device())) {
    call->Complete(InvalidFieldError(
        "device",
        absl::StrCat("unknown verification device ", request->device(),
                     "; use VERIFY_DEVICE_AUTO, VERIFY_DEVICE_SIM or "
                     "VERIFY_DEVICE_CUDA"),
        "UNKNOWN_DEVICE"));
    return;
  }
  if (request->device() == v1::VERIFY_DEVICE_CUDA && !options_.cuda_available) {
    call->Complete(DeviceUnavailableError(
        "cuda",
        "no usable GPU is visible to this server; use "
        "VERIFY_DEVICE_SIM or a GPU verification endpoint"));
    return;
  }
  call->Progress(QueuedUpdate(executor_.queued()));
  // No exception leaves a job: RunVerify finishes the call last, so one
  // that escapes it has not finished the call yet.
  Submit(call, [this, call, request, response] {
    std::optional<grpc::Status> failed;
    try {
      RunVerify(call, *request, response);
    } catch (const std::bad_alloc&) {
      failed = OutOfMemoryError("while verifying", EstimatedRetryDelay());
    } catch (const std::exception& e) {
      failed =
          InternalRpcError(absl::StrCat("verification failed: ", e.what()));
    } catch (...) {
      failed = InternalRpcError("verification failed: unknown exception");
    }
    if (failed) call->Complete(*failed);
  });
}

void CompilerService::RunVerify(Call* call, const v1::VerifyRequest& request,
                                v1::VerifyResponse* response) {
  Clock::time_point start = Clock::now();
  RunningJob running_job(*this, start);
  call->JobStarted();
  if (options_.before_job_for_testing)
    options_.before_job_for_testing("Verify");
  ContinueFn keep_going = [call] { return call->Wanted(Clock::now()); };
  if (!keep_going()) {
    call->Complete(call->Unwanted("while queued"));
    return;
  }
  v1::ProgressUpdate snapshot;
  snapshot.set_stage(v1::ProgressUpdate::STAGE_STARTED);
  call->Progress(snapshot);
  ProgressFn progress = [call, &snapshot](const StageEvent& event) {
    ApplyStageEvent(event, snapshot);
    call->Progress(snapshot);
  };

  // Blobs become data: verification runs the real weights.
  const v1::LowerRequest* lower_request = &request.request();
  std::optional<v1::LowerRequest> resolved;
  if (HasBlobRefs(request.request().program())) {
    resolved.emplace(request.request());
    if (std::optional<grpc::Status> failed =
            ResolveBlobs(call, *resolved->mutable_program())) {
      call->Complete(*failed);
      return;
    }
    lower_request = &*resolved;
  }
  if (std::optional<grpc::Status> refused = ChargeJobMemory(
          call, JobMemoryEstimate(CountNodes(lower_request->program())))) {
    call->Complete(*refused);
    return;
  }
  absl::StatusOr<LowerResult> lowered =
      ferry::Lower(*lower_request, keep_going, options_.limits,
                   DeclaredBackendOperators(), {}, {}, progress);
  if (!lowered.ok()) {
    call->Complete(lowered.status().code() == absl::StatusCode::kCancelled
                       ? call->Unwanted("between passes")
                       : JobError(lowered.status(), "lowering"));
    return;
  }
  // A malformed program (E01xx-E05xx), like one that fails to compile, is
  // an OK response with lowered = false and every diagnostic in the body.
  response->set_lowered(lowered->ok);
  DiagnosticsToProto(lowered->diagnostics, response->mutable_diagnostics());
  StatsToProto(lowered->stats, response->mutable_stats());
  RecordPasses(response->stats());
  response->set_compiler_version(kCompilerVersion);
  response->set_request_id(call->request_id());
  if (!lowered->ok) {
    call->SetFailedDiagnostics(response->diagnostics());
    call->SetOutcome("compile_failed");
    call->Complete(grpc::Status::OK);
    return;
  }

  Diagnostics import_diagnostics;
  Program original =
      ImportProgram(lower_request->program(), import_diagnostics);
  VerifyOptions options;
  options.device = DeviceFromProto(request.device());
  options.seed = request.seed();
  options.keep_going = keep_going;
  options.progress = progress;
  options.cancel = &call->cancel_token();
  for (const v1::InputValue& value : request.inputs().values()) {
    GivenInput input;
    input.method = value.method();
    input.input = value.input();
    input.dtype = DTypeFromProto(value.spec().dtype());
    input.sizes.assign(value.spec().sizes().begin(),
                       value.spec().sizes().end());
    input.data = value.data();
    options.inputs.push_back(std::move(input));
  }
  // What verification will allocate, within the per-request limit and then
  // charged to the process budget, before anything is allocated.
  options.limits = options_.limits;
  absl::StatusOr<int64_t> verify_bytes = VerifyBytes(
      original, lowered->program,
      static_cast<int64_t>(request.inputs().ByteSizeLong()), options_.limits);
  if (!verify_bytes.ok()) {
    metrics_.RecordVerification("none", "error");
    call->Complete(JobError(verify_bytes.status(), "verification"));
    return;
  }
  // On the worker: waits for running jobs like the pipeline's charge.
  if (std::optional<grpc::Status> refused =
          ChargeJobMemory(call, *verify_bytes)) {
    metrics_.RecordVerification("none", "error");
    call->Complete(*refused);
    return;
  }
  absl::StatusOr<VerifyReport> report =
      VerifyPrograms(original, lowered->program, options);
  RecordJobTime(Clock::now() - start);
  if (!report.ok()) {
    switch (report.status().code()) {
      case absl::StatusCode::kFailedPrecondition:
        metrics_.RecordVerification("none", "error");
        call->Complete(DeviceUnavailableError(
            request.device() == v1::VERIFY_DEVICE_CUDA ? "cuda" : "auto",
            report.status().message()));
        return;
      case absl::StatusCode::kCancelled:
        call->Complete(call->Unwanted("while verifying"));
        return;
      case absl::StatusCode::kInvalidArgument:  // a given input does not fit
        metrics_.RecordVerification("none", "error");
        call->Complete(InvalidFieldError("inputs", report.status().message(),
                                         "INPUT_DOES_NOT_FIT"));
        return;
      default:
        metrics_.RecordVerification("none", "error");
        call->Complete(JobError(report.status(), "verification"));
        return;
    }
  }
  if (!call->Wanted(Clock::now())) {
    call->Complete(call->Unwanted("while verifying"));
    return;
  }
  *response->mutable_report() = VerifyReportToProto(*report);
  response->set_device(report->device);
  response->set_ok(report->ok);
  if (request.include_program()) {
    ExportProgram(lowered->program, response->mutable_program());
    // What came as a blob goes back as one (when the lowering kept it).
    if (resolved)
      RestoreBlobRefs(request.request().program(),
                      *response->mutable_program());
  }
  absl::string_view result =
      report->ok ? "match" : (report->error.empty() ? "mismatch" : "error");
  metrics_.RecordVerification(report->device, result);
  call->SetOutcome(report->ok ? "verified" : "verify_failed");
  call->Complete(grpc::Status::OK);
}

// ---------------------------------------------------------------------------
// GetCapabilities: cheap and static, answered on the gRPC thread.

v1::GetCapabilitiesResponse CompilerService::Capabilities() const {
  v1::GetCapabilitiesResponse caps;
  caps.set_api_version(kApiVersion);
  caps.set_compiler_version(kCompilerVersion);
  v1::Limits* limits = caps.mutable_limits();
  limits->set_max_request_bytes(options_.max_request_bytes);
  limits->set_max_response_bytes(options_.max_response_bytes);
  limits->set_max_nodes(options_.max_nodes);
  limits->set_max_concurrent_jobs(executor_.workers());
  limits->set_queue_depth(executor_.queue_depth());
  limits->set_default_deadline_ms(options_.default_deadline.count());
  limits->set_max_deadline_ms(options_.max_deadline.count());
  limits->set_max_tensor_bytes(options_.limits.max_tensor_bytes);
  limits->set_max_verify_bytes(options_.limits.max_verify_bytes);
  limits->set_max_expansion(options_.limits.max_expansion);
  limits->set_max_memory_bytes(options_.max_memory_bytes);
  limits->set_memory_wait_ms(options_.memory_wait.count());
  if (blobs_ != nullptr) limits->set_max_blob_bytes(options_.max_blob_bytes);
  for (const std::string& pass : PipelinePassNames()) caps.add_passes(pass);
  const google::protobuf::Descriptor* lower_options =
      v1::LowerOptions::descriptor();
  for (int i = 0; i < lower_options->field_count(); ++i) {
    caps.add_lower_options(lower_options->field(i)->name());
  }
  const google::protobuf::EnumDescriptor* partitioners =
      v1::PartitionerKind_descriptor();
  for (int i = 0; i < partitioners->value_count(); ++i) {
    caps.add_partitioners(partitioners->value(i)->name());
  }
  v1::BackendInfo* cuda_backend = caps.add_backends();
  cuda_backend->set_id(kCudaBackendId);
  cuda_backend->add_device_types("cuda");
  for (const std::string& op : CudaBackendOperators())
    cuda_backend->add_operators(op);
  for (const std::string& op : CudaHostOnlyOperators())
    cuda_backend->add_host_only_operators(op);
  v1::BackendInfo* host_backend = caps.add_backends();
  host_backend->set_id(kHostBackendId);
  host_backend->add_device_types("cpu");
  for (const std::string& device : options_.visible_devices) {
    caps.add_devices(device);
  }
  caps.add_verify_devices(v1::VERIFY_DEVICE_AUTO);
  caps.add_verify_devices(v1::VERIFY_DEVICE_SIM);
  if (options_.cuda_available) caps.add_verify_devices(v1::VERIFY_DEVICE_CUDA);
  caps.set_digest_function("sha256");
  caps.set_cache_bytes(options_.cache_bytes);
  caps.set_requires_token(!options_.tokens.empty());
  if (shared_cache_ != nullptr) caps.set_shared_cache("redis");
  if (blobs_ != nullptr) caps.set_blob_store(blobs_->kind());
  return caps;
}

grpc::ServerUnaryReactor* CompilerService::GetCapabilities(
    grpc::CallbackServerContext* context, const v1::GetCapabilitiesRequest*,
    v1::GetCapabilitiesResponse* response) {
  UnaryCall* call = new UnaryCall(*this, context, "GetCapabilities");
  // Answered while draining too: it is cheap and helps clients pick
  // another replica.
  if (!Authorize(call)) return call;
  *response = Capabilities();
  call->Complete(grpc::Status::OK);
  return call;
}

// ---------------------------------------------------------------------------
// Lookup: the in-process cache, then the shared tier (bounded by the Redis
// timeout), on the gRPC thread; no program, no job.

grpc::ServerUnaryReactor* CompilerService::Lookup(
    grpc::CallbackServerContext* context, const v1::LookupRequest* request,
    v1::LowerResponse* response) {
  UnaryCall* call = new UnaryCall(*this, context, "Lookup");
  if (!Authorize(call)) return call;
  if (draining_.load()) {
    call->Complete(DrainingError());
    return call;
  }
  const std::string& key = request->request_digest();
  if (!IsSha256Hex(key)) {
    call->Complete(InvalidFieldError("request_digest",
                                     "not 64 lowercase hex digits (a SHA-256)",
                                     "BAD_DIGEST"));
    return call;
  }
  call->SetRequestDigest(key);
  ResultCache::Wire wire;
  ResultCache::Value hit =
      options_.cache_bytes > 0 ? cache_.Lookup(key, &wire) : nullptr;
  if (hit == nullptr && shared_cache_ != nullptr) hit = SharedLookup(key);
  if (hit == nullptr) {
    call->SetOutcome("miss");
    call->Complete(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                "no cached result for this digest; send "
                                "the program with Lower"));
    return call;
  }
  CompleteFromCache(call, *hit, std::move(wire), response);
  return call;
}

std::optional<grpc::Status> CompilerService::ReadWire(
    const std::string& wire, v1::LowerResponse* response,
    absl::string_view what) const {
  try {
    if (response->ParseFromString(wire)) return std::nullopt;
  } catch (const std::bad_alloc&) {
    return OutOfMemoryError(absl::StrCat("reading ", what),
                            EstimatedRetryDelay());
  }
  return InternalRpcError(absl::StrCat(what, " does not parse"));
}

void CompilerService::CompleteFromCache(Call* call,
                                        const v1::LowerResponse& hit,
                                        ResultCache::Wire wire,
                                        v1::LowerResponse* response) {
  if (wire != nullptr && call->AnswersInWireForm()) {
    call->UseResponseWire(std::move(wire));  // no copy, no serialization
  } else if (wire != nullptr) {
    if (std::optional<grpc::Status> unread =
            ReadWire(*wire, response, "a cached result")) {
      call->Complete(*unread);
      return;
    }
  } else {
    try {
      *response = hit;
    } catch (const std::bad_alloc&) {
      call->Complete(
          OutOfMemoryError("copying a cached result", EstimatedRetryDelay()));
      return;
    }
  }
  response->set_cached(true);
  response->set_request_id(call->request_id());
  call->SetOutcome("cache_hit");
  call->Complete(grpc::Status::OK);
}

// ---------------------------------------------------------------------------
// Blobs

namespace {

constexpr int kMaxDigestsPerCall = 10'000;
constexpr int kMaxOpenUploads = 64;

}  // namespace

grpc::ServerUnaryReactor* CompilerService::FindMissingBlobs(
    grpc::CallbackServerContext* context,
    const v1::FindMissingBlobsRequest* request,
    v1::FindMissingBlobsResponse* response) {
  UnaryCall* call = new UnaryCall(*this, context, "FindMissingBlobs");
  if (!Authorize(call)) return call;
  if (blobs_ == nullptr) {
    call->Complete(grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        "this server keeps no blobs (start it with --cache-redis or "
        "--blob-dir); send constants' data inline"));
    return call;
  }
  if (request->blob_digests_size() > kMaxDigestsPerCall) {
    call->Complete(OverLimitError("blob_digests", request->blob_digests_size(),
                                  kMaxDigestsPerCall, "TOO_MANY_DIGESTS"));
    return call;
  }
  std::vector<v1::Digest> digests;
  for (int i = 0; i < request->blob_digests_size(); ++i) {
    const v1::Digest& digest = request->blob_digests(i);
    if (!IsSha256Hex(digest.hash()) || digest.size_bytes() < 0) {
      call->Complete(InvalidFieldError(
          absl::StrCat("blob_digests[", i, "]"),
          "not a digest: 64 lowercase hex digits and a size >= 0",
          "BAD_DIGEST"));
      return call;
    }
    digests.push_back(digest);
  }
  absl::StatusOr<std::vector<bool>> held = blobs_->Contains(digests);
  if (!held.ok()) {
    call->Complete(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                std::string(held.status().message())));
    return call;
  }
  for (size_t i = 0; i < digests.size(); ++i) {
    if (!(*held)[i]) *response->add_missing_blob_digests() = digests[i];
  }
  call->Complete(grpc::Status::OK);
  return call;
}

// One UploadBlob stream: chunks are appended to a buffer charged to the
// memory budget at the size the first message declares; at the end of the
// stream the bytes are checked against the digest and stored.
class CompilerService::UploadCall final
    : public grpc::ServerReadReactor<v1::UploadBlobRequest> {
 public:
  UploadCall(CompilerService& service, grpc::CallbackServerContext* context,
             v1::UploadBlobResponse* response)
      : service_(service),
        context_(context),
        response_(response),
        arrival_(Clock::now()) {
    service_.metrics_.RecordStarted(kMethod, kType);
    // Open streams are bounded: one that sends nothing holds a slot until
    // its caller's deadline, never the server.
    if (service_.open_uploads_.fetch_add(1) >= kMaxOpenUploads) {
      Done(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("more than ", kMaxOpenUploads,
                                     " blob uploads are open; retry later")));
      return;
    }
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Commit();
      return;
    }
    service_.metrics_.RecordMessageReceived(kMethod, kType);
    if (!started_) {
      started_ = true;
      if (std::optional<grpc::Status> refused = Begin()) {
        Done(*refused);
        return;
      }
    } else if (chunk_.has_digest() &&
               !(chunk_.digest().hash() == digest_.hash() &&
                 chunk_.digest().size_bytes() == digest_.size_bytes())) {
      Done(InvalidFieldError("digest",
                             "a later message names another blob; send one "
                             "blob per stream",
                             "DIGEST_CHANGED"));
      return;
    }
    if (static_cast<int64_t>(bytes_.size() + chunk_.data().size()) >
        digest_.size_bytes()) {
      Done(InvalidFieldError("data",
                             absl::StrCat("more bytes than the digest's size (",
                                          digest_.size_bytes(), ")"),
                             "BLOB_TOO_LONG"));
      return;
    }
    bytes_.append(chunk_.data());
    chunk_.Clear();
    StartRead(&chunk_);
  }

  void OnDone() override {
    service_.open_uploads_.fetch_sub(1);
    delete this;
  }

 private:
  std::optional<grpc::Status> Begin() {
    if (!service_.AuthorizeContext(*context_, &status_)) return status_;
    if (service_.draining_.load()) return DrainingError();
    if (service_.blobs_ == nullptr) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "this server keeps no blobs (start it with "
                          "--cache-redis or --blob-dir)");
    }
    if (!chunk_.has_digest() || !IsSha256Hex(chunk_.digest().hash()) ||
        chunk_.digest().size_bytes() < 0) {
      return InvalidFieldError("digest",
                               "the first message must carry the blob's "
                               "digest (64 lowercase hex digits and a size)",
                               "BAD_DIGEST");
    }
    digest_ = chunk_.digest();
    if (digest_.size_bytes() > service_.options_.max_blob_bytes) {
      return OverLimitError("blob_bytes", digest_.size_bytes(),
                            service_.options_.max_blob_bytes, "BLOB_TOO_LARGE");
    }
    std::optional<MemoryBudget::Charge> charge =
        service_.ReserveShedding(digest_.size_bytes());
    if (!charge) {
      return MemoryBudgetError(digest_.size_bytes(), service_.memory_.used(),
                               service_.memory_.limit(),
                               service_.EstimatedRetryDelay());
    }
    charge_ = *std::move(charge);
    bytes_.reserve(static_cast<size_t>(digest_.size_bytes()));
    return std::nullopt;
  }

  void Commit() {
    if (!started_) {
      Done(InvalidFieldError("digest", "the stream carried no message",
                             "BAD_DIGEST"));
      return;
    }
    if (static_cast<int64_t>(bytes_.size()) != digest_.size_bytes() ||
        Sha256HexOf(bytes_) != digest_.hash()) {
      Done(InvalidFieldError(
          "data",
          absl::StrCat("the ", bytes_.size(),
                       " bytes received do not hash to the digest ",
                       BlobSubject(digest_), "; nothing was stored"),
          "DIGEST_MISMATCH"));
      return;
    }
    if (absl::Status stored = service_.blobs_->Put(digest_, std::move(bytes_));
        !stored.ok()) {
      Done(grpc::Status(
          stored.code() == absl::StatusCode::kResourceExhausted
              ? grpc::StatusCode::RESOURCE_EXHAUSTED
              : grpc::StatusCode::UNAVAILABLE,
          absl::StrCat("cannot store the blob: ", stored.message())));
      return;
    }
    *response_->mutable_digest() = digest_;
    response_->set_committed_size(digest_.size_bytes());
    service_.metrics_.RecordBlobUpload(digest_.size_bytes());
    Done(grpc::Status::OK);
  }

  void Done(const grpc::Status& status) {
    charge_.Reset();
    bytes_.clear();
    bytes_.shrink_to_fit();
    absl::string_view code = StatusCodeName(status.error_code());
    service_.metrics_.RecordRequest(
        kMethod, code, MillisBetween(arrival_, Clock::now()) / 1000, kType);
    if (status.ok()) service_.metrics_.RecordMessageSent(kMethod, kType);
    LogLine line = NewLogLine("rpc");
    line.set_level(std::string(LogLevel(status.error_code())));
    line.set_method(kMethod);
    line.set_code(std::string(code));
    line.set_blob(BlobSubject(digest_));
    line.set_duration_ms(MillisBetween(arrival_, Clock::now()));
    if (!status.ok()) line.set_error(status.error_message());
    line.set_peer(context_->peer());
    service_.logger_.Write(line);
    if (auto pushback = RetryPushbackMs(status)) {
      context_->AddTrailingMetadata(kRetryPushbackTrailer, *pushback);
    }
    Finish(status);
  }

  static constexpr char kMethod[] = "UploadBlob";
  static constexpr RpcType kType = RpcType::kClientStream;

  CompilerService& service_;
  grpc::CallbackServerContext* context_;
  v1::UploadBlobResponse* response_;
  const Clock::time_point arrival_;
  v1::UploadBlobRequest chunk_;
  v1::Digest digest_;
  bool started_ = false;
  std::string bytes_;
  MemoryBudget::Charge charge_;
  grpc::Status status_;
};

grpc::ServerReadReactor<v1::UploadBlobRequest>* CompilerService::UploadBlob(
    grpc::CallbackServerContext* context, v1::UploadBlobResponse* response) {
  return new UploadCall(*this, context, response);
}

}  // namespace ferry
