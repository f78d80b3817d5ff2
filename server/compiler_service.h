// ferry.v1.Compiler on gRPC's callback API.
//
// A handler only checks what is cheap (token, size and node limits, the
// verification device, the result cache), then hands the call to the
// bounded executor and returns; passes and verification run on the
// executor's workers, never on a gRPC thread. Between passes and between
// verification steps the job asks whether anyone still wants the result
// (not cancelled, not past its deadline, server not aborting).
//
// Identical Lower requests share one computation: the first becomes a
// "flight" that later identical calls join while it runs; its result goes to
// every caller and, when the program lowered, into the result cache.
#ifndef FERRY_SERVER_COMPILER_SERVICE_H_
#define FERRY_SERVER_COMPILER_SERVICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "ferry/v1/compiler.grpc.pb.h"
#include "passes/pipeline.h"
#include "passes/proto_io.h"
#include "passes/resource_limits.h"
#include "runtime/cancel.h"
#include "server/blob_store.h"
#include "server/executor.h"
#include "server/memory_budget.h"
#include "server/metrics.h"
#include "server/redis_store.h"
#include "server/request_log.h"
#include "server/result_cache.h"
#include "server/shared_cache.h"

namespace ferry {

struct ServiceOptions {
  int64_t max_request_bytes = int64_t{64} << 20;
  int64_t max_response_bytes = int64_t{256} << 20;
  int64_t max_nodes = 1'000'000;
  std::chrono::milliseconds default_deadline{std::chrono::seconds(60)};
  std::chrono::milliseconds max_deadline{std::chrono::seconds(600)};
  // Accepted bearer tokens; empty: calls need none.
  std::vector<std::string> tokens;
  int64_t cache_bytes = int64_t{256} << 20;
  // Per-request resource limits (passes/resource_limits.h).
  ResourceLimits limits;
  // Process-wide memory budget (memory_budget.h); 0: none. A job whose
  // estimate does not fit waits up to memory_wait for running ones to
  // finish.
  int64_t max_memory_bytes = 0;
  std::chrono::milliseconds memory_wait{std::chrono::seconds(10)};
  // Freed memory kept for the next jobs (allocator.h, KeepFreedMemory): the
  // pages a job frees are reused by the next rather than given back and
  // faulted in again, up to this many bytes. Beyond it they are given back
  // where a large job drops a form of its program, and by a thread that
  // looks once a second. 0: jemalloc's own timers decide, and a large job
  // gives back all it freed.
  int64_t keep_freed_bytes = 0;
  // The shared cache tier (shared_cache.h) and blob store (blob_store.h):
  // Redis at redis.address when set, blobs otherwise in blob_dir.
  RedisOptions redis;
  std::chrono::seconds result_ttl{std::chrono::hours(24)};
  int64_t max_shared_entry_bytes = int64_t{64} << 20;
  std::string blob_dir;
  int64_t blob_dir_bytes = int64_t{10} << 30;
  std::chrono::seconds blob_ttl{std::chrono::hours(24)};
  // Largest blob UploadBlob takes; 0: no blobs.
  int64_t max_blob_bytes = int64_t{256} << 20;
  // What the runtime sees, probed once at start.
  bool cuda_available = false;
  std::vector<std::string> visible_devices;
  // For tests: runs on the worker at the start of every job, with the
  // method name ("Lower", "Verify").
  std::function<void(absl::string_view method)> before_job_for_testing;
};

// Metadata a caller may send.
inline constexpr char kRequestIdHeader[] = "x-request-id";
// "bypass": neither read nor fill the result cache, and do not share a
// computation with identical requests (load tests, cache debugging).
inline constexpr char kCacheControlHeader[] = "ferry-cache";

// Lower and Verify are registered in their wire form (raw callback
// methods): the request is parsed here, so that bytes that do not parse get
// INVALID_ARGUMENT saying so, logged and counted like every other call,
// instead of gRPC's bare UNIMPLEMENTED.
class CompilerService final : public v1::Compiler::WithRawCallbackMethod_Lower<
                                  v1::Compiler::WithRawCallbackMethod_Verify<
                                      v1::Compiler::CallbackService>> {
 public:
  CompilerService(ServiceOptions options, BoundedExecutor& executor,
                  ServiceMetrics& metrics, Logger& logger);
  ~CompilerService() override;

  // What gRPC calls: parse, then as the typed forms below.
  grpc::ServerUnaryReactor* Lower(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Verify(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;

  grpc::ServerUnaryReactor* Lower(grpc::CallbackServerContext* context,
                                  const v1::LowerRequest* request,
                                  v1::LowerResponse* response) override;
  grpc::ServerUnaryReactor* Verify(grpc::CallbackServerContext* context,
                                   const v1::VerifyRequest* request,
                                   v1::VerifyResponse* response) override;
  grpc::ServerUnaryReactor* GetCapabilities(
      grpc::CallbackServerContext* context,
      const v1::GetCapabilitiesRequest* request,
      v1::GetCapabilitiesResponse* response) override;
  grpc::ServerUnaryReactor* Lookup(grpc::CallbackServerContext* context,
                                   const v1::LookupRequest* request,
                                   v1::LowerResponse* response) override;
  grpc::ServerUnaryReactor* FindMissingBlobs(
      grpc::CallbackServerContext* context,
      const v1::FindMissingBlobsRequest* request,
      v1::FindMissingBlobsResponse* response) override;
  grpc::ServerReadReactor<v1::UploadBlobRequest>* UploadBlob(
      grpc::CallbackServerContext* context,
      v1::UploadBlobResponse* response) override;
  // Lower and Verify with progress: the same admission and job code, the
  // call streaming where the job stands (StreamCall).
  grpc::ServerWriteReactor<v1::LowerProgress>* LowerStream(
      grpc::CallbackServerContext* context,
      const v1::LowerRequest* request) override;
  grpc::ServerWriteReactor<v1::VerifyProgress>* VerifyStream(
      grpc::CallbackServerContext* context,
      const v1::VerifyRequest* request) override;

  // New calls are refused with UNAVAILABLE from now on; accepted work
  // continues.
  void StartDraining();
  // Work still running stops at its next check (the drain grace is over).
  void AbortInFlight();
  bool draining() const { return draining_.load(); }

  // The capabilities this server advertises (also for tests and the docs).
  v1::GetCapabilitiesResponse Capabilities() const;
  ServiceMetrics::Gauges Gauges() const;
  const ResultCache& cache() const { return cache_; }
  const MemoryBudget& memory() const { return memory_; }
  // Null without --cache-redis / a blob store.
  const RedisStore* redis() const { return redis_.get(); }
  BlobStore* blobs() const { return blobs_.get(); }

  class Call;        // one RPC's bookkeeping (compiler_service.cc)
  class UploadCall;  // one UploadBlob stream

 private:
  struct LowerFlight;

  // Parses `wire_request` into messages `call` owns (the response is
  // serialized into `wire_response` when it finishes OK); finishes `call`
  // with INVALID_ARGUMENT and returns false when the bytes do not parse.
  template <typename Request, typename Response>
  bool ParseWire(Call* call, const grpc::ByteBuffer* wire_request,
                 grpc::ByteBuffer* wire_response, Request** request,
                 Response** response);
  // A Lower request that came as bytes, kept as bytes: the pipeline reads
  // its program node by node from them (LowerWire), and the parsed request
  // has everything but the program.
  struct LowerWireRequest {
    std::string_view bytes;  // the whole request
    RequestWire read;        // its program's bytes and node count
  };
  // Like ParseWire for a Lower request, which it parses all but the program
  // of (`wire` set); or, when the bytes are not one ReadRequestWire reads,
  // parses whole as ParseWire does (`wire` left empty).
  bool ParseLowerWire(Call* call, const grpc::ByteBuffer* wire_request,
                      grpc::ByteBuffer* wire_response,
                      v1::LowerRequest** request, v1::LowerResponse** response,
                      std::optional<LowerWireRequest>* wire);
  // Admit, then answer from the cache or submit the job; the job or the
  // refusal finishes `call`. `request_bytes`: the request's size on the wire
  // (a call that came as bytes has it; a typed one measures its message).
  // `wire`: the request's bytes, when `request` was parsed without its
  // program (ParseLowerWire).
  void StartLower(Call* call, const v1::LowerRequest* request,
                  v1::LowerResponse* response, int64_t request_bytes,
                  const LowerWireRequest* wire = nullptr);
  void StartVerify(Call* call, const v1::VerifyRequest* request,
                   v1::VerifyResponse* response, int64_t request_bytes);

  // Checks the bearer token; finishes `call` with UNAUTHENTICATED and
  // returns false when it is missing or wrong.
  bool Authorize(Call* call);
  // The check itself: false and `refused` set when the token is missing or
  // wrong.
  bool AuthorizeContext(grpc::CallbackServerContext& context,
                        grpc::Status* refused) const;
  // Admission shared by Lower and Verify; finishes `call` and returns false
  // when the request may not proceed.
  // `nodes`: how many nodes the request's program has (CountNodes).
  bool Admit(Call* call, int64_t nodes, int64_t bytes);
  void SubmitLowerFlight(std::shared_ptr<LowerFlight> flight);
  void RunLowerFlight(LowerFlight& flight);
  void FinishLowerFlight(LowerFlight& flight, const grpc::Status& status,
                         std::shared_ptr<const v1::LowerResponse> response,
                         v1::LowerResponse* owned,
                         ResultCache::Wire wire = nullptr);
  // Reads `wire` (a serialized LowerResponse) into `response`: the status to
  // finish with when it cannot (out of memory, or bytes that do not parse).
  std::optional<grpc::Status> ReadWire(const std::string& wire,
                                       v1::LowerResponse* response,
                                       absl::string_view what) const;
  void RunVerify(Call* call, const v1::VerifyRequest& request,
                 v1::VerifyResponse* response);
  bool Submit(Call* call, std::function<void()> job);
  // Charges `bytes` to the memory budget for `call` (the cache gives up
  // entries first if it must); finishes `call` with MEMORY_BUDGET and
  // returns false when they do not fit.
  bool ChargeMemory(Call* call, int64_t bytes);
  // TryReserve, after the cache has given up entries for it if need be.
  std::optional<MemoryBudget::Charge> ReserveShedding(int64_t bytes);
  // Answers `call` with the cached `hit`: its serialized form `wire`, when
  // there is one and the call answers in wire form, else a copy (read back
  // from `wire` when there is one: `hit` then lacks the program).
  void CompleteFromCache(Call* call, const v1::LowerResponse& hit,
                         ResultCache::Wire wire, v1::LowerResponse* response);
  // On a worker: charges `bytes` for the job, waiting up to
  // options_.memory_wait (and the call's deadline) for running jobs to
  // give memory back; the status to finish with when it cannot.
  std::optional<grpc::Status> ChargeJobMemory(Call* call, int64_t bytes);
  // The shared tier for `key`: a hit is also put in the in-process cache.
  std::shared_ptr<const v1::LowerResponse> SharedLookup(const std::string& key);
  // Stores `wire`, a serialized LowerResponse that lowered.
  void SharedStore(const std::string& key, const std::string& wire);
  // A fetcher of blobs from blobs_ (for a Lower that must re-lay out a
  // constant given by digest); empty without a store.
  BlobFetcher Fetcher();
  // Replaces every data_digest of `program` by the blob's bytes, charged to
  // `call`; the status to finish with when a blob is missing or does not
  // fit.
  std::optional<grpc::Status> ResolveBlobs(Call* call, v1::Program& program);
  // The status for an error from the pipeline or verification that is not
  // about the program: over a resource limit, out of memory, internal.
  grpc::Status JobError(const absl::Status& status, absl::string_view what);
  std::chrono::milliseconds EstimatedRetryDelay() const;
  void RecordJobTime(std::chrono::steady_clock::duration elapsed);
  void RecordPasses(const v1::LowerStats& stats);
  // Where a job has dropped a large form of its program: gives the freed
  // pages back, or, while keeping them, only those beyond keep_freed_bytes.
  void GiveBackFreedMemory();
  // While keeping: gives back what is kept beyond the bound, every second,
  // until the service is destroyed (trimmer_).
  void TrimFreedMemoryEverySecond();

  const ServiceOptions options_;
  BoundedExecutor& executor_;
  ServiceMetrics& metrics_;
  Logger& logger_;
  MemoryBudget memory_;  // before cache_, which charges it
  ResultCache cache_;
  std::unique_ptr<RedisStore> redis_;
  std::unique_ptr<SharedResultCache> shared_cache_;
  std::unique_ptr<BlobStore> blobs_;
  std::atomic<int> open_uploads_{0};  // UploadBlob streams not yet done
  std::atomic<bool> draining_{false};
  std::atomic<bool> aborting_{false};
  // Whether freed memory is kept (options_.keep_freed_bytes, and jemalloc).
  // KeepFreedMemory is process-wide: one service per process keeps it.
  const bool keeping_freed_;
  std::mutex trim_mutex_;
  std::condition_variable trim_stop_;
  bool stopping_ = false;  // guarded by trim_mutex_
  std::thread trimmer_;    // while keeping_freed_
  // Parent of every call's CancelToken; AbortInFlight cancels it, so work
  // inside a long step stops too (runtime/cancel.h).
  CancelToken drain_token_;

  std::mutex flights_mutex_;
  std::map<std::string, std::shared_ptr<LowerFlight>> flights_;

  // Job durations, for RetryInfo: a moving average of finished jobs (seeded
  // by the first), and when each running job started.
  mutable std::mutex job_time_mutex_;
  double mean_job_ms_ = 0;
  bool job_time_measured_ = false;
  std::multiset<std::chrono::steady_clock::time_point> running_job_starts_;
  // Tracks a job in running_job_starts_ while it lives.
  class RunningJob;

  friend class Call;
};

}  // namespace ferry

#endif  // FERRY_SERVER_COMPILER_SERVICE_H_
