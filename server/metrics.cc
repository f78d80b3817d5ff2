#include "server/metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ferry/version.h"

namespace ferry {
namespace {

// Label values are ours (method, pass and device names, status codes), but
// escape them anyway as the exposition format requires.
std::string LabelValue(absl::string_view value) {
  std::string escaped;
  for (char c : value) {
    if (c == '\\' || c == '"') escaped.push_back('\\');
    if (c == '\n') {
      escaped += "\\n";
      continue;
    }
    escaped.push_back(c);
  }
  return escaped;
}

std::string Number(double value) { return absl::StrFormat("%.9g", value); }

void Header(std::string& out, absl::string_view name, absl::string_view type,
            absl::string_view help) {
  absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ",
                  type, "\n");
}

void Gauge(std::string& out, absl::string_view name, absl::string_view help,
           int64_t value) {
  Header(out, name, "gauge", help);
  absl::StrAppend(&out, name, " ", value, "\n");
}

}  // namespace

void ServiceMetrics::Histogram::Observe(double value) {
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (value <= kBuckets[i]) {
      ++counts[i];
      break;
    }
  }
  ++count;
  sum += value;
}

void ServiceMetrics::RecordRequest(absl::string_view method,
                                   absl::string_view code, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{std::string(method), std::string(code)}];
  request_seconds_[std::string(method)].Observe(seconds);
}

void ServiceMetrics::RecordPass(absl::string_view pass, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  pass_seconds_[std::string(pass)].Observe(seconds);
}

void ServiceMetrics::RecordCacheLookup(bool hit) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++(hit ? cache_hits_ : cache_misses_);
}

void ServiceMetrics::RecordDeduplicated() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++deduplicated_;
}

void ServiceMetrics::RecordVerification(absl::string_view device,
                                        absl::string_view result) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++verifications_[{std::string(device), std::string(result)}];
}

void ServiceMetrics::RecordCancellation() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++cancellations_;
}

void ServiceMetrics::RecordSharedCache(absl::string_view result) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++shared_cache_[std::string(result)];
}

void ServiceMetrics::RecordMemoryWait(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  memory_wait_seconds_["job"].Observe(seconds);
}

void ServiceMetrics::RecordBlobUpload(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++blob_uploads_;
  blob_upload_bytes_ += bytes;
}

int64_t ServiceMetrics::RequestCount(absl::string_view method,
                                     absl::string_view code) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = requests_.find({std::string(method), std::string(code)});
  return found == requests_.end() ? 0 : found->second;
}

void ServiceMetrics::RenderHistogram(
    std::string& out, absl::string_view name, absl::string_view label,
    const std::map<std::string, Histogram>& series) {
  for (const auto& [value, histogram] : series) {
    std::string labels = absl::StrCat(label, "=\"", LabelValue(value), "\"");
    int64_t cumulative = 0;
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      cumulative += histogram.counts[i];
      absl::StrAppend(&out, name, "_bucket{", labels, ",le=\"",
                      Number(kBuckets[i]), "\"} ", cumulative, "\n");
    }
    absl::StrAppend(&out, name, "_bucket{", labels, ",le=\"+Inf\"} ",
                    histogram.count, "\n", name, "_sum{", labels, "} ",
                    Number(histogram.sum), "\n", name, "_count{", labels, "} ",
                    histogram.count, "\n");
  }
}

