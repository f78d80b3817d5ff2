// The real ferryd binary: flags and config file, the address on stdout's
// first line, /metrics, the probe mode, SIGTERM (readiness NOT_SERVING,
// liveness SERVING, new work refused, in-flight work finished, exit 0), and
// deadlines, cancels and the drain grace stopping work inside one long
// step.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <future>
#include <thread>

#include "client/testing/synthetic_program.h"
#include "ferry/client.h"
#include "tests/service/service_test_support.h"

namespace ferry::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// One host node: z = mm(x, y) on [n, n] inputs of `dtype`.
v1::VerifyRequest MatmulVerify(v1::DType dtype, int64_t n) {
  v1::VerifyRequest verify;
  verify.set_device(v1::VERIFY_DEVICE_SIM);
  v1::Method* method =
      verify.mutable_request()->mutable_program()->add_methods();
  method->set_name("forward");
  for (const char* name : {"x", "y", "z"}) {
    v1::Node* node = method->add_nodes();
    node->set_name(name);
    if (std::string(name) == "z") {
      node->mutable_call()->set_op("aten::mm");
      node->mutable_call()->add_args()->set_value("x");
      node->mutable_call()->add_args()->set_value("y");
    } else {
      node->mutable_input()->set_kind(v1::USER_INPUT);
    }
    node->mutable_tensor()->set_dtype(dtype);
    node->mutable_tensor()->add_sizes(n);
    node->mutable_tensor()->add_sizes(n);
  }
  v1::Node* output = method->add_nodes();
  output->set_name("output");
  output->mutable_output()->add_values()->set_value("z");
  return verify;
}

// A step that runs for many seconds on the host whatever the machine: an
// integer matrix product (no BLAS), 1024^3 multiply-adds, twice (the
// original program and the lowered one).
v1::VerifyRequest LongVerify() { return MatmulVerify(v1::I64, 1024); }

// A ferryd with one worker, so that the worker being free again is what
// lets the next call through.
class OneWorkerFerryd {
 public:
  explicit OneWorkerFerryd(const std::string& drain_grace = "30s")
      : ferryd_(FERRYD_PATH,
                {"--workers", "1", "--queue-depth", "4", "--drain-grace",
                 drain_grace},
                dir_.File("stderr"), FerrydProcess::Metrics::kOn) {
    const std::string& metrics = ferryd_.metrics_address();
    size_t colon = metrics.rfind(':');
    if (colon != std::string::npos) {
      http_ = std::make_unique<httplib::Client>(
          metrics.substr(0, colon), std::stoi(metrics.substr(colon + 1)));
    }
    client_ = Connect(ferryd_.address(), [](ClientOptions& options) {
      options.retry.max_attempts = 1;
    });
  }

  bool ok() const { return ferryd_.listening() && http_ != nullptr; }
  Client& client() { return *client_; }
  Process& process() { return ferryd_.process(); }
  std::string log() const { return ferryd_.log(); }
  // Whether /metrics says `text` (e.g. "ferry_jobs_running 1").
  bool MetricsSay(const std::string& text) {
    httplib::Result scraped = http_->Get("/metrics");
    return scraped && scraped->body.find(text) != std::string::npos;
  }

 private:
  TempDir dir_;
  FerrydProcess ferryd_;
  std::unique_ptr<httplib::Client> http_;
  std::unique_ptr<Client> client_;
};

// The call after a stopped one is served: it needs the only worker.
void ExpectNextCallServed(Client& client) {
  CallOptions call;
  call.deadline = seconds(5);
  absl::StatusOr<v1::VerifyResponse> next =
      client.Verify(MatmulVerify(v1::F32, 8), call);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->ok()) << next->report().summary();
}

TEST(FerrydDeadlineTest, DeadlineStopsALongStepAndFreesTheWorker) {
  OneWorkerFerryd ferryd;
  ASSERT_TRUE(ferryd.ok());
  CallOptions call;
  call.deadline = seconds(1);
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<v1::VerifyResponse> response =
      ferryd.client().Verify(LongVerify(), call);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kDeadlineExceeded)
      << response.status();
  ExpectNextCallServed(ferryd.client());
  // Generous: the long step alone runs for many seconds.
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(5));
  ASSERT_TRUE(Eventually([&] {
    std::string log = ferryd.log();
    return log.find("\"code\":\"DEADLINE_EXCEEDED\"") != std::string::npos;
  })) << ferryd.log();
}

