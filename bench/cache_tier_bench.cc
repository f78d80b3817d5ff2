// ferry_cache_tier_bench: the figures of the shared cache tier
// (docs/performance.md, "Past one machine"), with a real redis-server on a
// unix socket and ferryd servers in this process on 127.0.0.1:0.
//
//   ferry_cache_tier_bench [--redis-server /usr/bin/redis-server]
//                          [--lookups 2000] [--calls 96] [--nodes 1000]
//                          [--big-mib 60]
//
//  1. hit latency of Lookup: answered from the in-process cache vs from
//     Redis (a server with no in-process cache), p50/p99;
//  2. Lower at 8 clients, every call computing: one replica vs three
//     (round_robin over the three addresses), p50/p99 and throughput;
//  3. time to the first response for a program of --big-mib MiB (one
//     inline constant) already lowered by another replica: sending it vs
//     asking by digest first (ClientOptions::lookup_first);
//  0. first, without Redis: a full Lower (the program sent, as a build farm
//     sends it) answered from the in-process cache, --lookups times for
//     100 and --nodes nodes: the server's own time (arrival to the
//     serialized response, the duration_ms of its log line) and the
//     client's round trip, p50/p99. --hits-only stops after it.
// Everything is bounded: fixed call counts, 60 s deadlines.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/testing/synthetic_program.h"
#include "ferry/client.h"
#include "server/config.h"
#include "server/ferry_server.h"

