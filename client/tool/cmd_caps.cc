// ferry caps --server ADDR: what a ferryd offers (API version, limits,
// passes, options, backends, devices) and its health.
#include <cstdio>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/tool/command_flags.h"
#include "client/tool/commands.h"
#include "client/tool/remote.h"
#include "client/tool/status_report.h"
#include "passes/report_io.h"

namespace ferry::tool {
namespace {

std::string CapsUsage() {
  return "usage: ferry caps --server ADDR [--report=text|json] "
         "[remote options]\n"
         "Prints the server's capabilities and health. --report=json prints\n"
         "the GetCapabilitiesResponse instead, on one line; --json is a\n"
         "deprecated spelling of --report=json.\n"
         "Exit 0 when the server answered, 2 on usage, 4 when it is\n"
         "unreachable or busy (retry later); 'ferry --help' has every "
         "code.\n\n" +
         RemoteFlagsHelp();
}

std::string Bytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) {
    return absl::StrCat(bytes >> 20, " MiB");
  }
  return absl::StrCat(bytes, " B");
}

std::string Seconds(int64_t millis) {
  return millis % 1000 == 0 ? absl::StrCat(millis / 1000, "s")
                            : absl::StrCat(millis, "ms");
}

std::string HealthWord(Client& client, const std::string& service) {
  absl::StatusOr<bool> serving = client.CheckHealth(service);
  if (!serving.ok()) {
    return std::string(absl::StatusCodeToString(serving.status().code()));
  }
  return *serving ? "SERVING" : "NOT_SERVING";
}

}  // namespace

int RunCaps(const Args& args) {
  RemoteOptions remote;
  std::string report = "text";
  CommandFlags flags("caps", CapsUsage());
  flags.app().add_option("--report", report);
  // Deprecated spelling of --report=json.
  flags.app().add_flag_callback("--json", [&report] { report = "json"; });
  AddRemoteFlags(flags.app(), remote);
  if (std::optional<int> exit = flags.Parse(args)) return *exit;
  if (!remote.enabled()) {
    std::fprintf(stderr, "ferry caps: needs --server ADDR\n\n%s",
                 CapsUsage().c_str());
    return kExitUsage;
  }
  if (report != "text" && report != "json") {
    std::fputs(CapsUsage().c_str(), stderr);
    return kExitUsage;
  }
  absl::StatusOr<std::unique_ptr<Client>> client = ConnectRemote(remote);
  if (!client.ok()) {
    std::fprintf(stderr, "ferry caps: %s\n",
                 std::string(client.status().message()).c_str());
    return kExitUsage;
  }
  absl::StatusOr<v1::GetCapabilitiesResponse> caps =
      (*client)->GetCapabilities();
  if (!caps.ok()) return ReportStatus("caps", "-", caps.status());

  if (report == "json") {
    std::printf("%s\n", ReportJson(*caps).c_str());
    return kExitOk;
  }

  const v1::Limits& limits = caps->limits();
  std::vector<std::string> backends;
  for (const v1::BackendInfo& backend : caps->backends()) {
    backends.push_back(absl::StrCat(
        backend.id(), " (", absl::StrJoin(backend.device_types(), ", "), ")"));
  }
  std::vector<std::string> verify_devices;
  for (int device : caps->verify_devices()) {
    verify_devices.push_back(absl::AsciiStrToLower(
        v1::VerifyDevice_Name(device).substr(sizeof("VERIFY_DEVICE_") - 1)));
  }
  std::printf(
      "server:          %s\n"
      "api version:     %s\n"
      "compiler:        %s\n"
      "limits:          request %s, %lld nodes, response %s\n"
      "jobs:            %d at once, %d queued\n"
      "deadlines:       default %s, max %s\n"
      "resources:       tensor %s, verify %s, expansion %lldx, memory %s\n"
      "passes:          %s\n"
      "lower options:   %s\n"
      "partitioners:    %s\n"
      "backends:        %s\n"
      "devices:         %s\n"
      "verify devices:  %s\n"
      "result cache:    %s (%s)\n"
      "bearer token:    %s\n"
      "health:          %s %s, %s %s\n",
      remote.server.c_str(), caps->api_version().c_str(),
      caps->compiler_version().c_str(),
      Bytes(limits.max_request_bytes()).c_str(),
      static_cast<long long>(limits.max_nodes()),
      Bytes(limits.max_response_bytes()).c_str(), limits.max_concurrent_jobs(),
      limits.queue_depth(), Seconds(limits.default_deadline_ms()).c_str(),
      Seconds(limits.max_deadline_ms()).c_str(),
      Bytes(limits.max_tensor_bytes()).c_str(),
      Bytes(limits.max_verify_bytes()).c_str(),
      static_cast<long long>(limits.max_expansion()),
      limits.max_memory_bytes() > 0 ? Bytes(limits.max_memory_bytes()).c_str()
                                    : "no budget",
      absl::StrJoin(caps->passes(), " ").c_str(),
      absl::StrJoin(caps->lower_options(), " ").c_str(),
      absl::StrJoin(caps->partitioners(), " ").c_str(),
      absl::StrJoin(backends, ", ").c_str(),
      absl::StrJoin(caps->devices(), " ").c_str(),
      absl::StrJoin(verify_devices, " ").c_str(),
      caps->cache_bytes() > 0 ? Bytes(caps->cache_bytes()).c_str() : "off",
      caps->digest_function().c_str(),
      caps->requires_token() ? "required" : "not required", "ferry.v1.Compiler",
      HealthWord(**client, "ferry.v1.Compiler").c_str(),
      "ferry.v1.Compiler/gpu",
      HealthWord(**client, "ferry.v1.Compiler/gpu").c_str());
  return kExitOk;
}

}  // namespace ferry::tool