TEST(FerrydDeadlineTest, F16MatmulOfOneMegaElementFitsASecond) {
  OneWorkerFerryd ferryd;
  ASSERT_TRUE(ferryd.ok());
  // Through OpenBLAS this takes milliseconds (a naive loop: seconds).
  CallOptions call;
  call.deadline = seconds(5);
  for (v1::DType dtype : {v1::F16, v1::BF16}) {
    absl::StatusOr<v1::VerifyResponse> response =
        ferryd.client().Verify(MatmulVerify(dtype, 1024), call);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_TRUE(response->ok()) << response->report().summary();
  }
}

TEST(FerrydDeadlineTest, CancelStopsALongStepAndFreesTheWorker) {
  OneWorkerFerryd ferryd;
  ASSERT_TRUE(ferryd.ok());
  std::promise<absl::Status> cancelled;
  CallOptions call;
  call.deadline = seconds(60);
  std::shared_ptr<AsyncCall> pending = ferryd.client().VerifyAsync(
      LongVerify(),
      [&](absl::StatusOr<v1::VerifyResponse> r) {
        cancelled.set_value(r.status());
      },
      call);
  ASSERT_TRUE(
      Eventually([&] { return ferryd.MetricsSay("ferry_jobs_running 1"); }));
  pending->Cancel();
  EXPECT_EQ(cancelled.get_future().get().code(), absl::StatusCode::kCancelled);
  ExpectNextCallServed(ferryd.client());
  ASSERT_TRUE(Eventually([&] {
    return ferryd.log().find("\"code\":\"CANCELLED\"") != std::string::npos;
  })) << ferryd.log();
}

TEST(FerrydDrainTest, DrainGraceIsAHardBoundAndLivenessStaysServing) {
  OneWorkerFerryd ferryd("2s");
  ASSERT_TRUE(ferryd.ok());
  std::promise<absl::Status> in_flight;
  CallOptions call;
  call.deadline = seconds(60);
  ferryd.client().VerifyAsync(
      LongVerify(),
      [&](absl::StatusOr<v1::VerifyResponse> r) {
        in_flight.set_value(r.status());
      },
      call);
  ASSERT_TRUE(
      Eventually([&] { return ferryd.MetricsSay("ferry_jobs_running 1"); }));
  auto signalled = std::chrono::steady_clock::now();
  ferryd.process().Signal(SIGTERM);
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<bool> ready =
        ferryd.client().CheckHealth("ferry.v1.Compiler");
    return ready.ok() && !*ready;
  }));
  // Draining, not dead: liveness stays SERVING (a restart would be wrong).
  absl::StatusOr<bool> live = ferryd.client().CheckHealth("");
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_TRUE(*live);
  // The grace runs out: the step is stopped, the call answered UNAVAILABLE
  // and the process exits well before the step could have finished.
  EXPECT_EQ(in_flight.get_future().get().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(ferryd.process().WaitForExit(seconds(12)), 0) << ferryd.log();
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, seconds(12));
  std::string log = ferryd.log();
  EXPECT_NE(log.find("\"in_flight_finished\":false"), std::string::npos) << log;
  EXPECT_NE(log.find("\"in_flight_stopped\":true"), std::string::npos) << log;
}

