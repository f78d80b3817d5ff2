// ferry_loadgen: a closed-loop load generator for the compile service, on
// libferry_client, with the same pipeline in-process for comparison.
//
//   ferry_loadgen --nodes 100 --concurrency 8 --requests 2000
//   ferry_loadgen --nodes 100000 --ops-per-partition 99 --requests 8
//   --concurrency 1 ferry_loadgen --server 127.0.0.1:50051 --server-pid PID
//   --requests 10000
//
// Each of --concurrency threads sends Lower calls back to back until
// --requests calls have been made in all (after --warmup calls that are not
// counted), and the tool prints throughput and p50/p90/p99 latency. Without
// --server it starts a ferryd in this process on 127.0.0.1:0. Calls carry
// "ferry-cache: bypass" unless --cache is given, so every call computes.
// --mode=inprocess runs ferry::Lower (plus exporting the lowered program,
// as the service does) on the same threads instead; --mode=both runs both,
// one after the other; --mode=paired makes every request both ways back to
// back and reports the ratio of each pair too, so that the comparison holds
// on a machine whose other load changes during the run; it also times each
// request in process with the protobuf round trip a remote call needs
// (request serialized and parsed, response serialized and parsed) and
// reports the service's ratio to that.
// --server-pid samples that process's resident memory (VmRSS) through the
// run, to check that a server does not grow. --server-keep-freed-bytes sets
// the in-process server's --keep-freed-bytes (0: freed memory given back).
// --mode=floor measures memory instead: the peak growth of this process's
// resident memory (VmHWM, reset through /proc/self/clear_refs) while it
// only parses the request's bytes, then builds the response message (by
// parsing the lowered response's bytes) and serializes it, no passes: what
// no server can beat; and the same for the in-process pipeline (parse,
// Lower, export, serialize), for comparison (docs/performance.md,
// "Memory per node").
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/testing/synthetic_program.h"
#include "ferry/client.h"
#include "passes/pipeline.h"
#include "passes/proto_io.h"
#include "passes/wire_writer.h"
#include "server/allocator.h"
#include "server/config.h"
#include "server/ferry_server.h"

namespace {

struct Flags {
  std::string server;
  std::string mode = "service";  // service | inprocess | both | paired
  int concurrency = 1;
  int requests = 100;
  int warmup = 10;
  int64_t nodes = 100;
  int ops_per_partition = 3;
  bool cache = false;
  int server_workers = 0;  // in-process server; 0: hardware threads
  int server_pid = 0;
  // In-process server's --keep-freed-bytes; -1: its default.
  int64_t server_keep_freed_bytes = -1;
};

void Usage() {
  std::fputs(
      "usage: ferry_loadgen [--server ADDR] "
      "[--mode service|inprocess|both|paired|floor]\n"
      "                     [--concurrency N] [--requests N] [--warmup N]\n"
      "                     [--nodes N] [--ops-per-partition N] [--cache]\n"
      "                     [--server-workers N] [--server-pid PID]\n"
      "                     [--server-keep-freed-bytes N]\n",
      stderr);
}

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    size_t equals = arg.find('=');
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
      arg = arg.substr(0, equals);
    } else if (arg != "--cache" && arg != "--help" && i + 1 < argc) {
      value = argv[++i];
    }
    if (arg == "--server")
      flags->server = value;
    else if (arg == "--mode")
      flags->mode = value;
    else if (arg == "--concurrency")
      flags->concurrency = std::atoi(value.c_str());
    else if (arg == "--requests")
      flags->requests = std::atoi(value.c_str());
    else if (arg == "--warmup")
      flags->warmup = std::atoi(value.c_str());
    else if (arg == "--nodes")
      flags->nodes = std::atoll(value.c_str());
    else if (arg == "--ops-per-partition")
      flags->ops_per_partition = std::atoi(value.c_str());
    else if (arg == "--cache")
      flags->cache = true;
    else if (arg == "--server-workers")
      flags->server_workers = std::atoi(value.c_str());
    else if (arg == "--server-pid")
      flags->server_pid = std::atoi(value.c_str());
    else if (arg == "--server-keep-freed-bytes")
      flags->server_keep_freed_bytes = std::atoll(value.c_str());
    else
      return false;
  }
  return flags->concurrency > 0 && flags->requests > 0 && flags->warmup >= 0 &&
         (flags->mode == "service" || flags->mode == "inprocess" ||
          flags->mode == "both" || flags->mode == "paired" ||
          flags->mode == "floor");
}

