// TLS, mTLS and bearer tokens (accept and refuse), health names, the
// health transitions of a drain, and request-handling edge cases (unknown
// enum values, RetryInfo, idle metrics connections), over loopback.
#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "absl/strings/str_cat.h"
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

TEST(TokenTest, BearerSchemeIsCaseInsensitive) {
  TempDir dir;
  dir.Write("tokens", "s3cret\n");
  ServerConfig config = LoopbackConfig();
  config.token_file = dir.File("tokens");
  auto server = StartServer(config);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address(), NoRetries);
  // RFC 6750 / RFC 7235: the auth scheme is case-insensitive; the token is
  // not.
  for (const char* header :
       {"Bearer s3cret", "bearer s3cret", "BEARER s3cret", "bEaReR  s3cret"}) {
    CallOptions call;
    call.metadata.push_back({"authorization", header});
    absl::StatusOr<v1::LowerResponse> response =
        client->Lower(TinyRequest(), call);
    EXPECT_TRUE(response.ok()) << header << ": " << response.status();
  }
  for (const char* header : {"bearer S3CRET", "bearers3cret", "Basic s3cret"}) {
    CallOptions call;
    call.metadata.push_back({"authorization", header});
    EXPECT_EQ(client->Lower(TinyRequest(), call).status().code(),
              absl::StatusCode::kUnauthenticated)
        << header;
  }
}

TEST(TlsConfigTest, KeyThatDoesNotMatchTheCertificateIsSaidSo) {
  TempDir dir;
  TestCertificates certificates = MakeCertificates(dir);
  ASSERT_FALSE(certificates.ca.empty());
  ServerConfig config = LoopbackConfig();
  config.tls_cert = certificates.server_cert;
  config.tls_key = certificates.client_key;  // another key pair's key
  absl::StatusOr<std::unique_ptr<FerryServer>> server =
      FerryServer::Start(config);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("does not match the certificate"),
            std::string::npos)
      << server.status();
  EXPECT_EQ(server.status().message().find("cannot listen"), std::string::npos)
      << server.status();

  dir.Write("not-a-key.pem", "-----BEGIN NOTHING-----\n");
  config.tls_key = dir.File("not-a-key.pem");
  server = FerryServer::Start(config);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("holds no PEM private key"),
            std::string::npos)
      << server.status();
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
  // A failed call is reported as such, not read as a health status.
  absl::StatusOr<bool> gpu = client->CheckHealth("ferry.v1.Compiler/gpu");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_FALSE(*gpu);
  absl::StatusOr<bool> compiler = client->CheckHealth("ferry.v1.Compiler");
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  EXPECT_TRUE(*compiler);
}

TEST(HealthTest,
     DrainTurnsReadinessNotServingKeepsLivenessAndFinishesInFlight) {
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
  for (const char* name : {"ferry.v1.Compiler", "ferry.v1.Compiler/gpu"}) {
    absl::StatusOr<bool> health = client->CheckHealth(name);
    ASSERT_TRUE(health.ok()) << name << ": " << health.status();
    EXPECT_FALSE(*health) << name;
  }
  // Liveness stays SERVING while draining: a drain must not restart the pod.
  absl::StatusOr<bool> live = client->CheckHealth("");
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_TRUE(*live);
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

// Sends `bytes` as the request of `method` ("/ferry.v1.Compiler/Lower").
grpc::Status RawUnaryCall(const std::string& address, const std::string& method,
                          const std::string& bytes) {
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&](grpc::Status status) { done.set_value(status); });
  return done.get_future().get();
}

TEST(RequestTest, UnparseableRequestIsInvalidArgumentLoggedAndCounted) {
  LogCapture log;
  ServerHooks hooks;
  hooks.log_sink = log.Sink();
  auto server = StartServer(LoopbackConfig(), hooks);
  ASSERT_NE(server, nullptr);
  // Field 1 (request / program) as a length-delimited field that claims
  // more bytes than follow.
  const std::string garbage("\x0a\xff\xff\x03\x01", 5);
  for (const char* method : {"Lower", "Verify"}) {
    grpc::Status status =
        RawUnaryCall(server->address(),
                     absl::StrCat("/ferry.v1.Compiler/", method), garbage);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << status.error_message();
    EXPECT_NE(status.error_message().find("not a valid ferry.v1."),
              std::string::npos)
        << status.error_message();
    EXPECT_EQ(server->metrics().RequestCount(method, "INVALID_ARGUMENT"), 1)
        << method;
  }
  int logged = 0;
  for (const std::string& line : log.RpcLines()) {
    if (line.find("INVALID_ARGUMENT") != std::string::npos) ++logged;
  }
  EXPECT_EQ(logged, 2);
  // Well-formed requests are still served through the same path.
  auto client = Connect(server->address(), NoRetries);
  absl::StatusOr<v1::LowerResponse> lowered = client->Lower(TinyRequest());
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_TRUE(lowered->ok());
  v1::VerifyRequest verify;
  *verify.mutable_request() = TinyRequest(1);
  absl::StatusOr<v1::VerifyResponse> verified = client->Verify(verify);
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_TRUE(verified->ok());
}