namespace {

using Clock = std::chrono::steady_clock;

double Millis(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t index =
      static_cast<size_t>(q * static_cast<double>(values.size() - 1));
  return values[index];
}

struct Flags {
  std::string redis_server = "/usr/bin/redis-server";
  int lookups = 2000;
  int calls = 96;
  int64_t nodes = 1000;
  int big_mib = 60;
  bool hits_only = false;
};

class Redis {
 public:
  explicit Redis(const std::string& binary) {
    char dir_template[] = "/tmp/ferry-bench-redis-XXXXXX";
    dir_ = mkdtemp(dir_template);
    socket_ = dir_ + "/redis.sock";
    pid_ = fork();
    if (pid_ == 0) {
      freopen("/dev/null", "w", stdout);
      execl(binary.c_str(), binary.c_str(), "--port", "0", "--unixsocket",
            socket_.c_str(), "--save", "", "--appendonly", "no", "--dir",
            dir_.c_str(), "--proto-max-bulk-len", "512mb",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 100; ++i) {
      struct stat info;
      if (stat(socket_.c_str(), &info) == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~Redis() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    std::string command = "rm -rf '" + dir_ + "'";
    if (std::system(command.c_str()) != 0) std::perror("rm");
  }
  std::string address() const { return "unix:" + socket_; }

 private:
  std::string dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

std::unique_ptr<ferry::FerryServer> Start(
    const std::string& redis, int64_t cache_bytes,
    std::function<void(absl::string_view)> log_sink = [](absl::string_view) {
    }) {
  ferry::ServerConfig config;
  config.listen = "127.0.0.1:0";
  config.workers = 2;
  config.queue_depth = 64;
  config.cache_bytes = cache_bytes;
  config.cache_redis = redis;
  config.max_message_bytes = int64_t{128} << 20;
  config.max_memory_bytes = 0;
  ferry::ServerHooks hooks;
  hooks.log_sink = std::move(log_sink);
  absl::StatusOr<std::unique_ptr<ferry::FerryServer>> server =
      ferry::FerryServer::Start(config, hooks);
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start a server: %s\n",
                 std::string(server.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(server);
}

std::unique_ptr<ferry::Client> Connect(const std::string& target,
                                       bool lookup_first) {
  ferry::ClientOptions options;
  options.target = target;
  options.default_deadline = std::chrono::seconds(60);
  options.lookup_first = lookup_first;
  options.blob_threshold_bytes = 0;
  absl::StatusOr<std::unique_ptr<ferry::Client>> client =
      ferry::Client::Create(options);
  if (!client.ok()) std::exit(1);
  return *std::move(client);
}

// The duration_ms of a request log line (0 when it has none).
double LoggedMillis(absl::string_view line) {
  constexpr absl::string_view kKey = "\"duration_ms\":";
  size_t at = line.find(kKey);
  if (at == absl::string_view::npos) return 0;
  absl::string_view rest = line.substr(at + kKey.size());
  rest = rest.substr(0, rest.find_first_of(",}"));
  double ms = 0;
  return absl::SimpleAtod(rest, &ms) ? ms : 0;
}

void LowerHitLatency(const Flags& flags) {
  std::mutex mutex;
  std::vector<double> server_ms;  // of the cache hits
  auto server = Start("", int64_t{256} << 20, [&](absl::string_view line) {
    if (!absl::StrContains(line, "\"outcome\":\"cache_hit\"")) return;
    std::lock_guard<std::mutex> lock(mutex);
    server_ms.push_back(LoggedMillis(line));
  });
  auto client = Connect(server->address(), false);
  for (int64_t nodes : {int64_t{100}, flags.nodes}) {
    ferry::v1::LowerRequest request =
        ferry::testing::SyntheticChainRequest(nodes, 2);
    absl::StatusOr<ferry::v1::LowerResponse> first = client->Lower(request);
    if (!first.ok() || !first->ok()) std::exit(1);
    {
      std::lock_guard<std::mutex> lock(mutex);
      server_ms.clear();
    }
    std::vector<double> round_trip_ms;
    int errors = 0;
    for (int i = 0; i < flags.lookups; ++i) {
      Clock::time_point start = Clock::now();
      absl::StatusOr<ferry::v1::LowerResponse> hit = client->Lower(request);
      round_trip_ms.push_back(Millis(Clock::now() - start));
      errors += hit.ok() && hit->cached() ? 0 : 1;
    }
    std::lock_guard<std::mutex> lock(mutex);
    std::printf(
        "lower hit   in-process nodes=%lld request=%zu B response=%zu B n=%d "
        "errors=%d  server p50=%.3fms p99=%.3fms  round trip p50=%.3fms "
        "p99=%.3fms\n",
        static_cast<long long>(nodes), request.ByteSizeLong(),
        first->ByteSizeLong(), flags.lookups, errors,
        Percentile(server_ms, 0.5), Percentile(server_ms, 0.99),
        Percentile(round_trip_ms, 0.5), Percentile(round_trip_ms, 0.99));
  }
}

void HitLatency(const Flags& flags, const Redis& redis) {
  auto local = Start(redis.address(), int64_t{256} << 20);
  auto remote = Start(redis.address(), 0);  // every hit comes from Redis
  ferry::v1::LowerRequest request =
      ferry::testing::SyntheticChainRequest(flags.nodes, 1);
  auto seed = Connect(local->address(), false);
  absl::StatusOr<ferry::v1::LowerResponse> first = seed->Lower(request);
  if (!first.ok() || !first->ok()) std::exit(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // stored
  for (const auto& [name, server] :
       {std::pair<const char*, ferry::FerryServer*>{"in-process", local.get()},
        {"redis", remote.get()}}) {
    auto client = Connect(server->address(), false);
    std::vector<double> ms;
    int errors = 0;
    for (int i = 0; i < flags.lookups; ++i) {
      Clock::time_point start = Clock::now();
      absl::StatusOr<ferry::v1::LowerResponse> hit =
          client->Lookup(first->request_digest());
      ms.push_back(Millis(Clock::now() - start));
      errors += hit.ok() ? 0 : 1;
    }
    std::printf(
        "lookup hit  %-10s nodes=%lld response=%zu B n=%d errors=%d  "
        "p50=%.3fms p99=%.3fms\n",
        name, static_cast<long long>(flags.nodes), first->ByteSizeLong(),
        flags.lookups, errors, Percentile(ms, 0.5), Percentile(ms, 0.99));
  }
}

void Replicas(const Flags& flags, const Redis& redis) {
  std::vector<std::unique_ptr<ferry::FerryServer>> servers;
  for (int i = 0; i < 3; ++i) servers.push_back(Start(redis.address(), 0));
  std::vector<std::string> all;
  for (const auto& server : servers) all.push_back(server->address());
  int variant = 1000;
  for (const auto& [name, target] :
       {std::pair<std::string, std::string>{"1 replica", all[0]},
        {"3 replicas", absl::StrJoin(all, ",")}}) {
    auto client = Connect(target, false);
    std::vector<std::vector<double>> per_thread(8);
    std::atomic<int> next{0};
    std::atomic<int> errors{0};
    const int base = variant;
    variant += flags.calls;
    Clock::time_point start = Clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int i; (i = next++) < flags.calls;) {
          ferry::v1::LowerRequest request =
              ferry::testing::SyntheticChainRequest(flags.nodes, base + i);
          Clock::time_point call = Clock::now();
          absl::StatusOr<ferry::v1::LowerResponse> lowered =
              client->Lower(request);
          per_thread[t].push_back(Millis(Clock::now() - call));
          if (!lowered.ok() || !lowered->ok()) ++errors;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    double seconds = Millis(Clock::now() - start) / 1000;
    std::vector<double> ms;
    for (const auto& values : per_thread)
      ms.insert(ms.end(), values.begin(), values.end());
    std::printf(
        "lower x8    %-10s nodes=%lld n=%d errors=%d throughput=%.1f/s  "
        "p50=%.2fms p99=%.2fms p99/p50=%.2f\n",
        name.c_str(), static_cast<long long>(flags.nodes), flags.calls,
        errors.load(), flags.calls / seconds, Percentile(ms, 0.5),
        Percentile(ms, 0.99), Percentile(ms, 0.99) / Percentile(ms, 0.5));
  }
}

void BigProgram(const Flags& flags, const Redis& redis) {
  auto lowered_by = Start(redis.address(), int64_t{1} << 30);
  auto asked = Start(redis.address(), int64_t{1} << 30);
  ferry::v1::LowerRequest request = ferry::testing::TinyRequest(77);
  ferry::v1::Constant* constant = request.mutable_program()->add_constants();
  constant->set_name("unused_weights");
  constant->mutable_spec()->set_dtype(ferry::v1::F32);
  int64_t elements = int64_t{flags.big_mib} << 18;  // MiB / 4 bytes
  constant->mutable_spec()->add_sizes(elements);
  constant->set_data(std::string(static_cast<size_t>(elements) * 4, '\x01'));
  auto first = Connect(lowered_by->address(), false);
  Clock::time_point start = Clock::now();
  absl::StatusOr<ferry::v1::LowerResponse> computed = first->Lower(request);
  double computed_ms = Millis(Clock::now() - start);
  if (!computed.ok() || !computed->ok()) {
    std::fprintf(stderr, "big program: %s\n",
                 computed.ok()
                     ? "did not lower"
                     : std::string(computed.status().message()).c_str());
    std::exit(1);
  }
  std::printf("big program %zu B: first Lower (computed) %.1fms\n",
              request.ByteSizeLong(), computed_ms);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // stored
  for (bool lookup : {false, true}) {
    // A fresh client each time: its first call pays for GetCapabilities.
    auto client = Connect(asked->address(), lookup);
    Clock::time_point begin = Clock::now();
    absl::StatusOr<ferry::v1::LowerResponse> answer = client->Lower(request);
    double ms = Millis(Clock::now() - begin);
    std::printf(
        "big program on another replica, %-13s %.1fms (%s, cached=%d, "
        "answered by Lookup=%lld)\n",
        lookup ? "lookup first:" : "sent:", ms,
        answer.ok() ? "ok" : std::string(answer.status().message()).c_str(),
        answer.ok() && answer->cached(),
        static_cast<long long>(client->lookup_hits()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; i += 2) {
    std::string arg = argv[i];
    if (arg == "--hits-only") {
      flags.hits_only = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) arg = "--help";
    if (arg == "--redis-server")
      flags.redis_server = argv[i + 1];
    else if (arg == "--lookups")
      flags.lookups = std::atoi(argv[i + 1]);
    else if (arg == "--calls")
      flags.calls = std::atoi(argv[i + 1]);
    else if (arg == "--nodes")
      flags.nodes = std::atoll(argv[i + 1]);
    else if (arg == "--big-mib")
      flags.big_mib = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr,
                   "usage: ferry_cache_tier_bench [--redis-server PATH] "
                   "[--lookups N] [--calls N] [--nodes N] [--big-mib N] "
                   "[--hits-only]\n");
      return 2;
    }
  }
  LowerHitLatency(flags);
  if (flags.hits_only) return 0;
  Redis redis(flags.redis_server);
  HitLatency(flags, redis);
  Replicas(flags, redis);
  BigProgram(flags, redis);
  return 0;
}
