// The service's metrics, rendered in the Prometheus text exposition format
// (version 0.0.4) for the separate /metrics HTTP endpoint.
//
//   ferry_requests_total{method,code}           counter
//   ferry_request_duration_seconds{method}      histogram (queue + work)
//   ferry_pass_duration_seconds{pass}           histogram
//   ferry_queue_depth, ferry_jobs_running       gauges
//   ferry_queue_capacity, ferry_workers         gauges
//   ferry_cache_lookups_total{result=hit|miss}  counter
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
//   ferry_memory_wait_seconds                   histogram (jobs that waited
//                                               for the budget)
//   ferry_blob_uploads_total, ferry_blob_upload_bytes_total  counters
//   ferry_blob_uploads_open                     gauge (UploadBlob streams)
//   ferry_build_info{version,api_version}       gauge (always 1)
//
// Families and label sets are emitted in sorted order, so the output is
// deterministic for a given history.
#ifndef FERRY_SERVER_METRICS_H_
#define FERRY_SERVER_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ferry {

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

  void RecordRequest(absl::string_view method, absl::string_view code,
                     double seconds);
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

  std::string Render(const Gauges& gauges) const;

  // For tests: the count of one requests_total series.
  int64_t RequestCount(absl::string_view method, absl::string_view code) const;

 private:
  static constexpr std::array<double, 16> kBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
      0.25,   0.5,   1,      2.5,   5,    10,    30,   60};
  struct Histogram {
    std::array<int64_t, kBuckets.size()> counts{};  // non-cumulative
    int64_t count = 0;
    double sum = 0;
    void Observe(double value);
  };
  static void RenderHistogram(std::string& out, absl::string_view name,
                              absl::string_view label,
                              const std::map<std::string, Histogram>& series);

  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, int64_t> requests_;
  std::map<std::string, Histogram> request_seconds_;
  std::map<std::string, Histogram> pass_seconds_;
  int64_t cache_hits_ = 0;
  int64_t cache_misses_ = 0;
  int64_t deduplicated_ = 0;
  int64_t cancellations_ = 0;
  std::map<std::pair<std::string, std::string>, int64_t> verifications_;
  std::map<std::string, int64_t> shared_cache_;
  std::map<std::string, Histogram> memory_wait_seconds_;  // kind="job"
  int64_t blob_uploads_ = 0;
  int64_t blob_upload_bytes_ = 0;
};

}  // namespace ferry

#endif  // FERRY_SERVER_METRICS_H_