std::string ServiceMetrics::Render(const Gauges& gauges) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  Header(out, "ferry_build_info", "gauge", "Compiler and API version.");
  absl::StrAppend(&out, "ferry_build_info{version=\"",
                  LabelValue(kCompilerVersion), "\",api_version=\"",
                  LabelValue(kApiVersion), "\"} 1\n");

  Header(out, "ferry_requests_total", "counter",
         "Finished RPCs by method and gRPC status code.");
  for (const auto& [key, count] : requests_) {
    absl::StrAppend(&out, "ferry_requests_total{method=\"",
                    LabelValue(key.first), "\",code=\"", LabelValue(key.second),
                    "\"} ", count, "\n");
  }
  Header(out, "ferry_request_duration_seconds", "histogram",
         "RPC latency, from arrival to response (queueing included).");
  RenderHistogram(out, "ferry_request_duration_seconds", "method",
                  request_seconds_);
  Header(out, "ferry_pass_duration_seconds", "histogram",
         "Time spent in each pipeline pass.");
  RenderHistogram(out, "ferry_pass_duration_seconds", "pass", pass_seconds_);

  Gauge(out, "ferry_queue_depth", "Jobs waiting for a worker.",
        gauges.queue_depth);
  Gauge(out, "ferry_jobs_running", "Jobs running on workers.",
        gauges.jobs_running);
  Gauge(out, "ferry_queue_capacity", "Jobs that may wait for a worker.",
        gauges.queue_capacity);
  Gauge(out, "ferry_workers", "Worker threads.", gauges.workers);

  Header(out, "ferry_cache_lookups_total", "counter",
         "Result-cache lookups by result.");
  absl::StrAppend(&out, "ferry_cache_lookups_total{result=\"hit\"} ",
                  cache_hits_, "\nferry_cache_lookups_total{result=\"miss\"} ",
                  cache_misses_, "\n");
  Header(out, "ferry_cache_deduplicated_total", "counter",
         "Requests answered by an identical request computed concurrently.");
  absl::StrAppend(&out, "ferry_cache_deduplicated_total ", deduplicated_, "\n");
  Gauge(out, "ferry_cache_bytes", "Bytes held by the result cache.",
        gauges.cache_bytes);
  Gauge(out, "ferry_cache_entries", "Entries in the result cache.",
        gauges.cache_entries);
  Header(out, "ferry_cache_evictions_total", "counter",
         "Entries evicted from the result cache.");
  absl::StrAppend(&out, "ferry_cache_evictions_total ", gauges.cache_evictions,
                  "\n");

  Header(out, "ferry_verifications_total", "counter",
         "Verification runs by device and result (match, mismatch, error).");
  for (const auto& [key, count] : verifications_) {
    absl::StrAppend(&out, "ferry_verifications_total{device=\"",
                    LabelValue(key.first), "\",result=\"",
                    LabelValue(key.second), "\"} ", count, "\n");
  }
  Header(out, "ferry_cancellations_total", "counter",
         "Calls cancelled by their caller or their deadline mid-call.");
  absl::StrAppend(&out, "ferry_cancellations_total ", cancellations_, "\n");
  Gauge(out, "ferry_draining", "1 once the server is draining (SIGTERM).",
        gauges.draining ? 1 : 0);

  Header(out, "ferry_shared_cache_total", "counter",
         "Shared (Redis) cache tier: lookups by result (hit, miss, corrupt, "
         "unavailable) and writes (stored, too_large, store_failed).");
  for (const auto& [result, count] : shared_cache_) {
    absl::StrAppend(&out, "ferry_shared_cache_total{result=\"",
                    LabelValue(result), "\"} ", count, "\n");
  }
  if (gauges.shared_cache) {
    Gauge(out, "ferry_shared_cache_up",
          "1 while the shared cache tier (Redis) answers.",
          gauges.shared_cache_up ? 1 : 0);
  }
  Gauge(out, "ferry_memory_used_bytes",
        "Memory charged to the budget: running requests and the cache.",
        gauges.memory_used_bytes);
  Gauge(out, "ferry_memory_limit_bytes", "The memory budget (0: none).",
        gauges.memory_limit_bytes);
  Header(out, "ferry_memory_wait_seconds", "histogram",
         "Time jobs waited for the memory budget.");
  RenderHistogram(out, "ferry_memory_wait_seconds", "kind",
                  memory_wait_seconds_);
  Header(out, "ferry_blob_uploads_total", "counter", "Blobs stored.");
  absl::StrAppend(&out, "ferry_blob_uploads_total ", blob_uploads_, "\n");
  Header(out, "ferry_blob_upload_bytes_total", "counter",
         "Bytes of the blobs stored.");
  absl::StrAppend(&out, "ferry_blob_upload_bytes_total ", blob_upload_bytes_,
                  "\n");
  Gauge(out, "ferry_blob_uploads_open",
        "UploadBlob streams open (refused beyond 64).",
        gauges.blob_uploads_open);
  return out;
}

}  // namespace ferry
