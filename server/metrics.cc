#include "server/metrics.h"

#include <prometheus/client_metric.h>
#include <prometheus/gauge.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <utility>

#include "ferry/version.h"

namespace ferry {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Histogram;
using prometheus::Labels;
using prometheus::MetricFamily;
using prometheus::MetricType;
using prometheus::Registry;

// Latency buckets of every histogram, in seconds.
const Histogram::BucketBoundaries& LatencyBuckets() {
  static const Histogram::BucketBoundaries* buckets =
      new Histogram::BucketBoundaries{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                      0.05,   0.1,   0.25,   0.5,   1,    2.5,
                                      5,      10,    30,     60};
  return *buckets;
}

Family<Counter>& CounterFamily(Registry& registry, const std::string& name,
                               const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

Family<Histogram>& HistogramFamily(Registry& registry, const std::string& name,
                                   const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

Labels GrpcLabels(absl::string_view method, RpcType type) {
  return {{"grpc_service", kGrpcServiceName},
          {"grpc_method", std::string(method)},
          {"grpc_type", std::string(RpcTypeName(type))}};
}

MetricFamily GaugeFamily(
    std::string name, std::string help, double value,
    std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  return MetricFamily{
      std::move(name), std::move(help), MetricType::Gauge, {std::move(metric)}};
}

MetricFamily CounterValue(std::string name, std::string help, double value) {
  prometheus::ClientMetric metric;
  metric.counter.value = value;
  return MetricFamily{std::move(name),
                      std::move(help),
                      MetricType::Counter,
                      {std::move(metric)}};
}

}  // namespace

absl::string_view RpcTypeName(RpcType type) {
  switch (type) {
    case RpcType::kUnary:
      return "unary";
    case RpcType::kClientStream:
      return "client_stream";
    case RpcType::kServerStream:
      return "server_stream";
    case RpcType::kBidiStream:
      return "bidi_stream";
  }
  return "unary";
}

ServiceMetrics::ServiceMetrics()
    : registry_(std::make_shared<Registry>()),
      grpc_started_(CounterFamily(*registry_, "grpc_server_started_total",
                                  "RPCs started on the server.")),
      grpc_handled_(CounterFamily(
          *registry_, "grpc_server_handled_total",
          "RPCs completed on the server, regardless of success or failure.")),
      grpc_handling_seconds_(HistogramFamily(
          *registry_, "grpc_server_handling_seconds",
          "Response latency of RPCs handled by the server, in seconds.")),
      grpc_msg_received_(CounterFamily(*registry_,
                                       "grpc_server_msg_received_total",
                                       "Messages received from callers.")),
      grpc_msg_sent_(CounterFamily(*registry_, "grpc_server_msg_sent_total",
                                   "Messages sent to callers.")),
      requests_(CounterFamily(*registry_, "ferry_requests_total",
                              "Finished RPCs by method and gRPC status code.")),
      request_seconds_(HistogramFamily(
          *registry_, "ferry_request_duration_seconds",
          "RPC latency, from arrival to response (queueing included).")),
      queue_wait_seconds_(HistogramFamily(
          *registry_, "ferry_queue_wait_seconds",
          "Time from a call's arrival to a worker starting its job.")),
      pass_seconds_(HistogramFamily(*registry_, "ferry_pass_duration_seconds",
                                    "Time spent in each pipeline pass.")),
      cache_hits_(CounterFamily(*registry_, "ferry_cache_lookups_total",
                                "Result-cache lookups by result.")
                      .Add({{"result", "hit"}})),
      cache_misses_(CounterFamily(*registry_, "ferry_cache_lookups_total",
                                  "Result-cache lookups by result.")
                        .Add({{"result", "miss"}})),
      deduplicated_(
          CounterFamily(*registry_, "ferry_cache_deduplicated_total",
                        "Requests answered by an identical request computed "
                        "concurrently.")
              .Add({})),
      cancellations_(
          CounterFamily(
              *registry_, "ferry_cancellations_total",
              "Calls cancelled by their caller or their deadline mid-call.")
              .Add({})),
      verifications_(CounterFamily(
          *registry_, "ferry_verifications_total",
          "Verification runs by device and result (match, mismatch, error).")),
      shared_cache_(CounterFamily(
          *registry_, "ferry_shared_cache_total",
          "Shared (Redis) cache tier: lookups by result (hit, miss, corrupt, "
          "unavailable) and writes (stored, too_large, store_failed).")),
      memory_wait_seconds_(
          HistogramFamily(*registry_, "ferry_memory_wait_seconds",
                          "Time jobs waited for the memory budget.")),
      blob_uploads_(
          CounterFamily(*registry_, "ferry_blob_uploads_total", "Blobs stored.")
              .Add({})),
      blob_upload_bytes_(CounterFamily(*registry_,
                                       "ferry_blob_upload_bytes_total",
                                       "Bytes of the blobs stored.")
                             .Add({})) {}

void ServiceMetrics::RecordStarted(absl::string_view method, RpcType type) {
  grpc_started_.Add(GrpcLabels(method, type)).Increment();
}

void ServiceMetrics::RecordMessageReceived(absl::string_view method,
                                           RpcType type) {
  grpc_msg_received_.Add(GrpcLabels(method, type)).Increment();
}

void ServiceMetrics::RecordMessageSent(absl::string_view method, RpcType type) {
  grpc_msg_sent_.Add(GrpcLabels(method, type)).Increment();
}

void ServiceMetrics::RecordRequest(absl::string_view method,
                                   absl::string_view code, double seconds,
                                   RpcType type) {
  requests_.Add({{"method", std::string(method)}, {"code", std::string(code)}})
      .Increment();
  request_seconds_.Add({{"method", std::string(method)}}, LatencyBuckets())
      .Observe(seconds);
  Labels labels = GrpcLabels(method, type);
  grpc_handling_seconds_.Add(labels, LatencyBuckets()).Observe(seconds);
  labels.emplace("grpc_code", std::string(code));
  grpc_handled_.Add(labels).Increment();
}

void ServiceMetrics::RecordQueueWait(absl::string_view method, double seconds) {
  queue_wait_seconds_.Add({{"method", std::string(method)}}, LatencyBuckets())
      .Observe(seconds);
}

void ServiceMetrics::RecordPass(absl::string_view pass, double seconds) {
  pass_seconds_.Add({{"pass", std::string(pass)}}, LatencyBuckets())
      .Observe(seconds);
}

void ServiceMetrics::RecordCacheLookup(bool hit) {
  (hit ? cache_hits_ : cache_misses_).Increment();
}

void ServiceMetrics::RecordDeduplicated() { deduplicated_.Increment(); }

void ServiceMetrics::RecordVerification(absl::string_view device,
                                        absl::string_view result) {
  verifications_
      .Add({{"device", std::string(device)}, {"result", std::string(result)}})
      .Increment();
}

void ServiceMetrics::RecordCancellation() { cancellations_.Increment(); }

void ServiceMetrics::RecordSharedCache(absl::string_view result) {
  shared_cache_.Add({{"result", std::string(result)}}).Increment();
}

void ServiceMetrics::RecordMemoryWait(double seconds) {
  memory_wait_seconds_.Add({{"kind", "job"}}, LatencyBuckets())
      .Observe(seconds);
}

void ServiceMetrics::RecordBlobUpload(int64_t bytes) {
  blob_uploads_.Increment();
  blob_upload_bytes_.Increment(static_cast<double>(bytes));
}

void ServiceMetrics::AddCollectable(
    std::shared_ptr<prometheus::Collectable> collectable) {
  collectables_.push_back(std::move(collectable));
}

int64_t ServiceMetrics::RequestCount(absl::string_view method,
                                     absl::string_view code) const {
  Labels labels = {{"method", std::string(method)},
                   {"code", std::string(code)}};
  if (!requests_.Has(labels)) return 0;
  return static_cast<int64_t>(requests_.Add(labels).Value());
}

std::vector<MetricFamily> ServiceMetrics::CollectGauges(
    const Gauges& gauges) const {
  std::vector<MetricFamily> families;
  families.push_back(GaugeFamily(
      "ferry_build_info", "Compiler and API version.", 1,
      {{"api_version", kApiVersion}, {"version", kCompilerVersion}}));
  families.push_back(GaugeFamily("ferry_queue_depth",
                                 "Jobs waiting for a worker.",
                                 static_cast<double>(gauges.queue_depth)));
  families.push_back(GaugeFamily("ferry_jobs_running",
                                 "Jobs running on workers.",
                                 static_cast<double>(gauges.jobs_running)));
  families.push_back(GaugeFamily("ferry_queue_capacity",
                                 "Jobs that may wait for a worker.",
                                 static_cast<double>(gauges.queue_capacity)));
  families.push_back(GaugeFamily("ferry_workers", "Worker threads.",
                                 static_cast<double>(gauges.workers)));
  families.push_back(GaugeFamily("ferry_cache_bytes",
                                 "Bytes held by the result cache.",
                                 static_cast<double>(gauges.cache_bytes)));
  families.push_back(GaugeFamily("ferry_cache_entries",
                                 "Entries in the result cache.",
                                 static_cast<double>(gauges.cache_entries)));
  families.push_back(CounterValue("ferry_cache_evictions_total",
                                  "Entries evicted from the result cache.",
                                  static_cast<double>(gauges.cache_evictions)));
  const double hits = cache_hits_.Value();
  const double lookups = hits + cache_misses_.Value();
  if (lookups > 0) {
    families.push_back(
        GaugeFamily("ferry_cache_hit_ratio",
                    "Result-cache hits over lookups since the server started.",
                    hits / lookups));
  }
  families.push_back(GaugeFamily("ferry_draining",
                                 "1 once the server is draining (SIGTERM).",
                                 gauges.draining ? 1 : 0));
  if (gauges.shared_cache) {
    families.push_back(
        GaugeFamily("ferry_shared_cache_up",
                    "1 while the shared cache tier (Redis) answers.",
                    gauges.shared_cache_up ? 1 : 0));
  }
  families.push_back(GaugeFamily(
      "ferry_memory_used_bytes",
      "Memory charged to the budget: running requests and the cache.",
      static_cast<double>(gauges.memory_used_bytes)));
  families.push_back(
      GaugeFamily("ferry_memory_limit_bytes", "The memory budget (0: none).",
                  static_cast<double>(gauges.memory_limit_bytes)));
  families.push_back(GaugeFamily(
      "ferry_blob_uploads_open", "UploadBlob streams open (refused beyond 64).",
      static_cast<double>(gauges.blob_uploads_open)));
  return families;
}

std::string ServiceMetrics::Render(const Gauges& gauges) const {
  std::vector<MetricFamily> families = registry_->Collect();
  for (MetricFamily& family : CollectGauges(gauges)) {
    families.push_back(std::move(family));
  }
  for (const auto& collectable : collectables_) {
    for (MetricFamily& family : collectable->Collect()) {
      families.push_back(std::move(family));
    }
  }
  // Families whose every series is still to come (no call yet) say nothing.
  families.erase(std::remove_if(families.begin(), families.end(),
                                [](const MetricFamily& family) {
                                  return family.metric.empty();
                                }),
                 families.end());
  // The registry keeps series in hash order: sort for stable output.
  std::sort(families.begin(), families.end(),
            [](const MetricFamily& a, const MetricFamily& b) {
              return a.name < b.name;
            });
  for (MetricFamily& family : families) {
    std::sort(
        family.metric.begin(), family.metric.end(),
        [](const prometheus::ClientMetric& a,
           const prometheus::ClientMetric& b) { return a.label < b.label; });
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace ferry
