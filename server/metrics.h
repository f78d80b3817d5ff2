// The service's metrics, kept in a prometheus-cpp Registry and rendered in
// the Prometheus text exposition format (version 0.0.4) by prometheus-cpp's
// TextSerializer for the separate /metrics HTTP endpoint (metrics_http.h).
//
// gRPC server metrics, with the names and labels of go-grpc-prometheus that
// dashboards know (grpc_service="ferry.v1.Compiler", grpc_method the RPC,
// grpc_type unary|client_stream|server_stream|bidi_stream):
//   grpc_server_started_total{grpc_method,grpc_service,grpc_type}  counter
//   grpc_server_handled_total{grpc_code,grpc_method,grpc_service,grpc_type}
//   grpc_server_handling_seconds{grpc_method,grpc_service,grpc_type} histogram
//   grpc_server_msg_received_total, grpc_server_msg_sent_total     counters
// Ferry's own:
//   ferry_requests_total{method,code}           counter
//   ferry_request_duration_seconds{method}      histogram (queue + work)
//   ferry_queue_wait_seconds{method}            histogram (arrival to a
//                                               worker starting the job)
//   ferry_pass_duration_seconds{pass}           histogram
//   ferry_queue_depth, ferry_jobs_running       gauges
//   ferry_queue_capacity, ferry_workers         gauges
//   ferry_cache_lookups_total{result=hit|miss}  counter
//   ferry_cache_hit_ratio                       gauge: hits / lookups since
//                                               start (absent before the
//                                               first lookup)
//   ferry_cache_deduplicated_total              counter (shared in-flight)
//   ferry_cache_bytes, ferry_cache_entries      gauges
//   ferry_cache_evictions_total                 counter
//   ferry_verifications_total{device,result}    counter (match|mismatch|error)
//   ferry_cancellations_total                   counter (callers that went
//                                               away or timed out mid-call)
//   ferry_draining                              gauge (1 after SIGTERM)
//   ferry_shared_cache_total{result}            counter: the Redis tier's
//                                               hit|miss|corrupt|unavailable
//                                               lookups, stored|too_large|
//                                               store_failed writes
//   ferry_shared_cache_up                       gauge (absent without Redis)
//   ferry_memory_used_bytes, ferry_memory_limit_bytes  gauges (the budget)
//   ferry_memory_wait_seconds{kind}             histogram (jobs that waited
//                                               for the budget)
//   ferry_blob_uploads_total, ferry_blob_upload_bytes_total  counters
//   ferry_blob_uploads_open                     gauge (UploadBlob streams)
//   ferry_build_info{version,api_version}       gauge (always 1)
// Collected at scrape time from other sources (AddCollectable):
//   process_* (process_metrics.h), ferry_gpu_* (gpu_metrics.h).
//
// Families are emitted sorted by name and series sorted by their labels,
// so the output is deterministic for a given history.
#ifndef FERRY_SERVER_METRICS_H_
#define FERRY_SERVER_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ferry {

// The service name in grpc_* labels.
inline constexpr char kGrpcServiceName[] = "ferry.v1.Compiler";

// grpc_type of grpc_* metrics.
enum class RpcType { kUnary, kClientStream, kServerStream, kBidiStream };
absl::string_view RpcTypeName(RpcType type);

class ServiceMetrics {
 public:
  // Values the service reads from its executor and cache at render time.
  struct Gauges {
    int64_t queue_depth = 0;
    int64_t jobs_running = 0;
    int64_t queue_capacity = 0;
    int64_t workers = 0;
    int64_t cache_bytes = 0;
    int64_t cache_entries = 0;
    int64_t cache_evictions = 0;
    bool draining = false;
    bool shared_cache = false;  // --cache-redis given
    bool shared_cache_up = false;
    int64_t memory_used_bytes = 0;
    int64_t memory_limit_bytes = 0;
    int64_t blob_uploads_open = 0;
  };

  ServiceMetrics();

  // An RPC arrived (grpc_server_started_total).
  void RecordStarted(absl::string_view method, RpcType type = RpcType::kUnary);
  // One message of an RPC read from, or written to, the caller.
  void RecordMessageReceived(absl::string_view method,
                             RpcType type = RpcType::kUnary);
  void RecordMessageSent(absl::string_view method,
                         RpcType type = RpcType::kUnary);
  // An RPC finished with `code` (a gRPC status name) after `seconds`:
  // ferry_requests_total, ferry_request_duration_seconds and their grpc_*
  // twins.
  void RecordRequest(absl::string_view method, absl::string_view code,
                     double seconds, RpcType type = RpcType::kUnary);
  // A worker started the job of a call that arrived `seconds` ago.
  void RecordQueueWait(absl::string_view method, double seconds);
  void RecordPass(absl::string_view pass, double seconds);
  void RecordCacheLookup(bool hit);
  void RecordDeduplicated();
  // result: "match", "mismatch" or "error".
  void RecordVerification(absl::string_view device, absl::string_view result);
  // gRPC reported the call cancelled (by its caller or its deadline).
  void RecordCancellation();
  void RecordSharedCache(absl::string_view result);
  void RecordMemoryWait(double seconds);
  void RecordBlobUpload(int64_t bytes);

  // More families collected at every Render (process and GPU metrics).
  void AddCollectable(std::shared_ptr<prometheus::Collectable> collectable);

  std::string Render(const Gauges& gauges) const;

  // For tests: the count of one requests_total series.
  int64_t RequestCount(absl::string_view method, absl::string_view code) const;

 private:
  // The families of values read from `gauges`, and the cache hit ratio.
  std::vector<prometheus::MetricFamily> CollectGauges(
      const Gauges& gauges) const;

  std::shared_ptr<prometheus::Registry> registry_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;

  prometheus::Family<prometheus::Counter>& grpc_started_;
  prometheus::Family<prometheus::Counter>& grpc_handled_;
  prometheus::Family<prometheus::Histogram>& grpc_handling_seconds_;
  prometheus::Family<prometheus::Counter>& grpc_msg_received_;
  prometheus::Family<prometheus::Counter>& grpc_msg_sent_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_seconds_;
  prometheus::Family<prometheus::Histogram>& queue_wait_seconds_;
  prometheus::Family<prometheus::Histogram>& pass_seconds_;
  prometheus::Counter& cache_hits_;
  prometheus::Counter& cache_misses_;
  prometheus::Counter& deduplicated_;
  prometheus::Counter& cancellations_;
  prometheus::Family<prometheus::Counter>& verifications_;
  prometheus::Family<prometheus::Counter>& shared_cache_;
  // kind="job", added at the first wait.
  prometheus::Family<prometheus::Histogram>& memory_wait_seconds_;
  prometheus::Counter& blob_uploads_;
  prometheus::Counter& blob_upload_bytes_;
};

}  // namespace ferry

#endif  // FERRY_SERVER_METRICS_H_
