// TLS, mTLS and bearer tokens (accept and refuse), health names, and the
// health transitions of a drain, over loopback.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "client/testing/synthetic_program.h"
#include "ferry/client.h"
#include "runtime/verify.h"
#include "server/compiler_service.h"
#include "server/ferry_server.h"
#include "server/metrics.h"
#include "tests/service/service_test_support.h"

namespace ferry::testing {
namespace {

using std::chrono::milliseconds;

// TLS failures surface as UNAVAILABLE; no retries and a short deadline keep
// the refusals quick.
void NoRetries(ClientOptions& options) {
  options.retry.max_attempts = 1;
  options.default_deadline = std::chrono::seconds(5);
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    certificates_ = MakeCertificates(dir_);
    ASSERT_FALSE(certificates_.ca.empty()) << "openssl failed";
  }

  std::unique_ptr<FerryServer> StartTlsServer(bool require_client_cert) {
    ServerConfig config = LoopbackConfig();
    config.tls_cert = certificates_.server_cert;
    config.tls_key = certificates_.server_key;
    if (require_client_cert) config.tls_client_ca = certificates_.ca;
    return StartServer(config);
  }

  // A TLS client of `server` (its address is 127.0.0.1:PORT; the server
  // certificate names localhost and 127.0.0.1).
  std::unique_ptr<Client> TlsClient(const FerryServer& server,
                                    const std::string& root_ca,
                                    const std::string& cert = "",
                                    const std::string& key = "") {
    return Connect(server.address(), [&](ClientOptions& options) {
      NoRetries(options);
      options.tls.enabled = true;
      options.tls.root_ca_file = root_ca;
      options.tls.cert_file = cert;
      options.tls.key_file = key;
    });
  }