// Resident memory of a process in KiB (0 when unreadable).
int64_t ResidentKiB(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return 0;
}

// This process's peak resident memory in KiB (VmHWM) since the last
// ResetPeakResident.
int64_t PeakResidentKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return 0;
}

// Frees what the allocator holds and restarts VmHWM from the current
// resident memory (proc(5), clear_refs "5").
void ResetPeakResident() {
  ferry::ReleaseFreedMemory();
  std::ofstream("/proc/self/clear_refs") << "5";
}

// The serialized `ok: true` that starts a lowered response (its program, the
// next field, is written after it straight from the IR, as ferryd does).
std::string OkPrefix() {
  ferry::v1::LowerResponse ok;
  ok.set_ok(true);
  return ok.SerializeAsString();
}

// --mode=floor: prints the peak growth of the floor (parse the request,
// build and serialize the response) and of the in-process pipeline.
int MeasureFloor(const ferry::v1::LowerRequest& request) {
  const std::string request_wire = request.SerializeAsString();
  std::string response_wire;
  {
    absl::StatusOr<ferry::LowerResult> lowered = ferry::Lower(request);
    if (!lowered.ok() || !lowered->ok) {
      std::fprintf(stderr, "ferry_loadgen: the program did not lower\n");
      return 1;
    }
    ferry::v1::LowerResponse response;
    response.set_ok(true);
    ferry::ExportProgram(std::move(lowered->program),
                         response.mutable_program());
    response_wire = response.SerializeAsString();
  }
  const int64_t nodes = ferry::CountNodes(request.program());
  auto report = [&](const char* what, int64_t base_kib, int64_t peak_kib) {
    const double grown = static_cast<double>(peak_kib - base_kib) * 1024;
    std::printf(
        "%-10s nodes=%-7lld request_bytes=%zu response_bytes=%zu "
        "peak_growth=%.1fMiB per_node=%.0fB per_wire_byte(req+resp)=%.2f\n",
        what, static_cast<long long>(nodes), request_wire.size(),
        response_wire.size(), grown / 1048576,
        grown / static_cast<double>(nodes),
        grown /
            static_cast<double>(request_wire.size() + response_wire.size()));
  };

  // The floor: the request's bytes become a message, which goes once it
  // is read; the response's message is built, serialized, and goes. The
  // two byte strings are held throughout, as a server holds each while it
  // receives or sends it, and count in the growth.
  ResetPeakResident();
  int64_t base =
      PeakResidentKiB() -
      static_cast<int64_t>(request_wire.size() + response_wire.size()) / 1024;
  {
    ferry::v1::LowerRequest parsed;
    if (!parsed.ParseFromString(request_wire)) return 1;
  }
  ferry::ReleaseFreedMemory();
  {
    ferry::v1::LowerResponse built;
    if (!built.ParseFromString(response_wire)) return 1;
    std::string serialized = built.SerializeAsString();
    if (serialized.size() != response_wire.size()) return 1;
  }
  report("floor", base, PeakResidentKiB());

  // The in-process pipeline from the same bytes to the same bytes, the
  // response written straight from the IR as ferryd writes it.
  ResetPeakResident();
  base = PeakResidentKiB() - static_cast<int64_t>(request_wire.size()) / 1024;
  {
    ferry::v1::LowerRequest parsed;
    if (!parsed.ParseFromString(request_wire)) return 1;
    absl::StatusOr<ferry::LowerResult> lowered = ferry::Lower(parsed);
    if (!lowered.ok() || !lowered->ok) return 1;
    std::string serialized = OkPrefix();
    if (!ferry::AppendProgramWire(std::move(lowered->program), serialized,
                                  ferry::v1::LowerResponse::kProgramFieldNumber)
             .ok())
      return 1;
  }
  report("inprocess", base, PeakResidentKiB());
  return 0;
}

struct Result {
  std::vector<double> latencies_ms;
  int errors = 0;
  std::string first_error;
  double seconds = 0;
  std::vector<int64_t> rss_kib;  // sampled through the run
};

