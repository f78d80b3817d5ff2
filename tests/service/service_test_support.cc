#include "tests/service/service_test_support.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <thread>

extern char** environ;

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
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

std::string ScrapeMetrics(const std::string& metrics_address) {
  size_t colon = metrics_address.rfind(':');
  if (colon == std::string::npos) return "";
  int port = 0;
  if (!absl::SimpleAtoi(metrics_address.substr(colon + 1), &port)) return "";
  httplib::Client http(metrics_address.substr(0, colon), port);
  httplib::Result result = http.Get("/metrics");
  if (!result || result->status != 200) return "";
  return result->body;
}

namespace {

// `NAME{LABELS} VALUE` or `NAME VALUE` (label values with \\, \" and \n
// escapes); false when `line` is not one.
bool ParseSample(absl::string_view line, Exposition::Sample& sample) {
  size_t name_end = line.find_first_of("{ ");
  if (name_end == 0 || name_end == absl::string_view::npos) return false;
  sample.name = std::string(line.substr(0, name_end));
  size_t at = name_end;
  if (line[at] == '{') {
    ++at;
    while (at < line.size() && line[at] != '}') {
      size_t equals = line.find('=', at);
      if (equals == absl::string_view::npos || equals + 1 >= line.size() ||
          line[equals + 1] != '"') {
        return false;
      }
      std::string label(line.substr(at, equals - at));
      std::string value;
      at = equals + 2;
      while (at < line.size() && line[at] != '"') {
        if (line[at] == '\\' && at + 1 < line.size()) {
          ++at;
          value.push_back(line[at] == 'n' ? '\n' : line[at]);
        } else {
          value.push_back(line[at]);
        }
        ++at;
      }
      if (at >= line.size()) return false;  // unterminated value
      ++at;                                 // the closing quote
      if (!sample.labels.emplace(label, value).second) return false;
      if (at < line.size() && line[at] == ',') ++at;
    }
    if (at >= line.size()) return false;
    ++at;  // '}'
  }
  if (at >= line.size() || line[at] != ' ') return false;
  absl::string_view value = line.substr(at + 1);
  if (value == "+Inf") {
    sample.value = std::numeric_limits<double>::infinity();
    return true;
  }
  return absl::SimpleAtod(value, &sample.value);
}

}  // namespace

Exposition::Exposition(const std::string& text) {
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "# TYPE ")) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      if (parts.size() != 2) {
        malformed_.emplace_back(line);
      } else {
        types_[parts[0]] = parts[1];
      }
      continue;
    }
    if (absl::StartsWith(line, "#")) continue;
    Sample sample;
    if (ParseSample(line, sample)) {
      samples_.push_back(std::move(sample));
    } else {
      malformed_.emplace_back(line);
    }
  }
}

std::optional<double> Exposition::Value(const std::string& series) const {
  Sample wanted;
  if (!ParseSample(series + " 0", wanted)) return std::nullopt;
  for (const Sample& sample : samples_) {
    if (sample.name == wanted.name && sample.labels == wanted.labels) {
      return sample.value;
    }
  }
  return std::nullopt;
}

std::vector<Exposition::Sample> Exposition::Samples(
    const std::string& name) const {
  std::vector<Sample> found;
  for (const Sample& sample : samples_) {
    if (sample.name == name) found.push_back(sample);
  }
  return found;
}

bool Exposition::HasPrefix(const std::string& prefix) const {
  for (const Sample& sample : samples_) {
    if (absl::StartsWith(sample.name, prefix)) return true;
  }
  return false;
}

std::string Exposition::Type(const std::string& name) const {
  auto found = types_.find(name);
  return found == types_.end() ? "" : found->second;
}

}  // namespace ferry::testing