TEST(FerrydProcessTest, ServesThenDrainsOnSigtermAndExitsZero) {
  TempDir dir;
  dir.Write("ferryd.conf",
            "# keys as the flags\n"
            "workers = 1\n"
            "queue-depth = 3\n"
            "max-nodes = 50000   # trailing comment\n"
            "default-deadline = 20s\n"
            "listen = 127.0.0.1:1\n");  // overridden by the flag below
  FerrydProcess ferryd(
      FERRYD_PATH,
      {"--config", dir.File("ferryd.conf"), "--drain-grace", "20s"},
      dir.File("stderr"), FerrydProcess::Metrics::kOn);
  ASSERT_TRUE(ferryd.listening()) << ferryd.address() << ferryd.log();
  const std::string address = ferryd.address();
  const std::string metrics_address = ferryd.metrics_address();

  auto client = Connect(
      address, [](ClientOptions& options) { options.retry.max_attempts = 1; });
  absl::StatusOr<v1::GetCapabilitiesResponse> caps = client->GetCapabilities();
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->limits().max_concurrent_jobs(), 1);
  EXPECT_EQ(caps->limits().queue_depth(), 3);
  EXPECT_EQ(caps->limits().max_nodes(), 50000);
  EXPECT_EQ(caps->limits().default_deadline_ms(), 20000);
  EXPECT_TRUE(client->Lower(TinyRequest()).ok());

  // The probe mode the container's HEALTHCHECK uses.
  Process probe({FERRYD_PATH, "--probe", address}, dir.File("probe-stderr"));
  EXPECT_EQ(probe.ReadLine(), "SERVING");
  EXPECT_EQ(probe.WaitForExit(std::chrono::seconds(10)), 0);

  // A long job is in flight when SIGTERM arrives.
  std::promise<absl::StatusOr<v1::LowerResponse>> in_flight;
  client->LowerAsync(SyntheticChainRequest(10000),
                     [&](absl::StatusOr<v1::LowerResponse> r) {
                       in_flight.set_value(std::move(r));
                     });
  size_t colon = metrics_address.rfind(':');
  httplib::Client http(metrics_address.substr(0, colon),
                       std::stoi(metrics_address.substr(colon + 1)));
  ASSERT_TRUE(Eventually([&] {
    httplib::Result scraped = http.Get("/metrics");
    return scraped &&
           scraped->body.find("ferry_jobs_running 1") != std::string::npos;
  }));
  ferryd.process().Signal(SIGTERM);
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<bool> serving = client->CheckHealth("ferry.v1.Compiler");
    return serving.ok() && !*serving;
  }));
  EXPECT_EQ(client->Lower(TinyRequest(1)).status().code(),
            absl::StatusCode::kUnavailable);

  absl::StatusOr<v1::LowerResponse> finished = in_flight.get_future().get();
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_TRUE(finished->ok());
  EXPECT_EQ(ferryd.process().WaitForExit(std::chrono::seconds(20)), 0);

  std::string log = ferryd.log();
  EXPECT_NE(log.find("\"event\":\"start\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"event\":\"drain\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"in_flight_finished\":true"), std::string::npos) << log;
  EXPECT_NE(log.find("\"code\":\"UNAVAILABLE\""), std::string::npos) << log;
}

TEST(FerrydProcessTest, ProbeSpeaksTlsAsTheManifestsUseIt) {
  TempDir dir;
  TestCertificates certificates = MakeCertificates(dir);
  ASSERT_FALSE(certificates.ca.empty());
  FerrydProcess ferryd(FERRYD_PATH,
                       {"--tls-cert", certificates.server_cert, "--tls-key",
                        certificates.server_key},
                       dir.File("stderr"));
  ASSERT_TRUE(ferryd.listening()) << ferryd.address() << ferryd.log();
  const std::string address = ferryd.address();
  Process probe(
      {FERRYD_PATH, "--probe", address, "--probe-service", "ferry.v1.Compiler",
       "--probe-tls-ca", certificates.ca, "--probe-server-name", "localhost"},
      dir.File("probe-stderr"));
  EXPECT_EQ(probe.ReadLine(), "SERVING");
  EXPECT_EQ(probe.WaitForExit(std::chrono::seconds(10)), 0)
      << ReadFile(dir.File("probe-stderr"));
  // Plaintext against a TLS port fails (what the kubelet's gRPC probes do).
  Process plain({FERRYD_PATH, "--probe", address}, dir.File("plain-stderr"));
  EXPECT_NE(plain.WaitForExit(std::chrono::seconds(10)), 0);
  EXPECT_EQ(ferryd.Stop(std::chrono::seconds(10)), 0) << ferryd.log();
}

TEST(FerrydProcessTest, RejectsUnknownFlagsAndBadValues) {
  TempDir dir;
  Process unknown({FERRYD_PATH, "--listne", "127.0.0.1:0"}, dir.File("e1"));
  EXPECT_EQ(unknown.WaitForExit(std::chrono::seconds(10)), 2);
  EXPECT_NE(ReadFile(dir.File("e1")).find("unknown flag --listne"),
            std::string::npos);
  Process bad({FERRYD_PATH, "--workers", "zero"}, dir.File("e2"));
  EXPECT_EQ(bad.WaitForExit(std::chrono::seconds(10)), 2);
  EXPECT_NE(ReadFile(dir.File("e2")).find("--workers"), std::string::npos);
}

}  // namespace
}  // namespace ferry::testing
