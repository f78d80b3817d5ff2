#include "tests/service/service_test_support.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

extern char** environ;

#include "ferry/digest.h"
#include "ferry/file.h"

namespace ferry::testing {

ServerConfig LoopbackConfig() {
  ServerConfig config;
  config.listen = "127.0.0.1:0";
  config.workers = 2;
  config.queue_depth = 8;
  config.default_deadline = std::chrono::seconds(20);
  config.max_deadline = std::chrono::seconds(30);
  config.drain_grace = std::chrono::seconds(5);
  return config;
}

std::unique_ptr<FerryServer> StartServer(const ServerConfig& config,
                                         ServerHooks hooks) {
  if (!hooks.log_sink) hooks.log_sink = [](absl::string_view) {};
  absl::StatusOr<std::unique_ptr<FerryServer>> server =
      FerryServer::Start(config, std::move(hooks));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::unique_ptr<Client> Connect(const std::string& address,
                                std::function<void(ClientOptions&)> tweak) {
  ClientOptions options;
  options.target = address;
  options.default_deadline = std::chrono::seconds(20);
  options.retry.initial_backoff = std::chrono::milliseconds(20);
  if (tweak) tweak(options);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

std::function<void(absl::string_view)> JobGate::Hook() {
  return [this](absl::string_view) {
    std::unique_lock<std::mutex> lock(mutex_);
    ++arrivals_;
    changed_.notify_all();
    changed_.wait(lock, [this] { return open_; });
  };
}

bool JobGate::WaitForArrivals(int count, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return arrivals_ >= count; });
}

void JobGate::Open() {
  std::lock_guard<std::mutex> lock(mutex_);
  open_ = true;
  changed_.notify_all();
}

int JobGate::arrivals() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return arrivals_;
}

std::function<void(absl::string_view)> LogCapture::Sink() {
  return [this](absl::string_view line) {
    std::lock_guard<std::mutex> lock(mutex_);
    lines_.emplace_back(line);
  };
}

std::vector<std::string> LogCapture::Lines() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lines_;
}

std::vector<std::string> LogCapture::RpcLines() const {
  std::vector<std::string> rpc;
  for (const std::string& line : Lines()) {
    if (line.find("\"event\":\"rpc\"") != std::string::npos)
      rpc.push_back(line);
  }
  return rpc;
}

TempDir::TempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "ferry-test-XXXXXX").string();
  char* made = mkdtemp(pattern.data());
  path_ = made != nullptr ? made : "";
}

TempDir::~TempDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

void TempDir::Write(const std::string& name, const std::string& text) const {
  testing_util::WriteFile(File(name), text);
}

namespace {

bool Run(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

// A key and a certificate signed by `ca` (or self-signed when `ca` is
// empty) with `subject_alt_names`.
bool MakeCertificate(const TempDir& dir, const std::string& name,
                     const std::string& common_name, const std::string& ca,
                     const std::string& subject_alt_names) {
  std::string key = dir.File(name + ".key");
  std::string cert = dir.File(name + ".pem");
  std::string curve = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  if (ca.empty()) {
    return Run("openssl req -x509 " + curve + " -keyout " + key + " -out " +
               cert + " -days 1 -subj /CN=" + common_name);
  }
  std::string csr = dir.File(name + ".csr");
  std::string extensions = dir.File(name + ".ext");
  dir.Write(name + ".ext", "subjectAltName=" + subject_alt_names + "\n");
  return Run("openssl req " + curve + " -keyout " + key + " -out " + csr +
             " -subj /CN=" + common_name) &&
         Run("openssl x509 -req -in " + csr + " -CA " + dir.File(ca + ".pem") +
             " -CAkey " + dir.File(ca + ".key") +
             " -CAcreateserial -days 1 -out " + cert + " -extfile " +
             extensions);
}

}  // namespace

TestCertificates MakeCertificates(const TempDir& dir) {
  bool made = MakeCertificate(dir, "ca", "ferry-test-ca", "", "") &&
              MakeCertificate(dir, "server", "localhost", "ca",
                              "DNS:localhost,IP:127.0.0.1") &&
              MakeCertificate(dir, "client", "ferry-test-client", "ca",
                              "DNS:ferry-test-client") &&
              MakeCertificate(dir, "rogue-ca", "rogue-ca", "", "") &&
              MakeCertificate(dir, "rogue-client", "rogue-client", "rogue-ca",
                              "DNS:rogue-client");
  if (!made) return {};
  return TestCertificates{
      dir.File("ca.pem"),           dir.File("server.pem"),
      dir.File("server.key"),       dir.File("client.pem"),
      dir.File("client.key"),       dir.File("rogue-ca.pem"),
      dir.File("rogue-client.pem"), dir.File("rogue-client.key")};
}

bool Eventually(const std::function<bool()>& predicate,
                std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return predicate();
}

std::string CanonicalBytes(const google::protobuf::Message& message) {
  return DeterministicBytes(message);
}

}  // namespace ferry::testing