// Runs `call` (returns "" on success, else an error) `warmup` times, then
// `requests` times over `concurrency` threads, timing each call.
template <typename Call>
Result RunClosedLoop(const Flags& flags, Call call) {
  for (int i = 0; i < flags.warmup; ++i) call();
  Result result;
  std::mutex mutex;
  std::atomic<int> next{0};
  int sample_every = std::max(1, flags.requests / 10);
  if (flags.server_pid != 0)
    result.rss_kib.push_back(ResidentKiB(flags.server_pid));
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < flags.concurrency; ++t) {
    threads.emplace_back([&] {
      std::vector<double> mine;
      while (true) {
        int index = next.fetch_add(1);
        if (index >= flags.requests) break;
        auto begin = std::chrono::steady_clock::now();
        std::string error = call();
        auto end = std::chrono::steady_clock::now();
        mine.push_back(
            std::chrono::duration<double, std::milli>(end - begin).count());
        if (!error.empty() ||
            (flags.server_pid != 0 && (index + 1) % sample_every == 0)) {
          std::lock_guard<std::mutex> lock(mutex);
          if (!error.empty() && result.errors++ == 0)
            result.first_error = error;
          if (flags.server_pid != 0 && (index + 1) % sample_every == 0) {
            result.rss_kib.push_back(ResidentKiB(flags.server_pid));
          }
        }
      }
      std::lock_guard<std::mutex> lock(mutex);
      result.latencies_ms.insert(result.latencies_ms.end(), mine.begin(),
                                 mine.end());
    });
  }
  for (std::thread& thread : threads) thread.join();
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t index = static_cast<size_t>(
      fraction * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

// The serialized size of the last response a service call received (0
// before any), for bench/memory_per_node.
std::atomic<size_t> last_response_bytes{0};

void Print(const char* mode, const Flags& flags, size_t request_bytes,
           const Result& result) {
  double p50 = Percentile(result.latencies_ms, 0.50);
  double p99 = Percentile(result.latencies_ms, 0.99);
  std::printf(
      "%-10s nodes=%-7lld bytes=%-9zu conc=%-3d n=%-6d errors=%-3d "
      "throughput=%8.1f/s  p50=%9.2fms p90=%9.2fms p99=%9.2fms max=%9.2fms  "
      "p99/p50=%.2f\n",
      mode, static_cast<long long>(flags.nodes), request_bytes,
      flags.concurrency, flags.requests, result.errors,
      static_cast<double>(flags.requests) / result.seconds, p50,
      Percentile(result.latencies_ms, 0.90), p99,
      Percentile(result.latencies_ms, 1.0), p50 > 0 ? p99 / p50 : 0.0);
  if (size_t response_bytes = last_response_bytes.load(); response_bytes > 0)
    std::printf("  response_bytes=%zu\n", response_bytes);
  if (result.errors > 0)
    std::printf("  first error: %s\n", result.first_error.c_str());
  if (!result.rss_kib.empty()) {
    std::printf("  server RSS (KiB) through the run:");
    for (int64_t kib : result.rss_kib)
      std::printf(" %lld", static_cast<long long>(kib));
    std::printf("\n");
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    Usage();
    return 2;
  }
  ferry::v1::LowerRequest request = ferry::testing::SyntheticChainRequest(
      flags.nodes, 0, flags.ops_per_partition);
  size_t request_bytes = request.ByteSizeLong();
  if (flags.mode == "floor") return MeasureFloor(request);

  auto lower_in_process = [&]() -> std::string {
    absl::StatusOr<ferry::LowerResult> lowered = ferry::Lower(request);
    if (!lowered.ok()) return std::string(lowered.status().message());
    if (!lowered->ok) return "did not lower";
    ferry::v1::Program program;
    ferry::ExportProgram(lowered->program, &program);
    return "";
  };
  // The same in process with the protobuf work a remote call cannot avoid:
  // the request serialized and parsed, the response written (as ferryd
  // writes it, straight from the IR) and parsed, on one thread with no
  // transport (the service's floor).
  auto lower_over_wire = [&]() -> std::string {
    ferry::v1::LowerRequest parsed;
    if (!parsed.ParseFromString(request.SerializeAsString()))
      return "request does not parse";
    absl::StatusOr<ferry::LowerResult> lowered = ferry::Lower(parsed);
    if (!lowered.ok()) return std::string(lowered.status().message());
    if (!lowered->ok) return "did not lower";
    std::string built = OkPrefix();
    if (!ferry::AppendProgramWire(std::move(lowered->program), built,
                                  ferry::v1::LowerResponse::kProgramFieldNumber)
             .ok())
      return "writing the response failed";
    ferry::v1::LowerResponse received;
    if (!received.ParseFromString(built)) return "response does not parse";
    return "";
  };
  if (flags.mode == "inprocess" || flags.mode == "both") {
    Print("inprocess", flags, request_bytes,
          RunClosedLoop(flags, lower_in_process));
  }
  if (flags.mode == "inprocess") return 0;

  std::unique_ptr<ferry::FerryServer> server;
  std::string address = flags.server;
  if (address.empty()) {
    ferry::ServerConfig config;
    config.listen = "127.0.0.1:0";
    config.workers = flags.server_workers > 0
                         ? flags.server_workers
                         : static_cast<int>(std::max(
                               1u, std::thread::hardware_concurrency()));
    config.queue_depth = std::max(64, flags.concurrency * 2);
    config.max_message_bytes = int64_t{512} << 20;
    config.max_nodes = 10'000'000;
    if (flags.server_keep_freed_bytes >= 0)
      config.keep_freed_bytes = flags.server_keep_freed_bytes;
    config.default_deadline = std::chrono::minutes(10);
    config.max_deadline = std::chrono::minutes(10);
    ferry::ServerHooks hooks;
    hooks.log_sink = [](absl::string_view) {};
    absl::StatusOr<std::unique_ptr<ferry::FerryServer>> started =
        ferry::FerryServer::Start(config, hooks);
    if (!started.ok()) {
      std::fprintf(stderr, "ferry_loadgen: %s\n",
                   std::string(started.status().message()).c_str());
      return 1;
    }
    server = *std::move(started);
    address = server->address();
  }
  ferry::ClientOptions options;
  options.target = address;
  options.default_deadline = std::chrono::minutes(10);
  options.max_message_bytes = 1 << 30;
  absl::StatusOr<std::unique_ptr<ferry::Client>> client =
      ferry::Client::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "ferry_loadgen: %s\n",
                 std::string(client.status().message()).c_str());
    return 1;
  }
  ferry::CallOptions call;
  call.bypass_cache = !flags.cache;
  auto lower_remotely = [&]() -> std::string {
    absl::StatusOr<ferry::v1::LowerResponse> response =
        (*client)->Lower(request, call);
    if (!response.ok()) return response.status().ToString();
    last_response_bytes.store(response->ByteSizeLong());
    return response->ok() ? "" : "did not lower";
  };
  const char* name = flags.server.empty() ? "service" : "remote";
  if (flags.mode != "paired") {
    Result result = RunClosedLoop(flags, lower_remotely);
    Print(name, flags, request_bytes, result);
    return result.errors == 0 ? 0 : 1;
  }

  // Paired: each request in-process, then through the service.
  std::mutex mutex;
  std::vector<double> in_process_ms, service_ms, ratios, wire_ratios;
  auto timed = [](const auto& call, double* ms) {
    auto begin = std::chrono::steady_clock::now();
    std::string error = call();
    *ms = std::chrono::duration<double, std::milli>(
              std::chrono::steady_clock::now() - begin)
              .count();
    return error;
  };
  Result paired = RunClosedLoop(flags, [&]() -> std::string {
    double local = 0, wire = 0, remote = 0;
    std::string error = timed(lower_in_process, &local);
    if (error.empty()) error = timed(lower_over_wire, &wire);
    if (error.empty()) error = timed(lower_remotely, &remote);
    if (error.empty()) {
      std::lock_guard<std::mutex> lock(mutex);
      in_process_ms.push_back(local);
      service_ms.push_back(remote);
      ratios.push_back(remote / local);
      wire_ratios.push_back(remote / wire);
    }
    return error;
  });
  Result local_result = paired, remote_result = paired;
  size_t warm = in_process_ms.size() -
                std::min<size_t>(in_process_ms.size(), flags.requests);
  local_result.latencies_ms.assign(in_process_ms.begin() + warm,
                                   in_process_ms.end());
  remote_result.latencies_ms.assign(service_ms.begin() + warm,
                                    service_ms.end());
  ratios.erase(ratios.begin(), ratios.begin() + warm);
  wire_ratios.erase(wire_ratios.begin(), wire_ratios.begin() + warm);
  Print("inprocess", flags, request_bytes, local_result);
  Print(name, flags, request_bytes, remote_result);
  std::printf(
      "paired     service/inprocess latency: p10=%.3f p50=%.3f p90=%.3f\n",
      Percentile(ratios, 0.10), Percentile(ratios, 0.50),
      Percentile(ratios, 0.90));
  std::printf(
      "paired     service/(inprocess + protobuf round trip) latency: p10=%.3f "
      "p50=%.3f p90=%.3f\n",
      Percentile(wire_ratios, 0.10), Percentile(wire_ratios, 0.50),
      Percentile(wire_ratios, 0.90));
  return paired.errors == 0 ? 0 : 1;
}
