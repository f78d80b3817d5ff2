// Helpers for the service's end-to-end tests: an in-process ferryd on
// 127.0.0.1 (port 0), a gate that holds workers at the start of a job, a
// log capture, and throwaway TLS certificates made with the openssl tool.
#ifndef FERRY_TESTS_SERVICE_SERVICE_TEST_SUPPORT_H_
#define FERRY_TESTS_SERVICE_SERVICE_TEST_SUPPORT_H_

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ferry/client.h"
#include "server/config.h"
#include "server/ferry_server.h"
#include "tests/support/ferryd_process.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/programs.h"

namespace ferry::testing {

// Loopback, port 0, 2 workers, a small queue, cache on, short deadlines.
ServerConfig LoopbackConfig();

// Starts a server or fails the test (ASSERT in the caller on null).
std::unique_ptr<FerryServer> StartServer(const ServerConfig& config,
                                         ServerHooks hooks = {});

// A plaintext client of `address` with short deadlines and fast retries.
std::unique_ptr<Client> Connect(const std::string& address,
                                std::function<void(ClientOptions&)> tweak = {});

// Holds every job at its start until Open(). Install with Hook().
class JobGate {
 public:
  std::function<void(absl::string_view)> Hook();
  // Waits until `count` jobs have arrived; false on timeout.
  bool WaitForArrivals(
      int count, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  void Open();
  int arrivals() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int arrivals_ = 0;
  bool open_ = false;
};

// Collects the server's log lines.
class LogCapture {
 public:
  std::function<void(absl::string_view)> Sink();
  std::vector<std::string> Lines() const;
  // Lines with "event":"rpc".
  std::vector<std::string> RpcLines() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

// A temporary directory removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  void Write(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};

// A CA, a server certificate for localhost/127.0.0.1 and a client
// certificate signed by it, plus a second, unrelated CA with its own client
// certificate. Made with `openssl` (EC P-256), valid for a day.
struct TestCertificates {
  std::string ca;                 // ca.pem
  std::string server_cert;        // server.pem
  std::string server_key;         // server.key
  std::string client_cert;        // client.pem (signed by ca)
  std::string client_key;         // client.key
  std::string rogue_ca;           // rogue-ca.pem
  std::string rogue_client_cert;  // signed by rogue-ca
  std::string rogue_client_key;
};
// Empty paths when openssl failed (the test then fails on its ASSERT).
TestCertificates MakeCertificates(const TempDir& dir);

// A child process, and a real ferryd as one (tests/support).
using testing_util::FerrydProcess;
using testing_util::Process;

// tests/support: the contents of a file ("" when unreadable), a
// LowerRequest from text.
using testing_util::ParseRequestText;
using testing_util::ReadFile;

// Polls `predicate` every 10 ms until true or `timeout`.
bool Eventually(const std::function<bool()>& predicate,
                std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Deterministic bytes of a message, for byte-identical comparisons.
std::string CanonicalBytes(const google::protobuf::Message& message);

// GET /metrics of `metrics_address` (HOST:PORT); "" when it fails.
std::string ScrapeMetrics(const std::string& metrics_address);

// A Prometheus text exposition (format 0.0.4), parsed. A series is named
// as in the text, with its labels in any order:
// `ferry_requests_total{method="Lower",code="OK"}`, `ferry_queue_depth`.
class Exposition {
 public:
  struct Sample {
    std::string name;  // ferry_x_bucket for a bucket of histogram ferry_x
    std::map<std::string, std::string> labels;
    double value = 0;
  };
  explicit Exposition(const std::string& text);

  // Every line was a comment, a blank or a sample that parsed.
  bool well_formed() const { return malformed_.empty(); }
  const std::vector<std::string>& malformed() const { return malformed_; }
  // The value of `series`; nullopt when absent.
  std::optional<double> Value(const std::string& series) const;
  // The samples called `name` (a _bucket, _sum, _count for histograms).
  std::vector<Sample> Samples(const std::string& name) const;
  // Whether any sample's name starts with `prefix`.
  bool HasPrefix(const std::string& prefix) const;
  // "# TYPE name X": X, or "" when the family has no TYPE line.
  std::string Type(const std::string& name) const;

 private:
  std::vector<Sample> samples_;
  std::map<std::string, std::string> types_;
  std::vector<std::string> malformed_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_SERVICE_SERVICE_TEST_SUPPORT_H_
