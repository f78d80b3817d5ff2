#include "client/tool/remote.h"

#include <cstdio>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/tool/status_report.h"
#include "client/tool/tool_common.h"
#include "passes/pipeline.h"
#include "passes/proto_io.h"
#include "passes/report_io.h"
#include "runtime/verify.h"
#include "runtime/verify_io.h"

namespace ferry::tool {
namespace {

// The response's report, as the in-process run reports it: the same
// message for --report=json, and the pipeline's form (LowerResultFromProto)
// for ReportText.
v1::LowerReport ReportOfResponse(
    bool ok,
    const google::protobuf::RepeatedPtrField<v1::Diagnostic>& diagnostics,
    const v1::LowerStats& stats) {
  v1::LowerReport report;
  report.set_ok(ok);
  *report.mutable_diagnostics() = diagnostics;
  *report.mutable_stats() = stats;
  return report;
}

// Whether `diagnostics` hold an import or validation error (FERRY-E01xx to
// E04xx): the in-process `ferry verify` stops at those before lowering and
// prints only the diagnostics.
bool HasImportOrValidationError(const Diagnostics& diagnostics) {
  for (const Diagnostic& diagnostic : diagnostics.items()) {
    if (diagnostic.severity != Severity::kError) continue;
    const std::string& code = diagnostic.code;
    if (code.size() > 8 && code.compare(0, 7, "FERRY-E") == 0 &&
        code[7] == '0' && code[8] >= '1' && code[8] <= '4') {
      return true;
    }
  }
  return false;
}

// Why `address` is not a --server address ("" when it is one): HOST:PORT
// ([V6]:PORT), several separated by commas, dns:///NAME:PORT, or a gRPC
// scheme with something after it (unix:/PATH, unix-abstract:, ipv4:, ipv6:).
std::string ServerAddressProblem(const std::string& address) {
  for (absl::string_view scheme :
       {"dns:", "unix:", "unix-abstract:", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(address, scheme)) {
      return address.size() > scheme.size() ? "" : "nothing after the scheme";
    }
  }
  for (absl::string_view entry : absl::StrSplit(address, ',')) {
    const size_t colon = entry.rfind(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return absl::StrCat("'", entry, "' is not HOST:PORT");
    }
    int port = 0;
    if (!absl::SimpleAtoi(entry.substr(colon + 1), &port) || port < 1 ||
        port > 65535) {
      return absl::StrCat("'", entry.substr(colon + 1),
                          "' is not a port number (1-65535)");
    }
  }
  return "";
}

}  // namespace

void AddRemoteFlags(CLI::App& app, RemoteOptions& remote) {
  app.add_option("--server", remote.server)
      ->check(
          [](const std::string& address) {
            std::string problem = ServerAddressProblem(address);
            if (problem.empty()) return problem;
            return absl::StrCat(
                "'", address, "': ", problem,
                "; use HOST:PORT (several: HOST:PORT,HOST:PORT), "
                "dns:///NAME:PORT or unix:/PATH");
          },
          "ADDR");
  app.add_flag("--tls", remote.tls);
  // Any TLS file implies --tls.
  for (auto [name, field] :
       {std::pair{"--tls-ca", &remote.tls_ca},
        std::pair{"--tls-cert", &remote.tls_cert},
        std::pair{"--tls-key", &remote.tls_key},
        std::pair{"--tls-server-name", &remote.tls_server_name}}) {
    app.add_option_function<std::string>(
        name, [&remote, field = field](const std::string& value) {
          *field = value;
          remote.tls = true;
        });
  }
  app.add_option("--token-file", remote.token_file);
  app.add_option_function<std::string>(
      "--deadline", [&remote](const std::string& value) {
        if (!absl::SimpleAtoi(value, &remote.deadline_seconds) ||
            remote.deadline_seconds <= 0) {
          throw CLI::ValidationError(
              "--deadline needs a positive number of seconds");
        }
      });
}

std::string RemoteFlagsHelp() {
  return "remote options (run on a ferryd instead of in-process):\n"
         "  --server ADDR            HOST:PORT or dns:///NAME:PORT of a "
         "ferryd, or\n"
         "                           HOST:PORT,HOST:PORT,... of replicas "
         "(round_robin)\n"
         "  --tls                    use TLS (system roots unless --tls-ca)\n"
         "  --tls-ca FILE            CA certificates (PEM) to trust\n"
         "  --tls-cert FILE, --tls-key FILE   client certificate and key "
         "(mTLS)\n"
         "  --tls-server-name NAME   name expected in the server "
         "certificate\n"
         "  --token-file FILE        send the bearer token in FILE\n"
         "  --deadline SECONDS       deadline of the call (300)\n";
}

absl::StatusOr<std::unique_ptr<Client>> ConnectRemote(
    const RemoteOptions& remote) {
  ClientOptions options;
  options.target = remote.server;
  options.tls.enabled = remote.tls;
  options.tls.root_ca_file = remote.tls_ca;
  options.tls.cert_file = remote.tls_cert;
  options.tls.key_file = remote.tls_key;
  options.tls.server_name_override = remote.tls_server_name;
  options.token_file = remote.token_file;
  options.default_deadline = std::chrono::seconds(remote.deadline_seconds);
  options.metadata.emplace_back("x-ferry-client", "ferry-tool");
  return Client::Create(std::move(options));
}

int RemoteLower(const RemoteOptions& remote, const v1::LowerRequest& request,
                const std::string& file, const std::string& out,
                const std::string& report, bool timings,
                const GraphFlags& graph, ProgressPrinter& progress) {
  absl::StatusOr<std::unique_ptr<Client>> client = ConnectRemote(remote);
  if (!client.ok()) {
    std::fprintf(stderr, "ferry lower: %s\n",
                 std::string(client.status().message()).c_str());
    return kExitUsage;
  }
  absl::StatusOr<v1::LowerResponse> response =
      progress.enabled() ? (*client)->LowerStream(request, progress.Updates())
                         : (*client)->Lower(request);
  if (!response.ok()) {
    return ReportStatus("lower", file, response.status());
  }
  if (response->ok()) {
    if (!out.empty()) {
      if (!WriteOutput(out, SerializeProgram(response->program(),
                                             FormatFromPath(out)))) {
        return kExitUsage;
      }
    } else if (report == "text") {
      if (!WriteOutput("-", ToText(response->program()))) return kExitUsage;
    }
  }
  PrintLowerReport(ReportOfResponse(response->ok(), response->diagnostics(),
                                    response->stats()),
                   file, report, timings);
  if (!response->ok()) return kExitErrors;
  return graph.enabled() ? WriteGraph("lower", graph, response->program())
                         : kExitOk;
}

int RemoteVerify(const RemoteOptions& remote, const v1::LowerRequest& request,
                 const std::string& file, const std::string& device,
                 uint64_t seed, const std::string& report,
                 ProgressPrinter& progress) {
  absl::StatusOr<std::unique_ptr<Client>> client = ConnectRemote(remote);
  if (!client.ok()) {
    std::fprintf(stderr, "ferry verify: %s\n",
                 std::string(client.status().message()).c_str());
    return kExitUsage;
  }
  v1::VerifyRequest verify;
  *verify.mutable_request() = request;
  verify.set_seed(seed);
  verify.set_device(device == "sim"    ? v1::VERIFY_DEVICE_SIM
                    : device == "cuda" ? v1::VERIFY_DEVICE_CUDA
                                       : v1::VERIFY_DEVICE_AUTO);
  absl::StatusOr<v1::VerifyResponse> response =
      progress.enabled() ? (*client)->VerifyStream(verify, progress.Updates())
                         : (*client)->Verify(verify);
  if (!response.ok()) {
    return ReportStatus("verify", file, response.status());
  }
  if (!response->lowered()) {
    // A malformed program or one that failed to compile: its diagnostics
    // are in the body, printed as the in-process tool prints them.
    LowerResult result = LowerResultFromProto(
        ReportOfResponse(false, response->diagnostics(), response->stats()));
    std::fputs(HasImportOrValidationError(result.diagnostics)
                   ? FormatDiagnosticsText(result.diagnostics, file).c_str()
                   : ReportText(result, file).c_str(),
               stderr);
    return kExitErrors;
  }
  // Printed from the in-memory form, as the in-process run prints it (the
  // summary is recomputed, not taken from the wire).
  VerifyReport verified = VerifyReportFromProto(response->report());
  if (report == "json") {
    std::printf("%s\n", ReportJson(VerifyReportToProto(verified)).c_str());
  } else {
    std::fputs(verified.Text().c_str(), stdout);
  }
  return verified.ok ? kExitOk : kExitErrors;
}

}  // namespace ferry::tool