  TempDir dir_;
  TestCertificates certificates_;
};

TEST_F(TlsTest, TlsServerAcceptsTrustingClient) {
  auto server = StartTlsServer(false);
  ASSERT_NE(server, nullptr);
  auto client = TlsClient(*server, certificates_.ca);
  absl::StatusOr<v1::LowerResponse> response = client->Lower(TinyRequest());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_TRUE(response->ok());
}

TEST_F(TlsTest, TlsServerRefusesPlaintextAndUntrustingClients) {
  auto server = StartTlsServer(false);
  ASSERT_NE(server, nullptr);
  auto plaintext = Connect(server->address(), NoRetries);
  EXPECT_EQ(plaintext->Lower(TinyRequest()).status().code(),
            absl::StatusCode::kUnavailable);
  // The client trusts another CA: the server certificate does not verify.
  auto untrusting = TlsClient(*server, certificates_.rogue_ca);
  EXPECT_EQ(untrusting->Lower(TinyRequest()).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(TlsTest, MutualTlsAcceptsClientWithCertificateFromTheCa) {
  auto server = StartTlsServer(true);
  ASSERT_NE(server, nullptr);
  auto client = TlsClient(*server, certificates_.ca, certificates_.client_cert,
                          certificates_.client_key);
  absl::StatusOr<v1::GetCapabilitiesResponse> caps = client->GetCapabilities();
  EXPECT_TRUE(caps.ok()) << caps.status();
}

TEST_F(TlsTest, MutualTlsRefusesClientsWithoutAnAcceptedCertificate) {
  auto server = StartTlsServer(true);
  ASSERT_NE(server, nullptr);
  auto no_cert = TlsClient(*server, certificates_.ca);
  EXPECT_EQ(no_cert->GetCapabilities().status().code(),
            absl::StatusCode::kUnavailable);
  auto rogue =
      TlsClient(*server, certificates_.ca, certificates_.rogue_client_cert,
                certificates_.rogue_client_key);
  EXPECT_EQ(rogue->GetCapabilities().status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(server->metrics().RequestCount("GetCapabilities", "OK"), 0);
}

TEST(TokenTest, BearerTokenIsRequiredAndChecked) {
  TempDir dir;
  dir.Write("tokens", "# rotated weekly\nold-token\n  new-token  \n");
  ServerConfig config = LoopbackConfig();
  config.token_file = dir.File("tokens");
  auto server = StartServer(config);
  ASSERT_NE(server, nullptr);

  auto anonymous = Connect(server->address());
  absl::StatusOr<v1::LowerResponse> refused = anonymous->Lower(TinyRequest());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(anonymous->attempts(), 1);
  EXPECT_EQ(anonymous->GetCapabilities().status().code(),
            absl::StatusCode::kUnauthenticated);

  auto wrong = Connect(server->address(), [](ClientOptions& options) {
    options.bearer_token = "new-tokem";
  });
  EXPECT_EQ(wrong->Lower(TinyRequest()).status().code(),
            absl::StatusCode::kUnauthenticated);

  dir.Write("client-token", "new-token\n");
  auto right = Connect(server->address(), [&](ClientOptions& options) {
    options.token_file = dir.File("client-token");
  });
  absl::StatusOr<v1::LowerResponse> accepted = right->Lower(TinyRequest());
  EXPECT_TRUE(accepted.ok()) << accepted.status();
  absl::StatusOr<v1::GetCapabilitiesResponse> caps = right->GetCapabilities();
  ASSERT_TRUE(caps.ok());
  EXPECT_TRUE(caps->requires_token());

  // Health stays open to probes that carry no token.
  absl::StatusOr<bool> health = anonymous->CheckHealth("");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_TRUE(*health);
}

TEST(TokenTest, TokenAndMutualTlsTogether) {
  TempDir dir;
  TestCertificates certificates = MakeCertificates(dir);
  ASSERT_FALSE(certificates.ca.empty());
  dir.Write("tokens", "secret\n");
  ServerConfig config = LoopbackConfig();
  config.tls_cert = certificates.server_cert;
  config.tls_key = certificates.server_key;
  config.tls_client_ca = certificates.ca;
  config.token_file = dir.File("tokens");
  auto server = StartServer(config);
  ASSERT_NE(server, nullptr);
  auto tls = [&](const std::string& token) {
    return Connect(server->address(), [&](ClientOptions& options) {
      NoRetries(options);
      options.tls.enabled = true;
      options.tls.root_ca_file = certificates.ca;
      options.tls.cert_file = certificates.client_cert;
      options.tls.key_file = certificates.client_key;
      options.bearer_token = token;
    });
  };
  EXPECT_TRUE(tls("secret")->Lower(TinyRequest()).ok());
  EXPECT_EQ(tls("guess")->Lower(TinyRequest()).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(HealthTest, HealthNamesAtStartup) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  EXPECT_EQ(client->CheckHealth("").value_or(false), true);
  EXPECT_EQ(client->CheckHealth("ferry.v1.Compiler").value_or(false), true);
  // SERVING only where a usable GPU is visible.
  absl::StatusOr<bool> gpu = client->CheckHealth("ferry.v1.Compiler/gpu");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(*gpu, CudaAvailable());
  EXPECT_EQ(client->CheckHealth("no.such.Service").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(HealthTest, GpuHealthIsNotServingWithoutAGpu) {
  ServerHooks hooks;
  hooks.force_no_cuda = true;
  auto server = StartServer(LoopbackConfig(), hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  EXPECT_EQ(client->CheckHealth("ferry.v1.Compiler/gpu").value_or(true), false);
  EXPECT_EQ(client->CheckHealth("ferry.v1.Compiler").value_or(false), true);
}

TEST(HealthTest, DrainTurnsHealthNotServingRefusesNewWorkAndFinishesInFlight) {
  JobGate gate;
  ServerHooks hooks;
  hooks.before_job = gate.Hook();
  auto server = StartServer(LoopbackConfig(), hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address(), NoRetries);

  std::promise<absl::StatusOr<v1::LowerResponse>> in_flight;
  client->LowerAsync(TinyRequest(), [&](absl::StatusOr<v1::LowerResponse> r) {
    in_flight.set_value(std::move(r));
  });
  ASSERT_TRUE(gate.WaitForArrivals(1));

  std::thread drain([&] { server->Drain(std::chrono::seconds(10)); });
  ASSERT_TRUE(Eventually([&] { return server->service().draining(); }));
  for (const char* name : {"", "ferry.v1.Compiler", "ferry.v1.Compiler/gpu"}) {
    absl::StatusOr<bool> health = client->CheckHealth(name);
    ASSERT_TRUE(health.ok()) << name << ": " << health.status();
    EXPECT_FALSE(*health) << name;
  }
  absl::StatusOr<v1::LowerResponse> refused = client->Lower(TinyRequest(2));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);

  gate.Open();
  absl::StatusOr<v1::LowerResponse> finished = in_flight.get_future().get();
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_TRUE(finished->ok());
  drain.join();
  EXPECT_EQ(client->CheckHealth("").status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(HealthTest, DrainAbortsWorkThatOutlivesTheGrace) {
  JobGate gate;
  ServerHooks hooks;
  hooks.before_job = gate.Hook();
  auto server = StartServer(LoopbackConfig(), hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address(), NoRetries);
  std::promise<absl::Status> in_flight;
  client->LowerAsync(TinyRequest(), [&](absl::StatusOr<v1::LowerResponse> r) {
    in_flight.set_value(r.status());
  });
  ASSERT_TRUE(gate.WaitForArrivals(1));
  std::thread opener([&] {
    std::this_thread::sleep_for(milliseconds(500));
    gate.Open();
  });
  auto start = std::chrono::steady_clock::now();
  server->Drain(milliseconds(100));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(in_flight.get_future().get().code(),
            absl::StatusCode::kUnavailable);
  opener.join();
}

}  // namespace
}  // namespace ferry::testing
