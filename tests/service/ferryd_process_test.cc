// The real ferryd binary: flags and config file, the address on stdout's
// first line, /metrics, the probe mode, and SIGTERM (health NOT_SERVING,
// new work refused, in-flight work finished, exit 0).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <future>

#include "client/testing/synthetic_program.h"
#include "ferry/client.h"
#include "tests/service/service_test_support.h"

namespace ferry::testing {
namespace {

TEST(FerrydProcessTest, ServesThenDrainsOnSigtermAndExitsZero) {
  TempDir dir;
  dir.Write("ferryd.conf",
            "# keys as the flags\n"
            "workers = 1\n"
            "queue-depth = 3\n"
            "max-nodes = 50000   # trailing comment\n"
            "default-deadline = 20s\n"
            "listen = 127.0.0.1:1\n");  // overridden by the flag below
  Process ferryd(
      {FERRYD_PATH, "--config", dir.File("ferryd.conf"), "--listen=127.0.0.1:0",
       "--metrics-listen", "127.0.0.1:0", "--drain-grace", "20s"},
      dir.File("stderr"));
  std::string address = ferryd.ReadLine();
  std::string metrics_address = ferryd.ReadLine();
  ASSERT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;
  ASSERT_EQ(metrics_address.rfind("127.0.0.1:", 0), 0u) << metrics_address;

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
  ferryd.Signal(SIGTERM);
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<bool> serving = client->CheckHealth("ferry.v1.Compiler");
    return serving.ok() && !*serving;
  }));
  EXPECT_EQ(client->Lower(TinyRequest(1)).status().code(),
            absl::StatusCode::kUnavailable);

  absl::StatusOr<v1::LowerResponse> finished = in_flight.get_future().get();
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_TRUE(finished->ok());
  EXPECT_EQ(ferryd.WaitForExit(std::chrono::seconds(20)), 0);

  std::string log = ReadFileText(dir.File("stderr"));
  EXPECT_NE(log.find("\"event\":\"start\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"event\":\"drain\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"in_flight_finished\":true"), std::string::npos) << log;
  EXPECT_NE(log.find("\"code\":\"UNAVAILABLE\""), std::string::npos) << log;
}

TEST(FerrydProcessTest, RejectsUnknownFlagsAndBadValues) {
  TempDir dir;
  Process unknown({FERRYD_PATH, "--listne", "127.0.0.1:0"}, dir.File("e1"));
  EXPECT_EQ(unknown.WaitForExit(std::chrono::seconds(10)), 2);
  EXPECT_NE(ReadFileText(dir.File("e1")).find("unknown flag --listne"),
            std::string::npos);
  Process bad({FERRYD_PATH, "--workers", "zero"}, dir.File("e2"));
  EXPECT_EQ(bad.WaitForExit(std::chrono::seconds(10)), 2);
  EXPECT_NE(ReadFileText(dir.File("e2")).find("--workers"), std::string::npos);
}

}  // namespace
}  // namespace ferry::testing
