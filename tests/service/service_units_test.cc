// The service's parts on their own: configuration, the bounded executor,
// the result cache, metrics text, error details.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/time/clock.h"
#include "client/testing/synthetic_program.h"
#include "ferry/client.h"
#include "ferry/digest.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "passes/resource_limits.h"
#include "server/config.h"
#include "server/executor.h"
#include "server/gpu_metrics.h"
#include "server/memory_budget.h"
#include "server/metrics.h"
#include "server/process_metrics.h"
#include "server/result_cache.h"
#include "server/rpc_errors.h"
#include "tests/service/service_test_support.h"

namespace ferry {
namespace {

using std::chrono::milliseconds;
using testing::Exposition;

TEST(ConfigTest, FlagsOverrideTheConfigFileWhereverItAppears) {
  ServerConfig config;
  ASSERT_TRUE(ApplyConfigText("workers = 3\nqueue-depth=9 # c\n\n"
                              "cache-bytes = \"1MiB\"\n",
                              "test.conf", config)
                  .ok());
  EXPECT_EQ(config.workers, 3);
  EXPECT_EQ(config.queue_depth, 9);
  EXPECT_EQ(config.cache_bytes, 1 << 20);

  absl::StatusOr<CommandLine> parsed = ParseCommandLine(
      {"--workers=5", "--listen", "0.0.0.0:7000", "--max-deadline", "2m",
       "--default-deadline=500ms", "--max-message-bytes", "8MiB"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.workers, 5);
  EXPECT_EQ(parsed->config.listen, "0.0.0.0:7000");
  EXPECT_EQ(parsed->config.max_deadline, std::chrono::minutes(2));
  EXPECT_EQ(parsed->config.default_deadline, milliseconds(500));
  EXPECT_EQ(parsed->config.max_message_bytes, 8 << 20);
}

TEST(ConfigTest, ErrorsNameTheKey) {
  EXPECT_EQ(ParseCommandLine({"--bogus=1"}).status().message(),
            "unknown flag --bogus (see --help)");
  EXPECT_NE(ParseCommandLine({"--queue-depth", "-1"})
                .status()
                .message()
                .find("--queue-depth"),
            absl::string_view::npos);
  EXPECT_FALSE(ParseCommandLine({"--workers"}).ok());  // no value
  ServerConfig config;
  absl::Status status = ApplyConfigText("listen 1.2.3.4:5\n", "x.conf", config);
  EXPECT_EQ(status.message(), "x.conf:1: expected 'key = value'");
  status = ApplyConfigText("\nfoo = 1\n", "x.conf", config);
  EXPECT_NE(status.message().find("x.conf:2"), absl::string_view::npos);
  EXPECT_EQ(ParseCommandLine({"--config", "/nonexistent/ferryd.conf"})
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST(ConfigTest, CrossFieldChecks) {
  ServerConfig config;
  config.tls_cert = "cert.pem";
  EXPECT_FALSE(ValidateConfig(config).ok());
  config.tls_key = "key.pem";
  EXPECT_TRUE(ValidateConfig(config).ok());
  config.max_deadline = milliseconds(10);
  EXPECT_FALSE(ValidateConfig(config).ok());
  ServerConfig mtls_without_tls;
  mtls_without_tls.tls_client_ca = "ca.pem";
  EXPECT_FALSE(ValidateConfig(mtls_without_tls).ok());
}

TEST(ConfigTest, DurationsAndSizes) {
  EXPECT_EQ(ParseDuration("30s").value(), milliseconds(30000));
  EXPECT_EQ(ParseDuration("250ms").value(), milliseconds(250));
  EXPECT_EQ(ParseDuration("1.5m").value(), milliseconds(90000));
  EXPECT_EQ(ParseDuration("2h").value(), milliseconds(7'200'000));
  EXPECT_EQ(ParseDuration("7").value(), milliseconds(7000));
  EXPECT_FALSE(ParseDuration("soon").ok());
  EXPECT_FALSE(ParseDuration("-1s").ok());
  EXPECT_EQ(ParseByteSize("64MiB").value(), int64_t{64} << 20);
  EXPECT_EQ(ParseByteSize("10MB").value(), 10'000'000);
  EXPECT_EQ(ParseByteSize("4096").value(), 4096);
  EXPECT_EQ(ParseByteSize("1GiB").value(), int64_t{1} << 30);
  EXPECT_FALSE(ParseByteSize("lots").ok());
  EXPECT_FALSE(ParseByteSize("99999999999GiB").ok());
}

TEST(ExecutorTest, AdmitsWorkersPlusQueueDepthThenRefuses) {
  BoundedExecutor executor(2, 1);
  std::mutex mutex;
  std::condition_variable changed;
  int started = 0;
  bool release = false;
  auto blocking_job = [&] {
    std::unique_lock<std::mutex> lock(mutex);
    ++started;
    changed.notify_all();
    changed.wait(lock, [&] { return release; });
  };
  EXPECT_EQ(executor.TrySubmit(blocking_job),
            BoundedExecutor::Admission::kAccepted);
  EXPECT_EQ(executor.TrySubmit(blocking_job),
            BoundedExecutor::Admission::kAccepted);
  {
    std::unique_lock<std::mutex> lock(mutex);
    ASSERT_TRUE(changed.wait_for(lock, std::chrono::seconds(10),
                                 [&] { return started == 2; }));
  }
  EXPECT_EQ(executor.running(), 2);
  EXPECT_EQ(executor.TrySubmit(blocking_job),
            BoundedExecutor::Admission::kAccepted);  // waits in the queue
  EXPECT_EQ(executor.queued(), 1);
  EXPECT_EQ(executor.TrySubmit(blocking_job),
            BoundedExecutor::Admission::kQueueFull);
  executor.Close();
  EXPECT_EQ(executor.TrySubmit(blocking_job),
            BoundedExecutor::Admission::kClosed);
  EXPECT_FALSE(
      executor.WaitIdle(std::chrono::steady_clock::now() + milliseconds(20)));
  {
    std::lock_guard<std::mutex> lock(mutex);
    release = true;
  }
  changed.notify_all();
  EXPECT_TRUE(executor.WaitIdle(std::chrono::steady_clock::now() +
                                std::chrono::seconds(10)));
  EXPECT_EQ(started, 3);  // the queued job ran after Close
}

TEST(ExecutorTest, DestructorRunsAcceptedJobs) {
  std::atomic<int> ran{0};
  {
    BoundedExecutor executor(1, 10);
    for (int i = 0; i < 5; ++i) {
      executor.TrySubmit([&] { ++ran; });
    }
  }
  EXPECT_EQ(ran.load(), 5);
}

std::shared_ptr<const v1::LowerResponse> ResponseWithId(const std::string& id) {
  auto response = std::make_shared<v1::LowerResponse>();
  response->set_request_digest(id);
  return response;
}

TEST(ResultCacheTest, EvictsLeastRecentlyUsedToStayWithinBytes) {
  ResultCache cache(1000);
  cache.Insert("a", ResponseWithId("a"), 200);
  cache.Insert("b", ResponseWithId("b"), 200);
  cache.Insert("c", ResponseWithId("c"), 200);
  EXPECT_EQ(cache.entries(), 3);
  ASSERT_NE(cache.Lookup("a"), nullptr);        // a is now the most recent
  cache.Insert("d", ResponseWithId("d"), 200);  // evicts b
  EXPECT_EQ(cache.Lookup("b"), nullptr);
  EXPECT_NE(cache.Lookup("a"), nullptr);
  EXPECT_NE(cache.Lookup("c"), nullptr);
  EXPECT_NE(cache.Lookup("d"), nullptr);
  EXPECT_LE(cache.bytes(), 1000);
  EXPECT_EQ(cache.evictions(), 1);
  cache.Insert("huge", ResponseWithId("huge"), 5000);  // never fits
  EXPECT_EQ(cache.Lookup("huge"), nullptr);
  EXPECT_EQ(cache.entries(), 3);
}

// The serialized form stored with an entry comes back with it and counts
// against the capacity (a hit answered in wire form sends these bytes).
TEST(ResultCacheTest, KeepsTheSerializedFormAndChargesIt) {
  ResultCache cache(1000);
  auto wire = std::make_shared<const std::string>(std::string(300, 'w'));
  cache.Insert("a", ResponseWithId("a"), 200, wire);
  cache.Insert("b", ResponseWithId("b"), 200);
  ResultCache::Wire found;
  ASSERT_NE(cache.Lookup("a", &found), nullptr);
  EXPECT_EQ(found, wire);
  ASSERT_NE(cache.Lookup("b", &found), nullptr);
  EXPECT_EQ(found, nullptr);  // stored without one
  const int64_t with_wire = cache.bytes();
  cache.Insert("a", ResponseWithId("a"), 200);  // replaced, without bytes
  EXPECT_EQ(cache.bytes(), with_wire - 300);
  // 200 + 300 bytes of wire, twice, do not fit in 1000 with the overheads.
  cache.Insert("c", ResponseWithId("c"), 200, wire);
  cache.Insert("d", ResponseWithId("d"), 200, wire);
  EXPECT_LE(cache.bytes(), 1000);
  EXPECT_EQ(cache.Lookup("a"), nullptr);
}

TEST(ResultCacheTest, ZeroCapacityStoresNothing) {
  ResultCache cache(0);
  cache.Insert("a", ResponseWithId("a"), 1);
  EXPECT_EQ(cache.Lookup("a"), nullptr);
  EXPECT_EQ(cache.bytes(), 0);
}

TEST(MemoryBudgetTest, ChargesFitUnderTheLimitAndAreReleased) {
  MemoryBudget budget(1000);
  std::optional<MemoryBudget::Charge> a = budget.TryReserve(600);
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(budget.TryReserve(401).has_value());
  EXPECT_EQ(budget.used(), 600);
  {
    std::optional<MemoryBudget::Charge> b = budget.TryReserve(400);
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(budget.used(), 1000);
  }
  EXPECT_EQ(budget.used(), 600);
  a.reset();
  EXPECT_EQ(budget.used(), 0);
  EXPECT_FALSE(budget.TryCharge(int64_t{1} << 62) &&
               budget.TryCharge(int64_t{1} << 62));  // no overflow
  EXPECT_EQ(RequestMemoryEstimate(int64_t{1} << 62),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(RequestMemoryEstimate(1000),
            1000 * kRequestMemoryFactor + kRequestMemoryBaseBytes);
}

TEST(MemoryBudgetTest, ReserveWithinWaitsForAReleaseOrGivesUp) {
  using Clock = std::chrono::steady_clock;
  MemoryBudget budget(1000);
  std::optional<MemoryBudget::Charge> held = budget.TryReserve(700);
  ASSERT_TRUE(held.has_value());
  // Nothing is released: gives up at the deadline.
  EXPECT_FALSE(
      budget
          .ReserveWithin(500, Clock::now() + std::chrono::milliseconds(60), {})
          .has_value());
  // More than the whole budget: at once, without waiting.
  Clock::time_point start = Clock::now();
  EXPECT_FALSE(
      budget.ReserveWithin(1001, Clock::now() + std::chrono::seconds(30), {})
          .has_value());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  // The caller went away.
  EXPECT_FALSE(budget
                   .ReserveWithin(500, Clock::now() + std::chrono::seconds(30),
                                  [] { return true; })
                   .has_value());
  // Released by another thread while waiting: admitted.
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    held.reset();
  });
  std::optional<MemoryBudget::Charge> admitted =
      budget.ReserveWithin(500, Clock::now() + std::chrono::seconds(30), {});
  releaser.join();
  ASSERT_TRUE(admitted.has_value());
  EXPECT_EQ(budget.used(), 500);
  EXPECT_EQ(JobMemoryEstimate(10), 10 * kJobMemoryPerNodeBytes);
  EXPECT_EQ(JobMemoryEstimate(int64_t{1} << 62),
            std::numeric_limits<int64_t>::max());
}

TEST(ResultCacheTest, ChargesTheBudgetAndShedsForRunningWork) {
  MemoryBudget budget(2200);
  {
    ResultCache cache(2000, &budget);
    cache.Insert("a", ResponseWithId("a"), 400);
    cache.Insert("b", ResponseWithId("b"), 400);
    EXPECT_EQ(cache.entries(), 2);
    EXPECT_EQ(budget.used(), cache.bytes());
    // A running request holds most of the budget: to store c, the cache
    // evicts a, which its own capacity would have kept.
    std::optional<MemoryBudget::Charge> request = budget.TryReserve(1000);
    ASSERT_TRUE(request.has_value());
    cache.Insert("c", ResponseWithId("c"), 400);
    EXPECT_EQ(cache.Lookup("a"), nullptr);
    EXPECT_NE(cache.Lookup("c"), nullptr);
    EXPECT_EQ(budget.used(), 1000 + cache.bytes());
    // More than the budget has beside the request: not stored.
    cache.Insert("big", ResponseWithId("big"), 1200);
    EXPECT_EQ(cache.Lookup("big"), nullptr);
    EXPECT_LE(budget.used(), 2200);
    // Shed gives memory back to running work.
    cache.Insert("d", ResponseWithId("d"), 400);
    ASSERT_EQ(cache.entries(), 1);
    EXPECT_GE(cache.Shed(1), 400);
    EXPECT_EQ(cache.entries(), 0);
    EXPECT_EQ(budget.used(), 1000);
    cache.Insert("e", ResponseWithId("e"), 400);
  }
  // Destroyed, the cache released all it held; the request is gone too.
  EXPECT_EQ(budget.used(), 0);
}

TEST(DigestTest, Sha256OfLengthPrefixedParts) {
  std::string digest = Sha256Hex({"ab", "c"});
  EXPECT_EQ(digest.size(), 64u);
  EXPECT_EQ(digest, Sha256Hex({"ab", "c"}));
  EXPECT_NE(digest, Sha256Hex({"a", "bc"}));
}

// ferryd keys a Lower that came as bytes by the request without its program
// and the program's bytes: the same key as the parsed request's when those
// bytes are what protobuf writes (so the cache is shared with LowerStream and
// other replicas), and another key for any other program.
TEST(DigestTest, ARequestInTwoPartsHasTheWholeRequestsKey) {
  v1::LowerRequest request = testing::TinyRequest(1);
  request.mutable_options()->set_error_on_per_call_copies(true);
  v1::LowerRequest rest = request;
  rest.clear_program();
  const std::string program = DeterministicBytes(request.program());
  EXPECT_EQ(LowerRequestDigest(rest, program, "v"),
            LowerRequestDigest(request, "v"));
  // No program at all, and an empty one, are two requests.
  EXPECT_EQ(LowerRequestDigest(rest, std::nullopt, "v"),
            LowerRequestDigest(rest, "v"));
  v1::LowerRequest empty_program = rest;
  empty_program.mutable_program();
  EXPECT_EQ(LowerRequestDigest(rest, "", "v"),
            LowerRequestDigest(empty_program, "v"));
  EXPECT_NE(LowerRequestDigest(rest, "", "v"),
            LowerRequestDigest(rest, std::nullopt, "v"));
  // Another program, options or compiler: another key.
  EXPECT_NE(
      LowerRequestDigest(
          rest, DeterministicBytes(testing::TinyRequest(2).program()), "v"),
      LowerRequestDigest(request, "v"));
  EXPECT_NE(LowerRequestDigest(v1::LowerRequest(), program, "v"),
            LowerRequestDigest(request, "v"));
  EXPECT_NE(LowerRequestDigest(rest, program, "w"),
            LowerRequestDigest(request, "v"));
}

TEST(MetricsTest, RendersCountersHistogramsAndGauges) {
  ServiceMetrics metrics;
  metrics.RecordRequest("Lower", "OK", 0.003);
  metrics.RecordRequest("Lower", "OK", 0.2);
  metrics.RecordRequest("Verify", "FAILED_PRECONDITION", 0.001);
  metrics.RecordPass("partition", 0.0004);
  metrics.RecordCacheLookup(true);
  metrics.RecordVerification("sim", "mismatch");
  ServiceMetrics::Gauges gauges;
  gauges.queue_depth = 4;
  gauges.workers = 2;
  std::string text = metrics.Render(gauges);
  Exposition scraped(text);
  EXPECT_TRUE(scraped.well_formed()) << text;
  for (const auto& [series, value] :
       std::vector<std::pair<std::string, double>>{
           {"ferry_requests_total{method=\"Lower\",code=\"OK\"}", 2},
           {"ferry_requests_total{method=\"Verify\",code=\"FAILED_"
            "PRECONDITION\"}",
            1},
           {"ferry_request_duration_seconds_bucket{method=\"Lower\",le=\"0."
            "005\"}",
            1},
           {"ferry_request_duration_seconds_bucket{method=\"Lower\",le=\"0."
            "25\"}",
            2},
           {"ferry_request_duration_seconds_count{method=\"Lower\"}", 2},
           {"ferry_pass_duration_seconds_bucket{pass=\"partition\",le=\"0."
            "0005\"}",
            1},
           {"ferry_queue_depth", 4},
           {"ferry_workers", 2},
           {"ferry_cache_lookups_total{result=\"hit\"}", 1},
           {"ferry_cache_hit_ratio", 1},
           {"ferry_verifications_total{device=\"sim\",result=\"mismatch\"}", 1},
           {"grpc_server_handled_total{grpc_service=\"ferry.v1.Compiler\","
            "grpc_method=\"Lower\",grpc_type=\"unary\",grpc_code=\"OK\"}",
            2},
           {"grpc_server_handling_seconds_count{grpc_service=\"ferry.v1."
            "Compiler\",grpc_method=\"Verify\",grpc_type=\"unary\"}",
            1}}) {
    EXPECT_EQ(scraped.Value(series), value) << series << "\n" << text;
  }
  EXPECT_EQ(scraped.Type("ferry_requests_total"), "counter");
  EXPECT_EQ(scraped.Type("ferry_request_duration_seconds"), "histogram");
  EXPECT_EQ(metrics.RequestCount("Lower", "OK"), 2);
  EXPECT_EQ(metrics.RequestCount("Lower", "INTERNAL"), 0);
  // The same history renders the same bytes.
  EXPECT_EQ(metrics.Render(gauges), text);
}

// No lookup yet: no ratio to speak of.
TEST(MetricsTest, CacheHitRatioIsAbsentBeforeTheFirstLookup) {
  ServiceMetrics metrics;
  Exposition before(metrics.Render({}));
  EXPECT_FALSE(before.Value("ferry_cache_hit_ratio").has_value());
  metrics.RecordCacheLookup(false);
  EXPECT_EQ(Exposition(metrics.Render({})).Value("ferry_cache_hit_ratio"), 0);
}

TEST(ProcessMetricsTest, ParsesProcStatWithSpacesAndParensInTheName) {
  // proc(5): pid (comm) state ppid ... utime(14) stime(15) ... starttime(22)
  // vsize(23) rss(24).
  std::string line =
      "4242 (odd) name) S 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0 "
      "3 0 9000 123456789 321 18446744073709551615";
  std::optional<ProcStat> stat = ParseProcStat(line);
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->utime_ticks, 150);
  EXPECT_EQ(stat->stime_ticks, 50);
  EXPECT_EQ(stat->start_ticks, 9000);
  EXPECT_EQ(stat->vsize_bytes, 123456789);
  EXPECT_EQ(stat->rss_pages, 321);
  EXPECT_FALSE(ParseProcStat("4242 (short) S 1 2").has_value());
  EXPECT_FALSE(ParseProcStat("no parenthesis").has_value());
}

TEST(ProcessMetricsTest, ReportsThisProcess) {
  Exposition scraped(ServiceMetrics().Render({}));
  ServiceMetrics metrics;
  metrics.AddCollectable(std::make_shared<ProcessCollector>());
  Exposition with_process(metrics.Render({}));
  EXPECT_FALSE(scraped.HasPrefix("process_"));
  EXPECT_TRUE(with_process.well_formed());
  EXPECT_GT(with_process.Value("process_resident_memory_bytes").value_or(0), 0);
  EXPECT_GE(with_process.Value("process_virtual_memory_bytes").value_or(0),
            with_process.Value("process_resident_memory_bytes").value_or(0));
  EXPECT_GT(with_process.Value("process_open_fds").value_or(0), 0);
  EXPECT_GE(with_process.Value("process_max_fds").value_or(0),
            with_process.Value("process_open_fds").value_or(0));
  EXPECT_GE(with_process.Value("process_cpu_seconds_total").value_or(-1), 0);
  EXPECT_EQ(with_process.Type("process_cpu_seconds_total"), "counter");
  // Started after 2020-01-01 and not in the future.
  double started = with_process.Value("process_start_time_seconds").value_or(0);
  EXPECT_GT(started, 1577836800);
  EXPECT_LE(started,
            absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()) + 1);
}

// The GPU families from what the runtime reports (here: made up, as this
// test runs without a GPU); utilisation only where it was read.
TEST(GpuMetricsTest, OneSeriesPerDeviceAndNoneWithoutDevices) {
  ServiceMetrics metrics;
  metrics.AddCollectable(std::make_shared<GpuCollector>([] {
    GpuUsage first;
    first.index = 0;
    first.memory_used_bytes = 1 << 20;
    first.memory_total_bytes = int64_t{80} << 30;
    first.utilization = 0.25;
    GpuUsage second;
    second.index = 1;
    second.memory_used_bytes = 0;
    second.memory_total_bytes = int64_t{80} << 30;
    return std::vector<GpuUsage>{first, second};
  }));
  Exposition scraped(metrics.Render({}));
  EXPECT_TRUE(scraped.well_formed());
  EXPECT_EQ(scraped.Value("ferry_gpu_memory_used_bytes{device=\"cuda:0\"}"),
            1 << 20);
  EXPECT_EQ(scraped.Value("ferry_gpu_memory_total_bytes{device=\"cuda:1\"}"),
            static_cast<double>(int64_t{80} << 30));
  EXPECT_EQ(scraped.Value("ferry_gpu_utilization_ratio{device=\"cuda:0\"}"),
            0.25);
  EXPECT_FALSE(scraped.Value("ferry_gpu_utilization_ratio{device=\"cuda:1\"}")
                   .has_value());

  ServiceMetrics none;
  none.AddCollectable(
      std::make_shared<GpuCollector>([] { return std::vector<GpuUsage>{}; }));
  EXPECT_FALSE(Exposition(none.Render({})).HasPrefix("ferry_gpu_"));
}

TEST(RpcErrorsTest, DetailsRoundTripThroughTheClientHelpers) {
  grpc::Status status = QueueFullError(8, milliseconds(1500));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  absl::Status converted(absl::StatusCode::kResourceExhausted,
                         status.error_message());
  converted.SetPayload(kErrorDetailsPayload,
                       absl::Cord(status.error_details()));
  std::optional<google::rpc::RetryInfo> retry =
      ErrorDetail<google::rpc::RetryInfo>(converted);
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(retry->retry_delay().seconds(), 1);
  EXPECT_EQ(retry->retry_delay().nanos(), 500'000'000);
  std::optional<google::rpc::ErrorInfo> info =
      ErrorDetail<google::rpc::ErrorInfo>(converted);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "QUEUE_FULL");
  EXPECT_FALSE(ErrorDetail<google::rpc::BadRequest>(converted).has_value());
}

TEST(RpcErrorsTest, TruncationKeepsWholeUtf8Characters) {
  EXPECT_EQ(TruncateUtf8("short", 10), "short");
  EXPECT_EQ(TruncateUtf8("abcdefghij", 8), "abcde...");
  // "é" is two bytes: cutting after its first byte would split it.
  EXPECT_EQ(TruncateUtf8("abcd\xc3\xa9"
                         "fgh",
                         8),
            "abcd...");
}

google::rpc::Status DetailsOf(const grpc::Status& status) {
  google::rpc::Status details;
  EXPECT_TRUE(details.ParseFromString(status.error_details()));
  return details;
}

// gRPC refuses trailers over 8 KiB: every status stays well under it.
TEST(RpcErrorsTest, DetailsAreBoundedWhateverTheInput) {
  const std::string huge(20000, 'x');
  for (const grpc::Status& status :
       {InvalidFieldError(huge, huge, "INPUT_DOES_NOT_FIT"),
        OverLimitError(huge, 1, 0, "REQUEST_TOO_LARGE"),
        ResourceLimitRpcError(
            ResourceViolation{"max_tensor_bytes", huge, 10, 5}),
        DeviceUnavailableError(huge, huge), InternalRpcError(huge)}) {
    EXPECT_LE(status.error_message().size(), kMaxStatusMessageBytes);
    EXPECT_LE(status.error_details().size(), kMaxStatusDetailsBytes);
    EXPECT_GE(DetailsOf(status).details_size(), 1);  // ErrorInfo at least
  }
}

TEST(RpcErrorsTest, ResourceLimitErrorsNameTheNode) {
  absl::Status library = ResourceLimitError(ResourceViolation{
      "max_tensor_bytes", "program.constants['w']", 40'000'000'000, 1 << 30});
  std::optional<ResourceViolation> violation = GetResourceViolation(library);
  ASSERT_TRUE(violation.has_value());
  grpc::Status status = ResourceLimitRpcError(*violation);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  google::rpc::Status details = DetailsOf(status);
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(details.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "TENSOR_TOO_LARGE");
  google::rpc::QuotaFailure quota;
  ASSERT_TRUE(details.details(1).UnpackTo(&quota));
  EXPECT_EQ(quota.violations(0).subject(), "program.constants['w']");
  EXPECT_NE(quota.violations(0).description().find("40000000000"),
            std::string::npos);
  // A plain RESOURCE_EXHAUSTED (an allocation failure) carries none.
  EXPECT_FALSE(
      GetResourceViolation(absl::ResourceExhaustedError("oom")).has_value());
}

TEST(ConfigTest, ResourceLimitsAndTheMemoryBudget) {
  absl::StatusOr<CommandLine> parsed = ParseCommandLine(
      {"--max-tensor-bytes=64MiB", "--max-verify-bytes", "256MiB",
       "--max-expansion=4", "--max-memory-bytes=1GiB"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.max_tensor_bytes, 64 << 20);
  EXPECT_EQ(parsed->config.max_verify_bytes, 256 << 20);
  EXPECT_EQ(parsed->config.max_expansion, 4);
  EXPECT_EQ(parsed->config.max_memory_bytes, 1 << 30);
  EXPECT_TRUE(ValidateConfig(parsed->config).ok());
  EXPECT_FALSE(ParseCommandLine({"--max-expansion=0"}).ok());
  ServerConfig config;
  config.max_memory_bytes = 128 << 20;  // below the 256MiB cache
  EXPECT_FALSE(ValidateConfig(config).ok());
  config.cache_bytes = 32 << 20;  // ... and below max_verify_bytes (2GiB)
  EXPECT_FALSE(ValidateConfig(config).ok());
  config.max_verify_bytes = 64 << 20;
  EXPECT_TRUE(ValidateConfig(config).ok());
  config.max_memory_bytes = 0;  // no budget
  EXPECT_TRUE(ValidateConfig(config).ok());
}

TEST(ConfigTest, FreedMemoryKeptForTheNextJobs) {
  absl::StatusOr<CommandLine> defaults = ParseCommandLine({});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->config.keep_freed_bytes, int64_t{512} << 20);
  absl::StatusOr<CommandLine> parsed =
      ParseCommandLine({"--keep-freed-bytes=64MiB"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.keep_freed_bytes, int64_t{64} << 20);
  parsed = ParseCommandLine({"--keep-freed-bytes", "0"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.keep_freed_bytes, 0);
  EXPECT_FALSE(ParseCommandLine({"--keep-freed-bytes=-1"}).ok());
}

}  // namespace
}  // namespace ferry