// ferryd reads a Lower request's program from its bytes as the job runs:
// bytes that are well formed where it looks first but not further in (a node
// name that is not UTF-8) are refused the same way, and the same request with
// a good name lowers.
TEST(RequestTest, AProgramThatDoesNotParseDeepInIsInvalidArgument) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  v1::LowerRequest request = TinyRequest();
  request.mutable_program()->mutable_methods(0)->mutable_nodes(0)->set_name(
      "zq");
  const std::string renamed =
      TinyRequest().program().methods(0).nodes(0).name();
  for (v1::Node& node :
       *request.mutable_program()->mutable_methods(0)->mutable_nodes()) {
    if (!node.has_call()) continue;
    for (v1::Argument& arg : *node.mutable_call()->mutable_args())
      if (arg.value() == renamed) arg.set_value("zq");
  }
  std::string good;
  ASSERT_TRUE(request.SerializeToString(&good));
  std::string bad = good;
  const size_t at = bad.find("zq");
  ASSERT_NE(at, std::string::npos);
  bad[at] = '\xff';
  const std::string method = "/ferry.v1.Compiler/Lower";
  grpc::Status status = RawUnaryCall(server->address(), method, bad);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << status.error_message();
  EXPECT_NE(status.error_message().find("not a valid ferry.v1.LowerRequest"),
            std::string::npos)
      << status.error_message();
  EXPECT_EQ(server->metrics().RequestCount("Lower", "INVALID_ARGUMENT"), 1);
  auto client = Connect(server->address(), NoRetries);
  absl::StatusOr<v1::LowerResponse> lowered = client->Lower(request);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_TRUE(lowered->ok());
}

TEST(RequestTest, UnknownVerifyDeviceIsInvalidArgumentNamingTheValue) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address(), NoRetries);
  v1::VerifyRequest request;
  *request.mutable_request() = TinyRequest();
  request.set_device(static_cast<v1::VerifyDevice>(77));
  absl::StatusOr<v1::VerifyResponse> response = client->Verify(request);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument)
      << response.status();
  EXPECT_NE(response.status().message().find("77"), std::string::npos)
      << response.status();
  std::optional<google::rpc::BadRequest> bad =
      ErrorDetail<google::rpc::BadRequest>(response.status());
  ASSERT_TRUE(bad.has_value());
  ASSERT_GT(bad->field_violations_size(), 0);
  EXPECT_EQ(bad->field_violations(0).field(), "device");
}

TEST(RequestTest, RetryDelayFollowsMeasuredJobDurations) {
  ServerConfig config = LoopbackConfig();
  config.workers = 1;
  config.queue_depth = 1;
  constexpr auto kJob = std::chrono::milliseconds(1300);
  JobGate gate;
  std::atomic<bool> gated{false};
  ServerHooks hooks;
  std::function<void(absl::string_view)> hold = gate.Hook();
  hooks.before_job = [&](absl::string_view method) {
    if (gated.load()) {
      hold(method);
    } else {
      std::this_thread::sleep_for(kJob);
    }
  };
  auto server = StartServer(config, hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address(), NoRetries);
  CallOptions bypass;
  bypass.bypass_cache = true;
  // One job of 1.3 s has been measured.
  ASSERT_TRUE(client->Lower(TinyRequest(1), bypass).ok());

  gated.store(true);
  std::promise<absl::Status> running, queued;
  client->LowerAsync(
      TinyRequest(2),
      [&](absl::StatusOr<v1::LowerResponse> r) {
        running.set_value(r.status());
      },
      bypass);
  ASSERT_TRUE(gate.WaitForArrivals(1));
  client->LowerAsync(
      TinyRequest(3),
      [&](absl::StatusOr<v1::LowerResponse> r) {
        queued.set_value(r.status());
      },
      bypass);
  ASSERT_TRUE(
      Eventually([&] { return server->service().Gauges().queue_depth == 1; }));
  absl::StatusOr<v1::LowerResponse> refused =
      client->Lower(TinyRequest(4), bypass);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
      << refused.status();
  std::optional<google::rpc::RetryInfo> retry =
      ErrorDetail<google::rpc::RetryInfo>(refused.status());
  ASSERT_TRUE(retry.has_value());
  int64_t delay_ms = retry->retry_delay().seconds() * 1000 +
                     retry->retry_delay().nanos() / 1'000'000;
  // A job ahead runs and one waits, each of them about as long as the one
  // measured: no sooner than one job's time is worth retrying.
  EXPECT_GE(delay_ms, 1300) << delay_ms;
  EXPECT_LE(delay_ms, 30'000) << delay_ms;
  gate.Open();
  EXPECT_TRUE(running.get_future().get().ok());
  EXPECT_TRUE(queued.get_future().get().ok());
}

// Opens a TCP connection to `address` (127.0.0.1:PORT) and sends nothing.
int IdleConnection(const std::string& address) {
  size_t colon = address.rfind(':');
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port =
      htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, "127.0.0.1", &peer.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(MetricsHttpTest, IdleConnectionsDoNotHoldScrapes) {
  ServerConfig config = LoopbackConfig();
  config.metrics_listen = "127.0.0.1:0";
  auto server = StartServer(config);
  ASSERT_NE(server, nullptr);
  const std::string address = server->metrics_address();
  std::vector<int> idle;
  for (int i = 0; i < 32; ++i) {
    int fd = IdleConnection(address);
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  size_t colon = address.rfind(':');
  httplib::Client http(address.substr(0, colon),
                       std::stoi(address.substr(colon + 1)));
  // Generous: idle connections used to hold a scrape for 5 s per 8 of them
  // (20 s for these).
  http.set_connection_timeout(std::chrono::seconds(10));
  http.set_read_timeout(std::chrono::seconds(10));
  auto start = std::chrono::steady_clock::now();
  httplib::Result scraped = http.Get("/metrics");
  ASSERT_TRUE(scraped) << httplib::to_string(scraped.error());
  EXPECT_EQ(scraped->status, 200);
  EXPECT_NE(scraped->body.find("ferry_"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  for (int fd : idle) close(fd);
}

}  // namespace
}  // namespace ferry::testing
